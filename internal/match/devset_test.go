package match_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
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
