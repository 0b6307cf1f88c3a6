package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/hldp"
)

// TestBenchTools: every synthetic tool is a valid definition named after
// its folder, so a start serves them all (none is a problem that a start
// would skip).
func TestBenchTools(t *testing.T) {
	for _, i := range []int{0, 1, 9999, 12345} {
		name := fmt.Sprintf("tool-%05d", i)
		tool, err := hldp.Parse("tools/"+name+"/TOOL.hdlp", benchTool(i))
		if err != nil {
			t.Fatalf("tool %d does not parse: %v", i, err)
		}
		if tool.Name != name {
			t.Errorf("tool %d is named %q; want %q", i, tool.Name, name)
		}
	}
}

// TestSummary: the median and range of each figure.
func TestSummary(t *testing.T) {
	got := summary([]sample{
		{wall: 300 * time.Millisecond, cpu: 30 * time.Millisecond, rss: 3 << 20, anon: 3 << 19},
		{wall: 100 * time.Millisecond, cpu: 10 * time.Millisecond, rss: 1 << 20, anon: 1 << 19},
		{wall: 200 * time.Millisecond, cpu: 20 * time.Millisecond, rss: 2 << 20, restRSS: 4 << 20, anon: 2 << 19, restAnon: 3 << 20, peak: 5 << 20},
	})
	for _, want := range []string{"wall 200 (100-300)", "cpu 20 (10-30)", "rss 2.0 (1.0-3.0)", "rest 0.0 (0.0-4.0)", "anon 1.0 (0.5-1.5)", "rest anon 0.0 (0.0-3.0)", "peak 0.0 (0.0-5.0)"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary = %q; want it to contain %q", got, want)
		}
	}
}

// TestSummaryForge: a forge's samples also give the delivery (wall less
// the daemon's share) and the daemon's share.
func TestSummaryForge(t *testing.T) {
	got := summary([]sample{
		{wall: 400 * time.Millisecond, hook: 150 * time.Millisecond, server: 90 * time.Millisecond},
		{wall: 300 * time.Millisecond, hook: 100 * time.Millisecond, server: 80 * time.Millisecond},
		{wall: 500 * time.Millisecond, hook: 160 * time.Millisecond, server: 70 * time.Millisecond},
	})
	for _, want := range []string{"wall 400 (300-500)", "delivery 250 (200-340)", "daemon 150 (100-160)", "server 80 (70-90)"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary = %q; want it to contain %q", got, want)
		}
	}
}

// TestProcRSS: this process's resident set, its anonymous part, which a
// heap that was just touched is in, and its peak.
func TestProcRSS(t *testing.T) {
	heap := make([]byte, 8<<20)
	for i := range heap {
		heap[i] = 1
	}
	rss, anon, peak := procRSS(os.Getpid())
	if anon < 8<<20 || rss < anon || peak < rss {
		t.Errorf("procRSS = %d, %d, %d; want an anonymous part of at least 8 MiB (the heap touched) within the resident set, within the peak", rss, anon, peak)
	}
	runtime.KeepAlive(heap)
}

// TestRelay: a forge's delivery reaches the daemon with its body and its
// signature and event headers, the daemon's answer comes back, and the
// arrival is noted by the push's commit.
func TestRelay(t *testing.T) {
	type got struct {
		body      string
		sig, kind string
	}
	seen := make(chan got, 1)
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- got{string(b), r.Header.Get("X-Gitea-Signature"), r.Header.Get("X-Gitea-Event")}
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "queued")
	}))
	defer daemon.Close()
	rl := &relay{target: daemon.URL + "/v1/hooks/forgejo", client: daemon.Client(), at: map[string]time.Time{}}
	front := httptest.NewServer(rl)
	defer front.Close()
	body := `{"ref":"refs/heads/main","after":"0123abcd"}`
	req, _ := http.NewRequest(http.MethodPost, front.URL, strings.NewReader(body))
	req.Header.Set("X-Gitea-Signature", "feed")
	req.Header.Set("X-Gitea-Event", "push")
	before := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || string(answer) != "queued" {
		t.Errorf("relay answered %s %q; want the daemon's 202 queued", resp.Status, answer)
	}
	if g := <-seen; g != (got{body, "feed", "push"}) {
		t.Errorf("the daemon got %+v; want the body and headers as sent", g)
	}
	first, ok := rl.arrived("0123abcd")
	if !ok || first.Before(before) {
		t.Errorf("arrived(0123abcd) = %v, %v; want a time after the delivery started", first, ok)
	}
	// A redelivery of the same push does not move its arrival.
	again, _ := http.NewRequest(http.MethodPost, front.URL, strings.NewReader(body))
	if resp, err := http.DefaultClient.Do(again); err == nil {
		resp.Body.Close()
	}
	<-seen
	if at, _ := rl.arrived("0123abcd"); !at.Equal(first) {
		t.Errorf("after a redelivery arrived(0123abcd) = %v; want the first arrival %v", at, first)
	}
	if _, ok := rl.arrived("ffff"); ok {
		t.Error("arrived(ffff) is known; no webhook named it")
	}
}

