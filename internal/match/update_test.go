package match

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUpdateEqualsNew: an index updated with removed, replaced and added
// documents answers every query exactly as New over the resulting
// documents does (with the mean field lengths of the first New, which
// Update keeps), and the index it was updated from answers as before.
func TestUpdateEqualsNew(t *testing.T) {
	docs := synthDocs(400)
	slices.SortFunc(docs, func(a, b Doc) int { return strings.Compare(a.ID, b.ID) })
	base := New(docs, nil)
	r := rand.New(rand.NewPCG(9, 9))
	var queries []string
	queries = append(queries, benchQueries...)
	for range 150 {
		d := docs[r.IntN(len(docs))]
		f := d.Fields[r.IntN(len(d.Fields))]
		queries = append(queries, f.Text)
	}
	before := make([]Result, len(queries))
	for i, q := range queries {
		before[i] = base.Match(q, 3)
	}

	// Remove 5, replace 5 (new text, and one loses its examples), add 5:
	// one added document brings words no other holds.
	perm := r.Perm(len(docs))
	var removed, added []Doc
	gone := map[string]bool{}
	for _, i := range perm[:10] {
		removed = append(removed, docs[i])
		gone[docs[i].ID] = true
	}
	for k, i := range perm[5:10] {
		d := Doc{ID: docs[i].ID, Fields: slices.Clone(docs[i].Fields)}
		d.Fields[2].Text = "rotate the kafka broker certificates and 清理 旧的 segment 文件"
		if k == 0 {
			d.Fields = d.Fields[:5]
		}
		added = append(added, d)
	}
	for i := range 5 {
		added = append(added, Doc{ID: "new-" + string(rune('a'+i)), Fields: []Field{
			{Name: "name", Text: "zookeeper quorum check", Weight: 2.5},
			{Name: "intent", Text: "检查 zookeeper 集群的 quorum 状态和 leader 选举", Weight: 2},
			{Name: "examples", Text: "is the zk ensemble healthy", Weight: 3, Example: true},
		}})
	}
	queries = append(queries, "rotate kafka broker certificates", "zookeeper quorum 状态", "is the zk ensemble healthy", "清理旧的 segment 文件")
	upd := base.Update(removed, added)

	var want []Doc
	for _, d := range docs {
		if !gone[d.ID] {
			want = append(want, d)
		}
	}
	want = append(want, added...)
	slices.SortFunc(want, func(a, b Doc) int { return strings.Compare(a.ID, b.ID) })
	full := build(want, nil, base.avgLen)
	if upd.Len() != full.Len() || upd.Len() != len(docs) {
		t.Fatalf("Len: updated %d, New %d, want %d", upd.Len(), full.Len(), len(docs))
	}
	for _, q := range queries {
		if diff := cmp.Diff(full.Match(q, 3), upd.Match(q, 3)); diff != "" {
			t.Errorf("Match(%q): updated index differs from New (-New +updated):\n%s", q, diff)
		}
	}
	for i, q := range queries[:len(before)] {
		if diff := cmp.Diff(before[i], base.Match(q, 3)); diff != "" {
			t.Errorf("Match(%q): the index updated from changed (-before +after):\n%s", q, diff)
		}
	}
	// 10 slots emptied (5 removed, 5 replaced) and 10 filled (the 5
	// replacements and 5 new documents), over 400 live documents.
	if d := upd.Drift(); d != 20.0/400 || base.Drift() != 0 {
		t.Errorf("Drift = %v (base %v), want %v and 0", d, base.Drift(), 20.0/400)
	}
	// What upd added to a term's surfaces it added to a copy of its own:
	// base's array may have room after base's surfaces, which another
	// update of base would fill too.
	for id, ss := range upd.termSurfs[:len(base.termSurfs)] {
		if was := base.termSurfs[id]; len(ss) > len(was) && len(was) > 0 && &ss[0] == &was[0] {
			t.Fatalf("term %d: the update appended its surfaces into base's array", id)
		}
	}
	// A sibling update of base, adding documents with words and surfaces
	// of their own, leaves the first update as it was: they share what
	// base holds, and neither writes into it.
	sibling := base.Update(nil, []Doc{{ID: "sibling", Fields: []Field{
		{Name: "name", Text: "KAFKA Brokers ZOOKEEPERS quorums", Weight: 2.5},
		{Name: "intent", Text: "Rotating KAFKA brokers' Certificate, 清理了旧的 Segments 文件", Weight: 2},
	}}})
	if sibling.Len() != len(docs)+1 {
		t.Fatalf("sibling Len = %d, want %d", sibling.Len(), len(docs)+1)
	}
	for _, q := range queries {
		if diff := cmp.Diff(full.Match(q, 3), upd.Match(q, 3)); diff != "" {
			t.Errorf("after a sibling update, Match(%q) differs from New (-New +updated):\n%s", q, diff)
		}
	}
	// A second update on the first, removing one it added.
	again := upd.Update(added[len(added)-1:], nil)
	want2 := slices.DeleteFunc(slices.Clone(want), func(d Doc) bool { return d.ID == added[len(added)-1].ID })
	full2 := build(want2, nil, base.avgLen)
	for _, q := range queries {
		if diff := cmp.Diff(full2.Match(q, 3), again.Match(q, 3)); diff != "" {
			t.Errorf("second update, Match(%q) differs from New (-New +updated):\n%s", q, diff)
		}
	}
}

