package proc_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// bash runs script under /bin/bash in sb with grant g, in /: the test's
// own working directory may be under /tmp, and would then be shown there
// (TestSandboxShowsAWorkingDirectoryInTmp).
func bash(t *testing.T, sb *proc.Sandbox, g proc.Grant, script string) proc.Outcome {
	t.Helper()
	return mustRun(t, t.Context(), proc.Spec{
		Argv:    []string{"/bin/bash", "-c", script},
		Dir:     "/",
		Env:     proc.SandboxEnv(),
		Timeout: 30 * time.Second,
		Sandbox: sb,
		Grant:   g,
	})
}

// eachMechanism runs f with each mechanism this host can run (as root,
// both): both must give a call the same boundary.
func eachMechanism(t *testing.T, f func(t *testing.T, mech string)) {
	mechs := []string{proc.MechanismBubblewrap}
	if os.Geteuid() == 0 {
		mechs = append(mechs, proc.MechanismLandlock)
	}
	for _, m := range mechs {
		t.Run(m, func(t *testing.T) { f(t, m) })
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// worldDir returns a proctest.HostDir every user can enter and write, so a sandbox
// running as another user can use it.
func worldDir(t *testing.T) string {
	t.Helper()
	d := proctest.HostDir(t)
	must(t, os.Chmod(d, 0o777))
	return d
}

func TestSandboxRunsAndReportsTheExitCode(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		out := bash(t, sb, proc.Grant{}, `echo hello; echo oops >&2; exit 7`)
		if string(out.Stdout) != "hello\n" || string(out.Stderr) != "oops\n" || out.ExitCode != 7 {
			t.Errorf("got stdout %q stderr %q exit %d; want hello, oops, 7", out.Stdout, out.Stderr, out.ExitCode)
		}
		out = bash(t, sb, proc.Grant{}, `kill -SEGV $$`)
		if out.ExitCode != 128+int(syscall.SIGSEGV) {
			t.Errorf("a command killed by SIGSEGV: exit %d; want %d", out.ExitCode, 128+int(syscall.SIGSEGV))
		}
	})
}

func TestSandboxFilesystemIsReadOnlyOutsideTheGrant(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		// Directories every user may write: what refuses is the sandbox,
		// not the permissions of the tool's user.
		dir, granted := worldDir(t), worldDir(t)
		script := fmt.Sprintf(`touch %s/outside; touch %s/inside && echo wrote`, dir, granted)

		out := bash(t, sb, proc.Grant{}, script)
		if _, err := os.Stat(filepath.Join(dir, "outside")); err == nil {
			t.Errorf("read-only grant: a file was created outside the grant")
		}
		if _, err := os.Stat(filepath.Join(granted, "inside")); err == nil {
			t.Errorf("read-only grant: a file was created in a directory that was not granted")
		}
		// bubblewrap mounts the host read-only; Landlock refuses.
		want := map[string]string{proc.MechanismBubblewrap: "Read-only file system", proc.MechanismLandlock: "Permission denied"}[mech]
		if !strings.Contains(string(out.Stderr), want) {
			t.Errorf("stderr = %q; want the kernel's %s", out.Stderr, want)
		}

		out = bash(t, sb, proc.Grant{Write: []string{granted}}, script)
		if _, err := os.Stat(filepath.Join(granted, "inside")); err != nil {
			t.Errorf("write grant: %v (stdout %q stderr %q)", err, out.Stdout, out.Stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "outside")); err == nil {
			t.Errorf("write grant of one directory let the call write another")
		}
	})
}

