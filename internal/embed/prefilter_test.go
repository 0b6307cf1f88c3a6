package embed

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/match"
)

// TestPrefilterAgrees: at 10,000 tools of random vectors the fusion read
// through the sign prefilter gives the candidates of the exact one, in
// the same order, but for near ties: where they differ, the exact fused
// scores of the tools they order differently are closer than the
// embeddings' share of a tool just past the tools the prefilter passes
// (weight/(RRFK+prefilterFloor+1), a hundredth of the best fused score at
// the default weight), so close that the exact order there is the rank
// of a tool among thousands of near-orthogonal vectors. Random vectors
// are the prefilter's worst case: their cosines are all near 0, where the
// signs tell them apart least; the real-model tests hold it to the exact
// fusion on the development set. The requests have many lexical
// candidates, tied in their lexical scores (the catalog has many tools
// of the same verb and object); the vectors are near one tool's or
// random; the limits 1 to 3, at the default weight.
func TestPrefilterAgrees(t *testing.T) {
	snap, m, _ := benchCatalog(t, 10000)
	set := m.set.Load()
	r := rand.New(rand.NewPCG(7, 8))
	verbs := []string{"restart", "list", "show", "delete", "create", "renew", "export", "restore", "search", "tail", "deploy", "merge"}
	objs := []string{"service", "file", "certificate", "database", "table", "issue", "log", "port", "process", "disk", "container", "backup"}
	if len(set.names) < prefilterMin*prefilterSize(DefaultWeight, 3) {
		t.Fatal("fuse does not use the prefilter at 10,000 tools")
	}
	fusions, differ := 0, 0
	for i := range 300 {
		q := fmt.Sprintf("%s the %s", verbs[r.IntN(len(verbs))], objs[r.IntN(len(objs))])
		if i%3 == 0 {
			q += fmt.Sprintf(" for team%d", r.IntN(500))
		}
		qv := make([]float64, set.dims)
		near := r.IntN(len(set.names))
		for j := range qv {
			qv[j] = r.NormFloat64()
			if i%2 == 0 {
				qv[j] = 0.3*qv[j]/float64(set.dims) + float64(set.vecs[near*set.dims+j])
			}
		}
		u, _ := unit(qv)
		for limit := 1; limit <= 3; limit++ {
			fusions++
			if !agrees(t, snap, set, q, u, limit) {
				differ++
			}
		}
	}
	t.Logf("%d of %d fusions differ, all in near ties", differ, fusions)
	if differ*20 > fusions {
		t.Errorf("%d of %d fusions differ: more than 1 in 20", differ, fusions)
	}
}

// agrees reports whether the fusion of q (vector qv) at limit through
// the prefilter gives the candidates of the exact one, and fails t
// unless, where they differ, the exact fused scores of the first tools
// they order differently are a near tie: closer than the embeddings'
// share of the tool just past the least the prefilter passes.
func agrees(t *testing.T, snap *catalog.Snapshot, set *toolSet, q string, qv []float32, limit int) bool {
	t.Helper()
	tie := DefaultWeight / float64(RRFK+prefilterFloor+1)
	lex := snap.Ranking(q, nil, lexicalDepth(DefaultWeight, limit))
	fast, _ := fuse(snap, nil, set, lex, qv, limit, DefaultWeight)
	full, _ := fuseWith(snap, nil, set, lex, qv, limit, DefaultWeight, 0)
	a, b := ids(fast.Candidates), ids(full.Candidates)
	if slices.Equal(a, b) {
		return true
	}
	var ex embRanking
	set.exact(&ex, snap, nil, qv, RRFK+2*limit)
	defer ex.release()
	lexR := map[string]int{}
	for i, c := range lex.Candidates {
		lexR[c.ID] = i + 1
	}
	exact := func(name string) float64 {
		s := DefaultWeight / float64(RRFK+ex.rank(ex.sims[set.index[name]]))
		if r, ok := lexR[name]; ok {
			s += 1 / float64(RRFK+r)
		}
		return s
	}
	for j := range b {
		if j >= len(a) || exact(b[j])-exact(a[j]) >= tie {
			t.Errorf("%q, limit %d: prefiltered %v, exact %v: not a near tie (a near tie is closer than %.6f)", q, limit, a, b, tie)
			break
		}
		if a[j] != b[j] {
			t.Logf("%q, limit %d: prefiltered %v, exact %v: a near tie (exact scores %.6f, %.6f)", q, limit, a, b, exact(b[j]), exact(a[j]))
			break
		}
	}
	return false
}

func ids(cs []match.Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// TestPrefilterSurface: at 10,000 tools a surface holds through the
// prefilter: a wide one (two thirds of the tools) is read through it, a narrow
// one (a few tools) falls back to the exact ranking; neither offers a
// tool off the surface.
func TestPrefilterSurface(t *testing.T) {
	snap, m, _ := benchCatalog(t, 10000)
	set := m.set.Load()
	for _, sf := range []catalog.Surface{
		{{Tools: []string{"restart-*", "list-*", "show-*", "delete-*", "create-*", "renew-*", "export-*", "restore-*"}}},
		{{Tools: []string{"export-table-*"}}},
	} {
		for i, q := range append(benchRequests, "restart the service", "export the table", "merge") {
			qv := set.vecs[(i*37%len(set.names))*set.dims:][:set.dims]
			lex := snap.Ranking(q, sf, lexicalDepth(DefaultWeight, 3))
			res, _ := fuse(snap, sf, set, lex, qv, 3, DefaultWeight)
			for _, c := range res.Candidates {
				e, _ := snap.Lookup(c.ID)
				if !sf.AllowsEntry(e) {
					t.Errorf("surface %v, %q: candidate %s is off the surface", sf, q, c.ID)
				}
			}
		}
	}
}
