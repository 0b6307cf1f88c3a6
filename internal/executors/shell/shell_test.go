package shell_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/policy"
)

// Tools are struct literals, as hldp.Parse would produce them.

func execTool(timeout time.Duration, maxOut int64) *hldp.Tool {
	return &hldp.Tool{
		Name: "shell-exec", Method: "exec", Executor: hldp.Shell,
		Params: []hldp.Param{
			{Name: "cmd", Type: hldp.TypeString, Required: true},
			{Name: "cwd", Type: hldp.TypeString},
		},
		Constraints: hldp.Constraints{Timeout: timeout, MaxOutputBytes: maxOut},
	}
}

func printfTool() *hldp.Tool {
	return &hldp.Tool{
		Name: "say", Method: "run", Executor: hldp.Shell,
		Params:      []hldp.Param{{Name: "msg", Type: hldp.TypeString, Required: true}},
		Argv:        []hldp.ArgvItem{{Word: "printf"}, {Word: "%s\\n"}, {Word: "{msg}"}},
		Constraints: hldp.Constraints{Timeout: 10 * time.Second, MaxOutputBytes: 1024},
	}
}

func fileTool(method string) *hldp.Tool {
	t := &hldp.Tool{
		Name: "file-" + method, Method: method, Executor: hldp.Shell,
		Params:      []hldp.Param{{Name: "path", Type: hldp.TypeString, Required: true}},
		Constraints: hldp.Constraints{Timeout: 10 * time.Second, MaxOutputBytes: 16},
	}
	if method == "read" {
		t.Params = append(t.Params, hldp.Param{Name: "offset", Type: hldp.TypeInteger})
	} else {
		t.Params = append(t.Params,
			hldp.Param{Name: "content", Type: hldp.TypeString, Required: true},
			hldp.Param{Name: "append", Type: hldp.TypeBoolean})
	}
	return t
}

func TestExecuteCommands(t *testing.T) {
	e := shell.New(shell.Options{Grace: 200 * time.Millisecond, Env: []string{"TOOLAGENT_EXTRA=yes", "malformed"}})
	tests := []struct {
		name       string
		tool       *hldp.Tool
		params     map[string]any
		wantOut    string
		wantStderr string // substring
		wantCode   int
	}{
		{"exec echo", execTool(10*time.Second, 1024), map[string]any{"cmd": "echo hello"}, "hello\n", "", 0},
		{"exec fails", execTool(10*time.Second, 1024), map[string]any{"cmd": "ls /nonexistent"}, "", "/nonexistent", 2},
		{"exec cwd", execTool(10*time.Second, 1024), map[string]any{"cmd": "pwd", "cwd": "/usr"}, "/usr\n", "", 0},
		{"exec env", execTool(10*time.Second, 1024), map[string]any{"cmd": "echo $TOOLAGENT_EXTRA $HOME"}, "yes /\n", "", 0},
		{"run injection stays one arg", printfTool(), map[string]any{"msg": "hi; rm -rf / $(id) `id`"}, "hi; rm -rf / $(id) `id`\n", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := e.Execute(t.Context(), executors.Request{Tool: tt.tool, Params: tt.params})
			if err != nil {
				t.Fatalf("Execute(%v) error: %v", tt.params, err)
			}
			if string(out.Output) != tt.wantOut || out.ExitCode != tt.wantCode || !strings.Contains(string(out.Stderr), tt.wantStderr) {
				t.Errorf("Execute(%v) = output %q, stderr %q, exit %d; want %q, stderr containing %q, exit %d",
					tt.params, out.Output, out.Stderr, out.ExitCode, tt.wantOut, tt.wantStderr, tt.wantCode)
			}
			if tt.wantStderr != "" && len(out.Stderr) == 0 {
				t.Errorf("Execute(%v) stderr empty; want the command's real stderr", tt.params)
			}
		})
	}
}

