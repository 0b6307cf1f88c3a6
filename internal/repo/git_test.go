package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/google/go-cmp/cmp"
)

// newGit returns a Git for the server's repository with its own state dir
// and a logger that writes into the test log.
func newGit(t *testing.T, s *gitServer) *Git {
	t.Helper()
	return &Git{URL: s.url(), Dir: t.TempDir(), Logger: testLogger(t)}
}

// historyGit is newGit keeping the whole history (Git.History).
func historyGit(t *testing.T, s *gitServer) *Git {
	t.Helper()
	g := newGit(t, s)
	g.History = true
	return g
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tLogWriter struct{ t testing.TB }

func (w tLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// mustSync calls Sync and fails the test on error.
func mustSync(t *testing.T, g *Git) *Tree {
	t.Helper()
	tree, err := g.Sync(t.Context())
	if err != nil {
		t.Fatalf("Sync() error = %v", err)
	}
	return tree
}

// checkTree compares a tree with the remote's pushed head: revision, file
// contents and blob hashes as reported by real git.
func checkTree(t *testing.T, tree *Tree, r *remote, wantRev string, want map[string]string) {
	t.Helper()
	if got := tree.Rev(); got != wantRev {
		t.Errorf("Rev() = %s, want %s", got, wantRev)
	}
	if got, want := tree.TreeHash(), r.run(r.work, "rev-parse", wantRev+":tools"); got != want {
		t.Errorf("TreeHash() = %s, want git rev-parse %s:tools = %s", got, wantRev, want)
	}
	if diff := cmp.Diff(want, readAll(t, tree.FS())); diff != "" {
		t.Errorf("tree files mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(r.blobHashes(wantRev, "tools"), treeHashes(t, tree)); diff != "" {
		t.Errorf("BlobHash mismatch with git ls-tree (-git +BlobHash):\n%s", diff)
	}
}

func TestGitSyncFollowsCommits(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	r.write("README.md", "outside the tools path\n")
	r.write("tools/shell-exec/TOOL.hdlp", "name: shell-exec\n")
	rev1 := r.commit("first")
	g := newGit(t, serve(t, r, nil))

	// First Sync clones.
	tree1 := mustSync(t, g)
	want1 := map[string]string{"shell-exec/TOOL.hdlp": "name: shell-exec\n"}
	checkTree(t, tree1, r, rev1, want1)
	if got, want := mustBlobHash(t, tree1, "shell-exec/TOOL.hdlp"), r.run(r.work, "hash-object", "tools/shell-exec/TOOL.hdlp"); got != want {
		t.Errorf("BlobHash(shell-exec/TOOL.hdlp) = %s, want git hash-object %s", got, want)
	}

	steps := []struct {
		name   string
		change func()
		want   map[string]string
	}{
		{
			name:   "add",
			change: func() { r.write("tools/disk-space/TOOL.hdlp", "name: disk-space\n") },
			want:   map[string]string{"shell-exec/TOOL.hdlp": "name: shell-exec\n", "disk-space/TOOL.hdlp": "name: disk-space\n"},
		},
		{
			name:   "modify",
			change: func() { r.write("tools/shell-exec/TOOL.hdlp", "name: shell-exec\nintent: run\n") },
			want:   map[string]string{"shell-exec/TOOL.hdlp": "name: shell-exec\nintent: run\n", "disk-space/TOOL.hdlp": "name: disk-space\n"},
		},
		{
			name:   "delete",
			change: func() { r.remove("tools/shell-exec/TOOL.hdlp") },
			want:   map[string]string{"disk-space/TOOL.hdlp": "name: disk-space\n"},
		},
		{
			name:   "change outside path",
			change: func() { r.write("README.md", "edited\n") },
			want:   map[string]string{"disk-space/TOOL.hdlp": "name: disk-space\n"},
		},
	}
	prev := tree1
	for _, step := range steps {
		step.change()
		rev := r.commit(step.name)
		tree := mustSync(t, g)
		t.Run(step.name, func(t *testing.T) {
			checkTree(t, tree, r, rev, step.want)
			if tree.Rev() == prev.Rev() {
				t.Errorf("Rev() = %s after a new commit, same as before", tree.Rev())
			}
		})
		prev = tree
	}

	t.Run("modify changes BlobHash", func(t *testing.T) {
		// tree1 predates the modify step; it must still read its own content.
		if got, want := mustBlobHash(t, tree1, "shell-exec/TOOL.hdlp"), blobHash([]byte("name: shell-exec\n")); got != want {
			t.Errorf("old tree BlobHash = %s, want %s", got, want)
		}
	})
	t.Run("old tree readable", func(t *testing.T) {
		checkTreeFiles(t, tree1, want1)
	})
	t.Run("no change keeps Rev", func(t *testing.T) {
		tree := mustSync(t, g)
		if tree.Rev() != prev.Rev() {
			t.Errorf("Rev() = %s after Sync without a commit, want %s", tree.Rev(), prev.Rev())
		}
	})
	t.Run("delete gone", func(t *testing.T) {
		_, err := prev.BlobHash("shell-exec/TOOL.hdlp")
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("BlobHash(deleted) error = %v, want fs.ErrNotExist", err)
		}
		if _, err := fs.Stat(prev.FS(), "shell-exec"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat(deleted dir) error = %v, want fs.ErrNotExist", err)
		}
	})
}

func checkTreeFiles(t *testing.T, tree *Tree, want map[string]string) {
	t.Helper()
	if diff := cmp.Diff(want, readAll(t, tree.FS())); diff != "" {
		t.Errorf("tree %s files mismatch (-want +got):\n%s", tree.Rev(), diff)
	}
}

func mustBlobHash(t *testing.T, tree *Tree, name string) string {
	t.Helper()
	h, err := tree.BlobHash(name)
	if err != nil {
		t.Fatalf("BlobHash(%q) error = %v", name, err)
	}
	return h
}

func TestGitForcePush(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		rewrite func(r *remote) string // returns the new head
		want    map[string]string
	}{
		{
			name: "amend head",
			rewrite: func(r *remote) string {
				r.write("tools/a/TOOL.hdlp", "amended\n")
				r.run(r.work, "add", "-A")
				r.run(r.work, "commit", "--quiet", "--amend", "-m", "amended")
				return r.push()
			},
			want: map[string]string{"a/TOOL.hdlp": "amended\n"},
		},
		{
			name: "reset to an older commit",
			rewrite: func(r *remote) string {
				r.run(r.work, "reset", "--quiet", "--hard", "HEAD~2")
				return r.push()
			},
			want: map[string]string{"a/TOOL.hdlp": "v1\n"},
		},
		{
			name: "unrelated history",
			rewrite: func(r *remote) string {
				r.run(r.work, "checkout", "--quiet", "--orphan", "fresh")
				r.run(r.work, "rm", "--quiet", "-r", "-f", ".")
				r.write("tools/b/TOOL.hdlp", "orphan\n")
				return r.commit("orphan")
			},
			want: map[string]string{"b/TOOL.hdlp": "orphan\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRemote(t, "main")
			r.write("tools/a/TOOL.hdlp", "v1\n")
			r.commit("v1")
			r.write("tools/a/TOOL.hdlp", "v2\n")
			r.commit("v2")
			r.write("tools/a/TOOL.hdlp", "v3\n")
			rev3 := r.commit("v3")
			g := newGit(t, serve(t, r, nil))
			before := mustSync(t, g)
			checkTree(t, before, r, rev3, map[string]string{"a/TOOL.hdlp": "v3\n"})

			head := tt.rewrite(r)
			after := mustSync(t, g)
			checkTree(t, after, r, head, tt.want)
			checkTreeFiles(t, before, map[string]string{"a/TOOL.hdlp": "v3\n"})

			// The rewritten clone keeps working for ordinary commits.
			r.write("tools/a/TOOL.hdlp", "next\n")
			next := r.commit("next")
			wantNext := maps.Clone(tt.want)
			wantNext["a/TOOL.hdlp"] = "next\n"
			checkTree(t, mustSync(t, g), r, next, wantNext)
			offline, err := g.Offline()
			if err != nil {
				t.Fatalf("Offline() error = %v", err)
			}
			if offline.Rev() != next {
				t.Errorf("Offline().Rev() = %s, want %s", offline.Rev(), next)
			}
		})
	}
}

func TestGitServerDownAndBack(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	r.write("tools/a/TOOL.hdlp", "v1\n")
	rev1 := r.commit("v1")
	srv := serve(t, r, nil)
	g := newGit(t, srv)
	tree1 := mustSync(t, g)

	srv.stop()
	r.write("tools/a/TOOL.hdlp", "v2\n")
	rev2 := r.commit("v2")

	_, err := g.Sync(t.Context())
	if err == nil {
		t.Fatal("Sync() with the server down: error = nil, want an error")
	}
	t.Logf("Sync() with the server down: %v", err)
	checkTreeFiles(t, tree1, map[string]string{"a/TOOL.hdlp": "v1\n"})

	offline, err := g.Offline()
	if err != nil {
		t.Fatalf("Offline() error = %v", err)
	}
	if offline.Rev() != rev1 {
		t.Errorf("Offline().Rev() = %s, want %s", offline.Rev(), rev1)
	}
	checkTreeFiles(t, offline, map[string]string{"a/TOOL.hdlp": "v1\n"})

	// A daemon started while the server is down serves the clone on disk.
	restarted := &Git{URL: g.URL, Dir: g.Dir, Logger: g.Logger}
	if _, err := restarted.Sync(t.Context()); err == nil {
		t.Error("Sync() of a new Git with the server down: error = nil, want an error")
	}
	offline, err = restarted.Offline()
	if err != nil {
		t.Fatalf("Offline() in a new Git error = %v", err)
	}
	checkTree(t, offline, r, rev1, map[string]string{"a/TOOL.hdlp": "v1\n"})
	// That failed Sync must not have removed anything tree1 reads.
	checkTreeFiles(t, tree1, map[string]string{"a/TOOL.hdlp": "v1\n"})

	srv.restart()
	g.URL = srv.url()
	tree2 := mustSync(t, g)
	checkTree(t, tree2, r, rev2, map[string]string{"a/TOOL.hdlp": "v2\n"})
	checkTreeFiles(t, tree1, map[string]string{"a/TOOL.hdlp": "v1\n"})
}

func TestGitBranch(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "release")
	r.write("tools/a/TOOL.hdlp", "release\n")
	rev := r.commit("on release")
	// A main branch with other content must not be what is served.
	r.run(r.work, "checkout", "--quiet", "-b", "main")
	r.write("tools/a/TOOL.hdlp", "main\n")
	r.commitLocal("on main")
	r.run(r.work, "push", "--quiet", "origin", "main")

	srv := serve(t, r, nil)
	g := &Git{URL: srv.url(), Branch: "release", Dir: t.TempDir()}
	checkTree(t, mustSync(t, g), r, rev, map[string]string{"a/TOOL.hdlp": "release\n"})

	missing := &Git{URL: srv.url(), Branch: "no-such-branch", Dir: t.TempDir()}
	if _, err := missing.Sync(t.Context()); err == nil {
		t.Error("Sync() of a missing branch: error = nil, want an error")
	}
}