func TestSandboxTmpIsPrivateAndGone(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		marker := "toolagent-tmp-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		out := bash(t, sb, proc.Grant{}, `echo x > /tmp/`+marker+` && ls -A /tmp && echo "HOME=$HOME"`)
		if got := string(out.Stdout); got != marker+"\nHOME=/tmp\n" {
			t.Errorf("first call: stdout %q stderr %q; want only its own file in /tmp and HOME=/tmp", got, out.Stderr)
		}
		if _, err := os.Stat(filepath.Join(os.TempDir(), marker)); err == nil {
			t.Errorf("the sandbox's /tmp file appeared in the host's /tmp")
		}
		out = bash(t, sb, proc.Grant{}, `ls -A /tmp /var/tmp`)
		if strings.Contains(string(out.Stdout), marker) {
			t.Errorf("second call sees the first call's /tmp: %q", out.Stdout)
		}
	})
}

func TestSandboxHidesSecrets(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		// Not under /tmp: the sandbox's /tmp is private anyway, so a secret
		// there would be hidden without Hide doing anything.
		base2 := worldDir(t) // readable by the tool's user: only hiding hides
		secretDir := filepath.Join(base2, "state")
		secretFile := filepath.Join(base2, "token")
		must(t, os.MkdirAll(secretDir, 0o700))
		must(t, os.Chmod(secretDir, 0o755))
		must(t, os.WriteFile(filepath.Join(secretDir, "approvals.json"), []byte("SECRET-IN-STATE"), 0o644))
		must(t, os.WriteFile(secretFile, []byte("SECRET-TOKEN"), 0o644))
		must(t, os.WriteFile(filepath.Join(base2, "visible"), []byte("visible"), 0o644))
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech, Hide: []string{secretDir, secretFile}})

		out := bash(t, sb, proc.Grant{}, fmt.Sprintf(`cat %[1]s/visible; echo; cat %[1]s/token; ls -A %[1]s/state; cat %[1]s/state/approvals.json; grep -r SECRET %[1]s`, base2))
		if strings.Contains(string(out.Stdout), "SECRET") {
			t.Errorf("a hidden secret was readable: %q", out.Stdout)
		}
		if !strings.HasPrefix(string(out.Stdout), "visible") {
			t.Errorf("stdout = %q; want the file that is not hidden to stay readable", out.Stdout)
		}
		// A write grant may not uncover a hidden path.
		if err := sb.CheckGrant(proc.Grant{Write: []string{base2}}); err == nil {
			t.Errorf("CheckGrant(write %s) = nil; want a refusal: it contains hidden paths", base2)
		}
	})
}

func TestSandboxSeesNoDaemon(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		t.Setenv("TOOLAGENT_TEST_SECRET", "SECRET-IN-ENV")
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		out := bash(t, sb, proc.Grant{}, fmt.Sprintf(`echo "ppid=$PPID"; ls /proc | grep -c '^[0-9]'; cat /proc/%d/environ; tr '\0' '\n' < /proc/$PPID/environ; cat /proc/1/environ`, os.Getpid()))
		if bytes.Contains(out.Stdout, []byte("SECRET-IN-ENV")) || bytes.Contains(out.Stderr, []byte("SECRET-IN-ENV")) {
			t.Fatalf("the daemon's environment reached the sandbox: %q", out.Stdout)
		}
		lines := strings.Split(string(out.Stdout), "\n")
		// bash, ls and grep, and bwrap's init under bubblewrap.
		if n, err := strconv.Atoi(lines[1]); err != nil || n > 4 {
			t.Errorf("the sandbox's /proc shows %q processes; want only its own few (stdout %q)", lines[1], out.Stdout)
		}
	})
}