func TestExecuteEnvNotInherited(t *testing.T) {
	t.Setenv("TOOLAGENT_TEST_SECRET", "s3cret")
	e := shell.New(shell.Options{})
	out, err := e.Execute(t.Context(), executors.Request{Tool: execTool(10*time.Second, 4096), Params: map[string]any{"cmd": "env"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out.Output), "s3cret") {
		t.Errorf("Execute(env) output leaks the daemon's environment:\n%s", out.Output)
	}
}

func TestExecuteTimeout(t *testing.T) {
	t.Parallel()
	e := shell.New(shell.Options{Grace: 200 * time.Millisecond})
	// What ran before the timeout is kept. On a saturated machine the
	// timeout can fire before the shell has echoed at all: that run proves
	// nothing about the output, so try again with twice the time.
	for timeout := 200 * time.Millisecond; ; timeout *= 2 {
		start := time.Now()
		out, err := e.Execute(t.Context(), executors.Request{Tool: execTool(timeout, 1024), Params: map[string]any{"cmd": "echo started; sleep 60"}})
		if err != nil {
			t.Fatal(err)
		}
		if !out.TimedOut {
			t.Fatalf("Execute(sleep 60, timeout %v): not timed out; output %q", timeout, out.Output)
		}
		if d := time.Since(start); d >= 60*time.Second {
			t.Errorf("Execute(sleep 60, timeout %v) took %v; want the timeout to end it, not the sleep", timeout, d)
		}
		if len(out.Output) == 0 && timeout < 30*time.Second {
			continue
		}
		if string(out.Output) != "started\n" {
			t.Errorf("Execute(echo; sleep 60, timeout %v) = output %q; want %q", timeout, out.Output, "started\n")
		}
		return
	}
}

func TestExecuteCapsOutput(t *testing.T) {
	t.Parallel()
	e := shell.New(shell.Options{})
	out, err := e.Execute(t.Context(), executors.Request{Tool: execTool(10*time.Second, 1024), Params: map[string]any{"cmd": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Output) != 1024 || !out.Truncated || out.OutputBytes <= 1024 {
		t.Errorf("Execute(yes, cap 1024) = %d bytes, truncated %v, OutputBytes %d; want 1024, true, > 1024", len(out.Output), out.Truncated, out.OutputBytes)
	}
	if out.TimedOut {
		t.Errorf("Execute(yes, cap 1024) timed out; want it stopped by the drain limit")
	}
}

func TestExecuteStartFailure(t *testing.T) {
	e := shell.New(shell.Options{})
	tool := &hldp.Tool{Name: "nope", Method: "run", Executor: hldp.Shell, Argv: []hldp.ArgvItem{{Word: "toolagent-no-such-program"}}}
	_, err := e.Execute(t.Context(), executors.Request{Tool: tool})
	if err == nil || !strings.Contains(err.Error(), "executable file not found") {
		t.Errorf("Execute(run missing program) error = %v; want executable file not found", err)
	}
}

// newRoot returns a files root holding notes/a.txt and a symlink escaping
// to a file outside the root.
func newRoot(t *testing.T) (root, outside string) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "root")
	outside = filepath.Join(dir, "secret.txt")
	for _, err := range []error{
		os.MkdirAll(filepath.Join(root, "notes"), 0o755),
		os.WriteFile(filepath.Join(root, "notes", "a.txt"), []byte("0123456789abcdefghij"), 0o644),
		os.WriteFile(outside, []byte("secret"), 0o644),
		os.Symlink(outside, filepath.Join(root, "escape")),
		os.Symlink("../../secret.txt", filepath.Join(root, "notes", "escape-rel")),
		os.Symlink("a.txt", filepath.Join(root, "notes", "inside")),
		os.Symlink(dir, filepath.Join(root, "updir")),
		os.Link(outside, filepath.Join(root, "hardlink")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func TestReadWrite(t *testing.T) {
	root, outside := newRoot(t)
	e := shell.New(shell.Options{FilesRoot: root})
	tests := []struct {
		name        string
		tool        *hldp.Tool
		params      map[string]any
		wantOut     string
		wantTrunc   bool
		wantBytes   int64
		wantCode    int
		wantStderr  string // substring
		wantRefused bool
	}{
		{"read", fileTool("read"), map[string]any{"path": "notes/a.txt", "offset": int64(4)}, "456789abcdefghij", false, 16, 0, "", false},
		{"read capped", fileTool("read"), map[string]any{"path": "notes/a.txt"}, "0123456789abcdef", true, 20, 0, "", false},
		// No symlink is followed, not even one that stays inside the root.
		{"read through inside symlink", fileTool("read"), map[string]any{"path": "notes/inside", "offset": int64(18)}, "", false, 0, 0, "", true},
		// A hard link planted in the root may name a file outside it.
		{"read hard link", fileTool("read"), map[string]any{"path": "hardlink"}, "", false, 0, 0, "", true},
		{"write hard link", fileTool("write"), map[string]any{"path": "hardlink", "content": "pwned"}, "", false, 0, 0, "", true},
		{"append hard link", fileTool("write"), map[string]any{"path": "hardlink", "content": "pwned", "append": true}, "", false, 0, 0, "", true},
		{"read missing", fileTool("read"), map[string]any{"path": "notes/missing.txt"}, "", false, 0, 1, "no such file or directory", false},
		{"read dir", fileTool("read"), map[string]any{"path": "notes"}, "", false, 0, 1, "not a regular file", false},
		{"read dotdot", fileTool("read"), map[string]any{"path": "../secret.txt"}, "", false, 0, 0, "", true},
		{"read absolute", fileTool("read"), map[string]any{"path": "/etc/passwd"}, "", false, 0, 0, "", true},
		{"read symlink out", fileTool("read"), map[string]any{"path": "escape"}, "", false, 0, 0, "", true},
		{"read relative symlink out", fileTool("read"), map[string]any{"path": "notes/escape-rel"}, "", false, 0, 0, "", true},
		{"read through dir symlink out", fileTool("read"), map[string]any{"path": "updir/secret.txt"}, "", false, 0, 0, "", true},
		{"write", fileTool("write"), map[string]any{"path": "notes/b/c.txt", "content": "hello world\n"}, "wrote 12 bytes to notes/b/c.txt\n", false, 32, 0, "", false},
		{"write symlink out", fileTool("write"), map[string]any{"path": "escape", "content": "pwned"}, "", false, 0, 0, "", true},
		{"write dotdot", fileTool("write"), map[string]any{"path": "notes/../../x", "content": "pwned"}, "", false, 0, 0, "", true},
		{"write into dir symlink out", fileTool("write"), map[string]any{"path": "updir/new.txt", "content": "pwned"}, "", false, 0, 0, "", true},
		{"write over dir", fileTool("write"), map[string]any{"path": "notes", "content": "x"}, "", false, 0, 1, "is a directory", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.Execute(t.Context(), executors.Request{Tool: tt.tool, Params: tt.params})
			if tt.wantRefused {
				if !errors.Is(err, executors.ErrRefused) {
					t.Errorf("Execute(%s %v) = %+v, %v; want an error wrapping ErrRefused", tt.tool.Method, tt.params, out, err)
				}
				t.Logf("Execute(%s %v) error: %v", tt.tool.Method, tt.params, err)
				return
			}
			if err != nil {
				t.Fatalf("Execute(%s %v) error: %v", tt.tool.Method, tt.params, err)
			}
			if string(out.Output) != tt.wantOut || out.Truncated != tt.wantTrunc || out.OutputBytes != tt.wantBytes || out.ExitCode != tt.wantCode {
				t.Errorf("Execute(%s %v) = output %q, truncated %v, bytes %d, exit %d; want %q, %v, %d, %d",
					tt.tool.Method, tt.params, out.Output, out.Truncated, out.OutputBytes, out.ExitCode, tt.wantOut, tt.wantTrunc, tt.wantBytes, tt.wantCode)
			}
			if !strings.Contains(string(out.Stderr), tt.wantStderr) {
				t.Errorf("Execute(%s %v) stderr = %q; want it to contain %q", tt.tool.Method, tt.params, out.Stderr, tt.wantStderr)
			}
		})
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "secret" {
		t.Errorf("file outside the root = %q, %v; want it untouched", b, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("write through a directory symlink created a file outside the root (stat: %v)", err)
	}
}

func TestWriteAppendThenRead(t *testing.T) {
	root, _ := newRoot(t)
	e := shell.New(shell.Options{FilesRoot: root})
	steps := []map[string]any{
		{"path": "log.txt", "content": "one\n"},
		{"path": "log.txt", "content": "two\n", "append": true},
	}
	for _, p := range steps {
		if _, err := e.Execute(t.Context(), executors.Request{Tool: fileTool("write"), Params: p}); err != nil {
			t.Fatalf("Execute(write %v) error: %v", p, err)
		}
	}
	out, err := e.Execute(t.Context(), executors.Request{Tool: fileTool("read"), Params: map[string]any{"path": "log.txt"}})
	if err != nil || string(out.Output) != "one\ntwo\n" {
		t.Errorf("read after write+append = %q, %v; want %q", out.Output, err, "one\ntwo\n")
	}
}

func TestPlan(t *testing.T) {
	unsandboxed := map[string]string{"sandbox": "off (the daemon runs without a sandbox)"}
	e := shell.New(shell.Options{FilesRoot: "/srv/files", Env: []string{"FOO=bar"}})
	tests := []struct {
		name   string
		tool   *hldp.Tool
		params map[string]any
		want   executors.Plan
	}{
		{"exec", execTool(3*time.Second, 100), map[string]any{"cmd": "ls -l | wc -l", "cwd": "/tmp"}, executors.Plan{
			Argv: []string{"/bin/bash", "-p", "-c", "ls -l | wc -l"}, Dir: "/tmp",
			Env:     []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp", "SHELL=/bin/sh", "FOO=bar"},
			Timeout: 3 * time.Second, TimeoutMS: 3000, MaxOutputBytes: 100,
			Extra: unsandboxed,
		}},
		{"run", printfTool(), map[string]any{"msg": "a; b"}, executors.Plan{
			Argv:    []string{"printf", "%s\\n", "a; b"},
			Env:     []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/", "SHELL=/bin/sh", "FOO=bar"},
			Timeout: 10 * time.Second, TimeoutMS: 10000, MaxOutputBytes: 1024,
			Extra: unsandboxed,
		}},
		{"defaults", &hldp.Tool{Name: "d", Method: "exec", Executor: hldp.Shell, Params: []hldp.Param{{Name: "cmd", Type: hldp.TypeString}}}, map[string]any{"cmd": "true"}, executors.Plan{
			Argv:    []string{"/bin/bash", "-p", "-c", "true"},
			Env:     []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/", "SHELL=/bin/sh", "FOO=bar"},
			Timeout: hldp.DefaultTimeout, TimeoutMS: hldp.DefaultTimeout.Milliseconds(), MaxOutputBytes: hldp.DefaultMaxOutputBytes,
			Extra: unsandboxed,
		}},
		{"read", fileTool("read"), map[string]any{"path": "notes/./a.txt", "offset": int64(5)}, executors.Plan{
			Path:    "/srv/files/notes/a.txt",
			Timeout: 10 * time.Second, TimeoutMS: 10000, MaxOutputBytes: 16,
			Extra: map[string]string{"root": "/srv/files", "offset": "5"},
		}},
		{"write", fileTool("write"), map[string]any{"path": "x.txt", "content": "hello", "append": true}, executors.Plan{
			Path:    "/srv/files/x.txt",
			Timeout: 10 * time.Second, TimeoutMS: 10000, MaxOutputBytes: 16,
			Extra: map[string]string{"root": "/srv/files", "mode": "append", "bytes": "5"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Plan(executors.Request{Tool: tt.tool, Params: tt.params})
			if err != nil {
				t.Fatalf("Plan(%s %v) error: %v", tt.tool.Method, tt.params, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan(%s %v) mismatch (-want +got):\n%s", tt.tool.Method, tt.params, diff)
			}
		})
	}
	// Plan has no side effects: the files root above does not even exist.
	if _, err := os.Stat("/srv/files/x.txt"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Plan(write) touched the file system (stat: %v)", err)
	}
}

func TestCheck(t *testing.T) {
	withRoot := shell.New(shell.Options{FilesRoot: t.TempDir()})
	noRoot := shell.New(shell.Options{})
	noArgv := printfTool()
	noArgv.Argv = nil
	execNoCmd := execTool(time.Second, 1)
	execNoCmd.Params = execNoCmd.Params[1:]
	execIntCmd := execTool(time.Second, 1)
	execIntCmd.Params[0].Type = hldp.TypeInteger
	writeNoContent := fileTool("write")
	writeNoContent.Params = writeNoContent.Params[:1]
	gk := execTool(time.Second, 1)
	gk.Executor = hldp.Gatekeeper
	unknown := execTool(time.Second, 1)
	unknown.Method = "eval"

	tests := []struct {
		name              string
		e                 *shell.Executor
		tool              *hldp.Tool
		wantErr           string // substring; "" = no error
		wantNotConfigured bool
	}{
		{"exec ok", noRoot, execTool(time.Second, 1), "", false},
		{"run ok", noRoot, printfTool(), "", false},
		{"read ok", withRoot, fileTool("read"), "", false},
		{"write ok", withRoot, fileTool("write"), "", false},
		{"run without argv", noRoot, noArgv, "method run needs an argv template", false},
		{"exec without cmd", noRoot, execNoCmd, `needs a string param "cmd"`, false},
		{"exec cmd not string", noRoot, execIntCmd, `param "cmd" of method exec must be of type string, not integer`, false},
		{"read without root", noRoot, fileTool("read"), "files root not configured", true},
		{"write without root", noRoot, fileTool("write"), "files root not configured", true},
		{"write without content", withRoot, writeNoContent, `needs a string param "content"`, false},
		{"not shell", noRoot, gk, `executor is "gatekeeper", not "shell"`, false},
		{"unknown method", noRoot, unknown, `no method "eval" (methods: exec, run, read, write)`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.e.Check(tt.tool)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Check(%s) = %v; want nil", tt.tool.Name, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Check(%s) = %v; want an error containing %q", tt.tool.Name, err, tt.wantErr)
			}
			if got := errors.Is(err, executors.ErrNotConfigured); got != tt.wantNotConfigured {
				t.Errorf("Check(%s) = %v; errors.Is ErrNotConfigured = %v, want %v", tt.tool.Name, err, got, tt.wantNotConfigured)
			}
		})
	}
}

func TestExecuteUnknownMethod(t *testing.T) {
	tool := execTool(time.Second, 1)
	tool.Method = "eval"
	_, err := shell.New(shell.Options{}).Execute(t.Context(), executors.Request{Tool: tool, Params: map[string]any{"cmd": "true"}})
	if !errors.Is(err, executors.ErrRefused) || !strings.Contains(err.Error(), `"eval"`) || !strings.Contains(err.Error(), "exec, run, read, write") {
		t.Errorf("Execute(method eval) error = %v; want ErrRefused naming the method and the shell methods", err)
	}
}

func TestExecuteCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := shell.New(shell.Options{}).Execute(ctx, executors.Request{Tool: execTool(time.Second, 1), Params: map[string]any{"cmd": "true"}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Execute(cancelled ctx) error = %v; want context.Canceled", err)
	}
}

func TestHealth(t *testing.T) {
	if err := shell.New(shell.Options{}).Health(t.Context()); err != nil {
		t.Errorf("Health() = %v; want nil (this host has /bin/sh)", err)
	}
}

// TestPolicyRecheck calls the executor directly, as a buggy dispatcher
// would, and proves the re-check right before the process starts: a
// command that needs an approval and carries none is refused and nothing
// runs; with a claimed approval it runs; a denied command never runs; the
// refusal names the rule.
func TestPolicyRecheck(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "x")
	if err := os.MkdirAll(filepath.Join(victim, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "marker")
	e := shell.New(shell.Options{})
	tool := execTool(10*time.Second, 1024)
	confirmRun := printfTool()
	confirmRun.Constraints.RequireConfirm = true
	ruled := printfTool()
	ruled.Constraints.Rules = map[string]hldp.ArgRules{"msg": {Deny: []string{`secret`}}}
	tests := []struct {
		name     string
		tool     *hldp.Tool
		params   map[string]any
		approval string
		wantErr  []string // "" = runs
	}{
		{"rm -rf without approval", tool, map[string]any{"cmd": "rm -rf " + victim}, "", []string{"needs an approval and has none", "shell: command `rm`", "deletes files"}},
		{"write hidden after a read", tool, map[string]any{"cmd": "echo hi > " + marker}, "", []string{"needs an approval and has none", "shell: redirection"}},
		{"catastrophic even when approved", tool, map[string]any{"cmd": "rm -rf /"}, "0123456789abcdef0123456789abcdef", []string{"refused by policy: shell:", "catastrophic"}},
		{"require_confirm on a run tool", confirmRun, map[string]any{"msg": "hi"}, "", []string{"constraints.require_confirm: true"}},
		{"param deny pattern", ruled, map[string]any{"msg": "my secret"}, "", []string{"param msg: deny pattern `secret`"}},
		{"read-only runs without approval", tool, map[string]any{"cmd": "ls " + victim}, "", nil},
		{"approved write runs", tool, map[string]any{"cmd": "touch " + marker}, "0123456789abcdef0123456789abcdef", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.Execute(t.Context(), executors.Request{Tool: tt.tool, Params: tt.params, Rev: "r1", Approval: tt.approval})
			if tt.wantErr == nil {
				if err != nil || out.ExitCode != 0 {
					t.Fatalf("Execute(%v) = exit %d, %v; want it to run", tt.params, out.ExitCode, err)
				}
				return
			}
			if !errors.Is(err, executors.ErrRefused) {
				t.Fatalf("Execute(%v) = %+v, %v; want an error wrapping ErrRefused", tt.params, out, err)
			}
			var re *policy.RefusedError
			if !errors.As(err, &re) {
				t.Errorf("Execute(%v) error %v does not wrap *policy.RefusedError", tt.params, err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Execute(%v) error %q does not name %q", tt.params, err, w)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(victim, "sub")); err != nil {
		t.Errorf("the refused rm -rf ran: %v", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the approved touch did not run: %v", err)
	}
	// Plan (dry runs) never judges: it has no side effect.
	if _, err := e.Plan(executors.Request{Tool: tool, Params: map[string]any{"cmd": "rm -rf /"}}); err != nil {
		t.Errorf("Plan(rm -rf /) = %v; a plan runs nothing and is not refused", err)
	}
}
