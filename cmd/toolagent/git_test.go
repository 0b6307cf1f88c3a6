package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/toolagent/toolagent/internal/cache"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
	"github.com/toolagent/toolagent/internal/reload"
)

// These tests run the daemon against a real git server: a bare repository
// served by Debian's `git http-backend` behind net/http/cgi on loopback,
// with commits made and pushed by the real git CLI. Nothing is mocked.

// gitRepo is a bare repository served over HTTP plus a work clone that
// commits and pushes into it.
type gitRepo struct {
	tb     testing.TB
	git    string
	home   string
	root   string // GIT_PROJECT_ROOT of the server
	bare   string // root/tools.git
	work   string
	branch string

	handler http.Handler
	addr    string // kept across stop and start, so the daemon's URL stays valid
	srv     *http.Server
	served  chan struct{} // closed when srv.Serve has returned
}

// newGitRepo creates the repositories and starts serving them.
func newGitRepo(tb testing.TB) *gitRepo {
	tb.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		tb.Skip("git CLI not installed: the git source tests need git and git http-backend")
	}
	r := &gitRepo{tb: tb, git: gitPath, home: tb.TempDir(), root: tb.TempDir(), work: tb.TempDir(), branch: "main"}
	r.bare = filepath.Join(r.root, "tools.git")
	r.run("", "init", "--quiet", "--bare", "-b", r.branch, r.bare)
	r.run(r.work, "init", "--quiet", "-b", r.branch)
	r.run(r.work, "remote", "add", "origin", r.bare)
	r.handler = &cgi.Handler{
		Path: r.git,
		Args: []string{"http-backend"},
		Env:  append(r.env(), "GIT_PROJECT_ROOT="+r.root, "GIT_HTTP_EXPORT_ALL=1"),
	}
	r.start()
	tb.Cleanup(r.stop)
	return r
}

// env isolates git from the user's and the system's configuration.
func (r *gitRepo) env() []string {
	return []string{
		"HOME=" + r.home, "PATH=" + os.Getenv("PATH"),
		"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.invalid",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.invalid",
		// No gc --auto: after a commit of thousands of files it detaches
		// and keeps writing into the repositories while the test's
		// cleanup removes them ("directory not empty").
		"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=gc.auto", "GIT_CONFIG_VALUE_0=0",
		"GIT_CONFIG_KEY_1=maintenance.auto", "GIT_CONFIG_VALUE_1=false",
	}
}

// url is the repository's address on the server.
func (r *gitRepo) url() string { return "http://" + r.addr + "/tools.git" }

// start serves the repository, on the address it had before if any.
func (r *gitRepo) start() {
	r.tb.Helper()
	addr := r.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		r.tb.Fatalf("serve git on %s again: %v", addr, err)
	}
	r.addr = ln.Addr().String()
	r.srv = &http.Server{Handler: r.handler, ReadHeaderTimeout: 10 * time.Second}
	r.served = make(chan struct{})
	go func() {
		defer close(r.served)
		r.srv.Serve(ln)
	}()
}

// stop closes the listener and every connection: the server is gone.
func (r *gitRepo) stop() {
	if r.srv != nil {
		r.srv.Close()
		<-r.served
		r.srv = nil
	}
}

// run runs git in dir ("" for none) and returns its trimmed stdout.
func (r *gitRepo) run(dir string, args ...string) string {
	r.tb.Helper()
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.Command(r.git, args...)
	cmd.Env = r.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		r.tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// write sets a file of the work tree (a slash path from its root).
func (r *gitRepo) write(name, content string) {
	r.tb.Helper()
	p := filepath.Join(r.work, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.tb.Fatal(err)
	}
}

// remove deletes a folder or file of the work tree.
func (r *gitRepo) remove(name string) {
	r.tb.Helper()
	if err := os.RemoveAll(filepath.Join(r.work, filepath.FromSlash(name))); err != nil {
		r.tb.Fatal(err)
	}
}

// commit commits the whole work tree and force-pushes it to the branch;
// it returns the new head.
func (r *gitRepo) commit(msg string) string {
	r.tb.Helper()
	r.run(r.work, "add", "-A")
	r.run(r.work, "commit", "--quiet", "--allow-empty", "-m", msg)
	return r.pushTo(r.branch)
}

// pushTo force-pushes the work clone's HEAD to branch and returns it. The
// push goes to the bare repository directly, so it works while the HTTP
// server is down.
func (r *gitRepo) pushTo(branch string) string {
	r.tb.Helper()
	r.run(r.work, "push", "--quiet", "--force", "origin", "HEAD:refs/heads/"+branch)
	return r.run(r.work, "rev-parse", "HEAD")
}

// versionTool is a shell tool that prints version: its output tells which
// definition serves.
func versionTool(name, version string) string {
	return testTool(name, "intent: print the version of "+name+"\nmethod: run\nexecutor: shell\nargv: [echo, \""+version+"\"]\nparams_schema: {}\n")
}

// brokenTool does not parse (an unclosed flow sequence).
const brokenTool = "name: alpha\nintent: [\n"

// status is GET /v1/status.
func (d *liveDaemon) status(t testing.TB) reload.Status {
	t.Helper()
	code, b := d.request(t, "GET", "/v1/status", "")
	var st reload.Status
	if code != 200 || json.Unmarshal(b, &st) != nil {
		t.Fatalf("GET /v1/status = %d %s", code, b)
	}
	return st
}

// waitRev polls /v1/status until the daemon serves rev.
func (d *liveDaemon) waitRev(t testing.TB, rev string) reload.Status {
	t.Helper()
	var st reload.Status
	pollUntil(t, "revision "+rev, func() bool {
		st = d.status(t)
		return st.Rev == rev
	})
	return st
}

// syncNow asks for a sync (POST /v1/sync).
func (d *liveDaemon) syncNow(t testing.TB) {
	t.Helper()
	if code, b := d.request(t, "POST", "/v1/sync", ""); code != http.StatusAccepted {
		t.Fatalf("POST /v1/sync = %d %s", code, b)
	}
}

// gitView is one tool of GET /v1/tools?all=1 or GET /v1/tools/{name}.
type gitView struct {
	Name      string         `json:"name"`
	Status    catalog.Status `json:"status"`
	Revision  string         `json:"revision"`
	LoadError string         `json:"load_error"`
}

// toolsByName is GET /v1/tools?all=1 keyed by name, with the listing's
// revision.
func (d *liveDaemon) toolsByName(t testing.TB) (string, map[string]gitView) {
	t.Helper()
	code, b := d.request(t, "GET", "/v1/tools?all=1", "")
	var body struct {
		Revision string    `json:"revision"`
		Tools    []gitView `json:"tools"`
	}
	if code != 200 || json.Unmarshal(b, &body) != nil {
		t.Fatalf("GET /v1/tools?all=1 = %d %s", code, b)
	}
	m := make(map[string]gitView)
	for _, v := range body.Tools {
		m[v.Name] = v
	}
	return body.Revision, m
}

// callVersion calls a versionTool and checks its output and revision.
func (d *liveDaemon) callVersion(t testing.TB, step, name, wantVersion, wantRev string) {
	t.Helper()
	code, res := d.call(t, name, map[string]any{})
	if code != 200 || res.Status != dispatch.Success || res.Output != wantVersion+"\n" || res.Revision != wantRev {
		t.Errorf("%s: call %s = %d %s output %q revision %s; want 200 success %q revision %s (error %q)",
			step, name, code, res.Status, res.Output, res.Revision, wantVersion+"\n", wantRev, res.Error)
	}
}

// TestGitPushOfSeveralCommits: two commits changing one tool, pushed at
// once. A clone that keeps the history (--repo-history) sees the served
// head below the new one: it scans the changed folder alone (the log's
// "reloaded" line says how many it scanned), and the
// untouched tool keeps citing the commit it was first served at. A clone
// one commit deep cannot tell: it scans every folder, and every tool
// cites the new head.
func TestGitPushOfSeveralCommits(t *testing.T) {
	t.Parallel()
	for _, history := range []bool{true, false} {
		t.Run(fmt.Sprintf("history=%v", history), func(t *testing.T) {
			t.Parallel()
			r := newGitRepo(t)
			r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "a1"))
			r.write("tools/beta/TOOL.hdlp", versionTool("beta", "b1"))
			c1 := r.commit("alpha and beta")
			args := []string{"--repo", r.url(), "--schedule", "off"}
			if history {
				args = append(args, "--repo-history")
			}
			d := startDaemon(t, nil, args...)
			d.waitRev(t, c1)

			r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "a2"))
			r.commitSigned(nil, nil, "alpha v2")
			r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "a3"))
			c3 := r.commitSigned(nil, nil, "alpha v3")
			r.pushTo("main")
			d.syncNow(t)
			d.waitRev(t, c3)
			wantBeta, wantScanned := c3, 2
			if history {
				wantBeta, wantScanned = c1, 1
			}
			scanned := -1
			for line := range strings.Lines(d.logs.String()) {
				var l struct {
					Msg, Revision string
					Scanned       int
				}
				if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "reloaded" && l.Revision == c3 {
					scanned = l.Scanned
				}
			}
			if scanned != wantScanned {
				t.Errorf("the reload to the pushed head scanned %d tool folders; want %d", scanned, wantScanned)
			}
			d.callVersion(t, "two commits", "alpha", "a3", c3)
			d.callVersion(t, "two commits", "beta", "b1", wantBeta)
		})
	}
}

