package proc_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

func poolStats(t *testing.T, sb *proc.Sandbox) proc.PoolStats {
	t.Helper()
	st, ok, err := sb.Pool()
	if !ok {
		t.Fatalf("no reusable sandboxes: %v", err)
	}
	return st
}

// TestReuseLeavesNothingForTheNextCall: a call plants what it can in a
// reused sandbox (files in every scratch directory and in bubblewrap's
// mount-point directories, an unreadable directory, SysV IPC objects, a
// POSIX message queue, a daemonized process); the next call in the same
// sandbox finds none of it, and the granted directory (a mount inside the
// sandbox's /tmp) keeps its files: emptying never crosses into a mount.
func TestReuseLeavesNothingForTheNextCall(t *testing.T) {
	base := t.TempDir() // under the host's /tmp: its mount points are made in the sandbox's /tmp
	state := filepath.Join(base, "state")
	granted := filepath.Join(state, "files")
	must(t, os.MkdirAll(granted, 0o755))
	must(t, os.WriteFile(filepath.Join(granted, "kept"), []byte("host data"), 0o644))
	sb := proctest.NewSandbox(t, proc.SandboxOptions{Reuse: 2, Hide: []string{state}, Expose: []string{granted}})
	g := proc.Grant{Write: []string{granted}}
	marker := "toolagent-reuse-" + strconv.FormatInt(time.Now().UnixNano(), 36)

	plant := fmt.Sprintf(`set -e
echo a > /tmp/a; echo b > /var/tmp/b; echo c > /dev/shm/c
echo d > %[1]s/planted-beside-the-mount
mkdir -p /tmp/locked/deep; echo e > /tmp/locked/deep/e; chmod 0 /tmp/locked/deep /tmp/locked
ln -s %[2]s /tmp/link-to-grant
touch /dev/mqueue/q
ipcmk -M 4096 >/dev/null; ipcmk -Q >/dev/null; ipcmk -S 1 >/dev/null
chmod 0700 /tmp /var/tmp; touch -d @1000000000 /tmp /dev/shm
if command -v python3 >/dev/null; then python3 -c 'import os; os.setxattr("/tmp", "user.left", b"for the next call")'; fi
setsid -f bash -c 'exec -a %[3]s sleep 1000'
for i in $(seq 200); do [ "$(pgrep -fc ^%[3]s)" -ge 1 ] && break; sleep 0.05; done
echo planted`, base, granted, marker)
	// The scratch directories' own marks (mode, modification time,
	// extended attributes) as a new sandbox has them; a call may change them, and
	// the next call must find them as they were.
	must(t, sb.Warm(g))
	const meta = `stat -c '%a %Y' /tmp /var/tmp /dev/shm; if command -v python3 >/dev/null; then python3 -c 'import os; print(os.listxattr("/tmp"))'; fi`
	fresh := bash(t, sb, g, meta)
	if fresh.ExitCode != 0 {
		t.Fatalf("stat: %q", fresh.Stderr)
	}
	before := poolStats(t, sb)
	o := bash(t, sb, g, plant)
	if strings.TrimSpace(string(o.Stdout)) != "planted" {
		t.Fatalf("plant: stdout %q stderr %q exit %d", o.Stdout, o.Stderr, o.ExitCode)
	}
	waitNoneMarked(t, marker, 30*time.Second)

	look := fmt.Sprintf(`find /tmp /var/tmp /dev/shm /dev/mqueue -mindepth 1 -not -path '%[1]s/files/*' | sort; ipcs -m -q -s | grep -c '^0x'; cat %[1]s/files/kept`, state)
	o = bash(t, sb, g, look)
	var dirs []string // the mount point and its parents, which bwrap made in the sandbox's /tmp
	for d := granted; d != "/tmp"; d = filepath.Dir(d) {
		dirs = append([]string{d}, dirs...)
	}
	want := strings.Join(dirs, "\n") + "\n0\nhost data"
	if got := strings.TrimSpace(string(o.Stdout)); got != want {
		t.Errorf("the next call sees:\n%s\n(stderr %q)\nwant only the mount point directories, no IPC objects and the grant's file:\n%s", got, o.Stderr, want)
	}
	if o := bash(t, sb, g, meta); string(o.Stdout) != string(fresh.Stdout) {
		t.Errorf("the scratch directories' modes, times and attributes: %q after a call changed them; want %q as before", o.Stdout, fresh.Stdout)
	}
	if b, err := os.ReadFile(filepath.Join(granted, "kept")); err != nil || string(b) != "host data" {
		t.Errorf("the granted directory's file after the clean-up: %q, %v; want it untouched", b, err)
	}
	if st := poolStats(t, sb); st.Started != before.Started || st.Served != before.Served+3 || st.Discarded != 0 {
		t.Errorf("pool stats %+v -> %+v; want the grant's one sandbox reused, none discarded", before, st)
	}
}

