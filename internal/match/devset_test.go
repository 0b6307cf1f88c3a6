package match_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/match"
	"github.com/toolagent/toolagent/internal/match/matcheval"
)

// devSet reads the public development set (shared/eval/intent beside the
// module root) the way the daemon reads tools, or skips the test when it is
// absent.
func devSet(t *testing.T) ([]match.Doc, []matcheval.Query) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "eval", "intent"))
	if err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "tools", "*", hldp.FileName))
	if len(paths) == 0 {
		t.Skipf("dev set %s is absent; skipping", dir)
	}
	var docs []match.Doc
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tool, err := hldp.Parse(p, data)
		if err != nil {
			t.Fatalf("dev set tool does not parse: %v", err)
		}
		docs = append(docs, catalog.ToolDoc(tool))
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
	return docs, qs
}

// splitHalves splits queries by line: the odd lines (1st, 3rd, ...) and the
// even ones. The file is grouped by tool, so each half holds about half of
// every tool's queries and of the no-fit ones.
func splitHalves(qs []matcheval.Query) (odd, even []matcheval.Query) {
	for i, q := range qs {
		if i%2 == 0 {
			odd = append(odd, q)
		} else {
			even = append(even, q)
		}
	}
	return odd, even
}

// objective is what the penalty factors are chosen for: ranking (MRR@3)
// and telling "no tool fits" apart (no-fit recall less answerable
// refusals), with equal say.
func objective(r matcheval.Report) float64 {
	return r.MRRAt3 + r.NoFitRecall - r.AnswerableRefused
}

func summary(r matcheval.Report) string {
	return fmt.Sprintf("Hit@1 %.3f Hit@3 %.3f MRR@3 %.3f refused %.3f nofitR %.3f (objective %.3f)",
		r.HitAt1, r.HitAt3, r.MRRAt3, r.AnswerableRefused, r.NoFitRecall, objective(r))
}

// TestDevSetSplit checks the two fit factors (offCoreFactor,
// onlyActionFactor) the way a held-out set would. Each factor is swept with
// the other at its shipped value, and its best values are found on each
// half of the development set alone (odd and even lines). The shipped value
// must be among the best on both halves, to within one query of a half
// (1/90 of MRR or of refusals): then tuning on either half would have
// chosen it, and it is not fitted to particular queries. The test also
// logs what values tuned on one half reach on the other.
func TestDevSetSplit(t *testing.T) {
	docs, qs := devSet(t)
	ix := match.New(docs, nil)
	odd, even := splitHalves(qs)
	halves := []struct {
		name string
		qs   []matcheval.Query
	}{{"odd", odd}, {"even", even}}
	eval := func(ix *match.Index, qs []matcheval.Query) matcheval.Report {
		return matcheval.Evaluate(matcheval.Ranker(ix, 3), qs)
	}
	var grid []float64
	for i := 8; i <= 20; i++ {
		grid = append(grid, float64(i)/20) // 0.40, 0.45, ..., 1.00
	}
	const slack = 0.012 // one query of a half's 90 answerable ones
	factors := []struct {
		name    string
		shipped float64
		with    func(f float64) *match.Index
	}{
		{"offCoreFactor", match.OffCoreFactor, func(f float64) *match.Index { return ix.WithFactors(f, match.OnlyActionFactor) }},
		{"onlyActionFactor", match.OnlyActionFactor, func(f float64) *match.Index { return ix.WithFactors(match.OffCoreFactor, f) }},
	}
	for _, fc := range factors {
		for i, tune := range halves {
			test := halves[1-i]
			objs := make([]float64, len(grid))
			bestObj := math.Inf(-1)
			for j, f := range grid {
				objs[j] = objective(eval(fc.with(f), tune.qs))
				bestObj = max(bestObj, objs[j])
			}
			var best []string
			var bestF []float64
			for j, f := range grid {
				if objs[j] >= bestObj-1e-9 {
					best = append(best, fmt.Sprintf("%.2f", f))
					bestF = append(bestF, f)
				}
			}
			tuned := bestF[len(bestF)/2] // the middle of the best values
			shippedObj := objective(eval(ix, tune.qs))
			t.Logf("%s: best on %s %v (objective %.3f), shipped %.2f there %.3f; %.2f measured on %s: %s",
				fc.name, tune.name, best, bestObj, fc.shipped, shippedObj, tuned, test.name, summary(eval(fc.with(tuned), test.qs)))
			if shippedObj < bestObj-slack {
				t.Errorf("%s = %.2f: objective on the %s half %.3f, best there %.3f at %v; the constant is not justified by this half",
					fc.name, fc.shipped, tune.name, shippedObj, bestObj, best)
			}
		}
	}
	var b strings.Builder
	for _, h := range halves {
		fmt.Fprintf(&b, "  %s: %s\n", h.name, summary(eval(ix, h.qs)))
	}
	t.Logf("shipped factors by half:\n%s", b.String())
}

// TestDevSetExamplesFromOtherHalf measures examples the way a held-out set
// would: each tool gets as examples the requests of one half of the
// development set that expect it (catalog.ToolDoc's example fields, as a
// TOOL.hdlp's examples key would give them), and the other half is
// evaluated, both ways round. The figures are logged beside those without
// examples; the test fails only when Hit@3 drops by more than one query of
// a half. (Measured when examples were added: Hit@3 held, 0.967 and 0.956
// against 0.967; Hit@1 fell from 0.833 to 0.778 and 0.744 and no-fit
// recall from 0.933/0.867 to 0.733/0.800 (0.600/0.733 before a concept
// that only examples hold stopped counting as offered, Field.Example),
// which is what the development set's requests bring as examples: one or
// two per tool, long, full of hosts, paths and context, and written to
// confuse neighbouring tools.)
func TestDevSetExamplesFromOtherHalf(t *testing.T) {
	docs, qs := devSet(t)
	exampleField := func(text string) match.Field {
		d := catalog.ToolDoc(&hldp.Tool{Name: "x", Examples: []string{text}})
		return d.Fields[len(d.Fields)-1]
	}
	odd, even := splitHalves(qs)
	halves := []struct {
		name string
		qs   []matcheval.Query
	}{{"odd", odd}, {"even", even}}
	const slack = 0.012 // one query of a half's 90 answerable ones
	for i, train := range halves {
		test := halves[1-i]
		taught := make([]match.Doc, len(docs))
		for j, d := range docs {
			taught[j] = match.Doc{ID: d.ID, Fields: slices.Clone(d.Fields)}
			for _, q := range train.qs {
				if slices.Contains(q.Expected, d.ID) {
					taught[j].Fields = append(taught[j].Fields, exampleField(q.Query))
				}
			}
		}
		without := matcheval.RunDocs(docs, nil, test.qs, 3)
		with := matcheval.RunDocs(taught, nil, test.qs, 3)
		t.Logf("%s half as examples, %s half measured:\n  without: %s\n  with:    %s", train.name, test.name, summary(without), summary(with))
		if with.HitAt3 < without.HitAt3-slack {
			t.Errorf("examples from the %s half lower Hit@3 on the %s half from %.3f to %.3f", train.name, test.name, without.HitAt3, with.HitAt3)
		}
	}
}
