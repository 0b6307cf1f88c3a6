package match

import (
	"reflect"
	"testing"
)

// TestCalibrateChinese (issue 41, item 2): a catalog whose Chinese
// examples, each left out, score below the threshold gets a lower
// threshold for Chinese requests, tuned on them: a short Chinese request
// that was refused is now served, English requests keep the threshold,
// and Chinese requests no tool fits are still refused. A catalog without
// Chinese examples is left as it is.
func TestCalibrateChinese(t *testing.T) {
	docs := []Doc{
		{ID: "ledger-export", Fields: []Field{{Name: "intent", Text: "Export the payments ledger of one day as a CSV file", Weight: 2},
			{Name: "examples", Text: "把昨天的账本导出来", Weight: 3, Example: true},
			{Name: "examples", Text: "导一份上周三的流水账", Weight: 3, Example: true},
			{Name: "examples", Text: "财务要 11 月 3 号的账本文件", Weight: 3, Example: true},
			{Name: "examples", Text: "export the ledger for monday", Weight: 3, Example: true}}},
		{ID: "cache-flush", Fields: []Field{{Name: "intent", Text: "Flush the varnish cache of the storefront", Weight: 2},
			{Name: "examples", Text: "把前台的缓存清一下", Weight: 3, Example: true},
			{Name: "examples", Text: "商城页面还是旧的，刷新缓存", Weight: 3, Example: true},
			{Name: "examples", Text: "清空 varnish", Weight: 3, Example: true}}},
		{ID: "svc-restart", Fields: []Field{{Name: "intent", Text: "Restart a systemd service", Weight: 2},
			{Name: "examples", Text: "订单服务卡死了，拉起来", Weight: 3, Example: true},
			{Name: "examples", Text: "把支付服务重新启动", Weight: 3, Example: true}}},
	}
	ix := New(docs, nil)
	c := Calibrate(ix, docs, nil)
	if c.zhThreshold <= 0 || c.zhThreshold >= DefaultThreshold || c.zhThreshold < standoutFloor*DefaultThreshold-1e-9 {
		t.Fatalf("Chinese threshold %v; want below %v and at least %v", c.zhThreshold, DefaultThreshold, standoutFloor*DefaultThreshold)
	}
	if got := c.ThresholdFor("export the ledger for friday"); got != DefaultThreshold {
		t.Errorf("English threshold %v, want %v", got, DefaultThreshold)
	}
	if before, after := ix.Match("今天的账", 3), c.Match("今天的账", 3); before.Found || !after.Found || after.Candidates[0].ID != "ledger-export" {
		t.Errorf("今天的账: found %v before, %v %+v after; want refused, then ledger-export", before.Found, after.Found, after.Candidates)
	}
	for _, q := range []string{"给我讲个笑话", "帮我订一张机票", "今天晚上吃什么好", "明天会下雨吗"} {
		if r := c.Match(q, 3); r.Found {
			t.Errorf("%s: found %+v after calibration; want refused", q, r.Candidates)
		}
	}
	var english []Doc
	for _, d := range docs {
		e := Doc{ID: d.ID}
		for _, f := range d.Fields {
			if !f.Example || !chinese(f.Text) {
				e.Fields = append(e.Fields, f)
			}
		}
		english = append(english, e)
	}
	eix := New(english, nil)
	if got := Calibrate(eix, english, nil); got != eix {
		t.Errorf("a catalog without Chinese examples was calibrated (%v)", got.zhThreshold)
	}
}

// TestNewFunc: an index and its calibration built from documents asked
// for one at a time are those built from the slice, each document asked
// for once per pass of the build.
func TestNewFunc(t *testing.T) {
	docs := synthDocs(20) // 100 examples: calibrated (see calibrateMax)
	asked := make([]int, len(docs))
	doc := func(i int) Doc { asked[i]++; return docs[i] }
	want := Calibrate(New(docs, nil), docs, nil)
	got := NewFunc(len(docs), doc, nil)
	for i, n := range asked {
		if n != 2 {
			t.Errorf("NewFunc asked for document %d %d times, want 2", i, n)
		}
	}
	got = CalibrateFunc(got, len(docs), doc, nil)
	for _, q := range append(benchQueries, "please restart the service on web-01", "帮我重启服务") {
		if g, w := got.ThresholdFor(q), want.ThresholdFor(q); g != w {
			t.Errorf("ThresholdFor(%q) = %v, want %v", q, g, w)
		}
		if g, w := got.Match(q, 5), want.Match(q, 5); !reflect.DeepEqual(g, w) {
			t.Errorf("Match(%q) = %+v, want %+v", q, g, w)
		}
	}
}
