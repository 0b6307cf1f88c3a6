package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/host"
)

// TestAuditFileStore: `audit verify` and `audit export` work on the file
// store's STATE/audit/audit.jsonl: a daemon's calls form one unbroken
// chain, export gives a line per record, and an edited line breaks the
// chain at that line (exit 1, naming file:line).
func TestAuditFileStore(t *testing.T) {
	t.Parallel()
	state, tools := t.TempDir(), t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	for range 2 { // a restart continues the chain
		d := startDaemon(t, nil, "--tools", tools, "--state", state)
		for _, cmd := range []string{"echo one", "echo two"} {
			if code, res := d.call(t, "shell-exec", map[string]any{"cmd": cmd}); code != 200 || !res.OK {
				t.Fatalf("call: %d %+v", code, res)
			}
		}
		if err := d.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runCLI(t, nil, "audit", "verify", "--state", state)
	var res struct {
		Rows   int
		Head   string
		Broken string
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Rows < 4 || len(res.Head) != 64 || res.Broken != "" {
		t.Fatalf("audit verify (files) = %d %s %s; want the 4 calls and more in one unbroken chain", code, out, errOut)
	}
	out, errOut, code = runCLI(t, nil, "audit", "export", "--state", state)
	if code != 0 || strings.Count(out, "\n") != res.Rows || strings.Count(out, `"tool":"shell-exec"`) < 4 {
		t.Errorf("audit export (files) = %d, %d lines %s; want %d rows, the 4 calls among them\n%s", code, strings.Count(out, "\n"), errOut, res.Rows, out)
	}
	file := filepath.Join(host.AuditDir(state), "audit.jsonl")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n := bytes.Count(data[:bytes.Index(data, []byte(`"status":"success"`))], []byte("\n")) + 1
	os.WriteFile(file, bytes.Replace(data, []byte(`"status":"success"`), []byte(`"status":"error"`), 1), 0o600)
	out, errOut, code = runCLI(t, nil, "audit", "verify", "--state", state)
	if want := file + ":" + itoa(n) + ": its hash does not match"; code != exitFailed || !strings.Contains(errOut, want) {
		t.Errorf("audit verify of an edited line = %d %s %s; want exit 1 and %q", code, out, errOut, want)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestParamsJSONError: bad --params JSON says where it broke, before any
// tool is looked up, and exits 6, apart from a tool that ran and failed
// (1) and params a tool refused (2); a JSON value other than an object
// is refused the same way.
func TestParamsJSONError(t *testing.T) {
	t.Parallel()
	tools := nativeTools(t)
	for _, c := range []struct{ params, want string }{
		{"{\"cmd\": \"echo hi\",\n \"x\": }", "not valid JSON at byte 25 (line 2, column 7)"},
		{`{"cmd": "echo`, "not valid JSON at byte 13 (line 1, column 14)"},
		{`["echo"]`, "want one JSON object"},
	} {
		out, errOut, code := runCLI(t, nil, "call", "--tools", tools, "--state", t.TempDir(), "--params", c.params, "no-such-tool")
		if code != cli.ExitBadJSON || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("--params %q: exit %d, stdout %q, stderr %q; want exit %d and %q", c.params, code, out, errOut, cli.ExitBadJSON, c.want)
		}
	}
}

// TestNewRefusesServedTree: `new` does not write into the tree a running
// daemon of the state directory serves (it would serve the tool as soon
// as it loads) unless --force; a tree of one's own is fine.
func TestNewRefusesServedTree(t *testing.T) {
	t.Parallel()
	state, tools := t.TempDir(), toolsCopy(t)
	root, _ := filepath.Abs("../..")
	info := startBinDaemon(t, root, state, binEnv(t), "--tools", tools)
	_, errOut, code := runBin(t, root, binEnv(t), "new", "--state", state, "--tools", tools, "mine")
	if code != exitRefused || !strings.Contains(errOut, "the toolagent daemon at "+info.URL) || !strings.Contains(errOut, "--force") {
		t.Errorf("new into the served tree: exit %d %s; want %d naming the daemon and --force", code, errOut, exitRefused)
	}
	if _, err := os.Stat(filepath.Join(tools, "mine")); err == nil {
		t.Errorf("new wrote into the served tree although it refused")
	}
	if out, errOut, code := runBin(t, root, binEnv(t), "new", "--state", state, "--tools", tools, "--force", "mine"); code != 0 || !strings.Contains(out, "created") {
		t.Errorf("new --force: exit %d %s%s", code, out, errOut)
	}
	if out, errOut, code := runBin(t, root, binEnv(t), "new", "--state", state, "--tools", t.TempDir(), "mine"); code != 0 || !strings.Contains(out, "created") {
		t.Errorf("new into another tree: exit %d %s%s", code, out, errOut)
	}
}

// TestServeNextToRunningDaemon: a second serve on the state directory
// names the running daemon (address, pid) instead of the approval queue
// it holds; one that cannot listen leaves no operator token behind.
func TestServeNextToRunningDaemon(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	root, _ := filepath.Abs("../..")
	info := startBinDaemon(t, root, state, binEnv(t))
	_, errOut, code := runBin(t, root, binEnv(t), "serve", "--listen", "127.0.0.1:0", "--state", state)
	want := "a toolagent daemon already listens on " + strings.TrimPrefix(info.URL, "http://") + " (pid " + itoa(info.PID) + ") with this state directory"
	if code != exitFailed || !strings.Contains(errOut, want) || strings.Contains(errOut, "approvals") {
		t.Errorf("second serve: exit %d\n%s\nwant exit 1 and %q", code, errOut, want)
	}
	other := t.TempDir()
	_, errOut, code = runBin(t, root, binEnv(t), "serve", "--listen", strings.TrimPrefix(info.URL, "http://"), "--state", other)
	if code == 0 || !strings.Contains(errOut, "listen") {
		t.Errorf("serve on a taken port: exit %d %s; want a listen error", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(other, "operator.token")); err == nil {
		t.Errorf("serve that could not listen left %s behind", filepath.Join(other, "operator.token"))
	}
}
