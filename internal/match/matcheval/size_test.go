package matcheval_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/toolagent/toolagent/internal/match"
	"github.com/toolagent/toolagent/internal/match/matcheval"
)

// sizeFigures pools the outcomes of many random sub-catalogs of one size.
type sizeFigures struct {
	size, catalogs int
	// answerable: queries whose expected tools are all in the sub-catalog.
	answerable, hit1, hit3, refused int
	// nofit: the dev set's no-fit queries; removed: answerable queries none
	// of whose expected tools is in the sub-catalog, which must be refused
	// there too.
	nofit, nofitRefused, removed, removedRefused int
}

func (f sizeFigures) rate(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

func (f sizeFigures) String() string {
	return fmt.Sprintf("size %2d (%3d catalogs): answerable %5d Hit@1 %.3f Hit@3 %.3f refused %.3f | no-fit %5d recall %.3f | removed-tool %6d recall %.3f",
		f.size, f.catalogs, f.answerable, f.rate(f.hit1, f.answerable), f.rate(f.hit3, f.answerable), f.rate(f.refused, f.answerable),
		f.nofit, f.rate(f.nofitRefused, f.nofit), f.removed, f.rate(f.removedRefused, f.removed))
}

// evalSize draws catalogs random sub-catalogs of size tools (seeded, so the
// figures are reproducible) and pools their outcomes.
func evalSize(docs []match.Doc, qs []matcheval.Query, size, catalogs int, seed uint64) sizeFigures {
	r := rand.New(rand.NewPCG(seed, uint64(size)))
	f := sizeFigures{size: size, catalogs: catalogs}
	for range catalogs {
		perm := r.Perm(len(docs))[:size]
		sub := make([]match.Doc, size)
		in := map[string]bool{}
		for i, p := range perm {
			sub[i] = docs[p]
			in[docs[p].ID] = true
		}
		ix := match.New(sub, nil)
		for _, q := range qs {
			present := 0
			for _, e := range q.Expected {
				if in[e] {
					present++
				}
			}
			switch {
			case len(q.Expected) == 0 || present == 0:
				res := ix.Match(q.Query, 3)
				if len(q.Expected) == 0 {
					f.nofit++
					if !res.Found {
						f.nofitRefused++
					}
				} else {
					f.removed++
					if !res.Found {
						f.removedRefused++
					}
				}
			case present == len(q.Expected):
				res := ix.Match(q.Query, 3)
				f.answerable++
				if !res.Found {
					f.refused++
				}
				for i, c := range res.Candidates {
					if slices.Contains(q.Expected, c.ID) {
						if i == 0 {
							f.hit1++
						}
						f.hit3++
						break
					}
				}
			}
			// Partly present: the label no longer says what a right answer
			// is; left out.
		}
	}
	return f
}

// TestSizeGenerality checks that the score and its threshold mean the same
// for any size of catalog, the way a deployment with 5 or 20 tools uses
// them. For each size, seeded random sub-catalogs of the dev set's tools
// are evaluated on the answerable queries whose expected tools are all
// present, on the no-fit queries, and on the answerable queries whose tools
// were all removed (which must now be refused too).
//
// Floors, and why: Hit@1 >= 0.80 and no-fit recall >= 0.85 are the dev
// set's own targets (a smaller catalog has fewer look-alike tools, so it
// should do no worse). Answerable refused <= 0.08 is looser than the full
// catalog's target of 0.05: a small catalog cannot tell from its own few
// tools which request words are generic, and "an action no tool offers"
// (absentActionFactor, uncoveredClassWeight) is judged against the whole
// catalog. Before the stand-out rule (match's standoutMargin) a 5-tool
// catalog refused 0.106 of the requests it should answer, 10 tools 0.085,
// 20 tools 0.067 (with plain BM25 idf: 0.33, 0.17 and 0.10; 0.99 for one
// tool); with it 0.058, 0.062 and 0.061. The removed-tool recall is
// logged, not held (the rule lowered it from 0.861 to 0.760 at 5
// tools): a request whose tool was removed is often near-domain for a
// neighbour left in the catalog (svc-logs gone, log-grep present), and
// whether that neighbour fits is a judgement the labels do not make.
func TestSizeGenerality(t *testing.T) {
	docs, qs := loadDevSet(t)
	full := evalSize(docs, qs, len(docs), 1, 1)
	t.Logf("%v", full)
	for _, size := range []int{1, 2, 5, 10, 20} {
		f := evalSize(docs, qs, size, 100, 1)
		t.Logf("%v", f)
		if size < 5 {
			continue // logged only: too few answerable queries per catalog to hold to a rate
		}
		if got := f.rate(f.hit1, f.answerable); got < 0.80 {
			t.Errorf("size %d: Hit@1 %.3f, want >= 0.80", size, got)
		}
		if got := f.rate(f.refused, f.answerable); got > 0.08 {
			t.Errorf("size %d: answerable refused %.3f, want <= 0.08", size, got)
		}
		if got := f.rate(f.nofitRefused, f.nofit); got < 0.85 {
			t.Errorf("size %d: no-fit recall %.3f, want >= 0.85", size, got)
		}
	}
}
