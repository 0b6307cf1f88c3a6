package gatekeeper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/gatekeeper"
	server "github.com/toolagent/toolagent/internal/gatekeeper"
	"github.com/toolagent/toolagent/internal/grant"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

const token = "s3cret-token-value"

// seedTool parses the seed's shell-exec example exactly as shipped in
// examples/gatekeeper, so the test runs the definition users copy.
func seedTool(t *testing.T) *hldp.Tool {
	t.Helper()
	file := filepath.Join("..", "..", "..", "examples", "gatekeeper", "tools", "shell-exec", hldp.FileName)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tool, err := hldp.Parse(file, data)
	if err != nil {
		t.Fatalf("Parse(%s) = %v", file, err)
	}
	return tool
}

// withLimits returns a copy of tool with other constraints.
func withLimits(tool *hldp.Tool, timeout time.Duration, maxOut int64) *hldp.Tool {
	c := *tool
	if timeout > 0 {
		c.Constraints.Timeout = timeout
	}
	if maxOut > 0 {
		c.Constraints.MaxOutputBytes = maxOut
	}
	return &c
}

// startServer runs the real gatekeeper handler on a loopback httptest
// server; the audit log goes to the returned buffer.
func startServer(t *testing.T, opts server.Options) (*httptest.Server, *syncBuffer) {
	t.Helper()
	if opts.Tokens == nil && opts.TokenSHA256 == nil {
		opts.Tokens = []string{token}
	}
	if opts.Grace == 0 {
		opts.Grace = 200 * time.Millisecond
	}
	logs := new(syncBuffer)
	srv := httptest.NewServer(server.NewHandler(opts, slog.New(slog.NewJSONHandler(logs, nil))))
	t.Cleanup(srv.Close)
	return srv, logs
}

func call(t *testing.T, ex *gatekeeper.Executor, tool *hldp.Tool, params map[string]any) (executors.Outcome, error) {
	t.Helper()
	p, err := tool.CheckParams(params)
	if err != nil {
		t.Fatalf("CheckParams(%v) = %v", params, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), tool.Constraints.Timeout+5*time.Second)
	defer cancel()
	return ex.Execute(ctx, executors.Request{Tool: tool, Params: p, Rev: "test-rev"})
}

func TestSeedShellExecEndToEnd(t *testing.T) {
	srv, logs := startServer(t, server.Options{})
	ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: token}}})
	tool := seedTool(t)
	if err := ex.Check(tool); err != nil {
		t.Fatalf("Check(seed shell-exec) = %v", err)
	}
	if err := ex.Health(t.Context()); err != nil {
		t.Fatalf("Health() = %v", err)
	}

	tests := []struct {
		name         string
		cmd          string
		wantOut      string
		wantStderr   string // substring
		wantExitCode int
	}{
		{name: "echo", cmd: "echo hello", wantOut: "hello\n"},
		{name: "missing file", cmd: "ls /nonexistent", wantStderr: "/nonexistent", wantExitCode: 2},
		{name: "exit code and both streams", cmd: "echo out; echo err >&2; exit 7", wantOut: "out\n", wantStderr: "err", wantExitCode: 7},
		{name: "minimal environment", cmd: "echo \"$PATH\"", wantOut: "/usr/local/bin:/usr/bin:/bin\n"},
		{name: "non-UTF-8 output survives", cmd: `printf '\377\376'`, wantOut: "\xff\xfe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := call(t, ex, tool, map[string]any{"cmd": tt.cmd})
			if err != nil {
				t.Fatalf("Execute(%q) error = %v", tt.cmd, err)
			}
			if string(out.Output) != tt.wantOut || out.ExitCode != tt.wantExitCode || !strings.Contains(string(out.Stderr), tt.wantStderr) {
				t.Errorf("Execute(%q) = output %q, exit %d, stderr %q; want %q, %d, stderr containing %q",
					tt.cmd, out.Output, out.ExitCode, out.Stderr, tt.wantOut, tt.wantExitCode, tt.wantStderr)
			}
			if out.TimedOut || out.Truncated {
				t.Errorf("Execute(%q) TimedOut=%v Truncated=%v, want false", tt.cmd, out.TimedOut, out.Truncated)
			}
		})
	}

	t.Run("cwd", func(t *testing.T) {
		dir := t.TempDir()
		out, err := call(t, ex, tool, map[string]any{"cmd": "pwd", "cwd": dir})
		if err != nil || strings.TrimSpace(string(out.Output)) != dir {
			t.Errorf("Execute(pwd, cwd=%s) = %q, %v", dir, out.Output, err)
		}
	})

	t.Run("audit line has a hash, not the command or the token", func(t *testing.T) {
		const secretCmd = "echo do-not-log-me"
		if _, err := call(t, ex, tool, map[string]any{"cmd": secretCmd}); err != nil {
			t.Fatal(err)
		}
		log := logs.String()
		if strings.Contains(log, "do-not-log-me") || strings.Contains(log, token) {
			t.Errorf("audit log holds the command text or the token:\n%s", log)
		}
		if !strings.Contains(log, `"cmd_sha256"`) || !strings.Contains(log, `"tool":"shell-exec"`) || !strings.Contains(log, `"rev":"test-rev"`) {
			t.Errorf("audit log lacks cmd_sha256/tool/rev:\n%s", log)
		}
	})
}