// TestGiteaNeedsForge: the gitea-webhook case without a forge says which
// variables to set, before it writes a catalog.
func TestGiteaNeedsForge(t *testing.T) {
	t.Setenv(giteaURLEnv, "")
	t.Setenv(giteaTokenEnv, "")
	var out, errs strings.Builder
	dir := t.TempDir()
	err := run(t.Context(), []string{"--bin", "/nonexistent", "--tools", "1", "--rounds", "1", "--dir", dir, "--cases", "gitea-webhook"}, &out, &errs)
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("%d entries written to --dir before the missing forge was named", len(ents))
	}
	if err == nil || !strings.Contains(err.Error(), giteaURLEnv) || !strings.Contains(err.Error(), giteaTokenEnv) {
		t.Errorf("run = %v; want an error naming %s and %s", err, giteaURLEnv, giteaTokenEnv)
	}
	if slices.Contains(defaultCases(), "gitea-webhook") {
		t.Errorf("default cases %v hold gitea-webhook with no forge named", defaultCases())
	}
}

// TestWithIntent: the webhook cases' change leaves a definition that
// parses, with the new intent and everything else as it was.
func TestWithIntent(t *testing.T) {
	orig := benchTool(42)
	data, err := withIntent(orig, "查看第 42 号 nginx 服务的运行状态（第 1 次修改）")
	if err != nil {
		t.Fatal(err)
	}
	before, err := hldp.Parse(changedTool, orig)
	if err != nil {
		t.Fatal(err)
	}
	after, err := hldp.Parse(changedTool, data)
	if err != nil {
		t.Fatalf("changed definition does not parse: %v\n%s", err, data)
	}
	if after.Intent != "查看第 42 号 nginx 服务的运行状态（第 1 次修改）" || after.Name != before.Name || after.Method != before.Method {
		t.Errorf("after the change: name %q method %q intent %q; want %q %q and the new intent", after.Name, after.Method, after.Intent, before.Name, before.Method)
	}
	if _, err := withIntent([]byte("name: x\n"), "y"); err == nil {
		t.Error("withIntent of a definition without an intent line: no error")
	}
}

