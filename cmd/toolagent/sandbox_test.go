package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// runMainEnv makes the test binary run main() instead of the tests, so a
// test can start a real daemon process (and SIGKILL it).
const runMainEnv = "TOOLAGENT_TEST_RUN_MAIN"

// Every test of this package calls t.Parallel first (they mostly wait on
// daemons, sandboxes, git, browsers and node), unless it uses what the
// whole test process shares: its environment (t.Setenv), its working
// directory (t.Chdir), or every process or goroutine below it; those say
// why they do not. A daemon process gets its settings with withEnv.
func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	code := m.Run()
	removeBinary()
	os.Exit(code)
}

// listener counts the connections a loopback TCP server gets.
func listener(t *testing.T) (port int, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nreached\n"))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, conns
}

// TestSandboxHoldsAgainstACaller: a caller with only the call role sends
// a representative command of every bypass class found against the
// default shell policy, through the shipped shell-exec and through a tool
// with no policy at all (every command runs: only the sandbox stands in
// the way). Afterwards nothing outside the grant changed, the network was
// not reached, and no planted secret came back, whatever the verdicts.
// Not parallel: the planted secret is in the test process's own
// environment (t.Setenv), where the in-process daemon runs.
func TestSandboxHoldsAgainstACaller(t *testing.T) {
	const secret = "SECRET-7f3a9c"
	t.Setenv("TOOLAGENT_TEST_PLANTED", secret) // the daemon's own environment
	state, victim, files := proctest.HostDir(t), proctest.HostDir(t), proctest.HostDir(t)
	if err := os.WriteFile(filepath.Join(state, "planted-secret"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "existing"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokensFile := filepath.Join(proctest.HostDir(t), "tokens")
	if err := os.WriteFile(tokensFile, []byte("mallory:call:mallory-"+secret+"\nbob:approve:bob-"+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, conns := listener(t)

	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	putTool(t, tools, "file-write", fileWriteTool(t))
	// The same shell tool without any policy: what the sandbox alone holds.
	putTool(t, tools, "shell-open", testTool("shell-open", `intent: run a command with no policy
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true }
  cwd: { type: string, required: false }
constraints: { timeout_ms: 20000, shell_policy: none }
`))
	d := startDaemon(t, map[string]string{}, "--tools", tools, "--state", state, "--files-root", files, "--tokens-file", tokensFile)
	d.token = "mallory-" + secret

	v := victim
	attacks := []string{
		// secrets
		`tr "\0" "\n" < /proc/$PPID/environ; cat /proc/*/environ`,
		`cat ` + state + `/planted-secret; ls -la ` + state + `; grep -r SECRET ` + state + ` ` + tokensFile,
		`cat ` + tokensFile,
		// dash/bash differences
		`[[ -n $(touch ` + v + `/dbl-bracket) ]]`,
		`(( x = $(touch ` + v + `/arith) ))`,
		`$'\x74ouch' ` + v + `/ansi-c`,
		// an option spelled with an expansion
		`find ` + v + ` -ex${u}ec touch ` + v + `/find-exec \;`,
		`sort --out${u}put=` + v + `/sort-out /etc/hostname`,
		// abbreviated long options
		`sed --in-pl=.bak s/a/b/ ` + v + `/existing`,
		`sort --out=` + v + `/sort-abbrev /etc/hostname`,
		`tar --checkpoint-act=exec='touch ` + v + `/tar-cp' --checkpoint=1 -cf /dev/null /etc/hostname`,
		// options after --
		`env -- touch ` + v + `/env-dashdash`,
		// write/exec options of read-only programs
		`awk 'BEGIN { system("touch ` + v + `/awk") }'`,
		`sort --compress-program=sh -S 1 /etc/services > /dev/null; touch ` + v + `/sort-prog`,
		`tar -I 'sh -c "touch ` + v + `/tar-I"' -cf /dev/null /etc/hostname`,
		// wrappers modelled wrong
		`ionice -t touch ` + v + `/ionice`,
		// the environment
		`BASH_ENV=/dev/stdin bash -c true <<< 'touch ` + v + `/bash-env'`,
		`PS4='$(touch ` + v + `/ps4)' bash -xc true`,
		// the network
		fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d; cat <&3`, port),
		fmt.Sprintf(`curl -s http://127.0.0.1:%d/`, port),
		// two steps: a planted rc file, then an interactive shell there
		`bash -ic true`,
		// processes that try to outlive the call
		`setsid -f bash -c 'exec -a toolagent-escapee-` + secret[7:] + ` sleep 1000'; until pgrep -f ^toolagent-escapee-` + secret[7:] + `; do sleep 0.01; done`,
	}
	// Step one of the two-step chain: file-write is allowed without an
	// approval; the rc file it plants runs read-only below.
	code, res := d.call(t, "file-write", map[string]any{"path": ".bashrc", "content": "touch " + v + "/bashrc\n"})
	if code != http.StatusOK {
		t.Fatalf("file-write .bashrc: %d %+v", code, res)
	}

	var ran int
	for _, tool := range []string{"shell-exec", "shell-open"} {
		for _, cmd := range attacks {
			_, res := d.call(t, tool, map[string]any{"cmd": cmd, "cwd": files})
			if res.Status == "success" || res.Status == "error" || res.Status == "no_data" {
				ran++
			}
			for _, out := range []string{res.Output, res.Stderr, res.Error} {
				if strings.Contains(out, secret) {
					t.Errorf("%s %q: a planted secret came back: %q", tool, cmd, out)
				}
			}
			if res.Status == "approval_required" && !strings.Contains(res.Suggestion, "approv") {
				t.Errorf("%s %q: held without saying how to approve: %+v", tool, cmd, res)
			}
		}
	}
	if ran < len(attacks) {
		t.Errorf("only %d of %d commands ran: the policy-free tool must run every one, so the sandbox is what is tested", ran, 2*len(attacks))
	}
	ents, err := os.ReadDir(victim)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "existing" {
			t.Errorf("a command wrote %s outside its grant", filepath.Join(victim, e.Name()))
		}
	}
	if b, _ := os.ReadFile(filepath.Join(victim, "existing")); string(b) != "a\n" {
		t.Errorf("%s/existing changed to %q", victim, b)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the loopback listener got %d connections from commands without a network grant", n)
	}
	waitFor(t, 30*time.Second, "escaped processes to be gone", func() bool {
		return proctest.CountMarked("toolagent-escapee-"+secret[7:]) == 0
	})
}

// fileWriteTool is the shipped file-write.
func fileWriteTool(t testing.TB) string {
	b, err := os.ReadFile("../../native-repo/tools/file-write/TOOL.hdlp")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSandboxApprovedCallGetsTheDeclaredGrant: an approved shell-exec
// call may write the files root (its declared grant); the same command
// without approval could not, and the approval record shows the grant.
func TestSandboxApprovedCallGetsTheDeclaredGrant(t *testing.T) {
	t.Parallel()
	files := proctest.HostDir(t)
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	d := startDaemon(t, map[string]string{}, "--tools", tools, "--files-root", files, "--allow-self-approval")
	target := filepath.Join(files, "approved.txt")
	code, res := d.call(t, "shell-exec", map[string]any{"cmd": "echo approved > " + target})
	if code != http.StatusAccepted || res.ApprovalID == "" {
		t.Fatalf("a write: %d %+v; want approval_required", code, res)
	}
	code, body := d.request(t, "GET", "/v1/approvals/"+res.ApprovalID, "")
	var ap struct{ Sandbox string }
	if err := json.Unmarshal(body, &ap); err != nil || code != 200 || ap.Sandbox != "write "+files+", network" {
		t.Errorf("GET approval: %d %s; want sandbox %q shown to the approver", code, body, "write "+files+", network")
	}
	code, body = d.request(t, "POST", "/v1/approvals/"+res.ApprovalID, `{"decision":"approve"}`)
	if code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "approved\n" {
		t.Errorf("after approval: %q, %v; want the file written inside the grant (answer %s)", b, err, body)
	}
	if want := `"sandbox":"write ` + files + `, network; limits: `; !strings.Contains(string(body), want) {
		t.Errorf("the approved call's result %s does not state its grant (%s...)", body, want)
	}
}

// TestSandboxSIGKILLedDaemonLeavesNothing: a real daemon process runs a
// tool whose processes try to escape (setsid, a double fork); the daemon
// is killed with SIGKILL; every one of them is gone, long before the
// tool's ten-minute timeout.
// daemonProcess is `toolagent serve` as a real process (the test binary
// running main), so a test can SIGKILL it.
type daemonProcess struct {
	cmd *exec.Cmd
	url string
}

// processDaemon is startDaemonProcess seen as a daemon, so that the
// helpers of in-process daemons (call, status, hook, ...) drive it; env
// (KEY=value) is added to the environment the process inherits.
func processDaemon(t *testing.T, env []string, args ...string) *liveDaemon {
	t.Helper()
	dp := startDaemonProcessCmd(t, withEnv(env...), append([]string{"--state", t.TempDir()}, args...)...)
	return &liveDaemon{url: dp.url, client: &http.Client{}}
}

// withEnv is a startDaemonProcessCmd hook that adds kv (KEY=value) to the
// process's environment, over what it inherits: a test passes the
// daemon's settings this way, not with t.Setenv, and may run in parallel.
func withEnv(kv ...string) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) { cmd.Env = append(cmd.Env, kv...) }
}

// startDaemonProcess starts serve with args on 127.0.0.1:0 and waits until
// it is ready. It is killed at cleanup if still running.
func startDaemonProcess(t *testing.T, args ...string) *daemonProcess {
	t.Helper()
	return startDaemonProcessCmd(t, nil, args...)
}

// startDaemonProcessCmd is startDaemonProcess with a hook that changes
// the command before it starts.
func startDaemonProcessCmd(t *testing.T, hook func(*exec.Cmd), args ...string) *daemonProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	if hook != nil {
		hook(cmd)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				addr <- line.Addr
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	d := &daemonProcess{cmd: cmd}
	select {
	case a := <-addr:
		d.url = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatal("the daemon process did not log listening within 60s")
	}
	waitFor(t, 60*time.Second, "the daemon process to be ready", func() bool {
		resp, err := http.Get(d.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return d
}

// post sends body to path and returns the status and the answer.
func (d *daemonProcess) post(path, body string) (int, string, error) {
	resp, err := http.Post(d.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// kill SIGKILLs the daemon process and reaps it.
func (d *daemonProcess) kill(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.cmd.Wait()
}

// longTool runs its cmd for up to ten minutes, unjudged; with confirm,
// every call needs an approval.
func longTool(confirm bool) string {
	return testTool("long", fmt.Sprintf(`intent: run for a long time
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true }
constraints: { timeout_ms: 600000, shell_policy: none, require_confirm: %v }
`, confirm))
}

func TestSandboxSIGKILLedDaemonLeavesNothing(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "long", longTool(false))
	d := startDaemonProcess(t, "--state", t.TempDir(), "--tools", tools)
	marker := "toolagent-sigkill-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	body := fmt.Sprintf(`{"tool":"long","params":{"cmd":"setsid -f bash -c 'exec -a %[1]s-a sleep 1000'; ( (exec -a %[1]s-b sleep 1000) & ) & exec -a %[1]s-c sleep 1000"}}`, marker)
	var wg sync.WaitGroup
	wg.Go(func() { d.post("/v1/call", body) }) // answers nothing: the daemon dies
	waitFor(t, 60*time.Second, "the tool's three processes to run", func() bool { return proctest.CountMarked(marker) >= 3 })
	d.kill(t)
	waitFor(t, 60*time.Second, "every process of the call to be gone after the daemon's SIGKILL", func() bool {
		return proctest.CountMarked(marker) == 0
	})
	wg.Wait()
}

// TestApprovedCallInterruptedByACrash: an approved call runs when its
// daemon is SIGKILLed; the restarted daemon shows it interrupted (when,
// why), does not run it again, and answers 409 to a new decision.
func TestApprovedCallInterruptedByACrash(t *testing.T) {
	t.Parallel()
	tools, state := t.TempDir(), t.TempDir()
	putTool(t, tools, "long", longTool(true))
	d := startDaemonProcess(t, "--state", state, "--tools", tools, "--allow-self-approval")
	marker := "toolagent-interrupted-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	code, body, err := d.post("/v1/call", fmt.Sprintf(`{"tool":"long","params":{"cmd":"exec -a %s sleep 1000"}}`, marker))
	var held struct {
		ApprovalID string `json:"approval_id"`
	}
	if err != nil || code != http.StatusAccepted || json.Unmarshal([]byte(body), &held) != nil || held.ApprovalID == "" {
		t.Fatalf("the call: %d %s %v; want 202 with an approval id", code, body, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { // runs the call; answers nothing: the daemon dies
		code, body, err := d.post("/v1/approvals/"+held.ApprovalID, `{"decision":"approve"}`)
		t.Logf("approve: %d %s %v", code, body, err)
	})
	waitFor(t, 60*time.Second, "the approved call to run", func() bool { return proctest.CountMarked(marker) > 0 })
	d.kill(t)
	wg.Wait()
	waitFor(t, 60*time.Second, "the call's process to be gone", func() bool { return proctest.CountMarked(marker) == 0 })

	d2 := startDaemonProcess(t, "--state", state, "--tools", tools, "--allow-self-approval")
	resp, err := http.Get(d2.url + "/v1/approvals/" + held.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Status        string    `json:"status"`
		InterruptedAt time.Time `json:"interrupted_at"`
		Note          string    `json:"note"`
	}
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if got.Status != "interrupted" || got.InterruptedAt.IsZero() || !strings.Contains(got.Note, "does not run again") {
		t.Errorf("after the restart the approval is %+v; want interrupted, with when and why", got)
	}
	if n := proctest.CountMarked(marker); n != 0 {
		t.Errorf("the restarted daemon ran the interrupted call again (%d processes)", n)
	}
	if code, body, _ := d2.post("/v1/approvals/"+held.ApprovalID, `{"decision":"approve"}`); code != http.StatusConflict {
		t.Errorf("approving the interrupted call: %d %s; want 409", code, body)
	}
}

// TestServeRefusesWithoutBubblewrap: with the sandbox on (the default)
// and no bubblewrap, the daemon does not start, and says what to install
// and how to start without it.
func TestServeRefusesWithoutBubblewrap(t *testing.T) {
	t.Parallel()
	err := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--state", t.TempDir(), "--sandbox-mechanism", "bubblewrap", "--sandbox-bwrap", "/nonexistent/bwrap"},
		func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "apt-get install bubblewrap") || !strings.Contains(err.Error(), "--sandbox=off") {
		t.Errorf("serve without bubblewrap: %v; want a refusal naming the package and --sandbox=off", err)
	}
}

// TestServeSandboxStatus: /v1/status says whether the sandbox is on and
// which mechanism; --sandbox=off says so and warns at start.
func TestServeSandboxStatus(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			d := startDaemon(t, map[string]string{}, "--tools", t.TempDir(), "--sandbox", mode)
			code, body := d.request(t, "GET", "/v1/status", "")
			var st struct {
				Sandbox struct {
					Active    bool
					Mechanism string
					Warning   string
					Isolation string
				}
			}
			if err := json.Unmarshal(body, &st); err != nil || code != 200 {
				t.Fatalf("GET /v1/status: %d %s", code, body)
			}
			// Root on a kernel with Landlock (as in CI) gets landlock;
			// a daemon that is not root, bubblewrap.
			want := "bubblewrap"
			if os.Geteuid() == 0 {
				want = "landlock"
			}
			if got := st.Sandbox; (mode == "on") != got.Active || (mode == "on" && got.Mechanism != want) || (mode == "off" && got.Warning == "") {
				t.Errorf("--sandbox=%s: status sandbox = %+v; want mechanism %s when on", mode, got, want)
			}
			if got := st.Sandbox.Isolation; (mode == "on") != strings.HasPrefix(got, "per call") {
				t.Errorf("--sandbox=%s: status sandbox.isolation = %q; want per call with the sandbox on, none off", mode, got)
			}
			if warned := strings.Contains(d.logs.String(), "the sandbox is off"); warned != (mode == "off") {
				t.Errorf("--sandbox=%s: start-up warning logged = %v", mode, warned)
			}
		})
	}
}

// BenchmarkServeEcho: `echo hello` through POST /v1/call, with and
// without the sandbox, in one run (compare the two lines' ns/op; the
// figures are in docs/operations.md):
//
//	go test -run '^$' -bench ServeEcho -benchtime 3000x ./cmd/toolagent/
func BenchmarkServeEcho(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run("sandbox="+mode, func(b *testing.B) {
			tools := b.TempDir()
			putTool(b, tools, "shell-exec", shellExec(b))
			d := startDaemon(b, map[string]string{}, "--tools", tools, "--sandbox", mode)
			body := `{"tool":"shell-exec","params":{"cmd":"echo hello"}}`
			call := func() bool {
				resp, err := d.client.Post(d.url+"/v1/call", "application/json", strings.NewReader(body))
				if err != nil {
					b.Error(err)
					return false
				}
				var r struct{ Output string }
				json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
				if r.Output != "hello\n" {
					b.Errorf("output %q", r.Output)
					return false
				}
				return true
			}
			// The steady state: with the sandbox on, the reusable
			// sandboxes grow to the load in the background while the
			// first calls get sandboxes of their own.
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for range 40 {
						if !call() {
							return
						}
					}
				})
			}
			wg.Wait()
			b.SetParallelism(8) // 16 clients on 2 cores, as with wrk -c16
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !call() {
						return
					}
				}
			})
		})
	}
}