func TestTimeout(t *testing.T) {
	srv, _ := startServer(t, server.Options{})
	ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: token}}})
	tool := withLimits(seedTool(t), 300*time.Millisecond, 0)
	start := time.Now()
	out, err := call(t, ex, tool, map[string]any{"cmd": "echo started; sleep 30"})
	if err != nil {
		t.Fatalf("Execute(sleep 30) error = %v, want an outcome", err)
	}
	if !out.TimedOut || string(out.Output) != "started\n" || out.ExitCode == 0 {
		t.Errorf("Execute(sleep 30) = TimedOut %v, output %q, exit %d; want true, %q, non-zero", out.TimedOut, out.Output, out.ExitCode, "started\n")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Execute(sleep 30) took %s; the server did not kill it at the timeout", d)
	}
}

func TestServerClampsTimeout(t *testing.T) {
	srv, _ := startServer(t, server.Options{MaxTimeout: 300 * time.Millisecond})
	ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: token}}})
	out, err := call(t, ex, seedTool(t), map[string]any{"cmd": "sleep 30"}) // tool asks for 30 s
	if err != nil || !out.TimedOut {
		t.Errorf("Execute(sleep 30) with server MaxTimeout 300ms = TimedOut %v, %v; want true, nil", out.TimedOut, err)
	}
}

