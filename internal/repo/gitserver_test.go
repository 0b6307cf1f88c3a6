package repo

import (
	"bytes"
	"io/fs"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// This file holds the test fixtures: a bare repository served by the real
// `git http-backend` over loopback, and a work clone that commits with the
// real git CLI and pushes into it.

// gitBinary returns the path of git, or skips the test.
func gitBinary(tb testing.TB) string {
	tb.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		tb.Skip("git CLI not installed: repo's git tests need git and git http-backend")
	}
	return p
}

// gitEnv isolates git from the user's and the system's configuration.
func gitEnv(home string) []string {
	return []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Test",
		"GIT_AUTHOR_EMAIL=test@example.invalid",
		"GIT_COMMITTER_NAME=Test",
		"GIT_COMMITTER_EMAIL=test@example.invalid",
		// No detached gc --auto writing into a repository the test's
		// cleanup removes.
		"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=gc.auto", "GIT_CONFIG_VALUE_0=0",
		"GIT_CONFIG_KEY_1=maintenance.auto", "GIT_CONFIG_VALUE_1=false",
	}
}

// remote is a bare repository plus a work clone that pushes into it.
type remote struct {
	tb     testing.TB
	git    string
	home   string
	root   string // GIT_PROJECT_ROOT of the server
	bare   string // root/tools.git
	work   string
	branch string
}

func newRemote(tb testing.TB, branch string) *remote {
	tb.Helper()
	r := &remote{tb: tb, git: gitBinary(tb), home: tb.TempDir(), root: tb.TempDir(), work: tb.TempDir(), branch: branch}
	r.bare = filepath.Join(r.root, "tools.git")
	r.run("", "init", "--quiet", "--bare", "-b", branch, r.bare)
	r.run(r.work, "init", "--quiet", "-b", branch)
	r.run(r.work, "remote", "add", "origin", r.bare)
	return r
}

// run runs git in dir ("" for none) and returns its trimmed stdout.
func (r *remote) run(dir string, args ...string) string {
	r.tb.Helper()
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.Command(r.git, args...)
	cmd.Env = gitEnv(r.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		r.tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// write sets the content of a file in the work tree.
func (r *remote) write(name, content string) {
	r.tb.Helper()
	p := filepath.Join(r.work, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.tb.Fatal(err)
	}
}

// remove deletes a file from the work tree.
func (r *remote) remove(name string) {
	r.tb.Helper()
	if err := os.Remove(filepath.Join(r.work, filepath.FromSlash(name))); err != nil {
		r.tb.Fatal(err)
	}
}

// commit commits the work tree and force-pushes it to the branch, returning
// the new head.
func (r *remote) commit(msg string) string {
	r.tb.Helper()
	r.commitLocal(msg)
	return r.push()
}

// commitLocal commits the work tree on the work clone's current branch,
// pushing nothing, and returns the commit.
func (r *remote) commitLocal(msg string) string {
	r.tb.Helper()
	r.run(r.work, "add", "-A")
	r.run(r.work, "commit", "--quiet", "--allow-empty", "-m", msg)
	return strings.TrimSpace(r.run(r.work, "rev-parse", "HEAD"))
}

// mergeNoFF merges branch into the remote's branch in the work clone
// with a merge commit (git merge --no-ff), pushes it and returns it.
func (r *remote) mergeNoFF(branch string) string {
	r.tb.Helper()
	r.run(r.work, "checkout", "--quiet", r.branch)
	r.run(r.work, "merge", "--quiet", "--no-ff", "-m", "merge "+branch, branch)
	return r.push()
}

// push force-pushes the work clone's HEAD to the branch and returns it.
func (r *remote) push() string {
	r.tb.Helper()
	r.run(r.work, "push", "--quiet", "--force", "origin", "HEAD:refs/heads/"+r.branch)
	return r.run(r.work, "rev-parse", "HEAD")
}

// blobHashes lists the files under sub at commit rev with the blob hashes
// real git reports, keyed by path relative to sub.
func (r *remote) blobHashes(rev, sub string) map[string]string {
	r.tb.Helper()
	out := r.run(r.bare, "ls-tree", "-r", "--full-tree", rev, "--", sub)
	m := make(map[string]string)
	for line := range strings.Lines(out) {
		// <mode> SP <type> SP <hash> TAB <path>
		meta, p, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		f := strings.Fields(meta)
		if len(f) != 3 || f[1] != "blob" || f[0] == "120000" {
			continue
		}
		m[strings.TrimPrefix(p, sub+"/")] = f[2]
	}
	return m
}

// gitServer serves a remote's root with git http-backend on loopback.
type gitServer struct {
	tb   testing.TB
	h    http.Handler
	srv  *httptest.Server
	addr string
}

// serve starts serving r; wrap, if not nil, wraps the CGI handler (for
// example with an authentication check).
func serve(tb testing.TB, r *remote, wrap func(http.Handler) http.Handler) *gitServer {
	tb.Helper()
	var h http.Handler = &cgi.Handler{
		Path: r.git,
		Args: []string{"http-backend"},
		Env:  append(gitEnv(r.home), "GIT_PROJECT_ROOT="+r.root, "GIT_HTTP_EXPORT_ALL=1"),
	}
	if wrap != nil {
		h = wrap(h)
	}
	s := &gitServer{tb: tb, h: h}
	s.srv = httptest.NewServer(h)
	s.addr = s.srv.Listener.Addr().String()
	tb.Cleanup(s.stop)
	return s
}

// url is the repository's address on the server.
func (s *gitServer) url() string { return "http://" + s.addr + "/tools.git" }

// stop closes the server and its connections; requests then fail to connect.
func (s *gitServer) stop() {
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

// restart serves again on the same address if the port is still free, and
// on a new one otherwise; callers must use url() again.
func (s *gitServer) restart() {
	s.tb.Helper()
	s.stop()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.tb.Logf("port %s taken after stop (%v); serving on a new port", s.addr, err)
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.tb.Fatal(err)
		}
	}
	srv := httptest.NewUnstartedServer(s.h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	s.srv = srv
	s.addr = ln.Addr().String()
}

// readAll returns every regular file in fsys with its content.
func readAll(tb testing.TB, fsys fs.FS) map[string]string {
	tb.Helper()
	files := make(map[string]string)
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files[p] = string(data)
		return nil
	})
	if err != nil {
		tb.Fatalf("walk tree: %v", err)
	}
	return files
}

// treeHashes returns BlobHash for every regular file in t.
func treeHashes(tb testing.TB, t *Tree) map[string]string {
	tb.Helper()
	m := make(map[string]string)
	err := fs.WalkDir(t.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		h, err := t.BlobHash(p)
		if err != nil {
			return err
		}
		m[p] = h
		return nil
	})
	if err != nil {
		tb.Fatalf("walk tree: %v", err)
	}
	return m
}