// TestReuseDiscardsAKilledSandbox: a call that times out kills its whole
// sandbox, as one of its own would be; the next call gets a new one.
func TestReuseDiscardsAKilledSandbox(t *testing.T) {
	sb := proctest.NewSandbox(t, proc.SandboxOptions{Reuse: 2})
	served := poolStats(t, sb).Served
	o := mustRun(t, t.Context(), proc.Spec{Argv: []string{"/bin/sleep", "1000"}, Dir: "/", Env: proc.SandboxEnv(), Timeout: time.Second, Sandbox: sb})
	if !o.TimedOut || o.ExitCode != 137 || o.Signal != "SIGKILL" {
		t.Errorf("a timed-out call: %+v; want TimedOut, exit 137, SIGKILL", o)
	}
	st := poolStats(t, sb)
	if st.Served != served+1 || st.Discarded != 1 || st.Idle != 0 || !strings.Contains(st.LastDiscarded, "timed out") {
		t.Errorf("after a timeout: %+v; want the sandbox that served it discarded, saying why", st)
	}
	o = bash(t, sb, proc.Grant{}, `echo again`)
	if string(o.Stdout) != "again\n" {
		t.Errorf("the next call: %q %q", o.Stdout, o.Stderr)
	}
}

// TestReuseWorkerKilledByItsCall: a call may kill the worker (it runs as
// the same user); the sandbox then dies with everything in it, and the
// call is an error, never a result.
func TestReuseWorkerKilledByItsCall(t *testing.T) {
	sb := proctest.NewSandbox(t, proc.SandboxOptions{Reuse: 2})
	if st := poolStats(t, sb); st.Idle != 1 {
		t.Fatalf("pool %+v; want the probe's sandbox idle", st)
	}
	o, err := proc.Run(t.Context(), proc.Spec{Argv: []string{"/bin/bash", "-c", `kill -9 $PPID; sleep 1000`}, Dir: "/", Env: proc.SandboxEnv(), Timeout: time.Minute, Sandbox: sb})
	if err == nil || !strings.Contains(err.Error(), "worker died") {
		t.Errorf("a call that killed its worker: %+v, %v; want an error saying the worker died", o, err)
	}
	o = bash(t, sb, proc.Grant{}, `echo again`)
	if string(o.Stdout) != "again\n" {
		t.Errorf("the next call: %q %q", o.Stdout, o.Stderr)
	}
}

// TestReuseConcurrentCallsGetSandboxesOfTheirOwn: calls running at once
// never share a sandbox: each sees only its own /tmp, whether it got a
// reusable sandbox or, none being idle, one of its own.
func TestReuseConcurrentCallsGetSandboxesOfTheirOwn(t *testing.T) {
	sb := proctest.NewSandbox(t, proc.SandboxOptions{Reuse: 4})
	meet := worldDir(t) // where the calls meet, so all four run at once
	must(t, sb.Warm(proc.Grant{Write: []string{meet}}))
	must(t, sb.Warm(proc.Grant{Write: []string{meet}}))
	before := poolStats(t, sb)
	const n = 4
	var wg sync.WaitGroup
	outs := make([]proc.Outcome, n)
	for i := range n {
		wg.Go(func() {
			script := fmt.Sprintf(`touch /tmp/mine-%[1]d %[2]s/%[1]d
for i in $(seq 600); do [ "$(ls %[2]s | wc -l)" -ge %[3]d ] && break; sleep 0.05; done
ls /tmp`, i, meet, n)
			outs[i] = bash(t, sb, proc.Grant{Write: []string{meet}}, script)
		})
	}
	wg.Wait()
	for i, o := range outs {
		if got := string(o.Stdout); got != fmt.Sprintf("mine-%d\n", i) {
			t.Errorf("call %d sees /tmp %q (stderr %q); want only its own file", i, got, o.Stderr)
		}
	}
	st := poolStats(t, sb)
	if st.Served < before.Served+2 || st.Served+st.Fresh != before.Served+before.Fresh+n {
		t.Errorf("pool stats %+v -> %+v; want the two idle sandboxes used, and sandboxes of their own for the rest", before, st)
	}
}

