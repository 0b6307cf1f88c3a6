package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// runCLI runs the toolagent command in-process, with the environment given as
// k=v pairs (nothing is inherited), and returns stdout, stderr and the exit
// code main would use.
func runCLI(t *testing.T, envKV []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	envm := map[string]string{}
	for _, kv := range envKV {
		k, v, _ := strings.Cut(kv, "=")
		envm[k] = v
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return envm[k] }, strings.NewReader(""), &out, &errb)
	code = exitCode(err, &errb)
	return out.String(), errb.String(), code
}

// nativeTools is the checkout's native-repo/tools.
func nativeTools(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../native-repo/tools")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// toolsCopy copies native-repo/tools into a temp dir the test may change.
func toolsCopy(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "tools")
	if err := os.CopyFS(dst, os.DirFS(nativeTools(t))); err != nil {
		t.Fatal(err)
	}
	return dst
}

type result struct {
	OK         bool   `json:"ok"`
	Status     string `json:"status"`
	Tool       string `json:"tool"`
	Revision   string `json:"revision"`
	Output     string `json:"output"`
	Stderr     string `json:"stderr"`
	ExitCode   int    `json:"exit_code"`
	Truncated  bool   `json:"truncated"`
	Error      string `json:"error"`
	DurationMS int64  `json:"duration_ms"`
	OutputB    int64  `json:"output_bytes"`
	Found      *bool  `json:"found"`
	Suggestion string `json:"suggestion"`
	Sandbox    string `json:"sandbox"`
	Plan       *struct {
		Argv      []string `json:"argv"`
		TimeoutMS int64    `json:"timeout_ms"`
	} `json:"plan"`
}

func callTool(t *testing.T, tools string, args ...string) (result, int) {
	t.Helper()
	state := t.TempDir()
	out, errOut, code := runCLI(t, nil, append([]string{"call", "--tools", tools, "--state", state}, args...)...)
	var r result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("call %v: stdout is not a result (%v):\n%s\nstderr: %s", args, err, out, errOut)
	}
	return r, code
}

// TestSeedAcceptance is the seed's own check list on the shipped tools.
func TestSeedAcceptance(t *testing.T) {
	t.Parallel()
	tools := nativeTools(t)
	t.Run("shell-exec echo hello", func(t *testing.T) {
		r, code := callTool(t, tools, "shell-exec", "cmd=echo hello")
		if r.Status != "success" || r.Output != "hello\n" || r.ExitCode != 0 || !r.OK || code != 0 {
			t.Errorf("got %+v (exit %d), want success hello", r, code)
		}
		if !strings.HasPrefix(r.Revision, "local:") {
			t.Errorf("revision %q, want local:<hash>", r.Revision)
		}
	})
	t.Run("tool not in the repository", func(t *testing.T) {
		r, code := callTool(t, tools, "deploy-app")
		if r.Status != "not_found" || r.Found == nil || *r.Found || !strings.Contains(r.Suggestion, "has to be written") || code != exitNotFound {
			t.Errorf("got %+v (exit %d), want not_found with the suggestion", r, code)
		}
	})
	t.Run("failing command keeps stderr and exit code", func(t *testing.T) {
		r, code := callTool(t, tools, "shell-exec", "cmd=ls /nonexistent")
		if r.Status != "error" || r.ExitCode != 2 || !strings.Contains(r.Stderr, "/nonexistent") || r.Output != "" || code != exitFailed {
			t.Errorf("got %+v (exit %d), want error, exit_code 2, real stderr", r, code)
		}
	})
	t.Run("invalid params", func(t *testing.T) {
		r, code := callTool(t, tools, "git-ops", "op=push", "max_count=zero")
		if r.Status != "invalid_params" || code != exitUsage || !strings.Contains(r.Error, "op") || !strings.Contains(r.Error, "max_count") {
			t.Errorf("got %+v (exit %d), want invalid_params naming op and max_count", r, code)
		}
	})
	t.Run("a path out of the files root is denied, naming why", func(t *testing.T) {
		r, code := callTool(t, tools, "file-read", "path=../../etc/passwd")
		if r.Status != "denied" || code != exitRefused || !strings.Contains(r.Error, "files root") {
			t.Errorf("file-read ../../etc/passwd = %s (exit %d) %q; want denied naming the files root", r.Status, code, r.Error)
		}
	})
	t.Run("run template blocks injection", func(t *testing.T) {
		r, _ := callTool(t, tools, "git-ops", "op=log", "ref=HEAD; rm -rf /")
		if r.Status != "invalid_params" {
			t.Errorf("ref with a shell payload: %s %q, want invalid_params (pattern)", r.Status, r.Error)
		}
	})
	t.Run("dry run shows argv and runs nothing", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "marker")
		r, code := callTool(t, tools, "--dry-run", "shell-exec", "cmd=touch "+marker)
		if r.Status != "dry_run" || code != 0 || r.Plan == nil || strings.Join(r.Plan.Argv, " ") != "/bin/bash -p -c touch "+marker || r.Plan.TimeoutMS != 30000 {
			t.Errorf("got %+v, want dry_run with the argv", r)
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("dry run created %s", marker)
		}
	})
}

