package matcheval_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/match"
	"github.com/toolagent/toolagent/internal/match/matcheval"
)

// devSetDir finds shared/eval/intent beside the module root (the directory
// holding go.mod), or returns "" when it is absent.
func devSetDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	d := filepath.Join(dir, "..", "shared", "eval", "intent")
	if _, err := os.Stat(filepath.Join(d, "queries.jsonl")); err != nil {
		return ""
	}
	return d
}

// loadDevSet reads the dev set's tools with hldp.Parse and turns them into
// Docs with catalog.ToolDoc, exactly as the daemon does, and reads its
// queries.
func loadDevSet(t *testing.T) ([]match.Doc, []matcheval.Query) {
	t.Helper()
	dir := devSetDir(t)
	if dir == "" {
		t.Skip("dev set ../shared/eval/intent (beside the module root) is absent; skipping")
	}
	f, err := os.Open(filepath.Join(dir, "queries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	qs, err := matcheval.ReadQueries(f)
	if err != nil {
		t.Fatal(err)
	}
	docs := loadTools(t, filepath.Join(dir, "tools"))
	return docs, qs
}

// TestDevSetFloors runs the public dev set and fails below the floors the
// intent-matching issue sets.
func TestDevSetFloors(t *testing.T) {
	docs, qs := loadDevSet(t)
	r := matcheval.RunDocs(docs, nil, qs, 3)
	var b strings.Builder
	r.WriteText(&b)
	t.Logf("dev set:\n%s", b.String())
	if testing.Verbose() {
		b.Reset()
		r.WriteMisses(&b)
		t.Logf("misses:\n%s", b.String())
	}
	// target is what the intent-matching issue asks for; floor is what
	// fails the test. The method meets every target (Hit@3 0.967, Hit@1
	// 0.833, no-fit recall 0.900 at 4.4 % answerable refused), so the
	// floors are the targets.
	floors := []struct {
		name               string
		got, target, floor float64
		atMost             bool
	}{
		{"hit_at_3", r.HitAt3, 0.95, 0.95, false},
		{"hit_at_1", r.HitAt1, 0.80, 0.80, false},
		{"nofit_recall", r.NoFitRecall, 0.85, 0.85, false},
		{"answerable_refused", r.AnswerableRefused, 0.05, 0.05, true},
	}
	for _, f := range floors {
		below := func(limit float64) bool { return f.atMost && f.got > limit || !f.atMost && f.got < limit }
		op := map[bool]string{true: "<=", false: ">="}[f.atMost]
		if below(f.floor) {
			t.Errorf("dev set %s = %.3f, want %s %.2f (regression floor)", f.name, f.got, op, f.floor)
		} else if below(f.target) {
			t.Logf("dev set %s = %.3f: target %s %.2f not met yet", f.name, f.got, op, f.target)
		}
	}
}

// loadTools parses every TOOL.hdlp under dir into Docs, as the daemon does.
func loadTools(t *testing.T, dir string) []match.Doc {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*", hldp.FileName))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no tools under %s: %v", dir, err)
	}
	var docs []match.Doc
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tool, err := hldp.Parse(p, data)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, catalog.ToolDoc(tool))
	}
	return docs
}

// TestTraditionalAndPinyin: requests in traditional script and in Latin
// pinyin find the shipped tools (native-repo/tools) that their simplified
// forms find, and do not reach the look-alike tool.
func TestTraditionalAndPinyin(t *testing.T) {
	ix := match.New(loadTools(t, filepath.Join("..", "..", "..", "native-repo", "tools")), nil)
	for _, c := range []struct{ q, want string }{
		{"讀取文件內容", "file-read"},
		{"讀取 config.yaml 的內容", "file-read"},
		{"把這段文字寫入 notes.txt", "file-write"},
		{"執行一條 shell 命令", "shell-exec"},
		{"查看最近的提交記錄", "git-ops"},
		{"zuijin de tijiao jilu", "git-ops"},
		{"duqu wenjian neirong", "file-read"},
	} {
		res := ix.Match(c.q, 3)
		if !res.Found || len(res.Candidates) == 0 || res.Candidates[0].ID != c.want {
			t.Errorf("Match(%q) = found %v %+v; want %s first and found", c.q, res.Found, res.Candidates, c.want)
		}
	}
	// A traditional request reads as its simplified form, no more: the
	// same verdict and the same candidates.
	for _, p := range [][2]string{{"寫一首關於秋天的詩", "写一首关于秋天的诗"}, {"重啟服務", "重启服务"}, {"刪除這個目錄", "删除这个目录"}} {
		tr, si := ix.Match(p[0], 3), ix.Match(p[1], 3)
		if tr.Found != si.Found || len(tr.Candidates) != len(si.Candidates) || len(tr.Candidates) > 0 && tr.Candidates[0].ID != si.Candidates[0].ID {
			t.Errorf("Match(%s) = %v %+v; want as Match(%s) = %v %+v", p[0], tr.Found, tr.Candidates, p[1], si.Found, si.Candidates)
		}
	}
}

