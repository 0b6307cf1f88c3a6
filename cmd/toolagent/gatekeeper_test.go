package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// gatekeeperServer is a `toolagent gatekeeper` running in-process.
type gatekeeperServer struct {
	*inProcess
	url string
}

// startGatekeeper runs `toolagent gatekeeper` with args (which should
// include --listen) and env, and waits for its "listening" log line. It
// is stopped at cleanup. The server sandboxes its commands (the default)
// unless TOOLAGENT_TEST_NO_SANDBOX=1.
func startGatekeeper(t *testing.T, env map[string]string, args ...string) *gatekeeperServer {
	t.Helper()
	full := []string{"gatekeeper", "--log-format", "json"}
	if os.Getenv(proctest.NoSandboxEnv) == "1" {
		full = append(full, "--sandbox=off")
	}
	p := startInProcess(t, env, append(full, args...))
	return &gatekeeperServer{inProcess: p, url: "http://" + p.addr}
}

// toolState is GET /v1/tools/{name}: the fields these tests read.
type toolState struct {
	Status catalog.Status `json:"status"`
	Reason string         `json:"reason"`
}

func (d *liveDaemon) tool(t testing.TB, name string) toolState {
	t.Helper()
	code, b := d.request(t, "GET", "/v1/tools/"+name, "")
	var st toolState
	if code != 200 || json.Unmarshal(b, &st) != nil {
		t.Fatalf("GET /v1/tools/%s = %d %s", name, code, b)
	}
	return st
}

// waitStatus polls GET /v1/tools/{name} until the tool has status want.
func (d *liveDaemon) waitStatus(t testing.TB, name string, want catalog.Status) toolState {
	t.Helper()
	var st toolState
	pollUntil(t, fmt.Sprintf("tool %s to be %s", name, want), func() bool {
		st = d.tool(t, name)
		return st.Status == want
	})
	return st
}

