package repo

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
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
	first := r.commit("many tools")
	g := newGit(t, serve(t, r, nil))
	checkTree(t, mustSync(t, g), r, first, maps.Clone(want)) // every folder decoded

	for round := 1; round <= 3; round++ {
		name := fmt.Sprintf("tool-%04d/TOOL.hdlp", round*7)
		want[name] = fmt.Sprintf("name: tool-%04d\ndescription: changed in round %d\n", round*7, round)
		r.write("tools/"+name, want[name])
		rev := r.commit("one change")
		tree := mustSync(t, g)
		// The new Tree took the folders it shares with the last one as
		// they were decoded, and holds no tree of an earlier commit: the
		// root and tools trees and the n-1 unchanged folders (the changed
		// one is decoded when read).
		o := tree.fsys.(*gitFS).o
		o.mu.Lock()
		decoded := len(o.dirs)
		o.mu.Unlock()
		if decoded != n+1 {
			t.Errorf("round %d: the new Tree holds %d decoded trees, want %d (root, tools, the %d unchanged folders)", round, decoded, n+1, n-1)
		}
		checkTree(t, tree, r, rev, maps.Clone(want))
		// Every tree the change made came with the fetch: none was read
		// back from the clone's files.
		if got := o.treeReads.Load(); got != 0 {
			t.Errorf("round %d: %d tree objects read from the clone's files after a fetch, want 0 (the fetched ones are in memory, the rest decoded before)", round, got)
		}
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

// packObjects returns a memory store holding a blob of each size given,
// a tree and a commit, and their hashes.
func packObjects(t testing.TB, sizes ...int) (*memory.Storage, []plumbing.Hash) {
	t.Helper()
	sto := memory.NewStorage()
	var hashes []plumbing.Hash
	add := func(typ plumbing.ObjectType, data []byte) {
		obj := &plumbing.MemoryObject{}
		obj.SetType(typ)
		obj.Write(data)
		h, err := sto.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range sizes {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		add(plumbing.BlobObject, data)
	}
	var entries []object.TreeEntry
	for i := range 10000 {
		var h plumbing.Hash
		for j := range h {
			h[j] = byte(rng.IntN(256))
		}
		entries = append(entries, object.TreeEntry{Name: fmt.Sprintf("tool-%05d", i), Mode: filemode.Dir, Hash: h})
	}
	add(plumbing.TreeObject, treeBytes(entries...))
	add(plumbing.CommitObject, []byte("tree "+hashes[len(hashes)-1].String()+"\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\nm\n"))
	return sto, hashes
}

// TestWritePack checks that a pack writePack writes reads back, through
// go-git's parser (which checks the pack's trailing checksum), as the very
// objects it was given: types, sizes around each boundary of the entry
// header's size encoding, contents and hashes.
func TestWritePack(t *testing.T) {
	t.Parallel()
	sto, hashes := packObjects(t, 0, 1, 15, 16, 127, 2047, 2048, 262143, 262144, 1<<20)
	var buf bytes.Buffer
	if err := writePack(&buf, sto, hashes); err != nil {
		t.Fatal(err)
	}
	back := memory.NewStorage()
	p, err := packfile.NewParserWithStorage(packfile.NewScanner(bytes.NewReader(buf.Bytes())), back)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(); err != nil {
		t.Fatalf("parse the written pack: %v", err)
	}
	if len(back.Objects) != len(hashes) {
		t.Fatalf("the pack holds %d objects, want %d", len(back.Objects), len(hashes))
	}
	for _, h := range hashes {
		want, _ := sto.EncodedObject(plumbing.AnyObject, h)
		got, err := back.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			t.Errorf("object %s not in the written pack: %v", h, err)
			continue
		}
		wr, _ := want.Reader()
		gr, _ := got.Reader()
		wd, _ := io.ReadAll(wr)
		gd, _ := io.ReadAll(gr)
		if got.Type() != want.Type() || got.Size() != want.Size() || !bytes.Equal(gd, wd) {
			t.Errorf("object %s: %s of %d bytes back, want %s of %d bytes with the same content", h, got.Type(), got.Size(), want.Type(), want.Size())
		}
	}
	// A damaged pack is refused: a flipped byte in an object's data.
	bad := bytes.Clone(buf.Bytes())
	bad[len(bad)/2] ^= 0xff
	p, err = packfile.NewParserWithStorage(packfile.NewScanner(bytes.NewReader(bad)), memory.NewStorage())
	if err == nil {
		_, err = p.Parse()
	}
	if err == nil {
		t.Error("a pack with a flipped byte parsed; want an error")
	}
}

// BenchmarkWritePack measures storing what a one-tool push to a
// 10,000-tool repository brings (the 360 KB tools tree, a commit, a small
// blob): writePack at packLevel against go-git's encoder (default level).
func BenchmarkWritePack(b *testing.B) {
	sto, hashes := packObjects(b, 200)
	b.Run("writePack", func(b *testing.B) {
		for b.Loop() {
			if err := writePack(io.Discard, sto, hashes); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-git-encoder", func(b *testing.B) {
		for b.Loop() {
			if _, err := packfile.NewEncoder(io.Discard, sto, false).Encode(hashes, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestGitTreeDelta checks what a git Tree says differs from the source's
// previous Tree: nothing for the first; after a commit that edits one
// tool, adds one and removes one (and changes a file beside tools/), those
// three names, sorted, against the previous commit and its tools tree;
// none after a commit that changes nothing below tools/.
func TestGitTreeDelta(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	for _, n := range []string{"a", "b", "c"} {
		r.write("tools/"+n+"/TOOL.hdlp", "name: "+n+"\n")
	}
	first := r.commit("three tools")
	g := newGit(t, serve(t, r, nil))
	t1 := mustSync(t, g)
	if base, names, ok := t1.Delta(); ok {
		t.Errorf("the first Tree's Delta = %s %v true; want none", base, names)
	}
	r.write("tools/a/TOOL.hdlp", "name: a\nintent: edited\n")
	r.write("tools/d/TOOL.hdlp", "name: d\n")
	r.remove("tools/b/TOOL.hdlp")
	r.write("README.md", "beside the tools\n")
	r.commit("edit a, add d, remove b")
	t2 := mustSync(t, g)
	base, names, ok := t2.Delta()
	if !ok || base != first || !slices.Equal(names, []string{"a", "b", "d"}) || t2.BaseTreeHash() != t1.TreeHash() {
		t.Errorf("Delta after the commit = %s %v %v, base tree %s; want %s [a b d] true, base tree %s", base, names, ok, t2.BaseTreeHash(), first, t1.TreeHash())
	}
	r.write("README.md", "still beside the tools\n")
	r.commit("outside tools/")
	t3 := mustSync(t, g)
	if base, names, ok := t3.Delta(); !ok || base != t2.Rev() || len(names) != 0 || t3.TreeHash() != t2.TreeHash() {
		t.Errorf("Delta after a commit outside tools/ = %s %v %v; want %s [] true, the same tree hash", base, names, ok, t2.Rev())
	}
}