// TestSigning: with --signed's key, the git cases' commits are signed,
// and git itself verifies them against the allowed_signers file the
// daemons are given; without a key they are not signed.
func TestSigning(t *testing.T) {
	dir := t.TempDir()
	s, err := newSigning(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{s.key, ""} {
		work := t.TempDir()
		env := gitEnv(dir, key)
		git := func(args ...string) (string, error) {
			cmd := exec.Command("git", append([]string{"-C", work}, args...)...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		for _, a := range [][]string{{"init", "--quiet", "-b", "main"}, {"commit", "--quiet", "--allow-empty", "-m", "x"}} {
			if out, err := git(a...); err != nil {
				t.Fatalf("git %v: %v\n%s", a, err, out)
			}
		}
		out, err := git("-c", "gpg.ssh.allowedSignersFile="+s.signers, "verify-commit", "HEAD")
		if key != "" && err != nil {
			t.Errorf("a commit made with the key does not verify against %s: %v\n%s", s.signers, err, out)
		}
		if key == "" && err == nil {
			t.Errorf("a commit made without a key verifies: %s", out)
		}
	}
}

// TestSignedNotWithForge: --signed refuses the forge's case, whose commits
// the forge makes, before writing anything.
func TestSignedNotWithForge(t *testing.T) {
	dir := t.TempDir()
	var out, errs strings.Builder
	err := run(t.Context(), []string{"--bin", "/nonexistent", "--tools", "1", "--rounds", "1", "--dir", dir, "--signed", "--cases", "git-webhook,gitea-webhook"}, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "--signed") || !strings.Contains(err.Error(), "gitea-webhook") {
		t.Errorf("run = %v; want an error naming --signed and gitea-webhook", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("%d entries written to --dir", len(ents))
	}
}

// TestWaitServed: a commit served with every tool enabled is served; one
// served with a tool not callable (a signature refused) is an error that
// says how many.
func TestWaitServed(t *testing.T) {
	status := `{"revision":"c1","tools":{"total":2,"enabled":2}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, status) }))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if err := waitServed(t.Context(), srv.Client(), addr, "c1"); err != nil {
		t.Errorf("every tool enabled: %v", err)
	}
	status = `{"revision":"c1","tools":{"total":2,"enabled":1,"untrusted":1}}`
	if err := waitServed(t.Context(), srv.Client(), addr, "c1"); err == nil || !strings.Contains(err.Error(), "1 of its 2 tools are not enabled") {
		t.Errorf("one untrusted: %v; want an error saying 1 of 2 not enabled", err)
	}
}

// TestCommitPush: --commits' pushes: k commits, each changing another
// tool's intent alone, pushed at once to the served repository; --commits
// beyond the catalog is refused before anything is written.
func TestCommitPush(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := writeTools(filepath.Join(work, "tools"), 50); err != nil {
		t.Fatal(err)
	}
	env := gitEnv(dir, "")
	srv, _, err := serveRepo(t.Context(), git, dir, work, env)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	repo := &benchRepo{git: git, work: work, bare: filepath.Join(dir, "git", "tools.git"), env: env}
	before, _ := repo.run(t.Context(), "-C", repo.bare, "rev-parse", "main")
	head, err := repo.commitPush(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	pushed, _ := repo.run(t.Context(), "-C", repo.bare, "rev-parse", "main")
	if strings.TrimSpace(pushed) != strings.TrimSpace(head) {
		t.Fatalf("the bare repository's main is %s, want the pushed head %s", pushed, head)
	}
	log, err := repo.run(t.Context(), "-C", repo.bare, "log", "--format=%s", "--name-only", strings.TrimSpace(before)+".."+strings.TrimSpace(head))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for line := range strings.Lines(log) {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "tools/") {
			files = append(files, l)
		}
	}
	want := []string{"tools/tool-00044/TOOL.hdlp", "tools/tool-00043/TOOL.hdlp", changedTool}
	if !slices.Equal(files, want) {
		t.Errorf("the pushed commits changed %v (newest first), want %v", files, want)
	}

	var out, errs strings.Builder
	empty := t.TempDir()
	err = run(t.Context(), []string{"--bin", "/nonexistent", "--tools", "50", "--rounds", "1", "--dir", empty, "--commits", "9", "--cases", "git-webhook"}, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "--commits 9: want 1 to 8") {
		t.Errorf("run --commits 9 --tools 50 = %v; want an error naming the range", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) > 0 {
		t.Errorf("%d entries written to --dir", len(ents))
	}
}

// TestRoundOrder: every binary is measured once a round, and each leads
// as many rounds as the others.
func TestRoundOrder(t *testing.T) {
	const n, rounds = 3, 6
	first := make([]int, n)
	for r := range rounds {
		order := roundOrder(r, n)
		seen := make([]bool, n)
		for _, bi := range order {
			if bi < 0 || bi >= n || seen[bi] {
				t.Fatalf("round %d: order %v; want each of 0..%d once", r, order, n-1)
			}
			seen[bi] = true
		}
		first[order[0]]++
	}
	for bi, k := range first {
		if k != rounds/n {
			t.Errorf("binary %d led %d of %d rounds; want %d", bi, k, rounds, rounds/n)
		}
	}
}
