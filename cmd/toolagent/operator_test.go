package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// buildBinary builds cmd/toolagent into a new temporary directory, as the
// README's tour does (go build -o bin/toolagent ./cmd/toolagent), and
// returns its path.
func buildBinary() (string, error) {
	dir, err := os.MkdirTemp("", "toolagent-bin-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "toolagent")
	if out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput(); err != nil {
		return path, errors.New("go build: " + err.Error() + "\n" + string(out))
	}
	return path, nil
}

var (
	// binaryOnce builds the binary once per test run.
	binaryOnce = sync.OnceValues(buildBinary)
	// binaryAsked is set once something called binaryOnce: TestMain then
	// removes the binary's directory at the end.
	binaryAsked atomic.Bool
)

// removeBinary removes the built binary's directory.
func removeBinary() {
	if binaryAsked.Load() {
		if path, _ := binaryOnce(); path != "" {
			os.RemoveAll(filepath.Dir(path))
		}
	}
}

// builtBinary returns the path of the binary built once per test run.
func builtBinary(t *testing.T) string {
	t.Helper()
	binaryAsked.Store(true)
	path, err := binaryOnce()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// binEnv is the environment the built binary runs with: nothing inherited
// but PATH, a HOME of the test's own, and kv.
func binEnv(t *testing.T, kv ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, kv...)
}

// runBin runs the built binary in dir and returns stdout, stderr and the
// exit code.
func runBin(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(builtBinary(t), args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("toolagent %v: %v", args, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// startBinDaemon starts `toolagent serve` (the built binary) in dir on
// 127.0.0.1:0 with state, and waits for it to record itself in
// STATE/daemon.json and be ready (/readyz: its catalog is loaded). It is
// stopped with SIGTERM at cleanup.
func startBinDaemon(t *testing.T, dir, state string, env []string, args ...string) operator.Info {
	t.Helper()
	info, _ := startBinDaemonLogs(t, dir, state, env, args...)
	return info
}

// startBinDaemonLogs is startBinDaemon that also gives the daemon's log.
func startBinDaemonLogs(t *testing.T, dir, state string, env []string, args ...string) (operator.Info, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(builtBinary(t), append([]string{"serve", "--listen", "127.0.0.1:0", "--state", state}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("the daemon did not stop 30s after SIGTERM\n%s", logs)
		}
	})
	var info operator.Info
	pollUntil(t, "STATE/daemon.json of a ready daemon", func() bool {
		select {
		case <-exited:
			t.Fatalf("the daemon exited early:\n%s", logs)
		default:
		}
		var err error
		info, err = operator.ReadInfo(state)
		if err != nil {
			return false
		}
		resp, err := http.Get(info.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return info, logs
}

// TestOperatorApprovesOnTheEmbeddedDefault is issue 14's trap 2: on the
// embedded default (loopback, no tokens) every caller is anonymous, so
// nobody could approve. The daemon makes an operator token; the CLI on
// the same host finds the daemon and the token in the state directory, a
// call it makes is held with an id, and approving it as the operator runs
// it. Everything through the built binary.
func TestOperatorApprovesOnTheEmbeddedDefault(t *testing.T) {
	t.Parallel()
	proctest.SkipWithoutSandbox(t)
	outside := t.TempDir() // no tools tree anywhere above: the embedded copy
	state := filepath.Join(t.TempDir(), "state")
	env := binEnv(t)
	info := startBinDaemon(t, outside, state, env)
	if !info.Open || info.Tools != host.Embedded || info.PID <= 0 {
		t.Errorf("daemon.json = %+v; want an open daemon serving the embedded tools, with its pid", info)
	}

	tokFile := operator.TokenPath(state)
	fi, err := os.Stat(tokFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("operator token %s: %v %v; want a 0600 file", tokFile, fi, err)
	}
	secret, err := operator.ReadToken(state)
	if err != nil {
		t.Fatal(err)
	}

	target := filepath.Join(state, "files", "made-by-approval")
	out, errOut, code := runBin(t, outside, env, "call", "--state", state, "shell-exec", "cmd=touch "+target)
	var held dispatch.Result
	if err := json.Unmarshal([]byte(out), &held); err != nil || code != exitRefused || held.Status != dispatch.ApprovalRequired || held.ApprovalID == "" {
		t.Fatalf("call touch = exit %d %q %s; want 5, approval_required with an approval id", code, out, errOut)
	}
	if !strings.Contains(held.Suggestion, "toolagent approvals approve "+held.ApprovalID) {
		t.Errorf("hint %q does not name the operator's way to approve", held.Suggestion)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the held call ran before it was approved")
	}

	// Anonymous (the caller) may not approve; a wrong token is refused,
	// not served anonymously.
	d := &liveDaemon{url: info.URL, client: http.DefaultClient}
	if code, _, body := d.approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`); code != http.StatusForbidden {
		t.Errorf("anonymous approve = %d %s; want 403", code, body)
	}
	if code, _, body := d.as("wrong-0123456789abcdef").approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`); code != http.StatusUnauthorized {
		t.Errorf("approve with a wrong token = %d %s; want 401", code, body)
	}

	out, errOut, code = runBin(t, outside, env, "approvals", "approve", "--state", state, held.ApprovalID)
	var a struct {
		Decider string          `json:"decider"`
		Result  dispatch.Result `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil || code != 0 || a.Decider != operator.Name || a.Result.ExitCode != 0 {
		t.Fatalf("approvals approve = exit %d %q %s; want 0, decided by %s, the call run with exit code 0", code, out, errOut, operator.Name)
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("the approved call did not run: %v", err)
	}

	// The operator token is hidden from every tool.
	out, _, _ = runBin(t, outside, env, "call", "--state", state, "shell-exec", "cmd=cat "+tokFile)
	if strings.Contains(out, secret) {
		t.Fatalf("a tool read the operator token:\n%s", out)
	}

	// status, list, show, match ask the daemon.
	for _, args := range [][]string{
		{"status"}, {"list"}, {"show", "git-ops"}, {"match", "show me the last commits"},
	} {
		out, errOut, code := runBin(t, outside, env, append(args, "--state", state)...)
		if code != 0 || !json.Valid([]byte(out)) || !strings.Contains(out, `"revision"`) && !strings.Contains(out, `"candidates"`) {
			t.Errorf("%v = exit %d %q %s; want the daemon's answer", args, code, out, errOut)
		}
	}
	// A tools tree found from the working directory wins over a daemon
	// serving another one, and the command says a daemon runs.
	repo := t.TempDir()
	writeTool(t, filepath.Join(repo, "tools"), "greet", "method: run\nexecutor: shell\nargv: [echo, hi]\nparams_schema: {}\n")
	out, errOut, code = runBin(t, repo, env, "list", "--state", state)
	if code != 0 || !strings.Contains(out, `"tools_tree": "`+filepath.Join(repo, "tools")+`"`) || !strings.Contains(errOut, "--server "+info.URL) {
		t.Errorf("list in a tools repository while a daemon runs = exit %d %s %s; want the repository's tree, and a note naming the daemon", code, out, errOut)
	}
}

// TestCLIAsksTheDaemonAtServer: --server (TOOLAGENT_SERVER) with the
// token in TOOLAGENT_TOKEN; without a token a daemon with tokens refuses
// with exit code 5 and says what to set. A daemon that is gone leaves no
// daemon.json, and status says no daemon runs.
func TestCLIAsksTheDaemonAtServer(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "guarded", guardedTool("run a command after an approval"))
	d := startApprovalDaemon(t, tools)
	state := t.TempDir() // not the daemon's: only --server finds it
	alice := []string{"TOOLAGENT_SERVER=" + d.url, "TOOLAGENT_TOKEN=" + aliceToken}
	out, errOut, code := runCLI(t, alice, "call", "--state", state, "guarded", "cmd=echo from-cli")
	var held dispatch.Result
	if err := json.Unmarshal([]byte(out), &held); err != nil || code != exitRefused || held.ApprovalID == "" {
		t.Fatalf("call via --server = exit %d %q %s; want a held call with an id", code, out, errOut)
	}
	bob := []string{"TOOLAGENT_SERVER=" + d.url, "TOOLAGENT_TOKEN=" + bobToken}
	if out, errOut, code := runCLI(t, bob, "approvals", "list", "--state", state); code != 0 || !strings.Contains(out, held.ApprovalID) {
		t.Errorf("approvals list as bob = exit %d %s %s; want the held call", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, alice, "approvals", "approve", "--state", state, held.ApprovalID); code != exitRefused {
		t.Errorf("alice approving = exit %d %s; want 5 (her role is call)", code, errOut)
	}
	out, errOut, code = runCLI(t, bob, "approvals", "approve", "--state", state, held.ApprovalID)
	if code != 0 || !strings.Contains(out, "from-cli") {
		t.Errorf("bob approving = exit %d %s %s; want 0 and the call's output", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, []string{"TOOLAGENT_SERVER=" + d.url}, "list", "--state", state); code != exitRefused || !strings.Contains(errOut, "TOOLAGENT_TOKEN") {
		t.Errorf("list without a token = exit %d %s; want 5, saying to set TOOLAGENT_TOKEN", code, errOut)
	}

	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, nil, "status", "--state", state); code != exitFailed || !strings.Contains(errOut, "no daemon runs") {
		t.Errorf("status with no daemon = exit %d %s; want 1, saying no daemon runs", code, errOut)
	}
}

// TestDaemonInfoRemovedAtStop: the daemon removes STATE/daemon.json when
// it stops, so no later command talks to a port another process may own.
func TestDaemonInfoRemovedAtStop(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	p := startInProcess(t, nil, []string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json", "--state", state, "--tools", t.TempDir()})
	if _, err := operator.ReadInfo(state); err != nil {
		t.Fatalf("daemon.json while serving: %v", err)
	}
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(operator.InfoPath(state)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("daemon.json after stop: %v; want it removed", err)
	}
}
