package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// The attacks of issue "isolation per call", run as a caller with only
// the call role against a daemon serving the shipped tools, with a second
// caller alongside. Each would have worked with sandboxes shared between
// calls, or without the layer named.

const (
	aliceCallToken = "alice-call-0123456789abcdef"
	carolCallToken = "carol-call-0123456789abcdef"
)

// TestIsolationPlantedAgentReachesNoOtherCaller: alice, with file-write
// alone (no approval), plants a repository whose config would have git
// run her script on git-ops' status: the script would start an agent
// that outlives the call and sees the next calls. Neither happens: git
// runs no repository code, and nothing of a call outlives it; carol's
// later call comes back as her command wrote it.
func TestIsolationPlantedAgentReachesNoOtherCaller(t *testing.T) {
	t.Parallel()
	proctest.SkipWithoutSandbox(t)
	tools := t.TempDir()
	for _, name := range []string{"file-write", "git-ops", "shell-exec"} {
		b, err := os.ReadFile(filepath.Join("../../native-repo/tools", name, "TOOL.hdlp"))
		if err != nil {
			t.Fatal(err)
		}
		putTool(t, tools, name, string(b))
	}
	files := proctest.HostDir(t)
	d := startDaemon(t, map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceCallToken + ",carol:call:" + carolCallToken},
		"--tools", tools, "--files-root", files)
	alice, carol := d.as(aliceCallToken), d.as(carolCallToken)
	marker := "toolagent-agent-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	plant := fmt.Sprintf("#!/bin/bash\nsetsid -f bash -c 'exec -a %s sleep 1000'\n", marker)
	for path, content := range map[string]string{
		"r/.git/HEAD":         "ref: refs/heads/main\n",
		"r/.git/config":       "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = bash " + filepath.Join(files, "r/plant.sh") + "; false\n",
		"r/.git/objects/.dir": "",
		"r/.git/refs/.dir":    "",
		"r/plant.sh":          plant,
		"r/README":            "hello\n",
	} {
		if code, res := alice.call(t, "file-write", map[string]any{"path": path, "content": content}); code != 200 || res.Status != dispatch.Success {
			t.Fatalf("alice file-write %s: %d %s %s", path, code, res.Status, res.Error)
		}
	}
	code, res := alice.call(t, "git-ops", map[string]any{"op": "status", "repo": filepath.Join(files, "r")})
	if code != 200 || !strings.Contains(res.Output, "No commits yet") {
		t.Fatalf("alice git-ops status: %d %s output %q stderr %q; want git's status of the planted repository", code, res.Status, res.Output, res.Stderr)
	}
	if n := proctest.CountMarked(marker); n != 0 {
		t.Fatalf("git-ops ran the repository's fsmonitor: %d planted agent(s) alive after the call (result %+v)", n, res)
	}
	code, res = carol.call(t, "shell-exec", map[string]any{"cmd": "echo carol-key-PRIVATE; ls /proc | grep -c '^[0-9]'"})
	if code != 200 || !strings.HasPrefix(res.Output, "carol-key-PRIVATE\n") {
		t.Fatalf("carol's call: %d %q %q", code, res.Output, res.Stderr)
	}
	// Her /proc shows her own processes only: bash, ls, grep.
	if n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(res.Output, "carol-key-PRIVATE\n"))); err != nil || n > 3 {
		t.Errorf("carol's call sees %q processes in /proc; want only its own", res.Output)
	}
}

// TestIsolationServeAsRoot: a daemon started by hand as root, with a
// descriptor of the launching shell open (7>>log): a read-only call
// neither reads root's files nor writes the descriptor.
func TestIsolationServeAsRoot(t *testing.T) {
	t.Parallel()
	proctest.SkipWithoutSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon runs as root here, the tools must not")
	}
	log := filepath.Join(proctest.HostDir(t), "shell.log")
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	d := startDaemonProcessWith(t, []*os.File{nil, nil, nil, nil, f}, "--state", t.TempDir(), "--tools", tools) // f is the daemon's descriptor 7
	for _, cmd := range []string{"echo LEAKED >&7", "head -c 100 /etc/shadow", "ls /root", "id -u"} {
		code, body, err := d.post("/v1/call", fmt.Sprintf(`{"tool":"shell-exec","params":{"cmd":%q}}`, cmd))
		if err != nil || code == 0 {
			t.Fatalf("%s: %d %v", cmd, code, err)
		}
		if strings.Contains(body, "root:") || strings.Contains(body, `"output":"0\n"`) {
			t.Errorf("%s: the tool read root's files or ran as root: %s", cmd, body)
		}
	}
	if b, _ := os.ReadFile(log); len(b) != 0 {
		t.Errorf("a read-only call wrote the daemon's inherited descriptor 7: %q", b)
	}
}

// TestIsolationLimitsStated: a memory hog that also runs into its
// timeout says which limit ended it; so does a call that fills its /tmp.
// The timeout is long enough for the hogs to reach the memory limit on a
// saturated machine first: 512 MiB is some 130,000 fresh pages, at up to
// 45 µs each on the CI's VMs, and a full -race run once took more than
// the 8 s it had.
func TestIsolationLimitsStated(t *testing.T) {
	t.Parallel()
	proctest.SkipWithoutSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs a control group per call (root here)")
	}
	tools := t.TempDir()
	putTool(t, tools, "work", testTool("work", `intent: run a command unjudged
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true }
constraints: { timeout_ms: 30000, shell_policy: none }
`))
	d := startDaemon(t, map[string]string{}, "--tools", tools, "--sandbox-max-memory", "536870912")
	code, res := d.call(t, "work", map[string]any{"cmd": "for i in 1 2 3; do perl -e '$x = \"x\" x 250000000; sleep 100' & done; sleep 100"})
	if code == 0 || res.Status != dispatch.Timeout || !strings.Contains(res.LimitHit, "memory limit") || !strings.Contains(res.Error, "memory limit") {
		t.Errorf("a memory hog that timed out: %d %s limit_hit %q error %q; want timeout naming the memory limit", code, res.Status, res.LimitHit, res.Error)
	}
	code, res = d.call(t, "work", map[string]any{"cmd": "head -c 300000000 /dev/zero > /tmp/big"})
	if code == 0 || !strings.Contains(res.LimitHit, "/tmp") || !strings.Contains(res.LimitHit, "full at its 256 MiB") {
		t.Errorf("a call that fills /tmp: %d %s limit_hit %q stderr %q; want the full /tmp named", code, res.Status, res.LimitHit, res.Stderr)
	}
	if code, res := d.call(t, "work", map[string]any{"cmd": "echo fine"}); code != 200 || res.LimitHit != "" {
		t.Errorf("a call within its limits: %d limit_hit %q; want none", code, res.LimitHit)
	}
}

// startDaemonProcessWith is startDaemonProcess with descriptors the
// daemon inherits: extra[i] is its descriptor 3+i (nil: closed).
func startDaemonProcessWith(t *testing.T, extra []*os.File, args ...string) *daemonProcess {
	t.Helper()
	return startDaemonProcessCmd(t, func(cmd *exec.Cmd) { cmd.ExtraFiles = extra }, args...)
}