func TestGitTokenAuth(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token-value"
	r := newRemote(t, "main")
	r.write("tools/a/TOOL.hdlp", "v1\n")
	rev := r.commit("v1")
	srv := serve(t, r, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			user, pass, ok := req.BasicAuth()
			if !ok || user != DefaultUsername || pass != token {
				// A careless server that echoes the credentials it got:
				// the error Sync returns must still not show them.
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, fmt.Sprintf("bad credentials %s:%s", user, pass), http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, req)
		})
	})

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongFile := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrongFile, []byte("wrong-token-file-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		auth    Auth
		wantErr bool
		secret  string // must not appear in the error or the log
		inURL   bool   // put Username and Token into the URL, not Auth
	}{
		{name: "right token", auth: Auth{Token: token}},
		{name: "right token file", auth: Auth{TokenFile: tokenFile}},
		{name: "wrong token", auth: Auth{Token: "wrong-token-value"}, wantErr: true, secret: "wrong-token-value"},
		{name: "wrong token file", auth: Auth{TokenFile: wrongFile}, wantErr: true, secret: "wrong-token-file-value"},
		{name: "wrong user", auth: Auth{Username: "someone", Token: token}, wantErr: true, secret: token},
		{name: "no credentials", wantErr: true},
		{name: "token in URL", auth: Auth{Username: DefaultUsername, Token: token}, inURL: true},
		{name: "wrong token in URL", auth: Auth{Username: DefaultUsername, Token: "wrong-url-token"}, inURL: true, wantErr: true, secret: "wrong-url-token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			g := &Git{URL: srv.url(), Dir: t.TempDir(), Auth: tt.auth, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			if tt.inURL {
				g.URL = strings.Replace(g.URL, "http://", "http://"+tt.auth.Username+":"+tt.auth.Token+"@", 1)
				g.Auth = Auth{}
			}
			tree, err := g.Sync(t.Context())
			if tt.wantErr {
				if err == nil {
					t.Fatal("Sync() error = nil, want an authentication error")
				}
				if !errors.Is(err, transport.ErrAuthenticationRequired) {
					t.Errorf("Sync() error = %v, want one matching transport.ErrAuthenticationRequired", err)
				}
				if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
					t.Errorf("Sync() error = %q, contains the token", err)
				}
				if _, err := g.Offline(); !errors.Is(err, ErrNoClone) {
					t.Errorf("Offline() after a failed first Sync: error = %v, want ErrNoClone", err)
				}
			} else {
				if err != nil {
					t.Fatalf("Sync() error = %v", err)
				}
				checkTree(t, tree, r, rev, map[string]string{"a/TOOL.hdlp": "v1\n"})
				// The fetch path authenticates too.
				if _, err := g.Sync(t.Context()); err != nil {
					t.Fatalf("second Sync() error = %v", err)
				}
			}
			for _, s := range []string{token, tt.secret} {
				if s != "" && strings.Contains(logs.String(), s) {
					t.Errorf("log contains the token:\n%s", logs.String())
				}
			}
			if s := fmt.Sprintf("%v %+v %#v", tt.auth, g, tt.auth); strings.Contains(s, token) || (tt.secret != "" && strings.Contains(s, tt.secret)) {
				t.Errorf("formatting Auth shows the token: %s", s)
			}
		})
	}
}