// listed returns the names GET path lists in its "tools" array.
func (d *liveDaemon) listed(t testing.TB, path string) []string {
	t.Helper()
	code, b := d.request(t, "GET", path, "")
	var body struct {
		Tools []struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if code != 200 || json.Unmarshal(b, &body) != nil {
		t.Fatalf("GET %s = %d %s", path, code, b)
	}
	var names []string
	for _, tl := range body.Tools {
		names = append(names, tl.Name+tl.Function.Name)
	}
	return names
}

// example returns the TOOL.hdlp of examples/<executor>/tools/<name>.
func example(t testing.TB, executor, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", executor, "tools", name, "TOOL.hdlp"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const gatekeeperTestToken = "gatekeeper-test-token-0123456789"

// TestServeGatekeeper runs the seed's shell-exec example (executor
// gatekeeper) through the daemon's HTTP API against a real `toolagent
// gatekeeper` in-process; then stops that server (its tools turn failed
// within a health period, the other target's tool stays enabled) and
// starts it again on the same address (they come back), with no restart
// of the daemon.
func TestServeGatekeeper(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TOOLAGENT_GATEKEEPER_TOKEN": gatekeeperTestToken}
	primary := startGatekeeper(t, env, "--listen", "127.0.0.1:0")
	backup := startGatekeeper(t, env, "--listen", "127.0.0.1:0", "--allow", "echo")

	tools := t.TempDir()
	putTool(t, tools, "shell-exec", example(t, "gatekeeper", "shell-exec"))
	putTool(t, tools, "disk-usage", example(t, "gatekeeper", "disk-usage"))
	putTool(t, tools, "backup-echo", testTool("backup-echo", "intent: echo a message on the backup host\nmethod: run\nexecutor: gatekeeper\n"+
		"target: backup\nargv: [echo, \"{msg}\"]\nparams_schema:\n  msg: { type: string, required: true, description: what to echo }\n"))
	cfg := writeConfig(t, "gatekeeper:\n  targets:\n    backup:\n      url: "+backup.url+"\n      token_env: BACKUP_GATEKEEPER_TOKEN\n")
	d := startDaemon(t, map[string]string{
		"TOOLAGENT_GATEKEEPER_URL":   primary.url,
		"TOOLAGENT_GATEKEEPER_TOKEN": gatekeeperTestToken,
		"BACKUP_GATEKEEPER_TOKEN":    gatekeeperTestToken,
	}, "--tools", tools, "--config", cfg, "--health-schedule", "@every 1s")

	// du's path lies outside /tmp, which is private in the sandbox (the
	// checkout may be under /tmp).
	here := proctest.HostDir(t)
	calls := []struct {
		tool    string
		params  map[string]any
		wantOut string
	}{
		{"shell-exec", map[string]any{"cmd": "echo hello"}, "hello\n"},
		{"disk-usage", map[string]any{"path": here}, here + "\n"},
		{"backup-echo", map[string]any{"msg": "hi; rm -rf /"}, "hi; rm -rf /\n"},
	}
	for _, c := range calls {
		code, res := d.call(t, c.tool, c.params)
		if code != 200 || res.Status != dispatch.Success || !strings.HasSuffix(res.Output, c.wantOut) || res.Executor != "gatekeeper" {
			t.Errorf("call %s %v = %d %s %q (executor %s, error %q); want 200 success with output ending %q from executor gatekeeper",
				c.tool, c.params, code, res.Status, res.Output, res.Executor, res.Error, c.wantOut)
		}
	}
	if code, res := d.call(t, "shell-exec", map[string]any{"cmd": "echo oops >&2; exit 3"}); code != 200 || res.Status != dispatch.Error || res.ExitCode != 3 || res.Stderr != "oops\n" {
		t.Errorf("call shell-exec exit 3 = %d %s exit %d stderr %q; want 200 error, exit 3, stderr %q", code, res.Status, res.ExitCode, res.Stderr, "oops\n")
	}

	// The main target goes away: its tools fail, backup's tool does not.
	if err := primary.stop(t); err != nil {
		t.Fatalf("gatekeeper run() = %v after cancel; want nil", err)
	}
	st := d.waitStatus(t, "shell-exec", catalog.Failed)
	if !strings.Contains(st.Reason, "gatekeeper target main") {
		t.Errorf("shell-exec reason = %q; want it to name gatekeeper target main", st.Reason)
	}
	if st := d.tool(t, "disk-usage"); st.Status != catalog.Failed {
		t.Errorf("disk-usage (target main) = %s; want failed with shell-exec", st.Status)
	}
	if st := d.tool(t, "backup-echo"); st.Status != catalog.Enabled {
		t.Errorf("backup-echo (target backup) = %s %q; want enabled: only main failed", st.Status, st.Reason)
	}
	code, res := d.call(t, "shell-exec", map[string]any{"cmd": "echo hello"})
	if code != http.StatusConflict || res.Status != dispatch.Disabled || !strings.Contains(res.Error, "gatekeeper target main") {
		t.Errorf("call shell-exec while main is down = %d %s %q; want 409 disabled naming the target", code, res.Status, res.Error)
	}
	if got := d.listed(t, "/v1/tools"); strings.Join(got, ",") != "backup-echo" {
		t.Errorf("GET /v1/tools while main is down lists %v; want [backup-echo]", got)
	}

	// The same address comes back: so do its tools.
	startGatekeeper(t, env, "--listen", primary.addr)
	d.waitStatus(t, "shell-exec", catalog.Enabled)
	d.waitStatus(t, "disk-usage", catalog.Enabled)
	if code, res := d.call(t, "shell-exec", map[string]any{"cmd": "echo hello"}); code != 200 || res.Status != dispatch.Success || res.Output != "hello\n" {
		t.Errorf("call shell-exec after main came back = %d %s %q %q; want 200 success %q", code, res.Status, res.Output, res.Error, "hello\n")
	}
	if !strings.Contains(d.logs.String(), `"msg":"executor unhealthy; its tools are failed"`) || !strings.Contains(d.logs.String(), `"msg":"executor healthy again; its tools are enabled"`) {
		t.Errorf("daemon log lacks the health change lines:\n%s", d.logs)
	}
	if strings.Contains(d.logs.String(), gatekeeperTestToken) || strings.Contains(primary.logs.String(), gatekeeperTestToken) {
		t.Errorf("a log holds the gatekeeper token")
	}
}

// TestGatekeeperCommand checks the subcommand's start-up refusals and its
// token check.
func TestGatekeeperCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no token off loopback", nil, []string{"--listen", "0.0.0.0:0"}, "refusing to listen"},
		{"bad digest", nil, []string{"--listen", "127.0.0.1:0", "--token-sha256", "xyz"}, "not a hex SHA-256 digest"},
		{"missing token file", nil, []string{"--listen", "127.0.0.1:0", "--token-file", filepath.Join(t.TempDir(), "none")}, "token file"},
		{"arguments", nil, []string{"extra"}, "takes no arguments"},
		{"bad sandbox mode", nil, []string{"--listen", "127.0.0.1:0", "--sandbox", "maybe"}, "--sandbox: want on or off"},
		{"bad sandbox mode from env", map[string]string{"TOOLAGENT_SANDBOX": "maybe"}, []string{"--listen", "127.0.0.1:0"}, "--sandbox: want on or off"},
		{"sandbox cannot start", nil, []string{"--listen", "127.0.0.1:0", "--sandbox-mechanism", "bubblewrap", "--sandbox-bwrap", "/nonexistent/bwrap"}, "/nonexistent/bwrap"},
	}
	for _, tc := range tests {
		err := run(t.Context(), append([]string{"gatekeeper"}, tc.args...), func(k string) string { return tc.env[k] }, strings.NewReader(""), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: gatekeeper %q = %v; want an error containing %q", tc.name, tc.args, err, tc.want)
		}
	}

	g := startGatekeeper(t, map[string]string{"TOOLAGENT_GATEKEEPER_TOKEN": gatekeeperTestToken}, "--listen", "127.0.0.1:0")
	for _, tc := range []struct {
		token string
		want  int
	}{{gatekeeperTestToken, 200}, {"wrong-token-wrong-token", 401}} {
		req, _ := http.NewRequest("POST", g.url+"/exec", strings.NewReader(`{"cmd":"echo hi"}`))
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("POST /exec with token %.5s… = %d %s; want %d", tc.token, resp.StatusCode, b, tc.want)
		}
	}
}