// TestSplitB runs the second split (testdata/intent-b.jsonl: other
// wording of the same kinds of request, written apart from the dev set,
// against the dev set's tools) and fails when a served figure of zh or en
// falls below what main (a136402) had.
func TestSplitB(t *testing.T) {
	docs, _ := loadDevSet(t)
	f, err := os.Open(filepath.Join("testdata", "intent-b.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	qs, err := matcheval.ReadQueries(f)
	if err != nil {
		t.Fatal(err)
	}
	r := matcheval.RunDocs(docs, nil, qs, 3)
	var b strings.Builder
	r.WriteText(&b)
	t.Logf("split b:\n%s", b.String())
	if testing.Verbose() {
		b.Reset()
		r.WriteMisses(&b)
		t.Logf("misses:\n%s", b.String())
	}
	floors := []struct {
		lang           string
		sR3, nofitRecl float64
	}{
		{"zh", 0.962, 0.765},
		{"en", 0.946, 0.824},
	}
	for _, fl := range floors {
		got := r.ByLang[fl.lang]
		if got.ServedRecallAt3 < fl.sR3-1e-3 {
			t.Errorf("split b %s served R@3 = %.3f, want >= %.3f (main)", fl.lang, got.ServedRecallAt3, fl.sR3)
		}
		if got.NoFitRecall < fl.nofitRecl-1e-3 {
			t.Errorf("split b %s no-fit recall = %.3f, want >= %.3f (main)", fl.lang, got.NoFitRecall, fl.nofitRecl)
		}
	}
}

// readSplitB reads testdata/intent-b.jsonl.
func readSplitB(t *testing.T) []matcheval.Query {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "intent-b.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	qs, err := matcheval.ReadQueries(f)
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// TestLearning teaches the catalog requests as learning from use does
// (matcheval.Teach) and measures other requests: the dev set's even lines
// taught, its odd lines measured, and the other way round; the dev set
// taught, the second split measured, and the other way round. Served
// recall@3 and no-fit recall of zh and en must not fall below those of
// the catalog taught nothing (served recall@3 by at most one request:
// with the dev set's odd lines taught, 谁 learned for fs-grep lifts it
// over git-annotate for "server.go 第 120 到 140 行是谁写的？"), and
// served recall@3 must rise on the whole.
func TestLearning(t *testing.T) {
	docs, dev := loadDevSet(t)
	splitB := readSplitB(t)
	var even, odd []matcheval.Query
	for i, q := range dev {
		if i%2 == 0 {
			even = append(even, q)
		} else {
			odd = append(odd, q)
		}
	}
	var gain float64
	for _, c := range []struct {
		name        string
		teach, test []matcheval.Query
	}{
		{"dev even -> dev odd", even, odd},
		{"dev odd -> dev even", odd, even},
		{"dev -> split b", dev, splitB},
		{"split b -> dev", splitB, dev},
	} {
		before := matcheval.RunDocs(docs, nil, c.test, 3)
		after := matcheval.RunDocs(matcheval.Teach(docs, c.teach, 1), nil, c.test, 3)
		for _, l := range []string{"zh", "en"} {
			b, a := before.ByLang[l], after.ByLang[l]
			t.Logf("%s, %s: served R@3 %.3f -> %.3f, no-fit recall %.3f -> %.3f", c.name, l, b.ServedRecallAt3, a.ServedRecallAt3, b.NoFitRecall, a.NoFitRecall)
			if a.ServedRecallAt3 < b.ServedRecallAt3-1/float64(b.Answerable)-1e-9 {
				t.Errorf("%s, %s: learning lowered served R@3 %.3f -> %.3f", c.name, l, b.ServedRecallAt3, a.ServedRecallAt3)
			}
			if a.NoFitRecall < b.NoFitRecall-1e-9 {
				t.Errorf("%s, %s: learning lowered no-fit recall %.3f -> %.3f", c.name, l, b.NoFitRecall, a.NoFitRecall)
			}
			gain += a.ServedRecallAt3 - b.ServedRecallAt3
		}
	}
	if gain <= 0 {
		t.Errorf("learning changed served R@3 by %.3f in all; want a rise", gain)
	}
}

// TestChineseNotRefusedMore (issue 41, item 2's bar): on the dev set and
// the second split, answerable Chinese requests are refused no more often
// than English ones.
func TestChineseNotRefusedMore(t *testing.T) {
	docs, dev := loadDevSet(t)
	for name, qs := range map[string][]matcheval.Query{"dev": dev, "split b": readSplitB(t)} {
		r := matcheval.RunDocs(docs, nil, qs, 3)
		zh, en := r.ByLang["zh"], r.ByLang["en"]
		if zh.AnswerableRefused > en.AnswerableRefused {
			t.Errorf("%s: zh answerable refused %.3f > en %.3f", name, zh.AnswerableRefused, en.AnswerableRefused)
		}
	}
}

// TestCalibratedShippedTools (issue 41, item 2): on the shipped tools,
// whose examples are half English and half Chinese, the calibrated
// thresholds refuse no greater share of the Chinese examples than of the
// English ones, each asked of the catalog without it (leave-one-out),
// among those that find their own tool first; and no-fit requests in
// either language are still refused.
func TestCalibratedShippedTools(t *testing.T) {
	docs := loadTools(t, filepath.Join("..", "..", "..", "native-repo", "tools"))
	ix := match.Calibrate(match.New(docs, nil), docs, nil)
	refused := map[bool][2]int{} // by Chinese: refused, found first
	for _, r := range matcheval.LeaveOneOut(docs, nil, 1) {
		if len(r.Candidates) == 0 || r.Candidates[0].ID != r.Doc {
			continue
		}
		zh := match.Chinese(r.Example)
		c := refused[zh]
		c[1]++
		if r.Candidates[0].Score < ix.ThresholdFor(r.Example) {
			c[0]++
		}
		refused[zh] = c
	}
	share := func(c [2]int) float64 { return float64(c[0]) / float64(max(c[1], 1)) }
	t.Logf("refused at the calibrated thresholds: zh %d of %d, en %d of %d (thresholds zh %.3f, en %.3f, base %.3f)",
		refused[true][0], refused[true][1], refused[false][0], refused[false][1], ix.ThresholdFor("中文请求"), ix.ThresholdFor("a request"), ix.Threshold())
	if refused[true][1] < 5 || refused[false][1] < 5 {
		t.Fatalf("examples that find their tool: zh %d, en %d; want at least 5 of each", refused[true][1], refused[false][1])
	}
	if share(refused[true]) > share(refused[false]) {
		t.Errorf("Chinese examples refused %.3f, English %.3f: Chinese refused more often", share(refused[true]), share(refused[false]))
	}
	for _, q := range []string{"给我讲个笑话", "帮我订一张机票", "明天会下雨吗", "tell me a joke", "book me a flight to Paris", "will it rain tomorrow"} {
		if r := ix.Match(q, 3); r.Found {
			t.Errorf("%s: found %+v after calibration; want refused", q, r.Candidates)
		}
	}
}

// BenchmarkCalibrateShipped is what calibrating the shipped tools (30
// examples) adds to a catalog's load.
func BenchmarkCalibrateShipped(b *testing.B) {
	t := &testing.T{}
	docs := loadTools(t, filepath.Join("..", "..", "..", "native-repo", "tools"))
	ix := match.New(docs, nil)
	for b.Loop() {
		match.Calibrate(ix, docs, nil)
	}
}