func TestOutputCap(t *testing.T) {
	tests := []struct {
		name      string
		serverMax int64
		toolMax   int64
		wantLen   int
	}{
		{name: "tool cap", toolMax: 100, wantLen: 100},
		{name: "server cap below tool cap", serverMax: 50, toolMax: 100, wantLen: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := startServer(t, server.Options{MaxOutput: tt.serverMax})
			ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: token}}})
			tool := withLimits(seedTool(t), 0, tt.toolMax)
			out, err := call(t, ex, tool, map[string]any{"cmd": "head -c 5000 /dev/zero | tr '\\0' x"})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Output) != tt.wantLen || !out.Truncated || out.OutputBytes != 5000 {
				t.Errorf("Execute(5000 bytes) = %d bytes, Truncated %v, OutputBytes %d; want %d, true, 5000", len(out.Output), out.Truncated, out.OutputBytes, tt.wantLen)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	srv, _ := startServer(t, server.Options{})
	tool := seedTool(t)

	t.Run("wrong token", func(t *testing.T) {
		ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: "wrong"}}})
		_, err := call(t, ex, tool, map[string]any{"cmd": "echo hello"})
		if !errors.Is(err, gatekeeper.ErrUnauthorized) {
			t.Errorf("Execute with a wrong token = %v, want ErrUnauthorized", err)
		}
		if err != nil && strings.Contains(err.Error(), "wrong") {
			t.Errorf("error %q holds the token", err)
		}
		if err := ex.Health(t.Context()); !errors.Is(err, gatekeeper.ErrUnauthorized) {
			t.Errorf("Health with a wrong token = %v, want ErrUnauthorized", err)
		}
	})
	t.Run("no token", func(t *testing.T) {
		ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL}}})
		if _, err := call(t, ex, tool, map[string]any{"cmd": "echo hello"}); !errors.Is(err, gatekeeper.ErrUnauthorized) {
			t.Errorf("Execute without a token = %v, want ErrUnauthorized", err)
		}
	})
	t.Run("server closed", func(t *testing.T) {
		gone := httptest.NewServer(http.NotFoundHandler())
		url := gone.URL
		gone.Close()
		ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: url, Token: token}}})
		_, err := call(t, ex, tool, map[string]any{"cmd": "echo hello"})
		if !errors.Is(err, gatekeeper.ErrUnreachable) {
			t.Errorf("Execute against a closed server = %v, want ErrUnreachable", err)
		}
		if err := ex.Health(t.Context()); !errors.Is(err, gatekeeper.ErrUnreachable) || !strings.Contains(err.Error(), "main") {
			t.Errorf("Health against a closed server = %v, want ErrUnreachable naming target main", err)
		}
	})
	t.Run("program cannot start", func(t *testing.T) {
		ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: token}}})
		_, err := call(t, ex, tool, map[string]any{"cmd": "true", "cwd": "/nonexistent-dir"})
		var re *gatekeeper.RemoteError
		if !errors.As(err, &re) || re.Status != http.StatusUnprocessableEntity || !strings.Contains(re.Message, "nonexistent-dir") {
			t.Errorf("Execute with a missing cwd = %v, want RemoteError 422 naming the directory", err)
		}
	})
	t.Run("not a gatekeeper", func(t *testing.T) {
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		}))
		defer other.Close()
		ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: other.URL, Token: token}}})
		_, err := call(t, ex, tool, map[string]any{"cmd": "echo hello"})
		var re *gatekeeper.RemoteError
		if !errors.As(err, &re) || re.Status != http.StatusBadGateway || !strings.Contains(re.Message, "bad gateway") {
			t.Errorf("Execute against a proxy error = %v, want RemoteError 502 with the body", err)
		}
	})
}

func TestTargets(t *testing.T) {
	srvA, _ := startServer(t, server.Options{Env: []string{"WHO=alpha"}})
	srvB, _ := startServer(t, server.Options{Tokens: []string{"token-b"}, Env: []string{"WHO=beta"}})
	ex := gatekeeper.New(gatekeeper.Options{
		Targets: map[string]gatekeeper.Target{
			"alpha": {URL: srvA.URL, Token: token},
			"beta":  {URL: srvB.URL, Token: "token-b"},
		},
		Default: "alpha",
	})
	seed := seedTool(t)
	tests := []struct {
		target string
		want   string
	}{
		{target: "", want: "alpha\n"},
		{target: "alpha", want: "alpha\n"},
		{target: "beta", want: "beta\n"},
	}
	for _, tt := range tests {
		tool := *seed
		tool.Ext = &hldp.Ext{Target: tt.target}
		out, err := call(t, ex, &tool, map[string]any{"cmd": "echo $WHO"})
		if err != nil || string(out.Output) != tt.want {
			t.Errorf("Execute(target %q) = %q, %v; want %q", tt.target, out.Output, err, tt.want)
		}
	}

	unknown := *seed
	unknown.Ext = &hldp.Ext{Target: "gamma"}
	err := ex.Check(&unknown)
	if !errors.Is(err, executors.ErrNotConfigured) || !strings.Contains(err.Error(), "alpha, beta") || !strings.Contains(err.Error(), "gamma") {
		t.Errorf("Check(target gamma) = %v, want ErrNotConfigured naming gamma and alpha, beta", err)
	}
	if _, err := call(t, ex, &unknown, map[string]any{"cmd": "true"}); !errors.Is(err, executors.ErrRefused) {
		t.Errorf("Execute(target gamma) = %v, want ErrRefused", err)
	}

	srvB.Close()
	err = ex.Health(t.Context())
	if !errors.Is(err, gatekeeper.ErrUnreachable) || !strings.Contains(err.Error(), "beta") || strings.Contains(err.Error(), "target alpha") {
		t.Errorf("Health with beta down = %v, want ErrUnreachable naming beta only", err)
	}
}

