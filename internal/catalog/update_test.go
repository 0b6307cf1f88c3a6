package catalog

import (
	"fmt"
	"testing"
)

// word is a word of letters of its own for i ("zqaa", "zqab", ...).
func word(i int) string {
	return "zq" + string(rune('a'+i/26%26)) + string(rune('a'+i%26))
}

// updateCatalog is n callable tools with intents of their own.
func updateCatalog(n int) []Entry {
	services := []string{"nginx", "redis", "mysql", "kafka", "etcd", "minio", "grafana", "postgres"}
	entries := make([]Entry, n)
	for i := range entries {
		name := fmt.Sprintf("tool-%04d", i)
		t := tool(name)
		t.Intent = fmt.Sprintf("restart the %s service %s on a host", services[i%len(services)], word(i))
		entries[i] = Entry{Name: name, Tool: t, Status: Enabled}
	}
	return entries
}

// TestSnapshotIndexUpdates: a snapshot that follows one whose index is
// built updates that index for the tools that differ (an edited, an added
// and a removed tool, other learned requests) instead of building anew,
// and answers for them; the snapshot it follows answers as before; a
// catalog changed past the drift bound, a small one, and one without a
// built predecessor are indexed anew.
func TestSnapshotIndexUpdates(t *testing.T) {
	entries := updateCatalog(updateMinTools + 44)
	learned := map[string][]Learned{}
	opts := Options{Learned: func(name, _ string) []Learned { return learned[name] }}
	first := New("r1", entries, opts)
	if d := first.IndexDrift(); d != 0 {
		t.Fatalf("first snapshot drift %v, want 0 (built anew)", d)
	}
	const edited = "rotate the zookeeper quorum certificates"
	const learnedReq = "flush the varnish cache of the storefront"
	next := append([]Entry(nil), entries[1:]...) // tool-0000 removed
	e := next[10]
	e.Tool = tool(e.Name)
	e.Tool.Intent = edited
	next[10] = e
	added := tool("tool-new")
	added.Intent = "list the open pull requests of a repository"
	next = append(next, Entry{Name: "tool-new", Tool: added, Status: Enabled})
	learned["tool-0100"] = []Learned{{learnedReq, 1}}
	opts.Prev = first
	second := New("r2", next, opts)
	if d := second.IndexDrift(); d <= 0 {
		t.Fatalf("second snapshot drift %v, want > 0: its index should be the first's updated", d)
	}
	for q, want := range map[string]string{edited: e.Name, "list open pull requests": "tool-new", learnedReq: "tool-0100"} {
		if r := second.Match(q, 3); !r.Found || r.Candidates[0].ID != want {
			t.Errorf("updated index: Match(%q) = %+v, want %s first", q, r, want)
		}
		if r := first.Match(q, 3); r.Found && r.Candidates[0].ID == want {
			t.Errorf("the first snapshot finds %s for %q: updating its successor changed it", want, q)
		}
	}
	if r := second.Match("restart the nginx service "+word(0), 3); len(r.Candidates) > 0 && r.Candidates[0].ID == "tool-0000" {
		t.Errorf("updated index still ranks the removed tool-0000: %+v", r)
	}
	if r := first.Match("restart the nginx service "+word(0), 3); !r.Found || r.Candidates[0].ID != "tool-0000" {
		t.Errorf("the first snapshot lost tool-0000: %+v", r)
	}
	if second.Len() != first.Len() || second.index.Len() != first.index.Len() {
		t.Errorf("sizes: %d/%d tools, %d/%d indexed; want equal (one removed, one added)", second.Len(), first.Len(), second.index.Len(), first.index.Len())
	}

	// A change to more tools than the drift bound allows: a new build.
	many := append([]Entry(nil), entries...)
	for i := range len(many) / 4 {
		m := many[i]
		m.Tool = tool(m.Name)
		many[i] = m
	}
	opts.Prev = second
	if d := New("r3", many, opts).IndexDrift(); d != 0 {
		t.Errorf("a quarter of the tools changed: drift %v, want 0 (built anew)", d)
	}
	// A small catalog, and a predecessor whose index was never built.
	small := New("s1", entries[:10], Options{})
	small.BuildIndex()
	if d := New("s2", entries[:9], Options{Prev: small}).IndexDrift(); d != 0 {
		t.Errorf("small catalog: drift %v, want 0", d)
	}
	lazy := New("l1", entries, Options{LazyIndex: true})
	if d := New("l2", entries[1:], Options{Prev: lazy}).IndexDrift(); d != 0 || lazy.built.Load() {
		t.Errorf("after a lazy predecessor: drift %v (predecessor built %v), want 0 and not built", d, lazy.built.Load())
	}
}

// TestReindexUpdates: Reindex (requests learned from use) updates the
// published index for the tools whose learned requests changed.
func TestReindexUpdates(t *testing.T) {
	learned := map[string][]Learned{}
	var st Store
	st.Swap(New("r1", updateCatalog(updateMinTools), Options{Learned: func(name, _ string) []Learned { return learned[name] }}))
	const q = "flush the varnish cache of the storefront"
	learned["tool-0007"] = []Learned{{q, 1}}
	st.Reindex()
	cur := st.Load()
	if r := cur.Match(q, 3); !r.Found || r.Candidates[0].ID != "tool-0007" || cur.IndexDrift() <= 0 {
		t.Errorf("after Reindex: Match(%q) = %+v, drift %v; want tool-0007 found by an updated index", q, r, cur.IndexDrift())
	}
}

// TestStoreCompact: Compact republishes a snapshot whose index was
// updated with one built anew, answering the same; on an index built
// anew it does nothing.
func TestStoreCompact(t *testing.T) {
	entries := updateCatalog(updateMinTools + 10)
	var st Store
	first := New("r1", entries, Options{})
	st.Swap(first)
	if st.Compact() {
		t.Fatal("Compact on an index built anew published")
	}
	next := append([]Entry(nil), entries...)
	e := next[3]
	e.Tool = tool(e.Name)
	e.Tool.Intent = "rotate the zookeeper quorum certificates"
	next[3] = e
	st.Swap(New("r2", next, Options{Prev: first}))
	updated := st.Load()
	if updated.IndexDrift() == 0 {
		t.Fatal("the second snapshot's index was built anew; the test needs an updated one")
	}
	want := updated.Match("rotate zookeeper certificates", 3)
	if !st.Compact() {
		t.Fatal("Compact did not publish")
	}
	cur := st.Load()
	if cur == updated || cur.Gen() != updated.Gen() || cur.Rev() != "r2" || cur.IndexDrift() != 0 {
		t.Fatalf("after Compact: snapshot %p gen %d rev %s drift %v; want a new snapshot of gen %d, r2, drift 0", cur, cur.Gen(), cur.Rev(), cur.IndexDrift(), updated.Gen())
	}
	if got := cur.Match("rotate zookeeper certificates", 3); !got.Found || got.Candidates[0].ID != want.Candidates[0].ID {
		t.Errorf("after Compact: %+v, before %+v", got, want)
	}
	if st.Compact() {
		t.Error("a second Compact published again")
	}
}
