package repo

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
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
// one ref-advertisement round trip that transfers no objects; the Tree is
// reused. "server-only" is that request alone, for comparison.
func BenchmarkGitSyncNoChange(b *testing.B) {
	_, srv := benchRemote(b, 1000)
	g := &Git{URL: srv.url(), Dir: b.TempDir()}
	if _, err := g.Sync(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Run("sync", func(b *testing.B) {
		for b.Loop() {
			if _, err := g.Sync(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The server's share: the one request an up-to-date fetch makes, which
	// starts a git http-backend process through CGI.
	b.Run("server-only", func(b *testing.B) {
		for b.Loop() {
			resp, err := http.Get(srv.url() + "/info/refs?service=git-upload-pack")
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
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
		head := plumbing.NewHash(tree.Rev())
		for b.Loop() {
			t, err := newGitTree(g.cur.path, head, DefaultPath, nil, nil)
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

// BenchmarkGitOneToolChanged measures what a push of one changed tool costs
// the source: a Sync that fetches the new commit, then a list-and-hash pass
// over the tools of the new Tree (reusing the decoded trees of the
// previous one), at 1,000 and at 10,000 tools. Committing is not timed.
func BenchmarkGitOneToolChanged(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) { benchOneToolChanged(b, n) })
	}
}

func benchOneToolChanged(b *testing.B, n int) {
	r, srv := benchRemote(b, n)
	g := &Git{URL: srv.url(), Dir: b.TempDir()}
	tree, err := g.Sync(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	listAndHash(b, tree, n)
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		r.write("tools/tool-0500/TOOL.hdlp", fmt.Sprintf("name: tool-0500\nversion: %d\n", i))
		rev := r.commit("change one tool")
		b.StartTimer()
		tree, err := g.Sync(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if tree.Rev() != rev {
			b.Fatalf("Rev() = %s, want %s", tree.Rev(), rev)
		}
		listAndHash(b, tree, n)
	}
}

// BenchmarkLocalDirSync measures LocalDir.Sync (which, past the first,
// stats every file and hashes only those whose stat changed) plus a
// list-and-hash pass over 1,000 tools.
func BenchmarkLocalDirSync(b *testing.B) {
	dir := b.TempDir()
	for i := range 1000 {
		writeFilesTB(b, dir, fmt.Sprintf("tool-%04d/TOOL.hdlp", i), fmt.Sprintf("name: tool-%04d\n", i))
	}
	d := &LocalDir{Path: dir}
	defer d.Close()
	for b.Loop() {
		t, err := d.Sync(b.Context())
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