// TestSandboxGitOpsCreatesNoRef: git-ops with op branch or tag and a ref
// only lists (its argv adds --list for those ops), runs read-only in the
// sandbox, and the repository keeps its refs.
func TestSandboxGitOpsCreatesNoRef(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	repo := proctest.HostDir(t)
	for _, args := range [][]string{
		{"init", "--quiet", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "--quiet", "--allow-empty", "-m", "one"},
	} {
		if out, err := exec.Command(git, append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	tools := toolsCopy(t)
	for _, op := range []string{"branch", "tag"} {
		dry, _ := callTool(t, tools, "--dry-run", "git-ops", "op="+op, "ref=planted", "repo="+repo)
		if dry.Plan == nil || !slices.Contains(dry.Plan.Argv, "--list") {
			t.Errorf("git-ops op=%s ref=planted would run %v; want it to list (--list)", op, dry.Plan)
		}
		r, _ := callTool(t, tools, "git-ops", "op="+op, "ref=planted", "repo="+repo)
		if r.Status != "no_data" || r.ExitCode != 0 {
			t.Errorf("git-ops op=%s ref=planted = %s exit %d stderr %q; want an empty listing", op, r.Status, r.ExitCode, r.Stderr)
		}
		if !strings.HasPrefix(r.Sandbox, "read-only, no network; limits: ") {
			t.Errorf("git-ops result sandbox = %q; want the read-only grant and its limits", r.Sandbox)
		}
	}
	out, err := exec.Command(git, "-C", repo, "for-each-ref", "--format=%(refname)").Output()
	if err != nil || strings.TrimSpace(string(out)) != "refs/heads/main" {
		t.Errorf("refs after git-ops: %q, %v; want only refs/heads/main", out, err)
	}
	// Listing still works.
	if r, _ := callTool(t, tools, "git-ops", "op=branch", "repo="+repo); r.Status != "success" || !strings.Contains(r.Output, "main") {
		t.Errorf("git-ops op=branch (list): %+v", r)
	}
}

// TestServeLimitHitInResult: where the host gives every sandbox a control
// group, /v1/status says so, and a call that hits its process limit
// reports it in limit_hit and in its error, while an ordinary call of the
// same daemon reports no limit.
func TestServeLimitHitInResult(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "spawner", testTool("spawner", "intent: spawn\nmethod: run\nexecutor: shell\nargv: [sh, -c, \"i=0; while [ $i -lt 64 ]; do sleep 30 & i=$((i+1)); done; echo spawned\"]\nparams_schema: {}\n"))
	putTool(t, tools, "fine", testTool("fine", "intent: fine\nmethod: run\nexecutor: shell\nargv: [echo, fine]\nparams_schema: {}\n"))
	d := startDaemon(t, map[string]string{}, "--tools", tools, "--sandbox-max-procs", "16")
	code, body := d.request(t, "GET", "/v1/status", "")
	var st struct {
		Sandbox struct {
			Enforced string `json:"limits_enforced"`
		}
	}
	if err := json.Unmarshal(body, &st); err != nil || code != 200 {
		t.Fatalf("GET /v1/status: %d %s", code, body)
	}
	if !strings.HasPrefix(st.Sandbox.Enforced, "cgroup") {
		if strings.HasPrefix(st.Sandbox.Enforced, "rlimits only: ") {
			t.Skipf("no control group per sandbox here (%s): run as root where the pids and memory controllers are mounted", st.Sandbox.Enforced)
		}
		t.Fatalf("status sandbox.limits_enforced = %q; want cgroup ... or rlimits only: why", st.Sandbox.Enforced)
	}
	_, res := d.call(t, "spawner", nil)
	if !strings.Contains(res.LimitHit, "process limit") || !strings.Contains(res.Error, "hit a sandbox limit") {
		t.Errorf("64 processes with --sandbox-max-procs 16: limit_hit %q, error %q; want the process limit in both", res.LimitHit, res.Error)
	}
	if _, res := d.call(t, "fine", nil); res.LimitHit != "" || res.Output != "fine\n" {
		t.Errorf("a call within the limits: %+v; want success with no limit_hit", res)
	}
}