// TestManySurfaces: a term with more distinct document-side texts than a
// posting can index (manySurfs) keeps every one.
func TestManySurfaces(t *testing.T) {
	ix := &Index{termSurfs: make([][]int32, 1)}
	var ps []posting
	for d := range 600 {
		p := posting{doc: int32(d)}
		ix.setSurf(0, &p, int32(d%300)) // 300 surfaces, each twice
		ps = append(ps, p)
	}
	for d, p := range ps {
		if got := ix.surfOf(0, p); got != int32(d%300) {
			t.Fatalf("posting %d: surface %d, want %d", d, got, d%300)
		}
	}
	if n := len(ix.termSurfs[0]); n != manySurfs {
		t.Errorf("the term lists %d surfaces, want %d (the rest in moreSurfs)", n, manySurfs)
	}
}

// TestTiesByID: candidates with one score come in ID order, whether New
// was given them sorted (slots compare), unsorted, or an Update added one.
func TestTiesByID(t *testing.T) {
	doc := func(id string) Doc {
		return Doc{ID: id, Fields: []Field{{Name: "intent", Text: "restart the nginx service on a host", Weight: 2}}}
	}
	var sorted []Doc
	for _, id := range []string{"t-1", "t-2", "t-3", "t-4", "t-5"} {
		sorted = append(sorted, doc(id))
	}
	ids := func(r Result) []string {
		var out []string
		for _, c := range r.Candidates {
			out = append(out, c.ID)
		}
		return out
	}
	const q = "restart nginx"
	if got := ids(New(sorted, nil).Match(q, 3)); !slices.Equal(got, []string{"t-1", "t-2", "t-3"}) {
		t.Errorf("sorted New: %q, want t-1 t-2 t-3", got)
	}
	unsorted := []Doc{sorted[3], sorted[1], sorted[4], sorted[0], sorted[2]}
	if got := ids(New(unsorted, nil).Match(q, 3)); !slices.Equal(got, []string{"t-1", "t-2", "t-3"}) {
		t.Errorf("unsorted New: %q, want t-1 t-2 t-3", got)
	}
	upd := New(sorted, nil).Update([]Doc{sorted[1]}, []Doc{doc("t-0"), doc("t-2")})
	if got := ids(upd.Match(q, 3)); !slices.Equal(got, []string{"t-0", "t-1", "t-2"}) {
		t.Errorf("updated: %q, want t-0 t-1 t-2", got)
	}
}

// prunedDocs are n documents that all hold "service" and "bench" (in
// their why, as a catalog made from one template does) and a few words of
// their own.
func prunedDocs(n int) []Doc {
	actions := []string{"restart", "show", "stop", "reload", "tail"}
	var docs []Doc
	for i := range n {
		a := actions[i%len(actions)]
		docs = append(docs, Doc{ID: fmt.Sprintf("t%04d", i), Fields: []Field{
			{Name: "name", Text: fmt.Sprintf("%s-svc%d", a, i%37), Weight: 2.5},
			{Name: "intent", Text: fmt.Sprintf("%s the service svc%d on a host 服务", a, i%37), Weight: 2},
			{Name: "why", Text: "made by bench for the service tests", Context: true},
		}})
	}
	return docs
}

