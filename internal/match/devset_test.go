package match_test

import (
	"fmt"
	"math"
	"math/rand/v2"
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
		d := catalog.ToolDoc(&hldp.Tool{Name: "x", Ext: &hldp.Ext{Examples: []string{text}}})
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

// TestStandoutHalves checks the stand-out rule (standoutMargin) the way a
// held-out set would, on the catalogs where it acts: seeded random
// sub-catalogs of 5, 10 and 20 of the development set's tools, where a
// request's own tools are all present (answerable) or it is one of the
// no-fit requests. On each half of the queries (odd and even lines) the
// shipped margin must refuse at least one in a hundred fewer answerable
// requests than no rule, and keep no-fit recall at 0.90 or more (the
// issue's floor is 0.85; a held-out set will differ). On the whole catalog
// the rule must lower neither figure. The sweep over margins is logged: a
// smaller margin refuses less and lets more no-fit requests through, on
// both halves alike.
func TestStandoutHalves(t *testing.T) {
	docs, qs := devSet(t)
	odd, even := splitHalves(qs)
	type figures struct{ answerable, refused, nofit, nofitRefused int }
	margins := []float64{-1, 0.10, 0.14, 0.18, 0.20, 0.22, 0.26, 0.30}
	// per half, per margin
	got := [2][]figures{make([]figures, len(margins)), make([]figures, len(margins))}
	for _, size := range []int{5, 10, 20} {
		r := rand.New(rand.NewPCG(7, uint64(size)))
		for range 30 {
			perm := r.Perm(len(docs))[:size]
			sub := make([]match.Doc, size)
			in := map[string]bool{}
			for i, p := range perm {
				sub[i], in[docs[p].ID] = docs[p], true
			}
			ix := match.New(sub, nil)
			for h, half := range [][]matcheval.Query{odd, even} {
				for _, q := range half {
					all := len(q.Expected) > 0
					for _, e := range q.Expected {
						all = all && in[e]
					}
					if !all && len(q.Expected) > 0 {
						continue // partly or wholly removed: the label says nothing here
					}
					for m, margin := range margins {
						found := ix.WithMargin(margin).Match(q.Query, 3).Found
						f := &got[h][m]
						if all {
							f.answerable++
							if !found {
								f.refused++
							}
						} else {
							f.nofit++
							if !found {
								f.nofitRefused++
							}
						}
					}
				}
			}
		}
	}
	rate := func(n, d int) float64 { return float64(n) / float64(max(d, 1)) }
	shipped := slices.Index(margins, match.StandoutMargin)
	if shipped < 0 {
		t.Fatalf("the shipped margin %.2f is not in the sweep %v", match.StandoutMargin, margins)
	}
	for h, name := range []string{"odd", "even"} {
		var b strings.Builder
		for m, f := range got[h] {
			fmt.Fprintf(&b, "  margin %5.2f: answerable %d refused %.3f, no-fit %d recall %.3f\n",
				margins[m], f.answerable, rate(f.refused, f.answerable), f.nofit, rate(f.nofitRefused, f.nofit))
		}
		t.Logf("%s half, sub-catalogs of 5, 10 and 20 tools:\n%s", name, b.String())
		s, off := got[h][shipped], got[h][0]
		if rate(s.refused, s.answerable) > rate(off.refused, off.answerable)-0.01 || rate(s.nofitRefused, s.nofit) < 0.90 {
			t.Errorf("%s half: with the rule refused %.3f (without %.3f) and no-fit recall %.3f; want at least 0.01 fewer refused and recall >= 0.90",
				name, rate(s.refused, s.answerable), rate(off.refused, off.answerable), rate(s.nofitRefused, s.nofit))
		}
	}
	ix := match.New(docs, nil)
	with := matcheval.Evaluate(matcheval.Ranker(ix, 3), qs)
	without := matcheval.Evaluate(matcheval.Ranker(ix.WithMargin(-1), 3), qs)
	t.Logf("whole catalog: with the rule %s\n  without: %s", summary(with), summary(without))
	if with.NoFitRecall < without.NoFitRecall || with.AnswerableRefused > without.AnswerableRefused {
		t.Errorf("whole catalog: the rule moves no-fit recall %.3f -> %.3f and refused %.3f -> %.3f", without.NoFitRecall, with.NoFitRecall, without.AnswerableRefused, with.AnswerableRefused)
	}
}
