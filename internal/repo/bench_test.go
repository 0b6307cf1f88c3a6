package repo

import (
	"fmt"
	"io/fs"
	"testing"
)

// benchRemote returns a served remote whose tools path holds n tools.
func benchRemote(b *testing.B, n int) (*remote, *gitServer) {
	b.Helper()
	r := newRemote(b, "main")
	for i := range n {
		r.write(fmt.Sprintf("tools/tool-%04d/TOOL.hdlp", i), fmt.Sprintf("name: tool-%04d\nintent: benchmark tool number %d\n", i, i))
	}
	r.commit(fmt.Sprintf("%d tools", n))
	return r, serve(b, r, nil)
}

// BenchmarkGitSyncNoChange measures a Sync when the branch has not moved:
// one fetch round trip that transfers no objects, plus reading the tools
// tree object.
func BenchmarkGitSyncNoChange(b *testing.B) {
	_, srv := benchRemote(b, 1000)
	g := &Git{URL: srv.url(), Dir: b.TempDir()}
	if _, err := g.Sync(b.Context()); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := g.Sync(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGitListAndHash walks a 1,000-tool tree for */TOOL.hdlp and asks
// BlobHash for each, without reading any blob. "fresh" opens a new Tree per
// iteration (what a scan after each Sync sees); "reused" walks one Tree
// again, with its tree objects already decoded.
func BenchmarkGitListAndHash(b *testing.B) {
	_, srv := benchRemote(b, 1000)
	g := &Git{URL: srv.url(), Dir: b.TempDir()}
	tree, err := g.Sync(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			t, err := g.Offline()
			if err != nil {
				b.Fatal(err)
			}
			listAndHash(b, t, 1000)
		}
	})
	b.Run("reused", func(b *testing.B) {
		for b.Loop() {
			listAndHash(b, tree, 1000)
		}
	})
}

// BenchmarkLocalDirSync measures LocalDir.Sync (which hashes every file for
// the revision) plus a list-and-hash pass over 1,000 tools.
func BenchmarkLocalDirSync(b *testing.B) {
	dir := b.TempDir()
	for i := range 1000 {
		writeFilesTB(b, dir, fmt.Sprintf("tool-%04d/TOOL.hdlp", i), fmt.Sprintf("name: tool-%04d\n", i))
	}
	for b.Loop() {
		t, err := LocalDir{Path: dir}.Sync(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		listAndHash(b, t, 1000)
	}
}

func listAndHash(b *testing.B, t *Tree, want int) {
	n := 0
	err := fs.WalkDir(t.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != "TOOL.hdlp" {
			return nil
		}
		if _, err := t.BlobHash(p); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if n != want {
		b.Fatalf("found %d TOOL.hdlp files, want %d", n, want)
	}
}