func TestNotConfigured(t *testing.T) {
	ex := gatekeeper.New(gatekeeper.Options{})
	if err := ex.Health(t.Context()); !errors.Is(err, executors.ErrNotConfigured) {
		t.Errorf("Health() with no targets = %v, want ErrNotConfigured", err)
	}
	if err := ex.Check(seedTool(t)); !errors.Is(err, executors.ErrNotConfigured) {
		t.Errorf("Check() with no targets = %v, want ErrNotConfigured", err)
	}
	bad := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"x": {URL: "ftp://host"}}})
	if err := bad.Health(t.Context()); err == nil || !strings.Contains(err.Error(), "http://") {
		t.Errorf("Health() with an ftp URL = %v, want an error about the scheme", err)
	}
}

func TestRunMethod(t *testing.T) {
	srv, logs := startServer(t, server.Options{})
	ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: token}}})
	tool := parseExample(t, "gatekeeper", "disk-usage")
	if err := ex.Check(tool); err != nil {
		t.Fatalf("Check(disk-usage) = %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A value that would inject in a shell stays one argument.
	out, err := call(t, ex, tool, map[string]any{"path": dir + "; echo injected"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out.Output), "injected") || out.ExitCode == 0 {
		t.Errorf("run with an injection attempt = %q, exit %d; want du's error, no injection", out.Output, out.ExitCode)
	}
	out, err = call(t, ex, tool, map[string]any{"path": dir})
	if err != nil || out.ExitCode != 0 || !strings.Contains(string(out.Output), dir) {
		t.Errorf("run du %s = %q, exit %d, %v", dir, out.Output, out.ExitCode, err)
	}
	if !strings.Contains(logs.String(), `"mode":"argv"`) || !strings.Contains(logs.String(), `"program":"/usr/bin/du"`) {
		t.Errorf("audit log lacks mode argv / program /usr/bin/du:\n%s", logs)
	}
	plan, err := ex.Plan(executors.Request{Tool: tool, Params: map[string]any{"path": dir}})
	if err != nil || plan.Argv[0] != "du" || plan.Extra["target"] != "main" || strings.Contains(plan.Extra["url"], token) {
		t.Errorf("Plan() = %+v, %v", plan, err)
	}
}

func TestServerGuards(t *testing.T) {
	tool := seedTool(t)
	t.Run("allowlist", func(t *testing.T) {
		srv, logs := startServer(t, server.Options{Allow: []string{"echo", "/bin/ls"}})
		ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: token}}})
		tests := []struct {
			cmd     string
			allowed bool
			why     string // in the refusal
		}{
			{cmd: "echo ok", allowed: true},
			{cmd: "ls /", allowed: true},
			{cmd: "rm -rf /tmp/x", why: `program /usr/bin/rm is not in this gatekeeper's allowlist`},
			{cmd: "echo ok; rm -rf /tmp/x", why: "holds 2 commands"},
			{cmd: "uptime; id", why: "holds 2 commands"}, // not "program \"uptime;\""
			{cmd: "echo $(id)", why: "command substitution"},
			{cmd: "X=/ls cat /etc/passwd", why: "assignment X="},
			{cmd: "env ls", why: "program /usr/bin/env is not in this gatekeeper's allowlist"},
		}
		for _, tt := range tests {
			_, err := call(t, ex, tool, map[string]any{"cmd": tt.cmd})
			if tt.allowed && err != nil {
				t.Errorf("Execute(%q) = %v, want allowed", tt.cmd, err)
			}
			if !tt.allowed && (!errors.Is(err, executors.ErrRefused) || !strings.Contains(err.Error(), tt.why)) {
				t.Errorf("Execute(%q) = %v, want ErrRefused saying %q", tt.cmd, err, tt.why)
			}
		}
		if !strings.Contains(logs.String(), "gatekeeper exec refused") {
			t.Errorf("no refusal in the audit log:\n%s", logs)
		}
	})
	t.Run("check hook", func(t *testing.T) {
		var gotCmd string
		srv, _ := startServer(t, server.Options{Check: func(cmd string, argv []string) error {
			gotCmd = cmd
			if strings.Contains(cmd, "reboot") {
				return errors.New("reboot is not allowed by policy")
			}
			return nil
		}})
		ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: token}}})
		_, err := call(t, ex, tool, map[string]any{"cmd": "echo x && reboot"})
		if !errors.Is(err, executors.ErrRefused) || !strings.Contains(err.Error(), "reboot is not allowed by policy") {
			t.Errorf("Execute(reboot) = %v, want ErrRefused with the policy's message", err)
		}
		if gotCmd != "echo x && reboot" {
			t.Errorf("Check hook saw cmd %q", gotCmd)
		}
		if out, err := call(t, ex, tool, map[string]any{"cmd": "echo fine"}); err != nil || string(out.Output) != "fine\n" {
			t.Errorf("Execute(echo fine) = %q, %v", out.Output, err)
		}
	})
}