// TestNewToolRegistersOnNextScan: a TOOL.hdlp added to the tree is found by
// the next command, with no configuration.
func TestNewToolRegistersOnNextScan(t *testing.T) {
	t.Parallel()
	tools := toolsCopy(t)
	if r, _ := callTool(t, tools, "hello-world", "message=hi"); r.Status != "not_found" {
		t.Fatalf("before new: %s", r.Status)
	}
	// Unedited, the scaffold does not load: nothing serves it, and
	// validate names its placeholders.
	if out, errOut, code := runCLI(t, []string{"USER=tester"}, "new", "--tools", tools, "unedited"); code != 0 || !strings.Contains(out, "created") {
		t.Fatalf("new: exit %d\n%s%s", code, out, errOut)
	}
	if r, _ := callTool(t, tools, "unedited", "message=hi"); r.Status == "success" || !strings.Contains(r.Error, "placeholder") {
		t.Errorf("the unedited scaffold: %+v; want it refused for its placeholders", r)
	}
	if out, _, code := runCLI(t, nil, "validate", tools); code != exitFailed || !strings.Contains(out, filepath.Join(tools, "unedited", "TOOL.hdlp")+":6:9: intent: still the placeholder") {
		t.Errorf("validate of the unedited scaffold: exit %d\n%s\nwant exit 1 naming %s:6:9 and its intent", code, out, filepath.Join(tools, "unedited", "TOOL.hdlp"))
	}
	os.RemoveAll(filepath.Join(tools, "unedited"))
	out, errOut, code := runCLI(t, []string{"USER=tester"}, "new", "--tools", tools, "--intent", "Echo a message back.", "--why", "to try toolagent", "hello-world")
	if code != 0 || !strings.Contains(out, "created") {
		t.Fatalf("new: exit %d\n%s%s", code, out, errOut)
	}
	r, code := callTool(t, tools, "hello-world", "message=hi there")
	if r.Status != "success" || r.Output != "hi there\n" || code != 0 {
		t.Errorf("scaffolded tool: %+v", r)
	}
	data, _ := os.ReadFile(filepath.Join(tools, "hello-world", "TOOL.hdlp"))
	for _, field := range []string{"name:", "display:", "intent:", "method:", "executor:", "params_schema:", "constraints:", "author: tester", "created:", `why: "to try toolagent"`} {
		if !bytes.Contains(data, []byte(field)) {
			t.Errorf("scaffold lacks %q", field)
		}
	}
	if _, _, code := runCLI(t, nil, "new", "--tools", tools, "hello-world"); code != exitFailed {
		t.Errorf("new over an existing tool: exit %d, want %d", code, exitFailed)
	}
	if _, _, code := runCLI(t, nil, "new", "--tools", tools, "Bad Name"); code != exitUsage {
		t.Errorf("new with a bad name: exit %d, want %d", code, exitUsage)
	}
}

