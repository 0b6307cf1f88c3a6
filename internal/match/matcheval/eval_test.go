package matcheval

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolagent/toolagent/internal/match"
)

func TestReadQueries(t *testing.T) {
	in := `{"query": "restart nginx", "expected": ["svc-restart"], "lang": "en"}

{"query": "明天下雨吗", "expected": [], "lang": "zh"}
`
	got, err := ReadQueries(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Query{{"restart nginx", []string{"svc-restart"}, "en"}, {"明天下雨吗", []string{}, "zh"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadQueries mismatch (-want +got):\n%s", diff)
	}
}

func TestReadQueriesErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"bad json", "{\"query\": \"a\", \"expected\": []}\n{oops", "line 2:"},
		{"missing expected", `{"query": "a"}`, "line 1: missing expected"},
		{"missing query", `{"expected": ["x"]}`, "line 1: missing query"},
		{"unknown field", `{"query": "a", "expected": [], "extra": 1}`, "line 1:"},
	}
	for _, tt := range tests {
		_, err := ReadQueries(strings.NewReader(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ReadQueries error = %v, want containing %q", tt.name, err, tt.want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	qs := []Query{
		{"q1", []string{"a"}, "en"},      // rank 1
		{"q2", []string{"b", "c"}, "en"}, // c at rank 2: either is right
		{"q3", []string{"d"}, "zh"},      // missing, and refused
		{"q4", []string{}, "zh"},         // refused: right
		{"q5", []string{}, "zh"},         // answered: wrong
	}
	answers := map[string]struct {
		names []string
		found bool
	}{
		"q1": {[]string{"a", "x"}, true},
		"q2": {[]string{"x", "c", "y"}, true},
		"q3": {[]string{"x"}, false},
		"q4": {[]string{"x"}, false},
		"q5": {[]string{"x"}, true},
	}
	r := Evaluate(func(q string) ([]string, bool) { a := answers[q]; return a.names, a.found }, qs)
	want := Report{
		Queries: 5, Answerable: 3, NoFit: 2,
		RecallAt1: 1.0 / 3, RecallAt3: (1 + 0.5) / 3,
		ServedRecallAt1: 1.0 / 3, ServedRecallAt3: (1 + 0.5) / 3,
		HitAt1: 1.0 / 3, HitAt3: 2.0 / 3, MRRAt3: (1 + 0.5) / 3,
		AnsweredHitAt3: 2.0 / 3, AnswerableRefused: 1.0 / 3,
		NoFitPrecision: 0.5, NoFitRecall: 0.5,
	}
	opts := []cmp.Option{cmpopts.EquateApprox(0, 1e-9), cmpopts.IgnoreFields(Report{}, "ByLang", "Misses")}
	if diff := cmp.Diff(want, r, opts...); diff != "" {
		t.Errorf("Evaluate mismatch (-want +got):\n%s", diff)
	}
	if got := len(r.Misses); got != 3 {
		t.Errorf("Evaluate misses = %d, want 3 (q2 not first, q3 refused, q5 answered)", got)
	}
	if en := r.ByLang["en"]; en.Queries != 2 || en.HitAt3 != 1 {
		t.Errorf("Evaluate ByLang[en] = %+v, want 2 queries with Hit@3 1", en)
	}

	r.ByLang = nil
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	json.Unmarshal(b, &keys)
	for _, k := range []string{"recall_at_1", "recall_at_3", "hit_at_1", "hit_at_3", "mrr_at_3", "nofit_precision", "nofit_recall", "queries"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("report JSON %s lacks key %q", b, k)
		}
	}
	if _, ok := keys["by_lang"]; ok {
		t.Errorf("report JSON with ByLang nil has by_lang: %s", b)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil || !strings.Contains(text.String(), "Hit@3") {
		t.Errorf("WriteText = %q, %v; want a table with a Hit@3 column", text.String(), err)
	}
}

// TestServedFigures: a refused query whose expected tool ranks first
// counts for the ranked figures and as a miss for the served ones, per
// language, and the text report leads with the served table.
func TestServedFigures(t *testing.T) {
	qs := []Query{
		{"q1", []string{"a"}, "zh"}, // first, served
		{"q2", []string{"b"}, "zh"}, // first, but refused
		{"q3", []string{"c"}, "en"}, // third, served
		{"q4", []string{}, "en"},    // refused: right
	}
	answers := map[string]struct {
		names []string
		found bool
	}{
		"q1": {[]string{"a"}, true},
		"q2": {[]string{"b", "x"}, false},
		"q3": {[]string{"x", "y", "c"}, true},
		"q4": {[]string{"x"}, false},
	}
	r := Evaluate(func(q string) ([]string, bool) { a := answers[q]; return a.names, a.found }, qs)
	approx := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	zh, en := r.ByLang["zh"], r.ByLang["en"]
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"all R@3", r.RecallAt3, 1},
		{"all served R@3", r.ServedRecallAt3, 2.0 / 3},
		{"all served R@1", r.ServedRecallAt1, 1.0 / 3},
		{"zh R@1", zh.RecallAt1, 1},
		{"zh served R@1", zh.ServedRecallAt1, 0.5},
		{"zh served R@3", zh.ServedRecallAt3, 0.5},
		{"en served R@1", en.ServedRecallAt1, 0},
		{"en served R@3", en.ServedRecallAt3, 1},
		{"en nofit recall", en.NoFitRecall, 1},
	} {
		if !approx(c.got, c.want) {
			t.Errorf("%s = %.3f, want %.3f", c.name, c.got, c.want)
		}
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text.String(), "\n")
	if !strings.HasPrefix(lines[0], "served ") || !strings.Contains(lines[0], "sR@3") ||
		!strings.HasPrefix(lines[2], "lang=en ") || !strings.Contains(lines[2], "  1.000  ") {
		t.Errorf("WriteText does not lead with the served figures per language:\n%s", text.String())
	}
	var keys map[string]any
	b, _ := json.Marshal(r)
	json.Unmarshal(b, &keys)
	if _, ok := keys["served_recall_at_3"]; !ok {
		t.Errorf("report JSON %s lacks served_recall_at_3", b)
	}
}

func TestRunDocs(t *testing.T) {
	docs := []match.Doc{
		{ID: "svc-restart", Fields: []match.Field{{Name: "intent", Text: "完整地停止再启动一个 systemd 服务", Weight: 2}, {Name: "display", Text: "服务重启", Weight: 2.5}}},
		{ID: "disk-space", Fields: []match.Field{{Name: "intent", Text: "Show free space of every mounted filesystem", Weight: 2}}},
	}
	qs := []Query{{"restart the nginx service", []string{"svc-restart"}, "en"}, {"磁盘还剩多少空间", []string{"disk-space"}, "zh"}}
	r := RunDocs(docs, nil, qs, 0)
	if r.HitAt1 != 1 {
		t.Errorf("RunDocs Hit@1 = %v, want 1 (misses %+v)", r.HitAt1, r.Misses)
	}
}