// TestApprovalReachesTheServer: the client sends a signed grant for the
// approval dispatch claimed, so the server's shell policy runs a
// confirmed command with it and refuses it, naming the rule, without.
func TestApprovalReachesTheServer(t *testing.T) {
	srv, logs := startServer(t, server.Options{})
	ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: token}}})
	tool := seedTool(t)
	victim := filepath.Join(t.TempDir(), "x")
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	params, err := tool.CheckParams(map[string]any{"cmd": "rm -rf " + victim})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ex.Execute(t.Context(), executors.Request{Tool: tool, Params: params, Rev: "r"})
	if !errors.Is(err, executors.ErrRefused) || !strings.Contains(err.Error(), "needs an approval and has none: shell: command `rm` deletes files") {
		t.Fatalf("Execute(rm, no approval) = %v; want ErrRefused naming the rule", err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the refused command ran: %v", err)
	}
	out, err := ex.Execute(t.Context(), executors.Request{Tool: tool, Params: params, Rev: "r", Approval: approvalID})
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("Execute(rm, approved) = %+v, %v", out, err)
	}
	if _, err := os.Stat(victim); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the approved command did not run: %v", err)
	}
	if !strings.Contains(logs.String(), `"approval":"`+approvalID+`"`) {
		t.Errorf("the server's audit line lacks the approval id:\n%s", logs)
	}

	// A target without a token cannot sign: its server (loopback, no
	// token) has no key to verify a grant with and judges the call as
	// unapproved.
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	open, _ := startServer(t, server.Options{Tokens: []string{}})
	ex = gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: open.URL}}})
	_, err = ex.Execute(t.Context(), executors.Request{Tool: tool, Params: params, Rev: "r", Approval: approvalID})
	if !errors.Is(err, executors.ErrRefused) || !strings.Contains(err.Error(), "needs an approval and has none") {
		t.Errorf("Execute(rm, approved, no token) = %v; want ErrRefused: unapproved", err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("the command ran without a verifiable grant: %v", err)
	}
}

// Approval ids: a grant runs once, so each approved call has its own.
const (
	approvalID  = "0123456789abcdef0123456789abcdef"
	approvalID2 = "fedcba9876543210fedcba9876543210"
)