// TestGitSource follows one daemon through the life of a repository: the
// first clone, a tool added, modified and deleted, a broken commit (the
// last good definition keeps serving, stale, the error visible), a
// force-push that rewrites history, and the server going away and coming
// back. Every listing and result names the commit its definition came
// from.
func TestGitSource(t *testing.T) {
	t.Parallel()
	r := newGitRepo(t)
	r.write("README.md", "tools\n")
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "a1"))
	c1 := r.commit("alpha")

	d := startDaemon(t, nil, "--repo", r.url(), "--schedule", "off", "--reload-retry-min", "50ms", "--reload-retry-max", "200ms")

	// First clone.
	st := d.waitRev(t, c1)
	if !strings.Contains(st.Source, r.url()) || st.Parsed != 1 {
		t.Errorf("first clone: status source %q parsed %d; want the URL and 1", st.Source, st.Parsed)
	}
	d.callVersion(t, "first clone", "alpha", "a1", c1)

	// A commit adding a tool. The unchanged tool keeps the revision its
	// definition came from.
	r.write("tools/beta/TOOL.hdlp", versionTool("beta", "b1"))
	c2 := r.commit("beta")
	d.syncNow(t)
	st = d.waitRev(t, c2)
	if st.Parsed != 1 || st.Reused != 1 {
		t.Errorf("add: status parsed %d reused %d; want 1 and 1", st.Parsed, st.Reused)
	}
	d.callVersion(t, "add", "beta", "b1", c2)
	d.callVersion(t, "add", "alpha", "a1", c1)
	rev, tools := d.toolsByName(t)
	if rev != c2 || tools["alpha"].Revision != c1 || tools["beta"].Revision != c2 {
		t.Errorf("add: GET /v1/tools revision %s, alpha %s, beta %s; want %s, %s, %s", rev, tools["alpha"].Revision, tools["beta"].Revision, c2, c1, c2)
	}

	// A commit modifying a tool: exactly one file is parsed.
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "a2"))
	c3 := r.commit("alpha v2")
	d.syncNow(t)
	if st := d.waitRev(t, c3); st.Parsed != 1 {
		t.Errorf("modify: status parsed %d; want 1", st.Parsed)
	}
	d.callVersion(t, "modify", "alpha", "a2", c3)
	d.callVersion(t, "modify", "beta", "b1", c2)

	// A commit deleting a tool.
	r.remove("tools/beta")
	c4 := r.commit("no beta")
	d.syncNow(t)
	d.waitRev(t, c4)
	if code, res := d.call(t, "beta", map[string]any{}); code != 404 || res.Status != dispatch.NotFound {
		t.Errorf("delete: call beta = %d %s; want 404 not_found", code, res.Status)
	} else if !strings.Contains(res.Error, `tool "beta" was deleted`) || !strings.Contains(res.Error, c4) || strings.Contains(res.Suggestion, "has to be written") {
		t.Errorf("delete: call beta: error %q, suggestion %q; want it named deleted at %s, not a tool to write", res.Error, res.Suggestion, c4)
	}

	// A broken commit: the last good alpha keeps serving, stale, with the
	// error shown next to it.
	r.write("tools/alpha/TOOL.hdlp", brokenTool)
	c5 := r.commit("broken alpha")
	d.syncNow(t)
	if st := d.waitRev(t, c5); st.Problems != 1 || st.LastErr != "" {
		t.Errorf("broken: status problems %d last_error %q; want 1 and none (the sync worked)", st.Problems, st.LastErr)
	}
	d.callVersion(t, "broken", "alpha", "a2", c3)
	if _, res := d.call(t, "alpha", map[string]any{}); !strings.Contains(res.Error, "tool alpha is stale: alpha/TOOL.hdlp does not load now") || !strings.Contains(res.Error, c3) {
		t.Errorf("broken: call alpha: error %q; want it to say alpha is stale, run by its definition of %s", res.Error, c3)
	}
	_, tools = d.toolsByName(t)
	if a := tools["alpha"]; a.Status != catalog.Stale || a.Revision != c3 || !strings.Contains(a.LoadError, "tools/alpha/TOOL.hdlp") {
		t.Errorf("broken: alpha = %+v; want stale, revision %s, a load error naming tools/alpha/TOOL.hdlp", a, c3)
	}

	// A force-push that rewrites history back to c1 plus a new commit: the
	// daemon follows the new head.
	r.run(r.work, "reset", "--quiet", "--hard", c1)
	r.write("tools/gamma/TOOL.hdlp", versionTool("gamma", "g1"))
	c6 := r.commit("rewritten")
	d.syncNow(t)
	if st := d.waitRev(t, c6); st.Problems != 0 {
		t.Errorf("force-push: status problems %d; want 0", st.Problems)
	}
	d.callVersion(t, "force-push", "alpha", "a1", c6)
	d.callVersion(t, "force-push", "gamma", "g1", c6)
	_, tools = d.toolsByName(t)
	if got := slices.Sorted(func(yield func(string) bool) {
		for n := range tools {
			if !yield(n) {
				return
			}
		}
	}); !slices.Equal(got, []string{"alpha", "gamma"}) {
		t.Errorf("force-push: tools %v; want [alpha gamma]", got)
	}

	// The server goes away: the last good snapshot keeps serving, the
	// error shows, and retries back off. Then it comes back.
	r.stop()
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "a3"))
	c7 := r.commit("alpha v3, pushed while the HTTP server is down")
	d.syncNow(t)
	pollUntil(t, "the sync error", func() bool { return d.status(t).Failures >= 2 })
	st = d.status(t)
	if st.Rev != c6 || st.LastErr == "" || st.Next.IsZero() || st.LastOK.IsZero() {
		t.Errorf("server down: status rev %s last_error %q next_retry %v last_ok %v; want %s, an error, a retry time and the last success", st.Rev, st.LastErr, st.Next, st.LastOK, c6)
	}
	d.callVersion(t, "server down", "alpha", "a1", c6)
	r.start()
	d.syncNow(t)
	if st := d.waitRev(t, c7); st.LastErr != "" || st.Failures != 0 {
		t.Errorf("server back: status last_error %q failures %d; want none", st.LastErr, st.Failures)
	}
	d.callVersion(t, "server back", "alpha", "a3", c7)
}