func TestGitReadsLazily(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	for i := range 20 {
		r.write(fmt.Sprintf("tools/t%02d/TOOL.hdlp", i), fmt.Sprintf("name: t%02d\n", i))
	}
	r.commit("twenty tools")
	tree := mustSync(t, newGit(t, serve(t, r, nil)))

	objs := tree.FS().(*gitFS).o
	matches, err := fs.Glob(tree.FS(), "*/TOOL.hdlp")
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) != 20 {
		t.Fatalf("Glob(*/TOOL.hdlp) found %d files, want 20", len(matches))
	}
	for _, m := range matches {
		mustBlobHash(t, tree, m)
	}
	if n := objs.blobReads.Load(); n != 0 {
		t.Errorf("listing and BlobHash read %d blobs, want 0", n)
	}
	data, err := fs.ReadFile(tree.FS(), matches[3])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), "name: t03\n"; got != want {
		t.Errorf("ReadFile(%s) = %q, want %q", matches[3], got, want)
	}
	if n := objs.blobReads.Load(); n != 1 {
		t.Errorf("after one ReadFile, %d blobs read, want 1", n)
	}
}

func TestGitFS(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	r.write("tools/a/TOOL.hdlp", "a\n")
	r.write("tools/a/README", "readme\n")
	r.write("tools/b/TOOL.hdlp", "b\n")
	r.write("tools/b/bin/run.sh", "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(r.work, "tools/b/bin/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.commit("files")
	tree := mustSync(t, newGit(t, serve(t, r, nil)))
	if err := fstest.TestFS(tree.FS(), "a/TOOL.hdlp", "a/README", "b/TOOL.hdlp", "b/bin/run.sh"); err != nil {
		t.Fatal(err)
	}
	fi, err := fs.Stat(tree.FS(), "b/bin/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o555 || fi.Size() != int64(len("#!/bin/sh\n")) {
		t.Errorf("Stat(b/bin/run.sh) = mode %v size %d, want -r-xr-xr-x size %d", fi.Mode(), fi.Size(), len("#!/bin/sh\n"))
	}
	for _, name := range []string{"a", ".", "a/TOOL.hdlp/x", "../a", "/a", "a//TOOL.hdlp"} {
		if _, err := tree.BlobHash(name); err == nil {
			t.Errorf("BlobHash(%q) error = nil, want an error", name)
		}
	}
}

func TestGitSymlinksNotFollowed(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	r.write("tools/a/TOOL.hdlp", "a\n")
	r.write("secret", "outside\n")
	r.commit("files")
	if err := os.Symlink("../../secret", filepath.Join(r.work, "tools", "a", "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(r.work, "tools", "linkdir")); err != nil {
		t.Fatal(err)
	}
	r.commit("links")
	tree := mustSync(t, newGit(t, serve(t, r, nil)))

	for _, name := range []string{"a/escape", "linkdir/TOOL.hdlp"} {
		if _, err := fs.ReadFile(tree.FS(), name); !errors.Is(err, errSymlink) {
			t.Errorf("ReadFile(%q) error = %v, want errSymlink", name, err)
		}
		if _, err := tree.BlobHash(name); err == nil {
			t.Errorf("BlobHash(%q) error = nil, want an error", name)
		}
	}
	entries, err := fs.ReadDir(tree.FS(), "a")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s %v", e.Name(), e.Type()))
	}
	if want := []string{"TOOL.hdlp ----------", "escape L---------"}; !cmp.Equal(got, want) {
		t.Errorf("ReadDir(a) = %q, want %q", got, want)
	}
}

func TestGitPath(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	r.write("native-repo/tools/a/TOOL.hdlp", "a\n")
	r.write("top.txt", "top\n")
	rev := r.commit("nested")
	srv := serve(t, r, nil)

	nested := &Git{URL: srv.url(), Path: "native-repo/tools", Dir: t.TempDir()}
	checkTreeFiles(t, mustSync(t, nested), map[string]string{"a/TOOL.hdlp": "a\n"})

	whole := &Git{URL: srv.url(), Path: ".", Dir: t.TempDir()}
	checkTreeFiles(t, mustSync(t, whole), map[string]string{"native-repo/tools/a/TOOL.hdlp": "a\n", "top.txt": "top\n"})

	// The default "tools" does not exist here: Sync says so, keeps the
	// clone, and works once the path appears.
	missing := &Git{URL: srv.url(), Dir: t.TempDir()}
	if _, err := missing.Sync(t.Context()); !errors.Is(err, errNoPath) {
		t.Errorf("Sync() without the tools path: error = %v, want errNoPath", err)
	}
	if _, err := missing.Offline(); !errors.Is(err, errNoPath) {
		t.Errorf("Offline() without the tools path: error = %v, want errNoPath", err)
	}
	_ = rev
	r.write("tools/b/TOOL.hdlp", "b\n")
	rev2 := r.commit("tools")
	checkTree(t, mustSync(t, missing), r, rev2, map[string]string{"b/TOOL.hdlp": "b\n"})
}

func TestGitOfflineWithoutClone(t *testing.T) {
	g := &Git{URL: "http://127.0.0.1:1/none.git", Dir: t.TempDir()}
	if _, err := g.Offline(); !errors.Is(err, ErrNoClone) {
		t.Errorf("Offline() error = %v, want ErrNoClone", err)
	}
}

func TestGitConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		g    *Git
	}{
		{"no URL", &Git{Dir: "x"}},
		{"no Dir", &Git{URL: "http://127.0.0.1:1/x.git"}},
		{"bad Path", &Git{URL: "http://127.0.0.1:1/x.git", Dir: "x", Path: "../up"}},
		{"bad Branch", &Git{URL: "http://127.0.0.1:1/x.git", Dir: "x", Branch: "a..b"}},
		{"token and key", &Git{URL: "http://127.0.0.1:1/x.git", Dir: t.TempDir(), Auth: Auth{Token: "t", SSHKeyFile: "k"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.g.Sync(context.Background()); err == nil {
				t.Errorf("Sync() error = nil, want a configuration error")
			}
		})
	}
}