// TestGrantOnTheWire: the grant the client sends is of format 2 and names
// the approval, the tool, its revision, the approval's params hash, the
// exact command, the server's boot id (from its /healthz) and the tool's
// declared sandbox, expires after the tool's timeout plus
// GrantSlack, and verifies under the target token's key. A call without
// an approval, or to a target without a token, carries none.
func TestGrantOnTheWire(t *testing.T) {
	const boot = "00112233445566778899aabbccddeeff"
	var got server.ExecRequest
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status":"ok","boot_id":"`+boot+`"}`)
			return
		}
		got = server.ExecRequest{}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("request body: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"stdout":"","stderr":"","exit_code":0}`)
	}))
	t.Cleanup(fake.Close)
	ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{
		"main": {URL: fake.URL, Token: token}, "open": {URL: fake.URL},
	}, Default: "main"})
	tool := withLimits(seedTool(t), 5*time.Second, 0)
	tool.Ext = &hldp.Ext{Sandbox: hldp.Sandbox{Write: []string{"/srv/out"}, Network: true}}
	params, err := tool.CheckParams(map[string]any{"cmd": "touch /srv/out/x"})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if _, err := ex.Execute(t.Context(), executors.Request{Tool: tool, Params: params, Rev: "rev7", Approval: approvalID}); err != nil {
		t.Fatal(err)
	}
	g := got.Grant
	if g == nil {
		t.Fatalf("approved call sent no grant: %+v", got)
	}
	want := grant.Grant{
		Version: grant.FormatVersion, Approval: approvalID, Tool: tool.Name, Revision: "rev7", ParamsHash: approval.HashParams(params),
		Command: grant.CommandDigest("touch /srv/out/x", nil), BootID: boot, Sandbox: grant.Sandbox{Write: []string{"/srv/out"}, Network: true},
		ExpiresAt: g.ExpiresAt, MAC: g.MAC,
	}
	if diff := cmp.Diff(want, *g); diff != "" {
		t.Errorf("grant differs (-want +got):\n%s", diff)
	}
	exp, err := time.Parse(time.RFC3339, g.ExpiresAt)
	lo, hi := before.Add(5*time.Second+gatekeeper.GrantSlack).Add(-time.Second), time.Now().Add(5*time.Second+gatekeeper.GrantSlack)
	if err != nil || exp.Before(lo) || exp.After(hi) {
		t.Errorf("expires_at = %s, want between %s and %s", g.ExpiresAt, lo, hi)
	}
	if err := g.Verify(grant.Key(token), time.Now(), grant.CommandDigest("touch /srv/out/x", nil), boot); err != nil {
		t.Errorf("the grant does not verify under the target's token: %v", err)
	}
	if got.Approval != "" {
		t.Errorf("the bare approval field was sent: %q", got.Approval)
	}

	for _, tc := range []struct {
		name     string
		target   string
		approval string
	}{{"no approval", "", ""}, {"target without a token", "open", approvalID}} {
		tl, ext := *tool, *tool.Ext
		ext.Target, tl.Ext = tc.target, &ext
		if _, err := ex.Execute(t.Context(), executors.Request{Tool: &tl, Params: params, Rev: "rev7", Approval: tc.approval}); err != nil {
			t.Fatal(err)
		}
		if got.Grant != nil {
			t.Errorf("%s: a grant was sent: %+v", tc.name, got.Grant)
		}
	}

	// A sandbox the server cannot be granted is refused before sending.
	for _, sb := range []hldp.Sandbox{{None: true}, {Write: []string{hldp.SandboxFilesRoot}}} {
		tl, ext := *tool, *tool.Ext
		ext.Sandbox, tl.Ext = sb, &ext
		if _, err := ex.Execute(t.Context(), executors.Request{Tool: &tl, Params: params, Rev: "rev7", Approval: approvalID}); !errors.Is(err, executors.ErrRefused) {
			t.Errorf("Execute(sandbox %s, approved) = %v, want ErrRefused", sb, err)
		}
	}
}