// TestGatekeeperSandbox: `toolagent gatekeeper` runs its commands in the
// sandbox by default: a command cannot read the token file, and sees
// neither the token nor the server's processes; with --sandbox=off it
// says so at start.
func TestGatekeeperSandbox(t *testing.T) {
	t.Parallel()
	proctest.SkipWithoutSandbox(t)
	// The token file must lie outside /tmp, which a sandbox replaces
	// anyway.
	dir := proctest.HostDir(t)
	tokenFile := filepath.Join(dir, "gk.token")
	const fileToken = "gatekeeper-file-token-0123456789"
	if err := os.WriteFile(tokenFile, []byte(fileToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGatekeeper(t, map[string]string{"TOOLAGENT_GATEKEEPER_TOKEN": gatekeeperTestToken}, "--listen", "127.0.0.1:0", "--token-file", tokenFile)
	if !strings.Contains(g.logs.String(), `"sandbox":"bubblewrap`) && !strings.Contains(g.logs.String(), `"sandbox":"Landlock`) {
		t.Errorf("the listening line does not name the sandbox:\n%s", g.logs)
	}
	body, _ := json.Marshal(map[string]string{"cmd": "cat " + tokenFile + " /proc/1/environ; ls /proc"})
	req, _ := http.NewRequest("POST", g.url+"/exec", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+fileToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Stdout, Stderr string
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /exec = %d, %v", resp.StatusCode, err)
	}
	if strings.Contains(out.Stdout, fileToken) || strings.Contains(out.Stdout, gatekeeperTestToken) {
		t.Errorf("a sandboxed command read a token:\n%s", out.Stdout)
	}
	if strings.Contains(out.Stdout, "\n"+strconv.Itoa(os.Getpid())+"\n") {
		t.Errorf("a sandboxed command sees the server's process %d in /proc:\n%s", os.Getpid(), out.Stdout)
	}

	off := startGatekeeper(t, nil, "--listen", "127.0.0.1:0", "--sandbox=off")
	if !strings.Contains(off.logs.String(), `"msg":"the sandbox is off`) || !strings.Contains(off.logs.String(), `"sandbox":"off"`) {
		t.Errorf("--sandbox=off is not logged as a warning:\n%s", off.logs)
	}
}