// clonePath returns the clone directory Dir/current names.
func clonePath(t *testing.T, g *Git) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(g.Dir, currentLink))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(g.Dir, target)
}

// clones lists the clone directories in g.Dir.
func clones(t *testing.T, g *Git) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(g.Dir, clonePrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGitRecoversBrokenClone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		damage func(t *testing.T, clone string)
		// oldTreeReadable: the damage leaves the old tree's objects alone,
		// so it must stay readable across the re-clone.
		oldTreeReadable bool
		// wantReclone: recovery needs a fresh clone (go-git refetches lost
		// packs by itself).
		wantReclone bool
	}{
		{
			name: "unreadable config",
			damage: func(t *testing.T, clone string) {
				if err := os.WriteFile(filepath.Join(clone, "config"), []byte("[[[not git config"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			oldTreeReadable: true,
			wantReclone:     true,
		},
		{
			name: "pack files lost",
			damage: func(t *testing.T, clone string) {
				packs, _ := filepath.Glob(filepath.Join(clone, "objects", "pack", "*"))
				for _, p := range packs {
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRemote(t, "main")
			r.write("tools/a/TOOL.hdlp", "v1\n")
			r.commit("v1")
			var logs bytes.Buffer
			g := &Git{URL: serve(t, r, nil).url(), Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			tree1 := mustSync(t, g)

			for round := range 3 {
				tt.damage(t, clonePath(t, g))
				r.write("tools/a/TOOL.hdlp", fmt.Sprintf("round %d\n", round))
				rev := r.commit("next")
				tree := mustSync(t, g)
				checkTree(t, tree, r, rev, map[string]string{"a/TOOL.hdlp": fmt.Sprintf("round %d\n", round)})
				if round == 0 && tt.oldTreeReadable {
					checkTreeFiles(t, tree1, map[string]string{"a/TOOL.hdlp": "v1\n"})
				}
				if n := len(clones(t, g)); n > 2 {
					t.Errorf("round %d: %d clone dirs in state dir, want the current one and at most one kept", round, n)
				}
				fresh := &Git{URL: g.URL, Dir: g.Dir}
				offline, err := fresh.Offline()
				if err != nil {
					t.Fatalf("Offline() of a new Git after re-clone: %v", err)
				}
				if offline.Rev() != rev {
					t.Errorf("Offline().Rev() = %s, want %s", offline.Rev(), rev)
				}
			}
			if got := strings.Contains(logs.String(), "cloning again"); got != tt.wantReclone {
				t.Errorf("log reports a re-clone: %v, want %v; log:\n%s", got, tt.wantReclone, logs.String())
			}
		})
	}
}

func TestGitRemovesLeftovers(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	r.write("tools/a/TOOL.hdlp", "v1\n")
	rev := r.commit("v1")
	g := newGit(t, serve(t, r, nil))
	mustSync(t, g)
	keep := clonePath(t, g)

	// What a crash in the middle of a re-clone leaves behind.
	if err := os.MkdirAll(filepath.Join(g.Dir, clonePrefix+"interrupted", "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", filepath.Join(g.Dir, currentLink+".tmp")); err != nil {
		t.Fatal(err)
	}

	next := &Git{URL: g.URL, Dir: g.Dir}
	checkTree(t, mustSync(t, next), r, rev, map[string]string{"a/TOOL.hdlp": "v1\n"})
	if got := clones(t, next); !cmp.Equal(got, []string{keep}) {
		t.Errorf("clone dirs after reopening = %q, want only %q", got, keep)
	}
	if _, err := os.Lstat(filepath.Join(g.Dir, currentLink+".tmp")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("leftover %s.tmp: Lstat error = %v, want fs.ErrNotExist", currentLink, err)
	}
}

func TestGitConcurrentReadersAndSyncs(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	for i := range 10 {
		r.write(fmt.Sprintf("tools/t%d/TOOL.hdlp", i), "v0\n")
	}
	r.commit("v0")
	g := newGit(t, serve(t, r, nil))
	g.Logger = nil
	tree0 := mustSync(t, g)
	want0 := readAll(t, tree0.FS())

	// Readers walk, hash and read the first tree over and over while Syncs
	// run from two goroutines; -race checks the sharing, the readers check
	// that the old tree never changes.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				files := make(map[string]string)
				err := fs.WalkDir(tree0.FS(), ".", func(p string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					if _, err := tree0.BlobHash(p); err != nil {
						return err
					}
					data, err := fs.ReadFile(tree0.FS(), p)
					files[p] = string(data)
					return err
				})
				if err != nil {
					t.Errorf("reading the old tree: %v", err)
					return
				}
				if !maps.Equal(files, want0) {
					t.Errorf("old tree changed: got %v, want %v", files, want0)
					return
				}
			}
		})
	}
	for round := 1; round <= 3; round++ {
		r.write("tools/t0/TOOL.hdlp", fmt.Sprintf("v%d\n", round))
		rev := r.commit("next")
		var syncs sync.WaitGroup
		for range 2 {
			syncs.Go(func() {
				tree, err := g.Sync(t.Context())
				if err != nil {
					t.Errorf("Sync() error = %v", err)
					return
				}
				if tree.Rev() != rev {
					t.Errorf("Sync().Rev() = %s, want %s", tree.Rev(), rev)
				}
			})
		}
		syncs.Wait()
	}
	close(stop)
	readers.Wait()
}

func TestGitCompactsPacks(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	r.write("tools/a/TOOL.hdlp", "v0\n")
	r.commit("v0")
	var logs bytes.Buffer
	g := &Git{URL: serve(t, r, nil).url(), Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil)), maxPacks: 2}
	tree0 := mustSync(t, g)
	first := clonePath(t, g)
	for i := 1; i <= 3; i++ {
		r.write("tools/a/TOOL.hdlp", fmt.Sprintf("v%d\n", i))
		rev := r.commit("next")
		checkTree(t, mustSync(t, g), r, rev, map[string]string{"a/TOOL.hdlp": fmt.Sprintf("v%d\n", i)})
	}
	if clonePath(t, g) == first {
		t.Errorf("clone dir unchanged after more fetches than maxPacks; log:\n%s", logs.String())
	}
	packs, _ := filepath.Glob(filepath.Join(clonePath(t, g), "objects", "pack", "*.pack"))
	if len(packs) > 2 {
		t.Errorf("%d packs after compaction, want at most 2", len(packs))
	}
	checkTreeFiles(t, tree0, map[string]string{"a/TOOL.hdlp": "v0\n"})
}