// TestPrunedTerms: New keeps no posting list for a term nearly every
// document holds, only its count; the index ranks and scores as one that
// keeps every list, and lists the same hits but those terms'.
func TestPrunedTerms(t *testing.T) {
	docs := prunedDocs(2000)
	ix := New(docs, nil)
	id, ok := ix.terms["bench"]
	if !ok {
		t.Fatal("no term bench")
	}
	if ix.postings[id] != nil || ix.pruned[id] != 2000 || ix.df(id) != 2000 {
		t.Fatalf("term bench: %d postings kept, pruned count %d; want none kept and 2000 counted", len(ix.postings[id]), ix.pruned[id])
	}
	pruneBelow = 0
	full := New(docs, nil)
	pruneBelow = prunedBelow
	if len(full.pruned) != 0 {
		t.Fatalf("with pruneBelow 0, %d terms pruned", len(full.pruned))
	}
	kept, all := 0, 0
	for id, ps := range full.postings {
		all += len(ps)
		if ix.postings[id] != nil {
			kept += len(ps)
		}
	}
	if kept > all/2 {
		t.Errorf("pruned index keeps %d of %d postings; want the shared words' gone", kept, all)
	}
	for _, q := range []string{"restart the service svc5", "show svc12 service", "bench service", "服务 svc3", "tail the service on a host", "write me a poem"} {
		got, want := ix.Match(q, 3), full.Match(q, 3)
		if got.Found != want.Found || len(got.Candidates) != len(want.Candidates) {
			t.Fatalf("Match(%q) = %+v, want %+v", q, got, want)
		}
		for i, c := range got.Candidates {
			w := want.Candidates[i]
			if c.ID != w.ID || c.Score != w.Score {
				t.Errorf("Match(%q)[%d] = %s %v, want %s %v", q, i, c.ID, c.Score, w.ID, w.Score)
			}
			for _, m := range c.Matched {
				if !slices.Contains(w.Matched, m) {
					t.Errorf("Match(%q)[%d] lists %s, which the full index does not", q, i, m)
				}
			}
		}
	}
}

// TestUpdatePruned: an update keeps a pruned term's count and ranks as New
// over the same documents; one that makes such a term specific again
// returns nil, for a new build.
func TestUpdatePruned(t *testing.T) {
	docs := prunedDocs(2000)
	base := New(docs, nil)
	removed := []Doc{docs[3], docs[500]}
	replaced := Doc{ID: docs[500].ID, Fields: []Field{
		{Name: "name", Text: "drain-queue", Weight: 2.5},
		{Name: "intent", Text: "drain the job queue of a worker", Weight: 2},
		{Name: "why", Text: "made by bench for the service tests", Context: true},
	}}
	upd := base.Update(removed, []Doc{replaced})
	if upd == nil {
		t.Fatal("Update = nil for two documents of 2000")
	}
	want := slices.Clone(docs)
	want[500] = replaced
	want = slices.Delete(want, 3, 4)
	full := build(want, nil, base.avgLen)
	if id := base.terms["bench"]; upd.df(id) != 1999 || full.df(id) != 1999 {
		t.Errorf("bench held by %d (updated) and %d (New) documents, want 1999", upd.df(id), full.df(id))
	}
	for _, q := range []string{"drain the job queue", "restart the service svc5", "bench service", "show svc12"} {
		if diff := cmp.Diff(full.Match(q, 3), upd.Match(q, 3)); diff != "" {
			t.Errorf("Match(%q): updated index differs from New (-New +updated):\n%s", q, diff)
		}
	}
	var plain []Doc
	for i := range 60 {
		plain = append(plain, Doc{ID: fmt.Sprintf("z%03d", i), Fields: []Field{{Name: "intent", Text: fmt.Sprintf("rotate certificate %d", i)}}})
	}
	if got := base.Update(nil, plain); got != nil {
		t.Errorf("Update adding 60 documents without bench = an index; want nil (bench is specific again, its postings are not kept)")
	}
}
