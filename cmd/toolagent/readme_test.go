package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/operator"
)

// readmeBlock returns the command lines (no blank or comment lines) of the
// first ```sh block after heading in README.md.
func readmeBlock(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q", heading)
	}
	text = text[i:]
	start := strings.Index(text, "```sh\n")
	end := strings.Index(text[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatalf("README.md: no ```sh block after %q", heading)
	}
	var lines []string
	for _, l := range strings.Split(text[start+6:start+6+end], "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// tourStep is what the tour test expects of one README command: matched
// by a part of its line, the CLI's exit code, and text its output holds.
type tourStep struct {
	line string // a part of the command line, unique in the tour
	code int
	out  string
}

// TestReadmeTour runs every command of the README's tour, in order, as a
// newcomer would: from the checkout's root, with a HOME of its own, the
// binary built by `go build -o bin/toolagent ./cmd/toolagent` (as
// builtBinary does). A command the table below does not know, or a step
// the README lost, fails the test, so the README cannot drift from the
// program. What it changes: bin/toolagent is the built binary, /tmp/mytools
// a temporary directory, `serve` listens on a free port (the curl lines get
// it instead of 8765) and ID is the approval id the step before printed.
//
// It runs twice: without a daemon (the first command's was stopped), and
// with the first command's daemon still running on the default state
// directory. Then every command that asks a daemon says which one on
// stderr, the tour's `serve` refuses naming that daemon's address and
// pid, and the rest of the tour asks it; without one, no command claims to
// ask a daemon before the tour's own `serve`.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	t.Run("without the first daemon", func(t *testing.T) { t.Parallel(); readmeTour(t, false) })
	t.Run("with the first daemon running", func(t *testing.T) { t.Parallel(); readmeTour(t, true) })
}

func readmeTour(t *testing.T, firstRuns bool) {
	steps := []tourStep{
		{"go build -o bin/toolagent ./cmd/toolagent", 0, ""},
		{"bin/toolagent list", 0, `"shell-exec"`},
		{"bin/toolagent show shell-exec", 0, `"params_schema"`},
		{"cmd='echo hello'", 0, `"output": "hello\n"`},
		{"cmd='ls /nonexistent'", exitFailed, `"exit_code": 2`},
		{"git-ops op=log max_count=5", 0, `"status": "success"`},
		{`"content":"hi\n"}' file-write`, 0, `"status"`},
		{`{"path": notes}' file-write`, cli.ExitBadJSON, ""},
		{"--dry-run shell-exec", 0, `"status": "dry_run"`},
		{"--follow shell-exec", 0, "1\n2\n3\n{"},
		{"cmd='touch x'", exitRefused, `"approval_id"`},
		{"approvals approve ID   # you asked", 0, `"decision_reason": "confirmed by operator (own request)"`},
		{"call deploy-app", exitNotFound, `"not_found"`},
		{`match "查看最近的提交记录"`, 0, `"git-ops"`},
		{"mkdir -p /tmp/mytools", 0, ""},
		{"new --tools /tmp/mytools", 0, "created"},
		{"validate /tmp/mytools", 0, "1 tool folder, 1 callable, 0 problems"},
		{"hello-world message=hi", 0, `"status": "success"`},
		{"bin/toolagent serve", 0, ""},
		{"bin/toolagent status", 0, `"listen": "127.0.0.1:`},
		{`"cmd":"echo hello"`, 0, `"status":"success"`},
		{`"intent":"show me the last commits"`, 0, `"candidates"`},
		{"cmd='touch y'", exitRefused, `"approval_id"`},
		{"bin/toolagent approvals approve ID", 0, `"decider": "operator"`},
	}
	lines := readmeBlock(t, "## A five-minute tour")
	if len(lines) != len(steps) {
		t.Errorf("the tour has %d commands, the test knows %d: update one of them\n%s", len(lines), len(steps), strings.Join(lines, "\n"))
	}
	bin := builtBinary(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	home, mytools := t.TempDir(), filepath.Join(t.TempDir(), "mytools")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "USER=newcomer"}
	state := filepath.Join(home, ".local", "state", "toolagent")
	id, daemonURL := "", ""
	var first operator.Info
	if firstRuns {
		// `go run ./cmd/toolagent serve` is this binary's serve
		// (TestReadmeTwoCommands runs it as written).
		first = startBinDaemon(t, root, state, env)
		daemonURL = first.URL
	}
	for i, line := range lines {
		if i >= len(steps) {
			break
		}
		st := steps[i]
		if !strings.Contains(line, st.line) {
			t.Fatalf("tour command %d is %q; the test expects one with %q", i+1, line, st.line)
		}
		switch {
		case strings.HasPrefix(line, "go build"):
			continue // builtBinary ran exactly this
		case line == "bin/toolagent serve" && !firstRuns:
			info := startBinDaemon(t, root, state, env)
			daemonURL = info.URL
			continue
		case line == "bin/toolagent serve":
			// Next to the first daemon: it names that one and stops,
			// before it listens (so the free port it is given is moot).
			c := exec.Command(bin, "serve", "--listen", "127.0.0.1:0")
			c.Dir, c.Env = root, env
			out, _ := c.CombinedOutput()
			want := "a toolagent daemon already listens on " + strings.TrimPrefix(first.URL, "http://") + " (pid " + strconv.Itoa(first.PID) + ") with this state directory"
			if c.ProcessState.ExitCode() != exitFailed || !strings.Contains(string(out), want) {
				t.Errorf("serve next to the first daemon: exit %d\n%s\nwant exit 1 and %q", c.ProcessState.ExitCode(), out, want)
			}
			if _, err := os.Stat(filepath.Join(state, "approvals")); err != nil {
				t.Errorf("the first daemon's approvals directory: %v", err)
			}
			continue
		}
		cmd := strings.ReplaceAll(line, "bin/toolagent", bin)
		cmd = strings.ReplaceAll(cmd, "/tmp/mytools", mytools)
		if daemonURL != "" {
			cmd = strings.ReplaceAll(cmd, "localhost:8765", strings.TrimPrefix(daemonURL, "http://"))
		}
		if strings.Contains(cmd, " ID") {
			if id == "" {
				t.Fatalf("tour command %q needs an approval id, and no step before printed one", line)
			}
			cmd = strings.Replace(cmd, " ID", " "+id, 1)
		}
		c := exec.Command("bash", "-c", cmd)
		c.Dir, c.Env = root, env
		var stderr strings.Builder
		c.Stderr = &stderr
		out, err := c.Output()
		code := c.ProcessState.ExitCode()
		if err != nil && code == 0 {
			t.Fatalf("%s: %v", line, err)
		}
		if firstRuns && st.code == 0 && strings.Contains(line, "# you asked") {
			// An open daemon's callers are anonymous: its operator
			// decides a call they did not ask for themselves.
			st.out = `"decider": "operator"`
		}
		if code != st.code || !strings.Contains(string(out), st.out) {
			t.Errorf("tour: %s\n= exit %d, stdout:\n%s\nstderr: %s\nwant exit %d and output holding %q", line, code, out, stderr.String(), st.code, st.out)
		}
		// Which daemon answers is said, and only when one does.
		asks := strings.HasPrefix(line, "bin/toolagent ") && !strings.Contains(line, "--tools") && !strings.Contains(line, " validate ") && st.code != cli.ExitBadJSON
		said := strings.Contains(stderr.String(), "toolagent: asking the daemon at ")
		switch {
		case asks && daemonURL != "" && !strings.Contains(stderr.String(), "toolagent: asking the daemon at "+daemonURL+" (pid "):
			t.Errorf("tour: %s\nasks the daemon at %s without saying so on stderr:\n%s", line, daemonURL, stderr.String())
		case daemonURL == "" && said:
			t.Errorf("tour: %s\nno daemon runs, yet stderr says one is asked:\n%s", line, stderr.String())
		}
		if line == "bin/toolagent status" && (!strings.Contains(string(out), `"listen": "`+strings.TrimPrefix(daemonURL, "http://")+`"`) || !strings.Contains(string(out), `"total": 5`)) {
			t.Errorf("tour: status names no listen address %s or no tool counts (5 shipped tools):\n%s", daemonURL, out)
		}
		if st.code == cli.ExitBadJSON && !strings.Contains(stderr.String(), "not valid JSON at byte 10 (line 1, column 11)") {
			t.Errorf("tour: %s\nstderr %q: want where the JSON broke", line, stderr.String())
		}
		var held struct {
			ApprovalID string `json:"approval_id"`
		}
		if json.Unmarshal(out, &held) == nil && held.ApprovalID != "" {
			id = held.ApprovalID
		}
	}
}

// TestReadmeTwoCommands: the README's first command starts the daemon on
// its embedded default, as written (`go run ./cmd/toolagent serve`), on
// loopback; the second is the test command CI runs (.ci/run runs it, and
// this test checks that it does).
func TestReadmeTwoCommands(t *testing.T) {
	t.Parallel()
	lines := readmeBlock(t, "## The two commands")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "go run ./cmd/toolagent serve") || !strings.HasPrefix(lines[1], "go test -race ./...") {
		t.Fatalf("the two commands are %q; the test knows `go run ./cmd/toolagent serve` and `go test -race ./...`", lines)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "go test -race") || !strings.Contains(string(ci), "./...") {
		t.Errorf(".ci/run does not run the README's test command %q", lines[1])
	}
	if testing.Short() {
		t.Skip("-short: not starting `go run ./cmd/toolagent serve`")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	builtBinary(t) // warms the build cache go run uses
	state := t.TempDir()
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GOCACHE=" + goEnv(t, "GOCACHE"), "GOPATH=" + goEnv(t, "GOPATH"), "GOFLAGS=" + os.Getenv("GOFLAGS")}
	cmd := exec.Command("go", "run", "./cmd/toolagent", "serve", "--listen", "127.0.0.1:0", "--state", state)
	cmd.Dir, cmd.Env = root, env
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	// go run's child gets the signal through the process group.
	cmd.SysProcAttr = newProcessGroup()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() {
		killGroup(cmd.Process.Pid)
		<-done
	}()
	pollUntilLong(t, "the daemon started by go run to record itself", func() bool {
		select {
		case <-done:
			t.Fatalf("go run ./cmd/toolagent serve exited:\n%s", logs)
		default:
		}
		info, err := operator.ReadInfo(state)
		if err != nil || info.Tools != filepath.Join(root, "native-repo", "tools") {
			return false
		}
		resp, err := httpClient().Get(info.URL + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func goEnv(t *testing.T, name string) string {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func newProcessGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends SIGTERM to the process group pid leads.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGTERM) }

func httpClient() *http.Client { return &http.Client{Timeout: 5 * time.Second} }

// pollUntilLong is pollUntil with room for a compile on a loaded machine.
func pollUntilLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