// TestGitBranchDeleted: once the branch is deleted on the server, Sync
// says so (ErrNoBranch) and neither falls back to another fetch nor
// re-clones: the clone is fine and asking again cannot help. The clone's
// last tree stays available offline.
func TestGitBranchDeleted(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	r.write("tools/a/TOOL.hdlp", "v1\n")
	rev := r.commit("v1")
	srv := serve(t, r, nil)
	var logs bytes.Buffer // slog's handler serialises its writes; read after Sync returns
	g := &Git{URL: srv.url(), Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	checkTree(t, mustSync(t, g), r, rev, map[string]string{"a/TOOL.hdlp": "v1\n"})

	r.run(r.bare, "branch", "-D", "main")
	for range 3 {
		if _, err := g.Sync(t.Context()); !errors.Is(err, ErrNoBranch) {
			t.Fatalf("Sync() after the branch was deleted: %v; want ErrNoBranch", err)
		}
	}
	if got := logs.String(); strings.Contains(got, "cloning again") || strings.Contains(got, "fetching with go-git") {
		t.Errorf("a missing branch led to another fetch or a re-clone:\n%s", got)
	}
	if tree, err := g.Offline(); err != nil || tree.Rev() != rev {
		t.Errorf("Offline() after the branch was deleted: %v, %v; want the last synced tree %s", tree, err, rev)
	}
}
