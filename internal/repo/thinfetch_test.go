package repo

import (
	"fmt"
	"maps"
	"path/filepath"
	"testing"
)

// TestGitIncrementalFetchIsThin checks that after a one-file change in a
// 1,000-file repository Sync receives only the changed objects (commit,
// root tree, tools tree, the tool's tree, the blob), as deltas against the
// objects the clone holds, and that the served tree is exactly the new
// head.
func TestGitIncrementalFetchIsThin(t *testing.T) {
	t.Parallel()
	const n = 1000
	r := newRemote(t, "main")
	want := make(map[string]string, n)
	for i := range n {
		name := fmt.Sprintf("tool-%04d/TOOL.hdlp", i)
		content := fmt.Sprintf("name: tool-%04d\ndescription: tool number %d of the fixture\n", i, i)
		r.write("tools/"+name, content)
		want[name] = content
	}
	r.commit("many tools")
	g := newGit(t, serve(t, r, nil))
	mustSync(t, g)

	for round := 1; round <= 3; round++ {
		name := fmt.Sprintf("tool-%04d/TOOL.hdlp", round*7)
		want[name] = fmt.Sprintf("name: tool-%04d\ndescription: changed in round %d\n", round*7, round)
		r.write("tools/"+name, want[name])
		rev := r.commit("one change")
		tree := mustSync(t, g)
		checkTree(t, tree, r, rev, maps.Clone(want))
		st := g.lastFetch
		t.Logf("round %d: fetched %d objects, %d bytes", round, st.objects, st.bytes)
		if st.objects == 0 || st.objects > 6 {
			t.Errorf("round %d: fetched %d objects for a one-file change, want 1..6", round, st.objects)
		}
		// The tools tree alone is about 40 KB; a thin pack is far smaller.
		if st.bytes > 4096 {
			t.Errorf("round %d: fetched %d pack bytes for a one-file change, want at most 4096", round, st.bytes)
		}
	}
	packs, _ := filepath.Glob(filepath.Join(clonePath(t, g), "objects", "pack", "*.pack"))
	if len(packs) != 4 {
		t.Errorf("%d packs after clone and 3 fetches, want 4 (one per fetch)", len(packs))
	}
}