// TestApprovedSandbox: against a sandboxed server, an approved call may
// change the paths its tool declares, and nothing else; an unapproved one
// is refused by the server's policy.
func TestApprovedSandbox(t *testing.T) {
	sb := proctest.NewSandbox(t, proc.SandboxOptions{})
	granted, other := proctest.GrantDir(t, sb), proctest.GrantDir(t, sb)
	srv, logs := startServer(t, server.Options{Sandbox: sb})
	ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: token}}})
	tool := seedTool(t)
	tool.Ext = &hldp.Ext{Sandbox: hldp.Sandbox{Write: []string{granted}}}

	run := func(cmd, approval string) (executors.Outcome, error) {
		params, err := tool.CheckParams(map[string]any{"cmd": cmd})
		if err != nil {
			t.Fatal(err)
		}
		return ex.Execute(t.Context(), executors.Request{Tool: tool, Params: params, Rev: "r", Approval: approval})
	}
	if _, err := run("touch "+granted+"/a", ""); !errors.Is(err, executors.ErrRefused) {
		t.Errorf("unapproved touch = %v, want ErrRefused", err)
	}
	if out, err := run("touch "+granted+"/b", approvalID); err != nil || out.ExitCode != 0 {
		t.Errorf("approved touch in the granted path = %+v, %v; want exit 0", out, err)
	}
	if _, err := os.Stat(granted + "/b"); err != nil {
		t.Errorf("approved touch did not create the file: %v", err)
	}
	if out, err := run("touch "+other+"/c", approvalID2); err != nil || out.ExitCode == 0 {
		t.Errorf("approved touch outside the grant = %+v, %v; want a failed touch", out, err)
	}
	if _, err := os.Stat(other + "/c"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a touch outside the grant created the file: %v", err)
	}
	if !strings.Contains(logs.String(), `"sandbox":"write `+granted+`, no network"`) {
		t.Errorf("the server's audit line lacks the sandbox grant:\n%s", logs)
	}
}

// parseExample parses examples/<executor>/tools/<name>/TOOL.hdlp.
func parseExample(t *testing.T, executor, name string) *hldp.Tool {
	t.Helper()
	file := filepath.Join("..", "..", "..", "examples", executor, "tools", name, hldp.FileName)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tool, err := hldp.Parse(file, data)
	if err != nil {
		t.Fatalf("Parse(%s) = %v", file, err)
	}
	return tool
}

// syncBuffer is a bytes.Buffer safe for the handler's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestStreamingClientOldServer: a call with an output hook asks for a
// streamed answer; a server that predates streaming answers the plain way,
// and the call's outcome is the same as without the hook. A streaming
// server's chunks reach the hook, and its result is the outcome.
func TestStreamingClientOldServer(t *testing.T) {
	var accept string
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept = r.Header.Get("Accept")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"stdout":"hello\n","stderr":"","exit_code":4,"stdout_bytes":6}`)
	}))
	t.Cleanup(old.Close)
	streaming := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"event":"stdout","data":"hel"}`+"\n"+`{"event":"stdout","data":"bG8K","encoding":"base64"}`+"\n"+
			`{"event":"result","result":{"stdout":"hello\n","stderr":"","exit_code":4,"stdout_bytes":6}}`+"\n")
	}))
	t.Cleanup(streaming.Close)
	tool := withLimits(seedTool(t), 5*time.Second, 0)
	params, err := tool.CheckParams(map[string]any{"cmd": "echo hello"})
	if err != nil {
		t.Fatal(err)
	}
	for name, url := range map[string]string{"old server": old.URL, "streaming server": streaming.URL} {
		ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: url}}, Default: "main"})
		var chunks []string
		out, err := ex.Execute(t.Context(), executors.Request{Tool: tool, Params: params, Rev: "r",
			Output: func(stream string, p []byte) { chunks = append(chunks, stream+":"+string(p)) }})
		if err != nil || string(out.Output) != "hello\n" || out.ExitCode != 4 || !out.Completed {
			t.Errorf("%s: %+v, %v; want hello, exit 4", name, out, err)
		}
		if want := map[string][]string{"old server": nil, "streaming server": {"stdout:hel", "stdout:lo\n"}}[name]; !slices.Equal(chunks, want) {
			t.Errorf("%s: chunks %q; want %q", name, chunks, want)
		}
	}
	if !strings.Contains(accept, "application/x-ndjson") || !strings.Contains(accept, "application/json") {
		t.Errorf("Accept = %q; want both the stream and plain JSON", accept)
	}
}