// hook posts a push payload for ref to the daemon's webhook, signed with
// secret in header ("" for no signature).
func (d *liveDaemon) hook(t testing.TB, header, secret, ref string) (int, string) {
	t.Helper()
	return d.hookAfter(t, header, secret, ref, "0000000000000000000000000000000000000000")
}

// hookAfter is hook for a push that names the commit the branch now
// points at (after), as Forgejo and Gitea send it.
func (d *liveDaemon) hookAfter(t testing.TB, header, secret, ref, after string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"ref":%q,"after":%q,"repository":{"full_name":"ops/tools"}}`, ref, after)
	req, err := http.NewRequest("POST", d.url+"/v1/hooks/forgejo", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forgejo-Event", "push")
	if header != "" {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(body))
		sig := hex.EncodeToString(m.Sum(nil))
		if header == "X-Hub-Signature-256" {
			sig = "sha256=" + sig
		}
		req.Header.Set(header, sig)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/hooks/forgejo: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// writeSecret writes a secret file and returns its path.
func writeSecret(t testing.TB, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGitWebhook: a push webhook with a valid signature, in each of the
// three header styles, syncs at once; a missing or wrong signature is
// refused and syncs nothing; a push to another branch is ignored. With
// API tokens configured, the webhook still needs none.
func TestGitWebhook(t *testing.T) {
	t.Parallel()
	const secret = "webhook-secret-0123456789"
	r := newGitRepo(t)
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "v0"))
	rev := r.commit("v0")
	d := startDaemon(t, map[string]string{"TOOLAGENT_TOKENS": "ops:admin:0123456789abcdef0123"},
		"--repo", r.url(), "--schedule", "off", "--webhook-secret-file", writeSecret(t, secret))
	d.token = "0123456789abcdef0123"
	d.waitRev(t, rev)

	for i, header := range []string{"X-Forgejo-Signature", "X-Gitea-Signature", "X-Hub-Signature-256"} {
		version := fmt.Sprintf("v%d", i+1)
		r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", version))
		next := r.commit(version)

		// Refused deliveries sync nothing: the new commit stays unserved.
		lastOK := d.status(t).LastOK
		for _, bad := range []struct{ name, header, secret string }{
			{"missing signature", "", ""},
			{"wrong signature", header, "not-the-secret"},
		} {
			if code, body := d.hook(t, bad.header, bad.secret, "refs/heads/main"); code != http.StatusUnauthorized {
				t.Errorf("%s, %s: webhook = %d %s; want 401", header, bad.name, code, body)
			}
		}
		if code, body := d.hook(t, header, secret, "refs/heads/feature"); code != http.StatusAccepted || !strings.Contains(body, `"ignored"`) {
			t.Errorf("%s, push to another branch: webhook = %d %s; want 202 ignored", header, code, body)
		}
		if st := d.status(t); st.Rev != rev || !st.LastOK.Equal(lastOK) {
			t.Errorf("%s: after refused and ignored deliveries the daemon synced (revision %s, last_ok %v); want %s, %v", header, st.Rev, st.LastOK, rev, lastOK)
		}

		if code, body := d.hook(t, header, secret, "refs/heads/main"); code != http.StatusAccepted || !strings.Contains(body, `"queued"`) {
			t.Fatalf("%s: webhook = %d %s; want 202 queued", header, code, body)
		}
		d.waitRev(t, next)
		d.callVersion(t, header, "alpha", version, next)
		rev = next
	}

	// A commit pushed to another branch is never served.
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "feature"))
	r.run(r.work, "commit", "--quiet", "-am", "feature")
	r.pushTo("feature")
	d.hook(t, "X-Forgejo-Signature", secret, "refs/heads/feature")
	d.syncNow(t) // even a sync of main does not pick the feature branch up
	pollUntil(t, "a sync after the feature push", func() bool { return d.status(t).LastOK.After(time.Time{}) })
	d.callVersion(t, "feature branch", "alpha", "v3", rev)
}

// primed is the daemon's "serving the last synced catalog" log line: what
// building the catalog of the last synced commit at start did.
type primed struct {
	Parsed      int  `json:"parsed"`
	Reused      int  `json:"reused"`
	FromListing bool `json:"from_listing"`
}

// primedLine returns d's primed line; ok is false when it logged none.
// The daemon is ready once the primed snapshot is published, which comes
// just before the line is logged: wait for the line (with a deadline)
// while the daemon's first sync has not settled whether there is one.
func (d *liveDaemon) primedLine(t testing.TB) (p primed, ok bool) {
	t.Helper()
	find := func() bool {
		for _, l := range strings.Split(d.logs.String(), "\n") {
			var line struct {
				Msg string `json:"msg"`
				primed
			}
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "serving the last synced catalog" {
				p, ok = line.primed, true
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(15 * time.Second)
	for !find() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond) // polling a condition with a deadline
	}
	return p, ok
}

// TestGitRestart: a restart at an unchanged commit parses nothing (the
// persisted parse cache and the clone under the state directory) and
// reads no tool folder (the cache's listing of the commit's tools tree),
// and a restart while the server is down serves the last synced catalog at
// once. Then one changed tool parses exactly one file. Without a usable
// listing, a restart reads the tree and still parses nothing.
func TestGitRestart(t *testing.T) {
	t.Parallel()
	const n = 30
	r := newGitRepo(t)
	for i := range n {
		name := fmt.Sprintf("tool-%02d", i)
		r.write("tools/"+name+"/TOOL.hdlp", versionTool(name, "v1"))
	}
	c1 := r.commit("30 tools")
	state := t.TempDir()
	args := []string{"--repo", r.url(), "--schedule", "off", "--state", state}

	d := startDaemon(t, nil, args...)
	if st := d.waitRev(t, c1); st.Parsed != n {
		t.Errorf("first start: parsed %d; want %d", st.Parsed, n)
	}
	d.stop(t)
	if _, err := os.Stat(filepath.Join(state, "cache", "parse.cache")); err != nil {
		t.Fatalf("parse cache not saved under the state directory: %v", err)
	}

	// Restart at the same commit: zero files parsed, in the status and in
	// the metrics.
	d = startDaemon(t, nil, args...)
	pollUntil(t, "the first sync after the restart", func() bool { return !d.status(t).LastOK.IsZero() })
	if st := d.status(t); st.Rev != c1 || st.Parsed != 0 || st.Reused != n || st.ParsedTotal != 0 {
		t.Errorf("restart at an unchanged commit: status rev %s parsed %d reused %d parsed_total %d; want %s, 0, %d, 0", st.Rev, st.Parsed, st.Reused, st.ParsedTotal, c1, n)
	}
	if p, ok := d.primedLine(t); !ok || p != (primed{Parsed: 0, Reused: n, FromListing: true}) {
		t.Errorf("restart at an unchanged commit: primed %+v (logged %v); want 0 parsed, %d reused, from the listing", p, ok, n)
	}
	if !strings.Contains(d.logs.String(), fmt.Sprintf(`"msg":"parse cache loaded","outcomes":%d,"took_ms":`, n)) {
		t.Errorf("restart: no log line says the parse cache loaded %d outcomes and how long it took", n)
	}
	_, metrics := d.request(t, "GET", "/metrics", "")
	if !strings.Contains(string(metrics), "\ntoolagent_tool_parses_total 0\n") {
		t.Errorf("metrics after the restart lack toolagent_tool_parses_total 0")
	}

	// One changed tool: exactly one file parsed.
	r.write("tools/tool-07/TOOL.hdlp", versionTool("tool-07", "v2"))
	c2 := r.commit("tool-07 v2")
	d.syncNow(t)
	if st := d.waitRev(t, c2); st.Parsed != 1 || st.Reused != n-1 {
		t.Errorf("one changed tool: parsed %d reused %d; want 1 and %d", st.Parsed, st.Reused, n-1)
	}
	d.callVersion(t, "one changed tool", "tool-07", "v2", c2)
	d.stop(t)

	// Restart with the server down: the last synced catalog serves at
	// once, and the status says the server cannot be reached.
	r.stop()
	d = startDaemon(t, nil, args...)
	d.callVersion(t, "server down at start", "tool-07", "v2", c2)
	d.callVersion(t, "server down at start", "tool-00", "v1", c1)
	pollUntil(t, "the failed first sync", func() bool { return d.status(t).LastErr != "" })
	if st := d.status(t); st.Rev != c2 || st.Parsed != 0 {
		t.Errorf("server down at start: status rev %s parsed %d; want %s and 0", st.Rev, st.Parsed, c2)
	}
	if p, ok := d.primedLine(t); !ok || !p.FromListing {
		t.Errorf("server down at start: primed %+v (logged %v); want the blob hashes from the listing", p, ok)
	}
	d.stop(t)

	// A parse cache from before listings (or with its listing dropped):
	// the restart reads the tree, and still parses nothing.
	cacheFile := filepath.Join(state, "cache", "parse.cache")
	c, err := cache.Open(cacheFile)
	if err != nil {
		t.Fatal(err)
	}
	c.SetListing("0000000000000000000000000000000000000000", nil) // another tree
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, nil, args...)
	if p, ok := d.primedLine(t); !ok || p != (primed{Parsed: 0, Reused: n, FromListing: false}) {
		t.Errorf("restart without a listing of the tree: primed %+v (logged %v); want 0 parsed, %d reused, not from a listing", p, ok, n)
	}
	d.callVersion(t, "restart without a listing", "tool-07", "v2", c2)
}

// TestGitSchedule: without a webhook (and a git source has no watcher),
// a pushed commit is served by the schedule alone; the status tells when
// the next scheduled sync is, and it moves on past the push.
func TestGitSchedule(t *testing.T) {
	t.Parallel()
	r := newGitRepo(t)
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "v1"))
	c1 := r.commit("v1")
	d := startDaemon(t, nil, "--repo", r.url(), "--schedule", "@every 1s")
	d.waitRev(t, c1)
	st := d.status(t)
	if st.NextSync.IsZero() || time.Until(st.NextSync) > 2*time.Second {
		t.Errorf("status next_sync = %v; want within the 1s schedule", st.NextSync)
	}
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "v2"))
	c2 := r.commit("v2")
	pushed := time.Now()
	d.waitRev(t, c2) // nothing but the schedule syncs this daemon
	if st := d.status(t); !st.NextSync.After(pushed) {
		t.Errorf("status next_sync = %v after the pushed commit was served; want a scheduled sync after the push (%v)", st.NextSync, pushed)
	}
	d.callVersion(t, "schedule", "alpha", "v2", c2)
}

// runSyncCmd runs `toolagent sync` with args and decodes its summary.
func runSyncCmd(t testing.TB, args ...string) (daemon.SyncSummary, error) {
	t.Helper()
	var stdout bytes.Buffer
	err := run(context.Background(), append([]string{"sync", "--log-level", "error"}, args...),
		func(string) string { return "" }, strings.NewReader(""), &stdout, io.Discard)
	var sum daemon.SyncSummary
	if jerr := json.Unmarshal(stdout.Bytes(), &sum); jerr != nil {
		t.Fatalf("toolagent sync printed %q, not a summary: %v (run error %v)", stdout.String(), jerr, err)
	}
	return sum, err
}

// TestSyncCommand: `toolagent sync` clones, builds and saves the cache
// with a JSON summary; run again at the same commit it parses nothing; a
// broken file is a problem, not a failure; an unreachable server is a
// failure (exit 1) that still prints the summary.
func TestSyncCommand(t *testing.T) {
	t.Parallel()
	r := newGitRepo(t)
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "v1"))
	r.write("tools/beta/TOOL.hdlp", versionTool("beta", "v1"))
	c1 := r.commit("two tools")
	args := []string{"--repo", r.url(), "--state", t.TempDir()}

	sum, err := runSyncCmd(t, args...)
	if err != nil || !sum.OK || sum.Revision != c1 || !sum.Changed || sum.Tools["enabled"] != 2 || sum.Parsed != 2 || len(sum.Problems) != 0 {
		t.Errorf("first sync = %+v, %v; want ok, revision %s, changed, 2 enabled, 2 parsed, no problems", sum, err, c1)
	}
	sum, err = runSyncCmd(t, args...)
	if err != nil || sum.Revision != c1 || sum.Changed || sum.Parsed != 0 || sum.Reused != 2 {
		t.Errorf("sync at the same commit = %+v, %v; want revision %s, not changed, 0 parsed, 2 reused", sum, err, c1)
	}

	r.write("tools/beta/TOOL.hdlp", "name: beta\nintent: [\n")
	c2 := r.commit("broken beta")
	sum, err = runSyncCmd(t, args...)
	// The state's last synced snapshot is the previous one: beta's last
	// good definition is kept, stale, as the daemon would.
	if err != nil || sum.Revision != c2 || sum.Tools["stale"] != 1 || sum.Parsed != 1 || len(sum.Problems) == 0 || !strings.Contains(sum.Problems[0], "tools/beta/TOOL.hdlp") {
		t.Errorf("sync of a broken file = %+v, %v; want revision %s, 1 stale, 1 parsed, a problem naming tools/beta/TOOL.hdlp", sum, err, c2)
	}

	r.stop()
	sum, err = runSyncCmd(t, args...)
	var ee exitError
	if !errors.As(err, &ee) || ee.Code != exitFailed || sum.OK || sum.Error == "" || sum.Revision != c2 {
		t.Errorf("sync with the server down = %+v, %v; want exit 1, ok false, an error, and the last synced revision %s", sum, err, c2)
	}
}

// TestGitConfigErrors: settings that cannot work stop the daemon at start
// with a message that says why.
func TestGitConfigErrors(t *testing.T) {
	t.Parallel()
	empty := writeSecret(t, "")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"tools and repo", []string{"--repo", "http://127.0.0.1:1/x.git", "--tools", t.TempDir()}, nil, "not both"},
		{"bad schedule", []string{"--repo", "http://127.0.0.1:1/x.git", "--schedule", "every minute"}, nil, "schedule"},
		{"empty webhook secret", []string{"--repo", "http://127.0.0.1:1/x.git", "--webhook-secret-file", empty}, nil, "is empty"},
		{"missing token file", []string{"--repo", "http://127.0.0.1:1/x.git", "--repo-token-file", filepath.Join(t.TempDir(), "none")}, nil, "repo token file"},
		{"token twice", []string{"--repo", "http://127.0.0.1:1/x.git", "--repo-token-file", empty}, map[string]string{"TOOLAGENT_REPO_TOKEN": "x"}, "not both"},
		{"webhook without git", []string{"--tools", t.TempDir(), "--webhook-secret-file", writeSecret(t, "s")}, nil, "needs a git source"},
	}
	for _, tc := range tests {
		args := append([]string{"serve", "--listen", "127.0.0.1:0", "--state", t.TempDir()}, tc.args...)
		err := run(t.Context(), args, func(k string) string { return tc.env[k] }, strings.NewReader(""), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: serve %q = %v; want an error containing %q", tc.name, tc.args, err, tc.want)
		}
	}
}

// TestGitTokenNeverLogged: the repository token reaches the server (HTTP
// basic auth) and never the logs, the status or an error.
func TestGitTokenNeverLogged(t *testing.T) {
	t.Parallel()
	const token = "tok-5f4e3d2c1b0a99887766"
	r := newGitRepo(t)
	inner := r.handler
	r.handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, pw, ok := req.BasicAuth(); !ok || pw != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, req)
	})
	r.stop()
	r.start()
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "v1"))
	c1 := r.commit("v1")
	tokenFile := writeSecret(t, token)
	d := startDaemon(t, nil, "--repo", r.url(), "--schedule", "off", "--repo-token-file", tokenFile, "--log-level", "debug")
	d.waitRev(t, c1)

	// A wrong token: the error shows, the token does not.
	if err := os.WriteFile(tokenFile, []byte("wrong-"+token), 0o600); err != nil {
		t.Fatal(err)
	}
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "v2"))
	r.commit("v2")
	d.syncNow(t)
	pollUntil(t, "the auth error", func() bool { return d.status(t).LastErr != "" })
	_, status := d.request(t, "GET", "/v1/status", "")
	for what, text := range map[string]string{"logs": d.logs.String(), "status": string(status)} {
		if strings.Contains(text, token) {
			t.Errorf("the repository token appears in the %s", what)
		}
	}
}

// durations summarises a benchmark's samples.
func reportDurations(b *testing.B, samples []time.Duration, unit string) {
	b.Helper()
	if len(samples) == 0 {
		return
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(s[len(s)/2]), unit+"-median-ms")
	b.ReportMetric(ms(s[(len(s)*95+99)/100-1]), unit+"-p95-ms")
	b.ReportMetric(ms(s[len(s)-1]), unit+"-max-ms")
	b.Logf("%s over %d samples: median %v, p95 %v, max %v", unit, len(s), s[len(s)/2], s[(len(s)*95+99)/100-1], s[len(s)-1])
}

// BenchmarkGitWebhookPushToCallable measures commit pushed -> tool
// callable with the push webhook: after `git push` returns, a signed
// delivery naming the pushed commit is posted (as Forgejo would), which
// syncs at once, and the tool is called until it answers with the new
// definition.
// Run 20 pushes: -bench GitWebhookPushToCallable -benchtime 20x.
func BenchmarkGitWebhookPushToCallable(b *testing.B) {
	const secret = "bench-webhook-secret"
	r := newGitRepo(b)
	for i := range 20 {
		name := fmt.Sprintf("other-%02d", i)
		r.write("tools/"+name+"/TOOL.hdlp", versionTool(name, "v"))
	}
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "v0"))
	rev := r.commit("v0")
	d := startDaemon(b, nil, "--repo", r.url(), "--schedule", "off", "--webhook-secret-file", writeSecret(b, secret))
	d.waitRev(b, rev)
	var samples []time.Duration
	i := 0
	for b.Loop() {
		i++
		version := fmt.Sprintf("v%d", i)
		b.StopTimer()
		r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", version))
		rev := r.commit(version)
		b.StartTimer()
		pushed := time.Now()
		if code, body := d.hookAfter(b, "X-Forgejo-Signature", secret, "refs/heads/main", rev); code != http.StatusAccepted {
			b.Fatalf("webhook = %d %s", code, body)
		}
		pollUntil(b, "alpha "+version, func() bool {
			_, res := d.call(b, "alpha", map[string]any{})
			return res.Output == version+"\n"
		})
		samples = append(samples, time.Since(pushed))
	}
	reportDurations(b, samples, "push-to-callable")
}

// TestGitWebhookExactSkipsDebounce: a signed push for the served branch
// that names its commit syncs at once, whatever the debounce (an hour
// here, which a push that names none waits out).
func TestGitWebhookExactSkipsDebounce(t *testing.T) {
	t.Parallel()
	const secret = "exact-webhook-secret-0123"
	r := newGitRepo(t)
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "v1"))
	c1 := r.commit("v1")
	d := startDaemon(t, nil, "--repo", r.url(), "--schedule", "off", "--webhook-secret-file", writeSecret(t, secret),
		"--reload-debounce", "1h", "--reload-max-wait", "1h")
	d.waitRev(t, c1)

	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "v2"))
	c2 := r.commit("v2")
	if code, body := d.hookAfter(t, "X-Forgejo-Signature", secret, "refs/heads/main", c2); code != http.StatusAccepted {
		t.Fatalf("webhook = %d %s; want 202", code, body)
	}
	d.waitRev(t, c2)
	d.callVersion(t, "after the push naming its commit", "alpha", "v2", c2)
	if logs := d.logs.String(); !strings.Contains(logs, `"after":"`+c2+`","at_once":true`) {
		t.Errorf("the webhook line does not say at_once for %s:\n%s", c2, logs)
	}
}

// bigRepo commits n tools in one commit and returns the repository and
// the commit.
func bigRepo(b *testing.B, n int) (*gitRepo, string) {
	b.Helper()
	r := newGitRepo(b)
	for i := range n {
		name := fmt.Sprintf("tool-%05d", i)
		r.write("tools/"+name+"/TOOL.hdlp", versionTool(name, "v1"))
	}
	return r, r.commit(fmt.Sprintf("%d tools", n))
}

// BenchmarkGitRestart10k measures a restart at an unchanged commit with
// 10,000 tools: from run() to /readyz answering 200 (the last synced
// catalog served from the clone and the persisted parse cache), and checks
// that no file was parsed.
func BenchmarkGitRestart10k(b *testing.B) {
	const n = 10000
	r, rev := bigRepo(b, n)
	state := b.TempDir()
	args := []string{"--repo", r.url(), "--schedule", "off", "--state", state}
	first := time.Now()
	d := startDaemon(b, nil, args...)
	d.waitRev(b, rev)
	b.Logf("first start (clone, parse %d files): %v", n, time.Since(first))
	d.stop(b)

	var samples []time.Duration
	for b.Loop() {
		start := time.Now()
		d := startDaemon(b, nil, args...)
		samples = append(samples, time.Since(start))
		b.StopTimer()
		pollUntil(b, "the first sync", func() bool { return !d.status(b).LastOK.IsZero() })
		if st := d.status(b); st.Rev != rev || st.Parsed != 0 || st.ParsedTotal != 0 || st.Reused != n {
			b.Fatalf("restart at an unchanged commit: rev %s parsed %d parsed_total %d reused %d; want %s, 0, 0, %d", st.Rev, st.Parsed, st.ParsedTotal, st.Reused, rev, n)
		}
		if p, ok := d.primedLine(b); !ok || !p.FromListing {
			b.Fatalf("restart at an unchanged commit: primed %+v (logged %v); want the blob hashes from the listing", p, ok)
		}
		d.stop(b)
		b.StartTimer()
	}
	reportDurations(b, samples, "restart-to-serving")
}

// BenchmarkGitOneChanged10k measures one changed tool in a 10,000-tool
// repository: from POST /v1/sync (debounce 1ms) to the new snapshot
// serving (fetch, list, parse one file, build, swap), and checks that
// exactly one file was parsed.
func BenchmarkGitOneChanged10k(b *testing.B) {
	const n = 10000
	r, rev := bigRepo(b, n)
	d := startDaemon(b, nil, "--repo", r.url(), "--schedule", "off", "--reload-debounce", "1ms")
	d.waitRev(b, rev)
	var samples []time.Duration
	i := 0
	for b.Loop() {
		i++
		name := fmt.Sprintf("tool-%05d", i%n)
		b.StopTimer()
		r.write("tools/"+name+"/TOOL.hdlp", versionTool(name, fmt.Sprintf("v%d", i+1)))
		next := r.commit(name)
		b.StartTimer()
		start := time.Now()
		d.syncNow(b)
		st := d.waitRev(b, next)
		samples = append(samples, time.Since(start))
		if st.Parsed != 1 {
			b.Fatalf("one changed tool: parsed %d files; want 1", st.Parsed)
		}
	}
	reportDurations(b, samples, "sync-to-snapshot")
}

// TestGitForgejoReal runs against a real Forgejo or Gitea server: it
// creates a repository, pushes a TOOL.hdlp through the API, starts the
// daemon on the repository with a token, registers the daemon's push
// webhook, changes the tool through the API, and sees the new definition
// become callable through the webhook (the schedule is off), synced at
// once because the push names its commit. Set TOOLAGENT_TEST_FORGEJO_URL
// and TOOLAGENT_TEST_FORGEJO_TOKEN (see forgejoReal; waits are bounded by
// TOOLAGENT_TEST_FORGEJO_TIMEOUT); the server must be allowed to deliver
// to the daemon: TOOLAGENT_TEST_WEBHOOK_HOST names the address it reaches
// this machine at (default 127.0.0.1, which needs the server's [webhook]
// ALLOWED_HOST_LIST = loopback or *).
func TestGitForgejoReal(t *testing.T) {
	t.Parallel()
	base, token, timeout := forgejoReal(t)
	host := cmp.Or(os.Getenv("TOOLAGENT_TEST_WEBHOOK_HOST"), "127.0.0.1")
	client, err := gitea.NewClient(base, gitea.SetToken(token))
	if err != nil {
		t.Fatalf("forgejo client: %v", err)
	}
	me, _, err := client.GetMyUserInfo()
	if err != nil {
		t.Fatalf("forgejo: who am I: %v", err)
	}
	name := fmt.Sprintf("toolagent-test-%d", time.Now().UnixNano())
	repoInfo, _, err := client.CreateRepo(gitea.CreateRepoOption{Name: name, AutoInit: true, DefaultBranch: "main", Private: true})
	if err != nil {
		t.Fatalf("forgejo: create repo: %v", err)
	}
	t.Cleanup(func() { client.DeleteRepo(me.UserName, name) })
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	created, _, err := client.CreateFile(me.UserName, name, "tools/alpha/TOOL.hdlp", gitea.CreateFileOptions{
		FileOptions: gitea.FileOptions{Message: "alpha v1", BranchName: "main"}, Content: b64(versionTool("alpha", "v1"))})
	if err != nil {
		t.Fatalf("forgejo: create TOOL.hdlp: %v", err)
	}

	const secret = "forgejo-webhook-secret-0123"
	listen := "127.0.0.1:0"
	env := map[string]string{}
	if host != "127.0.0.1" {
		listen = "0.0.0.0:0"
		env["TOOLAGENT_TOKENS"] = "ops:admin:0123456789abcdef0123"
	}
	d := startDaemon(t, env, "--listen", listen, "--repo", repoInfo.CloneURL, "--schedule", "off",
		"--repo-token-file", writeSecret(t, token), "--webhook-secret-file", writeSecret(t, secret))
	if env["TOOLAGENT_TOKENS"] != "" {
		d.token = "0123456789abcdef0123"
	}
	pollWithin(t, timeout, "the first sync of "+created.Commit.SHA, func() bool { return d.status(t).Rev == created.Commit.SHA })
	d.callVersion(t, "forgejo clone", "alpha", "v1", created.Commit.SHA)

	_, port, _ := net.SplitHostPort(strings.TrimPrefix(d.url, "http://"))
	if _, _, err := client.CreateRepoHook(me.UserName, name, gitea.CreateHookOption{
		Type:   gitea.HookTypeGitea,
		Config: map[string]string{"url": "http://" + net.JoinHostPort(host, port) + "/v1/hooks/forgejo", "content_type": "json", "secret": secret},
		Events: []string{"push"}, Active: true,
	}); err != nil {
		t.Fatalf("forgejo: register webhook: %v", err)
	}
	updated, _, err := client.UpdateFile(me.UserName, name, "tools/alpha/TOOL.hdlp", gitea.UpdateFileOptions{
		FileOptions: gitea.FileOptions{Message: "alpha v2", BranchName: "main"}, SHA: created.Content.SHA, Content: b64(versionTool("alpha", "v2"))})
	if err != nil {
		t.Fatalf("forgejo: update TOOL.hdlp: %v", err)
	}
	pushed := time.Now()
	pollWithin(t, timeout, "the webhook delivery to sync "+updated.Commit.SHA+" (check the server's ALLOWED_HOST_LIST and its webhook delivery log)", func() bool {
		return d.status(t).Rev == updated.Commit.SHA
	})
	t.Logf("commit through the API → served: %v (most of it the server's webhook queue; docs/daemon.md)", time.Since(pushed).Round(time.Millisecond))
	d.callVersion(t, "forgejo webhook", "alpha", "v2", updated.Commit.SHA)
	if logs := d.logs.String(); !strings.Contains(logs, `"after":"`+updated.Commit.SHA+`","at_once":true`) {
		t.Errorf("the daemon did not log the push of %s as synced at once (no debounce); its log:\n%s", updated.Commit.SHA, logs)
	}
}

// TestGitForcePushRemovesATool: a tool added in a commit that a
// force-push then drops is not served any more; the served catalog is the
// tools tree of the served commit (issue 12, item 1), over smart HTTP and
// over git daemon's git://.
func TestGitForcePushRemovesATool(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"http", "git"} {
		t.Run(proto, func(t *testing.T) {
			const secret = "webhook-secret-0123456789"
			r := newGitRepo(t)
			url := r.url()
			if proto == "git" {
				url = r.gitDaemon(t)
			}
			r.write("tools/base/TOOL.hdlp", versionTool("base", "b0"))
			c1 := r.commit("base")
			d := startDaemon(t, nil, "--repo", url, "--schedule", "@every 30s", "--webhook-secret-file", writeSecret(t, secret))
			d.waitRev(t, c1)

			r.write("tools/t1/TOOL.hdlp", versionTool("t1", "one"))
			c2 := r.commit("t1")
			d.hook(t, "X-Forgejo-Signature", secret, "refs/heads/main")
			d.waitRev(t, c2)
			d.callVersion(t, "t1 added", "t1", "one", c2)

			r.run(r.work, "reset", "--quiet", "--hard", "HEAD~1")
			r.write("tools/t2/TOOL.hdlp", versionTool("t2", "two"))
			c3 := r.commit("t2 instead") // force-pushed
			d.hook(t, "X-Forgejo-Signature", secret, "refs/heads/main")
			d.waitRev(t, c3)
			d.callVersion(t, "t2 after the force-push", "t2", "two", c3)
			if code, res := d.call(t, "t1", map[string]any{}); code != http.StatusNotFound || res.Status != dispatch.NotFound {
				t.Errorf("t1 after the force-push dropped it: %d %s (revision %s); want 404 not_found", code, res.Status, res.Revision)
			}
			_, tools := d.toolsByName(t)
			if _, ok := tools["t1"]; ok || len(tools) != 2 {
				t.Errorf("tools after the force-push: %v; want base and t2 only", tools)
			}
		})
	}
}

// gitDaemon serves r's bare repository with `git daemon` on loopback as
// well, for the rest of the test, and returns its git:// URL.
func (r *gitRepo) gitDaemon(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // git daemon binds it next; nothing else here takes ports
	cmd := exec.Command(r.git, "daemon", "--reuseaddr", "--export-all", "--listen=127.0.0.1", fmt.Sprintf("--port=%d", port), "--base-path="+r.root, r.root)
	cmd.Env = r.env()
	if err := cmd.Start(); err != nil {
		t.Skipf("git daemon: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	pollUntil(t, "git daemon to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "git://" + addr + "/tools.git"
}

// TestStaleSurvivesARestart: a tool whose newest definition is broken
// keeps serving its last good definition (stale) after the daemon
// restarts, for a git source and a directory source alike (issue 12,
// item 4).
func TestStaleSurvivesARestart(t *testing.T) {
	t.Parallel()
	t.Run("git", func(t *testing.T) {
		r := newGitRepo(t)
		r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "a1"))
		c1 := r.commit("alpha")
		state := t.TempDir()
		d := startDaemon(t, nil, "--repo", r.url(), "--schedule", "off", "--state", state)
		d.waitRev(t, c1)
		r.write("tools/alpha/TOOL.hdlp", brokenTool)
		c2 := r.commit("broken alpha")
		d.syncNow(t)
		d.waitRev(t, c2)
		d.callVersion(t, "broken", "alpha", "a1", c1)
		if err := d.stop(t); err != nil {
			t.Fatal(err)
		}
		d2 := startDaemon(t, nil, "--repo", r.url(), "--schedule", "off", "--state", state)
		d2.waitRev(t, c2)
		d2.callVersion(t, "after the restart", "alpha", "a1", c1)
		if _, tools := d2.toolsByName(t); tools["alpha"].Status != catalog.Stale || tools["alpha"].LoadError == "" {
			t.Errorf("after the restart alpha = %+v; want stale with the load error", tools["alpha"])
		}
	})
	t.Run("directory", func(t *testing.T) {
		tools, state := t.TempDir(), t.TempDir()
		putTool(t, tools, "alpha", versionTool("alpha", "a1"))
		d := startDaemon(t, nil, "--tools", tools, "--state", state)
		pollUntil(t, "alpha to be served", func() bool { code, _ := d.call(t, "alpha", map[string]any{}); return code == 200 })
		putTool(t, tools, "alpha", brokenTool)
		pollUntil(t, "alpha to turn stale", func() bool { _, tl := d.toolsByName(t); return tl["alpha"].Status == catalog.Stale })
		if err := d.stop(t); err != nil {
			t.Fatal(err)
		}
		d2 := startDaemon(t, nil, "--tools", tools, "--state", state)
		_, tl := d2.toolsByName(t)
		if a := tl["alpha"]; a.Status != catalog.Stale || a.LoadError == "" {
			t.Errorf("after the restart alpha = %+v; want stale with the load error", a)
		}
		if code, res := d2.call(t, "alpha", map[string]any{}); code != 200 || res.Output != "a1\n" {
			t.Errorf("after the restart call alpha = %d %s %q; want the last good a1", code, res.Status, res.Output)
		}
	})
}

// TestGitProvenance: a tool's revision is the commit at which the daemon
// first served its current definition, kept while each sync moves the
// branch one commit forward; when a sync brings several commits, or
// history was rewritten, every tool cites the new head (the clone is one
// commit deep: the head is the commit known to hold the definition). A
// restart at the same head keeps the revisions (issue 12, item 9).
func TestGitProvenance(t *testing.T) {
	t.Parallel()
	r := newGitRepo(t)
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "a1"))
	c1 := r.commit("alpha")
	state := t.TempDir()
	d := startDaemon(t, nil, "--repo", r.url(), "--schedule", "off", "--state", state)
	d.waitRev(t, c1)

	// One commit forward: alpha still cites c1.
	r.write("tools/beta/TOOL.hdlp", versionTool("beta", "b1"))
	c2 := r.commit("beta")
	d.syncNow(t)
	d.waitRev(t, c2)
	d.callVersion(t, "one commit", "alpha", "a1", c1)
	d.callVersion(t, "one commit", "beta", "b1", c2)

	// Two commits in one fetch: every tool cites the head.
	r.write("tools/gamma/TOOL.hdlp", versionTool("gamma", "g1"))
	r.run(r.work, "add", "-A")
	r.run(r.work, "commit", "--quiet", "-m", "gamma")
	r.write("tools/beta/TOOL.hdlp", versionTool("beta", "b2"))
	c4 := r.commit("beta v2")
	d.syncNow(t)
	d.waitRev(t, c4)
	for _, tc := range []struct{ name, version string }{{"alpha", "a1"}, {"beta", "b2"}, {"gamma", "g1"}} {
		d.callVersion(t, "two commits at once", tc.name, tc.version, c4)
	}

	// A rewrite: back to c1, a new commit. alpha, unchanged since c1, must
	// not cite a commit the branch lost (c4), nor keep anything older.
	r.run(r.work, "reset", "--quiet", "--hard", c1)
	r.write("tools/delta/TOOL.hdlp", versionTool("delta", "d1"))
	c5 := r.commit("rewritten")
	d.syncNow(t)
	d.waitRev(t, c5)
	d.callVersion(t, "rewrite", "alpha", "a1", c5)
	d.callVersion(t, "rewrite", "delta", "d1", c5)

	// One commit forward again, then a restart at that head: kept.
	r.write("tools/delta/TOOL.hdlp", versionTool("delta", "d2"))
	c6 := r.commit("delta v2")
	d.syncNow(t)
	d.waitRev(t, c6)
	d.callVersion(t, "after the rewrite, one commit", "alpha", "a1", c5)
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	d2 := startDaemon(t, nil, "--repo", r.url(), "--schedule", "off", "--state", state)
	d2.waitRev(t, c6)
	d2.callVersion(t, "restart", "alpha", "a1", c5)
	d2.callVersion(t, "restart", "delta", "d2", c6)
}

// TestGitBackoffHoldsTheSchedule: with a 1 s schedule and the git server
// failing, the daemon does not ask it again at every tick while it backs
// off (status says when the next retry is, and that is when it comes);
// POST /v1/sync still goes through at once (issue 12, item 8).
func TestGitBackoffHoldsTheSchedule(t *testing.T) {
	t.Parallel()
	r := newGitRepo(t)
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "a1"))
	c1 := r.commit("alpha")
	var requests atomic.Int64
	var failing atomic.Bool
	real := r.handler
	r.handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		requests.Add(1)
		if failing.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		real.ServeHTTP(w, req)
	})
	r.stop()
	r.start()
	d := startDaemon(t, nil, "--repo", r.url(), "--schedule", "@every 1s", "--reload-retry-min", "1h", "--reload-retry-max", "1h")
	d.waitRev(t, c1)

	failing.Store(true)
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "a2"))
	r.commit("alpha v2")
	// The next tick fails; from then on the daemon backs off for an hour.
	pollUntil(t, "a failed sync", func() bool { return d.status(t).Failures > 0 })
	st := d.status(t)
	if st.Next.IsZero() || time.Until(st.Next) < 50*time.Minute {
		t.Fatalf("after a failure the next retry is %v; want about an hour away", st.Next)
	}
	n := requests.Load()
	// Three more ticks of the schedule pass (next_sync moves on each).
	for range 3 {
		before := d.status(t).NextSync
		pollUntil(t, "the next schedule tick", func() bool { return d.status(t).NextSync.After(before) })
	}
	if got := requests.Load(); got != n {
		t.Errorf("%d requests reached the failing server during the backoff; want none (ticks wait for the retry)", got-n)
	}
	// A manual sync still asks at once.
	d.syncNow(t)
	pollUntil(t, "the manual sync to reach the server", func() bool { return requests.Load() > n })
}

// TestReplicasOnePushEveryReplica: three replicas (real processes) on one
// git source and one database, none on a schedule: a verified push
// webhook to one of them makes the new tool callable on all three (the
// others hear the announcement and sync themselves), and each one's status
// names the newest revision any replica has seen.
func TestReplicasOnePushEveryReplica(t *testing.T) {
	t.Parallel()
	env := []string{"TOOLAGENT_STORE_URL=" + pgtest.URL(t)}
	const secret = "webhook-secret-0123456789"
	r := newGitRepo(t)
	r.write("tools/alpha/TOOL.hdlp", versionTool("alpha", "v0"))
	rev := r.commit("v0")
	var ds []*liveDaemon
	for range 3 {
		d := processDaemon(t, env, "--repo", r.url(), "--schedule", "off", "--webhook-secret-file", writeSecret(t, secret), "--store", "postgres")
		d.waitRev(t, rev)
		ds = append(ds, d)
	}
	r.write("tools/beta/TOOL.hdlp", versionTool("beta", "v1"))
	next := r.commit("beta")
	start := time.Now()
	if code, body := ds[0].hook(t, "X-Forgejo-Signature", secret, "refs/heads/main"); code != http.StatusAccepted {
		t.Fatalf("webhook to replica 1 = %d %s", code, body)
	}
	for i, d := range ds {
		d.waitRev(t, next)
		d.callVersion(t, fmt.Sprintf("replica %d", i+1), "beta", "v1", next)
	}
	t.Logf("one webhook to replica 1: the new tool callable on all 3 replicas after %v", time.Since(start).Round(time.Millisecond))
	for i, d := range ds {
		pollUntil(t, fmt.Sprintf("replica %d: status shared.newest %s", i+1, next), func() bool {
			_, b := d.request(t, "GET", "/v1/status", "")
			var st struct {
				Shared struct {
					Newest struct{ Revision string }
				}
			}
			return json.Unmarshal(b, &st) == nil && st.Shared.Newest.Revision == next
		})
	}
}
