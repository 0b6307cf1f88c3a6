package matcheval

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolagent/toolagent/internal/match"
)

// lintDocs are two tools, each with examples: most read like their own
// tool, one of svc-status's reads like svc-restart (the two cross-match),
// and one of svc-restart's shares no word with anything else.
func lintDocs() []match.Doc {
	ex := func(s string) match.Field { return match.Field{Name: "examples", Text: s, Weight: 3, Example: true} }
	return []match.Doc{
		{ID: "svc-restart", Fields: []match.Field{
			{Name: "intent", Text: "restart a systemd service on the host", Weight: 2},
			ex("bounce the nginx service"),
			ex("kick the wedged api"),
			ex("重启一下订单服务"),
		}},
		{ID: "svc-status", Fields: []match.Field{
			{Name: "intent", Text: "show whether a systemd service is running", Weight: 2},
			ex("is nginx running"),
			ex("restart the nginx service"),
		}},
	}
}

func TestLeaveOneOut(t *testing.T) {
	docs := lintDocs()
	// The lone example finds its tool while it is part of the tool's text:
	// what LeaveOneOut reports below is its being left out.
	if r := match.New(docs, nil).Match("kick the wedged api", 3); !r.Found || r.Candidates[0].ID != "svc-restart" {
		t.Fatalf("with every example indexed, Match(kick the wedged api) = %v %+v; want svc-restart", r.Found, r.Candidates)
	}
	type row struct {
		Doc     string
		Index   int
		Example string
		First   string
		Rank    int
		OK      bool
	}
	var got []row
	for _, r := range LeaveOneOut(docs, nil, 3) {
		first := ""
		if len(r.Candidates) > 0 {
			first = r.Candidates[0].ID
		}
		got = append(got, row{r.Doc, r.Index, r.Example, first, r.Rank(), r.OK()})
	}
	// svc-status's restart example draws svc-restart's own restart request
	// away, and is drawn to svc-restart itself: the two cross-match, and
	// both sides are flagged.
	want := []row{
		{"svc-restart", 0, "bounce the nginx service", "svc-status", 2, false},
		{"svc-restart", 1, "kick the wedged api", "", 0, false},
		{"svc-restart", 2, "重启一下订单服务", "svc-restart", 1, true},
		{"svc-status", 0, "is nginx running", "svc-status", 1, true},
		{"svc-status", 1, "restart the nginx service", "svc-restart", 2, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LeaveOneOut mismatch (-want +got):\n%s", diff)
	}
	if docs[0].Fields[2].Text != "kick the wedged api" || len(docs[0].Fields) != 4 {
		t.Errorf("LeaveOneOut changed its input: %+v", docs[0])
	}
}

func TestSummarizeExamples(t *testing.T) {
	c := func(ids ...string) []match.Candidate {
		var out []match.Candidate
		for _, id := range ids {
			out = append(out, match.Candidate{ID: id})
		}
		return out
	}
	results := []ExampleResult{
		{Doc: "a", Candidates: c("a", "b"), Found: true},      // hit at 1
		{Doc: "a", Candidates: c("b", "c", "a"), Found: true}, // hit at 3
		{Doc: "b", Candidates: c("b"), Found: false},          // hit at 1, refused
		{Doc: "b", Candidates: c("a", "c", "d"), Found: true}, // miss
	}
	want := ExampleSummary{Examples: 4, Docs: 2, HitAt1: 0.5, HitAt3: 0.75, Refused: 0.25}
	if diff := cmp.Diff(want, SummarizeExamples(results), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("SummarizeExamples mismatch (-want +got):\n%s", diff)
	}
	if got := SummarizeExamples(nil); got != (ExampleSummary{}) {
		t.Errorf("SummarizeExamples(nil) = %+v, want zero", got)
	}
}

func TestWithoutExamples(t *testing.T) {
	docs := lintDocs()
	var got []string
	for _, d := range WithoutExamples(docs) {
		for _, f := range d.Fields {
			got = append(got, d.ID+":"+f.Name)
		}
	}
	if want := []string{"svc-restart:intent", "svc-status:intent"}; !cmp.Equal(want, got) {
		t.Errorf("WithoutExamples fields = %q, want %q", got, want)
	}
	if len(docs[0].Fields) != 4 {
		t.Errorf("WithoutExamples changed its input: %+v", docs[0])
	}
}