// TestReuseOff: Reuse 0 keeps no sandbox; a working directory under /tmp
// gets a sandbox of its own even when reuse is on.
func TestReuseOff(t *testing.T) {
	sb := proctest.NewSandbox(t, proc.SandboxOptions{})
	if _, ok, err := sb.Pool(); ok || err != nil {
		t.Errorf("Reuse 0: Pool() = %v, %v; want none, no error", ok, err)
	}
	sb = proctest.NewSandbox(t, proc.SandboxOptions{Reuse: 2})
	before := poolStats(t, sb)
	o := mustRun(t, t.Context(), proc.Spec{Argv: []string{"/bin/pwd"}, Dir: t.TempDir(), Env: proc.SandboxEnv(), Timeout: 30 * time.Second, Sandbox: sb})
	if o.ExitCode != 0 {
		t.Fatalf("pwd in /tmp: %+v", o)
	}
	if st := poolStats(t, sb); st.Served != before.Served {
		t.Errorf("a call in /tmp used a reusable sandbox: %+v -> %+v", before, st)
	}
}

// TestReuseShowsAWorkingDirectoryInTmp: calls whose working directory is
// under /tmp (a daemon started in a checkout there) are served by reused
// sandboxes too, kept per directory shown: the next call sees the
// directory, read-only, and nothing the previous call left in /tmp.
func TestReuseShowsAWorkingDirectoryInTmp(t *testing.T) {
	work := t.TempDir()
	must(t, os.WriteFile(filepath.Join(work, "README"), []byte("checkout"), 0o644))
	sb := proctest.NewSandbox(t, proc.SandboxOptions{Reuse: 2})
	run := func(script string) proc.Outcome {
		return mustRun(t, t.Context(), proc.Spec{Argv: []string{"/bin/bash", "-c", script}, Dir: work, Env: proc.SandboxEnv(), Timeout: 30 * time.Second, Sandbox: sb})
	}
	before := poolStats(t, sb)
	// The first call gets a sandbox of its own and starts one for the
	// directory in the background; calls go on until one is served.
	deadline := time.Now().Add(2 * time.Minute)
	for poolStats(t, sb).Served == before.Served {
		if time.Now().After(deadline) {
			t.Fatalf("no call with a working directory in /tmp was served by a reused sandbox: %+v", poolStats(t, sb))
		}
		if o := run(`cat README; echo left > /tmp/leftover; touch written 2>/dev/null && echo WRITABLE`); string(o.Stdout) != "checkout" {
			t.Fatalf("a call in %s: stdout %q stderr %q; want the directory's file, read-only", work, o.Stdout, o.Stderr)
		}
	}
	o := run(`cat README; ls /tmp/leftover 2>/dev/null`)
	if string(o.Stdout) != "checkout" {
		t.Errorf("the next call in the reused sandbox: stdout %q stderr %q; want the directory's file and no leftover", o.Stdout, o.Stderr)
	}
	if st := poolStats(t, sb); st.Discarded != 0 {
		t.Errorf("pool stats %+v; want nothing discarded", st)
	}
}

// TestStartedOnce: Spec.Started is called once when the process runs —
// unsandboxed, in a sandbox of its own and in a reused one — and never
// for a program that does not start.
func TestStartedOnce(t *testing.T) {
	own := proctest.NewSandbox(t, proc.SandboxOptions{})
	pooled := proctest.NewSandbox(t, proc.SandboxOptions{Reuse: 2})
	for _, tt := range []struct {
		name string
		spec proc.Spec
		want int
	}{
		{"unsandboxed", proc.Spec{Argv: []string{"/bin/true"}}, 1},
		{"its own sandbox", proc.Spec{Argv: []string{"/bin/true"}, Dir: "/", Env: proc.SandboxEnv(), Sandbox: own}, 1},
		{"a reused sandbox", proc.Spec{Argv: []string{"/bin/true"}, Dir: "/", Env: proc.SandboxEnv(), Sandbox: pooled}, 1},
		{"a reused sandbox, no such program", proc.Spec{Argv: []string{"/nonexistent/prog"}, Dir: "/", Env: proc.SandboxEnv(), Sandbox: pooled}, 0},
		{"no such program", proc.Spec{Argv: []string{"/nonexistent/prog"}}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			tt.spec.Started = func() { n++ }
			tt.spec.Timeout = 30 * time.Second
			proc.Run(t.Context(), tt.spec)
			if n != tt.want {
				t.Errorf("Started called %d times; want %d", n, tt.want)
			}
		})
	}
}