func writeTool(t *testing.T, tools, name, body string) {
	t.Helper()
	dir := filepath.Join(tools, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := "name: " + name + "\ndisplay: " + name + "\nintent: test tool\nauthor: t\ncreated: 2026-11-30\nwhy: tests\n" + body
	if err := os.WriteFile(filepath.Join(dir, "TOOL.hdlp"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTimeoutKillsTheGroup: a tool whose background child runs past the
// tool's timeout returns timeout with the partial output, and the child is
// gone afterwards (counted by its name: in the sandbox, pids are the
// sandbox's own). The command says "started" only once the child runs, so
// the test knows it had something to kill; the timeout is long enough for
// that on a loaded machine, and the child sleeps far longer.
// shell_policy: none, so the command runs without an approval.
func TestTimeoutKillsTheGroup(t *testing.T) {
	t.Parallel()
	tools := toolsCopy(t)
	writeTool(t, tools, "slow", `method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true }
constraints: { timeout_ms: 5000, shell_policy: none }
`)
	marker := "toolagent-timeout-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	r, code := callTool(t, tools, "slow", "cmd=(exec -a "+marker+" sleep 1000) & until pgrep -f ^"+marker+" >/dev/null; do sleep 0.01; done; echo started; wait")
	if r.Status != "timeout" || code != exitTimeout || r.Output != "started\n" {
		t.Fatalf("got %+v (exit %d), want timeout with the partial output", r, code)
	}
	waitFor(t, 10*time.Second, "the background sleep to be gone", func() bool {
		return proctest.CountMarked(marker) == 0
	})
}

// TestOutputCap: `yes` with max_output_bytes 1024 returns exactly 1024
// bytes, truncated, and does not run to the timeout.
func TestOutputCap(t *testing.T) {
	t.Parallel()
	tools := toolsCopy(t)
	writeTool(t, tools, "yes", `method: run
executor: shell
argv: [yes]
params_schema: {}
constraints: { max_output_bytes: 1024, timeout_ms: 20000 }
`)
	start := time.Now()
	r, _ := callTool(t, tools, "yes")
	if len(r.Output) != 1024 || !r.Truncated || r.OutputB <= 1024 {
		t.Errorf("got %d bytes truncated=%v output_bytes=%d, want 1024, true, more than 1024", len(r.Output), r.Truncated, r.OutputB)
	}
	// yes dies of SIGPIPE once the runtime closes its pipe: that is the
	// cap's doing, reported as truncated output, with the real exit code.
	if r.Status != "success" || r.ExitCode != 141 || !strings.Contains(r.Error, "SIGPIPE") {
		t.Errorf("status %s exit %d error %q; want success, 141 and the SIGPIPE named", r.Status, r.ExitCode, r.Error)
	}
	if time.Since(start) > 15*time.Second {
		t.Errorf("yes ran %v: it was not stopped after the cap", time.Since(start))
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFileToolsConfined(t *testing.T) {
	t.Parallel()
	tools := nativeTools(t)
	state := t.TempDir()
	call := func(args ...string) result {
		out, _, _ := runCLI(t, nil, append([]string{"call", "--tools", tools, "--state", state}, args...)...)
		var r result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return r
	}
	if r := call("file-write", "path=notes/a.txt", "content=hello file\n"); r.Status != "success" {
		t.Fatalf("write: %+v", r)
	}
	if r := call("file-read", "path=notes/a.txt"); r.Status != "success" || r.Output != "hello file\n" {
		t.Errorf("read back: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(state, "files", "notes", "a.txt")); err != nil {
		t.Errorf("file not under STATE/files: %v", err)
	}
	for _, p := range []string{"../outside.txt", "/etc/passwd", "notes/../../x"} {
		if r := call("file-read", "path="+p); r.Status == "success" {
			t.Errorf("read %s succeeded: %q", p, r.Output)
		}
	}
}

func TestHTTPRequestTool(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (apt-get install curl); .ci/run installs it")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.Error(w, "no such page", http.StatusNotFound)
			return
		}
		body := new(bytes.Buffer)
		body.ReadFrom(r.Body)
		w.Write([]byte(r.Method + " " + r.Header.Get("X-Test") + " " + body.String()))
	}))
	defer srv.Close()
	tools := nativeTools(t)
	r, _ := callTool(t, tools, "http-request", "url="+srv.URL+"/x", "method=POST", "header=X-Test: yes", "body=@/etc/passwd")
	if r.Status != "success" || r.Output != "POST yes @/etc/passwd" {
		t.Errorf("POST: %+v (body must be sent raw, never read from a file)", r)
	}
	r, _ = callTool(t, tools, "http-request", "url="+srv.URL+"/missing")
	if r.Status != "error" || r.ExitCode != 22 || !strings.Contains(r.Output, "no such page") || !strings.Contains(r.Stderr, "404") {
		t.Errorf("404: %+v, want error with exit 22, the body and curl's stderr", r)
	}
	r, _ = callTool(t, tools, "http-request", "url=file:///etc/passwd")
	if r.Status != "invalid_params" {
		t.Errorf("file:// URL: %s, want invalid_params", r.Status)
	}
}

func TestListShowValidate(t *testing.T) {
	t.Parallel()
	tools := nativeTools(t)
	state := t.TempDir()
	out, _, code := runCLI(t, nil, "list", "--tools", tools, "--state", state)
	var l struct {
		Tools []struct{ Name, Status string } `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || code != 0 {
		t.Fatalf("list: %v %d\n%s", err, code, out)
	}
	var names []string
	for _, tl := range l.Tools {
		names = append(names, tl.Name+":"+tl.Status)
	}
	if got := strings.Join(names, " "); got != "file-read:enabled file-write:enabled git-ops:enabled http-request:enabled shell-exec:enabled" {
		t.Errorf("list = %s", got)
	}
	out, _, code = runCLI(t, nil, "show", "--tools", tools, "--state", state, "shell-exec")
	if code != 0 || !strings.Contains(out, `"params_schema": {`) || !strings.Contains(out, `"additionalProperties": false`) || !strings.Contains(out, `"timeout_ms": 30000`) {
		t.Errorf("show: exit %d\n%s", code, out)
	}
	if _, _, code := runCLI(t, nil, "show", "--tools", tools, "--state", state, "nope"); code != exitNotFound {
		t.Errorf("show nope: exit %d", code)
	}
	out, _, code = runCLI(t, nil, "validate", "--state", state, tools)
	if code != 0 || !strings.Contains(out, "5 tool folders, 5 callable, 0 problems") {
		t.Errorf("validate native: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, nil, "validate", "--state", state, "../../internal/hldp/testdata/bad/tools")
	if code != exitFailed || !strings.Contains(out, "require_confrim") || !strings.Contains(out, "TOOL.hdlp:") {
		t.Errorf("validate bad corpus: exit %d\n%s", code, out)
	}
	if _, _, code := runCLI(t, nil, "frobnicate"); code != exitUsage {
		t.Errorf("unknown subcommand: exit %d", code)
	}
}

func TestMatchCommand(t *testing.T) {
	t.Parallel()
	tools := nativeTools(t)
	out, _, code := runCLI(t, nil, "match", "--tools", tools, "--state", t.TempDir(), "查看最近的提交记录")
	var resp struct {
		Found      bool `json:"found"`
		Candidates []struct {
			Name string `json:"name"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if code != 0 || !resp.Found || len(resp.Candidates) == 0 || resp.Candidates[0].Name != "git-ops" {
		t.Errorf("match 查看最近的提交记录: exit %d %s", code, out)
	}
}

// TestBrokenCorpusBesideValidTools puts hldp's corpus of broken
// definitions, a huge file and a symlink out of the tree next to the five
// shipped tools: validate names every broken file, and the valid tools
// still load and run.
func TestBrokenCorpusBesideValidTools(t *testing.T) {
	t.Parallel()
	tools := toolsCopy(t)
	if err := os.CopyFS(tools, os.DirFS("../../internal/hldp/testdata/bad/tools")); err != nil {
		t.Fatal(err)
	}
	huge := "name: huge\n" + strings.Repeat("# padding\n", 40000)
	if err := os.MkdirAll(filepath.Join(tools, "huge"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "huge", "TOOL.hdlp"), []byte(huge), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	writeTool(t, outside, "escape", "method: exec\nexecutor: shell\nparams_schema: {}\n")
	if err := os.Symlink(filepath.Join(outside, "escape"), filepath.Join(tools, "escape")); err != nil {
		t.Fatal(err)
	}
	out, _, code := runCLI(t, nil, "validate", "--state", t.TempDir(), tools)
	if code != exitFailed {
		t.Fatalf("validate: exit %d, want %d", code, exitFailed)
	}
	for _, want := range []string{"tools/huge/TOOL.hdlp", "file too large", "tools/escape: symlink leaves the tools tree", "require_confrim", "did you mean"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q", want)
		}
	}
	r, _ := callTool(t, tools, "shell-exec", "cmd=echo still here")
	if r.Status != "success" || r.Output != "still here\n" {
		t.Errorf("shell-exec beside the broken corpus: %+v", r)
	}
	out, _, _ = runCLI(t, nil, "list", "--tools", tools, "--state", t.TempDir(), "--all")
	var l struct {
		Tools []struct{ Name, Status string } `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, tl := range l.Tools {
		if tl.Status == "failed" {
			failed++
		}
	}
	if failed < 32 {
		t.Errorf("%d failed tools listed, want every broken file (>= 32)", failed)
	}
}

// TestVersion: `toolagent version` and `--version` print the build's
// version, the one MCP's serverInfo reports.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, code := runCLI(t, nil, args...)
		if code != 0 || out != "toolagent "+daemon.Version()+"\n" || daemon.Version() == "" {
			t.Errorf("%v = exit %d %q; want toolagent %s", args, code, out, daemon.Version())
		}
	}
}

// TestToolsTreeFoundLikeGit: in a tools repository (tools/*/TOOL.hdlp) the
// CLI uses that tree, from its root and from a folder below it, not the
// copy compiled in: validate exits 1 naming the broken tool, call finds
// it, list says which tree; with no tree anywhere validate refuses to
// check the embedded copy unless asked by name (issue 14, trap 1).
// Not parallel: it changes the working directory (t.Chdir).
func TestToolsTreeFoundLikeGit(t *testing.T) {
	repo := t.TempDir()
	writeTool(t, filepath.Join(repo, "tools"), "greet", "method: run\nexecutor: shell\nargv: [echo, hi]\nparams_schema: {}\n")
	writeTool(t, filepath.Join(repo, "tools"), "broken", "method: run\nexecutor: shell\nargv: [echo]\nparams_schema: {}\nbogus_key: 1\n")
	deep := filepath.Join(repo, "docs", "deep")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	for _, dir := range []string{repo, deep, filepath.Join(repo, "tools")} {
		t.Run(dir[len(repo):], func(t *testing.T) {
			t.Chdir(dir)
			out, _, code := runCLI(t, nil, "validate", "--state", state)
			if code != exitFailed || !strings.Contains(out, "tools tree: "+filepath.Join(repo, "tools")) || !strings.Contains(out, "tools/broken/TOOL.hdlp") {
				t.Errorf("validate in %s = exit %d\n%s\nwant 1, the repository's tree named, the broken tool named", dir, code, out)
			}
			r, _ := callTool(t, "", "greet")
			if r.Status != "success" || r.Output != "hi\n" {
				t.Errorf("call greet in %s = %+v; want the repository's greet", dir, r)
			}
			out, _, _ = runCLI(t, nil, "list", "--state", state)
			if !strings.Contains(out, `"tools_tree": "`+filepath.Join(repo, "tools")+`"`) {
				t.Errorf("list in %s does not name the tree it used:\n%s", dir, out)
			}
		})
	}
	t.Run("no tree", func(t *testing.T) {
		t.Chdir(t.TempDir())
		if out, errOut, code := runCLI(t, nil, "validate", "--state", state); code == 0 || !strings.Contains(errOut+out, "no tools tree here") {
			t.Errorf("validate with no tree anywhere = exit %d %s %s; want a refusal, not the embedded copy", code, out, errOut)
		}
		if _, _, code := runCLI(t, nil, "validate", "--state", state, "embedded"); code != 0 {
			t.Errorf("validate embedded = exit %d; want 0 (asked by name)", code)
		}
	})
}