// restartable serves through the current one of its handlers; it moves to
// the next after the first GET /healthz, as a server restarted between
// the client's asking for its boot id and sending the call.
type restartable struct {
	mu       sync.Mutex
	handlers []http.Handler
	healthz  int // GET /healthz served
}

func (rs *restartable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rs.mu.Lock()
	h := rs.handlers[0]
	if r.URL.Path == "/healthz" {
		rs.healthz++
		if rs.healthz == 1 && len(rs.handlers) > 1 {
			rs.handlers = rs.handlers[1:]
		}
	}
	rs.mu.Unlock()
	h.ServeHTTP(w, r)
}

// TestGrantRunsOnce: through the client, an approved call runs once: the
// same approval sent again is refused by the server as already used, and
// the command's side effect (a line appended to a file) happened once. A
// server that restarts between the client's asking for its boot id and
// the call refuses the grant; the client signs for the new boot and sends
// the call once more, and it runs once. A server that gives no boot id
// (older than grant format 2) gets no grant, and the error says so.
func TestGrantRunsOnce(t *testing.T) {
	tool := withLimits(seedTool(t), 5*time.Second, 0)
	opts := server.Options{Tokens: []string{token}, Grace: 200 * time.Millisecond}
	old := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`)
	})
	tests := []struct {
		name     string
		handlers []http.Handler
		ran      int    // lines appended after both calls
		second   string // the second call's error
		first    string // the first call's error, "" for none
	}{
		{name: "replay refused", handlers: []http.Handler{server.NewHandler(opts, nil)}, ran: 1, second: "grant refused: grant already used: approval \"" + approvalID + "\""},
		{name: "server restarted before the call", handlers: []http.Handler{server.NewHandler(opts, nil), server.NewHandler(opts, nil)}, ran: 1, second: "grant already used"},
		{name: "server without boot ids", handlers: []http.Handler{old}, ran: 0, first: "gave no boot_id", second: "gave no boot_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "ran")
			srv := httptest.NewServer(&restartable{handlers: tt.handlers})
			t.Cleanup(srv.Close)
			ex := gatekeeper.New(gatekeeper.Options{Targets: map[string]gatekeeper.Target{"main": {URL: srv.URL, Token: token}}})
			params, err := tool.CheckParams(map[string]any{"cmd": "echo ran >> " + out})
			if err != nil {
				t.Fatal(err)
			}
			req := executors.Request{Tool: tool, Params: params, Rev: "r", Approval: approvalID}
			if _, err := ex.Execute(t.Context(), req); tt.first == "" && err != nil || tt.first != "" && (err == nil || !strings.Contains(err.Error(), tt.first)) {
				t.Errorf("first Execute = %v; want error %q", err, tt.first)
			}
			if _, err := ex.Execute(t.Context(), req); err == nil || !strings.Contains(err.Error(), tt.second) {
				t.Errorf("second Execute of the approval = %v; want an error saying %q", err, tt.second)
			}
			b, err := os.ReadFile(out)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if n := strings.Count(string(b), "\n"); n != tt.ran {
				t.Errorf("the command ran %d times; want %d", n, tt.ran)
			}
		})
	}
}