func TestSandboxNetwork(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("reached\n"))
				c.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		script := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && cat <&3`, port)

		out := bash(t, sb, proc.Grant{}, script)
		if strings.Contains(string(out.Stdout), "reached") || out.ExitCode == 0 {
			t.Errorf("no network grant: the call reached the host's loopback (exit %d, %q)", out.ExitCode, out.Stdout)
		}
		out = bash(t, sb, proc.Grant{}, `ls /run | head -3`)
		if len(bytes.TrimSpace(out.Stdout)) != 0 {
			t.Errorf("no network grant: /run (host service sockets) is visible: %q", out.Stdout)
		}
		out = bash(t, sb, proc.Grant{Network: true}, script)
		if string(out.Stdout) != "reached\n" {
			t.Errorf("network grant: stdout %q stderr %q exit %d; want the listener's line", out.Stdout, out.Stderr, out.ExitCode)
		}
	})
}

// waitNoneMarked waits until no process carries marker, failing after d.
func waitNoneMarked(t *testing.T, marker string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		n := proctest.CountMarked(marker)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes marked %s still alive %v after the call ended", n, marker, d)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

func TestSandboxNothingOutlivesTheCall(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		marker := "toolagent-escape-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		// Each escape names the marker in its own argv, so it can be counted.
		// The script waits (bounded) until all four escapees run, and says
		// how many it saw, so the test knows they started.
		script := fmt.Sprintf(`
	setsid -f bash -c 'exec -a %[1]s-setsid sleep 1000'
	( ( exec -a %[1]s-double sleep 1000 ) & ) &
	perl -e 'setpgrp(0,0); exec {"sleep"} "%[1]s-setpgrp", "1000"' &
	nohup bash -c 'exec -a %[1]s-nohup sleep 1000' >/dev/null 2>&1 &
	disown -a
	for i in $(seq 200); do [ "$(pgrep -fc ^%[1]s)" -ge 4 ] && break; sleep 0.05; done
	echo "running $(pgrep -fc ^%[1]s)"`, marker)
		out := bash(t, sb, proc.Grant{}, script)
		if !strings.Contains(string(out.Stdout), "running 4") {
			t.Fatalf("the escapees did not all start: stdout %q stderr %q", out.Stdout, out.Stderr)
		}
		waitNoneMarked(t, marker, 30*time.Second)

		// The same at a timeout: the call is killed while its escapees run.
		s := proc.Spec{
			Argv:    []string{"/bin/bash", "-c", fmt.Sprintf(`setsid -f bash -c 'exec -a %[1]s-t sleep 1000'; ( (exec -a %[1]s-t2 sleep 1000) & ) & echo ready; sleep 1000`, marker)},
			Env:     proc.SandboxEnv(),
			Timeout: 2 * time.Second,
			Sandbox: sb,
		}
		o := mustRun(t, t.Context(), s)
		if !o.TimedOut {
			t.Errorf("want a timeout, got %+v", o)
		}
		waitNoneMarked(t, marker, 30*time.Second)
	})
}

// TestSandboxLimits: the limits hold with a control group per sandbox
// where the host allows one, and with rlimits alone (NoCgroups).
func TestSandboxLimits(t *testing.T) {
	for _, noCG := range []bool{false, true} {
		t.Run(fmt.Sprintf("cgroups=%t", !noCG), func(t *testing.T) { testSandboxLimits(t, noCG) })
	}
}

func testSandboxLimits(t *testing.T, noCG bool) {
	eachMechanism(t, func(t *testing.T, mech string) {
		if os.Getuid() != 0 {
			t.Skip("needs root to run the sandbox as another user (RLIMIT_NPROC does not bind uid 0)")
		}
		nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech, NoCgroups: noCG, User: nobody, Limits: proc.Limits{MaxProcs: 16, MaxMemory: 256 << 20}})
		dir := worldDir(t)

		// Process count: dash reports a failed fork at once (bash retries).
		o := mustRun(t, t.Context(), proc.Spec{
			Argv: []string{"/bin/sh", "-c", `i=0; while [ $i -lt 64 ]; do sleep 30 & i=$((i+1)); done; echo spawned`},
			Env:  proc.SandboxEnv(), Timeout: 60 * time.Second, Sandbox: sb, Dir: dir,
		})
		if o.ExitCode == 0 || !strings.Contains(string(o.Stderr), "fork") {
			t.Errorf("64 background processes with max_procs 16: exit %d, stderr %q; want a fork failure", o.ExitCode, o.Stderr)
		}

		// Memory: dd allocates its block before it reads. With an
		// address space limit (rlimits only) the allocation fails; with
		// the call's control group, filling the block does.
		o = mustRun(t, t.Context(), proc.Spec{
			Argv: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=512M", "count=1"},
			Env:  proc.SandboxEnv(), Timeout: 60 * time.Second, Sandbox: sb,
		})
		if o.ExitCode == 0 || !strings.Contains(string(o.Stderr), "memory") && !strings.Contains(o.LimitHit, "memory limit") {
			t.Errorf("a 512 MiB buffer with max_memory 256 MiB: exit %d, stderr %q, limit hit %q; want dd's memory exhausted", o.ExitCode, o.Stderr, o.LimitHit)
		}

		// Every call has the limits, set before its first instruction.
		for _, mem := range []int64{256 << 20, proc.DefaultMaxMemory} {
			sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech, NoCgroups: noCG, User: nobody, Limits: proc.Limits{MaxProcs: 16, MaxMemory: mem}})
			o := mustRun(t, t.Context(), proc.Spec{
				Argv: []string{"/bin/bash", "-c", `ulimit -v; ulimit -u; ulimit -n`},
				Env:  proc.SandboxEnv(), Timeout: 60 * time.Second, Sandbox: sb, Dir: "/",
			})
			// Where a control group enforces the process limit,
			// RLIMIT_NPROC is only a backstop above it.
			// The call's memory is then the group's too, and no
			// address space limit is set.
			nproc, as := "16", strconv.FormatInt(mem>>10, 10)
			if _, err := sb.Cgroups(); err == nil {
				nproc, as = strconv.Itoa(2*16+64), "unlimited"
			}
			if want := fmt.Sprintf("%s\n%s\n%d\n", as, nproc, proc.DefaultMaxOpenFiles); string(o.Stdout) != want {
				t.Errorf("max_memory %d: ulimit -v, -u, -n say %q (stderr %q); want %q", mem, o.Stdout, o.Stderr, want)
			}
		}

		// The user: the sandbox cannot read a root-only file.
		secret := filepath.Join(dir, "root-only")
		must(t, os.WriteFile(secret, []byte("SECRET"), 0o600))
		o = mustRun(t, t.Context(), proc.Spec{
			Argv: []string{"/bin/cat", secret}, Env: proc.SandboxEnv(), Timeout: 30 * time.Second, Sandbox: sb,
		})
		if bytes.Contains(o.Stdout, []byte("SECRET")) || o.ExitCode == 0 {
			t.Errorf("sandbox user read a 0600 root file: exit %d %q", o.ExitCode, o.Stdout)
		}
	})
}

// TestSandboxLimitHitIsStated: where the daemon can give each sandbox a
// control group, a call that hits its process or memory limit says so in
// its Outcome, as the group counted it, for root's sandboxes too (the
// group, unlike RLIMIT_NPROC, binds uid 0). A call within its limits says
// nothing, and the counting starts anew with every call of a reused
// sandbox.
func TestSandboxLimitHitIsStated(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech, Limits: proc.Limits{MaxProcs: 16, MaxMemory: 64 << 20}})
		if _, err := sb.Cgroups(); err != nil {
			t.Skipf("no control group per sandbox on this host (%v): run the tests as root where the pids and memory controllers are mounted (cgroup v1), or delegated to the daemon's group (cgroup v2)", err)
		}
		run := func(script string) proc.Outcome {
			return mustRun(t, t.Context(), proc.Spec{
				Argv: []string{"/bin/sh", "-c", script}, Dir: "/",
				Env: proc.SandboxEnv(), Timeout: 60 * time.Second, Sandbox: sb,
			})
		}
		o := run(`i=0; while [ $i -lt 64 ]; do sleep 30 & i=$((i+1)); done; echo spawned`)
		if !strings.Contains(o.LimitHit, "process limit") || !strings.Contains(o.LimitHit, "limit of 16") {
			t.Errorf("64 background processes with max_procs 16: LimitHit %q (exit %d, stderr %.200q); want the process limit named", o.LimitHit, o.ExitCode, o.Stderr)
		}
		if o := run(`echo fine`); o.LimitHit != "" || string(o.Stdout) != "fine\n" {
			t.Errorf("a call within its limits after one that hit them: LimitHit %q, stdout %q; want none", o.LimitHit, o.Stdout)
		}
		// Three processes of 40 MB each: every one is within its own
		// address space limit (64 MiB), all of them are not within the
		// call's 64 MiB.
		o = run(`for i in 1 2 3; do (head -c 40000000 /dev/zero | tail -c 40000000 >/dev/null; echo "tail $i: $?") & done; wait`)
		if !strings.Contains(o.LimitHit, "memory limit") || !strings.Contains(o.LimitHit, "64 MiB") {
			t.Errorf("120 MB in three processes with max_memory 64 MiB: LimitHit %q (exit %d, stdout %q, stderr %.200q); want the memory limit named", o.LimitHit, o.ExitCode, o.Stdout, o.Stderr)
		}
		if o := run(`echo fine`); o.LimitHit != "" {
			t.Errorf("a call within its limits after one that hit the memory limit: LimitHit %q; want none", o.LimitHit)
		}
	})
}

func TestSandboxSetupFailureIsAStartError(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		_, err := proc.Run(t.Context(), proc.Spec{
			Argv: []string{"/bin/true"}, Env: proc.SandboxEnv(), Timeout: 30 * time.Second, Sandbox: sb,
			Grant: proc.Grant{Write: []string{"/nonexistent/toolagent"}},
		})
		if !errors.Is(err, proc.ErrSandbox) {
			t.Errorf("a grant of a missing path: err = %v; want ErrSandbox", err)
		}
		_, err = proc.Run(t.Context(), proc.Spec{
			Argv: []string{"/bin/true"}, Env: proc.SandboxEnv(), Timeout: 30 * time.Second, Sandbox: sb,
			Dir: "/proc/self/fd/0/nonexistent-dir-x",
		})
		if err == nil {
			t.Errorf("a missing working directory: err = nil; want a start error")
		}
	})
}

func TestNewSandboxWithoutBubblewrap(t *testing.T) {
	_, err := proc.NewSandbox(proc.SandboxOptions{Mechanism: proc.MechanismBubblewrap, Bwrap: "/nonexistent/bwrap"})
	if !errors.Is(err, proc.ErrSandbox) {
		t.Errorf("NewSandbox(missing bwrap) = %v; want ErrSandbox", err)
	}
}

func BenchmarkRunTrueSandboxed(b *testing.B) {
	sb := proctest.NewSandbox(b, proc.SandboxOptions{})
	b.ReportAllocs()
	s := proc.Spec{Argv: []string{"true"}, Timeout: 10 * time.Second, Sandbox: sb, Env: proc.SandboxEnv()}
	for b.Loop() {
		out, err := proc.Run(b.Context(), s)
		if err != nil || out.ExitCode != 0 {
			b.Fatalf("Run(true) = exit %d, %v", out.ExitCode, err)
		}
	}
}

func TestLimitsString(t *testing.T) {
	got := proc.Limits{MaxProcs: 256, MaxMemory: 4 << 30, MaxOpenFiles: 1024, MaxTmp: 256<<20 + 1}.String()
	if want := "256 processes, 4 GiB address space per process, 1024 open files, 268435457 bytes /tmp"; got != want {
		t.Errorf("Limits.String() = %q, want %q", got, want)
	}
}

// TestSandboxShowsAWorkingDirectoryInTmp: a working directory under /tmp
// (a checkout there) is visible read-only in the sandbox, and only it; a
// hidden path inside it stays hidden, and the rest of the host's /tmp is
// out of sight. With no Dir, the daemon's own working directory counts.
func TestSandboxShowsAWorkingDirectoryInTmp(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		work, other := t.TempDir(), t.TempDir()
		must(t, os.WriteFile(filepath.Join(work, "README"), []byte("checkout"), 0o644))
		must(t, os.MkdirAll(filepath.Join(work, "state"), 0o700))
		must(t, os.WriteFile(filepath.Join(work, "state", "secret"), []byte("SECRET"), 0o600))
		must(t, os.WriteFile(filepath.Join(other, "neighbour"), []byte("NEIGHBOUR"), 0o644))
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech, Hide: []string{filepath.Join(work, "state")}})
		script := fmt.Sprintf(`cat README; cat state/secret; cat %s/neighbour; touch written`, other)
		for _, tc := range []struct {
			name string
			dir  string
		}{{"Dir", work}, {"the daemon's own", ""}} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.dir == "" {
					t.Chdir(work)
				}
				o := mustRun(t, t.Context(), proc.Spec{Argv: []string{"/bin/bash", "-c", script}, Dir: tc.dir, Env: proc.SandboxEnv(), Timeout: 30 * time.Second, Sandbox: sb})
				if !strings.HasPrefix(string(o.Stdout), "checkout") {
					t.Errorf("stdout %q stderr %q; want the working directory's file", o.Stdout, o.Stderr)
				}
				if strings.Contains(string(o.Stdout), "SECRET") || strings.Contains(string(o.Stdout), "NEIGHBOUR") {
					t.Errorf("stdout %q: a hidden file or another /tmp directory was visible", o.Stdout)
				}
				if _, err := os.Stat(filepath.Join(work, "written")); err == nil {
					t.Errorf("the working directory in /tmp was writable")
				}
			})
		}
	})
}

// BenchmarkSandboxFloor is the mechanism's own price, without a daemon:
// `bash -c 'echo hello'` through Run, 8 at a time, with no sandbox, with
// a sandbox of its own per call, and with one but no control group (the
// group's share of the price), in one run. It reports the host's
// CPU per call (busy time in /proc/stat, so the kernel's deferred work
// for namespaces and control groups counts too) as cpu-ms/op; compare
// the two lines (docs/security.md has the figures):
//
//	go test -run '^$' -bench SandboxFloor -benchtime 400x ./internal/proc/
func BenchmarkSandboxFloor(b *testing.B) {
	sb := proctest.NewSandbox(b, proc.SandboxOptions{})
	for _, tc := range []struct {
		name string
		sb   *proc.Sandbox
	}{{"off", nil}, {"on", sb}, {"on-without-cgroup", proctest.NewSandbox(b, proc.SandboxOptions{NoCgroups: true})}} {
		b.Run("sandbox="+tc.name, func(b *testing.B) {
			s := proc.Spec{Argv: []string{"/bin/bash", "-c", "echo hello"}, Dir: "/", Env: proc.SandboxEnv(), Timeout: 30 * time.Second, Sandbox: tc.sb}
			b.SetParallelism(4) // 4 x GOMAXPROCS (2 here): 8 at a time
			busy0 := hostBusy(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if o, err := proc.Run(b.Context(), s); err != nil || o.ExitCode != 0 {
						b.Errorf("Run = exit %d, %v", o.ExitCode, err)
						return
					}
				}
			})
			b.ReportMetric(float64(hostBusy(b)-busy0)/float64(b.N), "cpu-ms/op")

		})
	}
}

// hostBusy returns the host's busy CPU time so far, in milliseconds: the
// first line of /proc/stat without idle, iowait and steal.
func hostBusy(tb testing.TB) float64 {
	tb.Helper()
	d, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(d), "\n")
	var busy float64
	for i, f := range strings.Fields(line)[1:] {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			tb.Fatal(err)
		}
		if i != 3 && i != 4 && i != 7 { // idle, iowait, steal
			busy += v
		}
	}
	return busy * 1000 / 100 // USER_HZ is 100 on Linux
}
