package proc_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// The escape-class tests: what a tool tries from inside its sandbox to
// reach the host, the daemon or another call, each refused by the layer
// named in its comment. They run with every mechanism this host can run.

// TestEscapeTerminalInjection: TIOCSTI pushes input into a terminal
// (the daemon's, were it inherited); TIOCLINUX reaches the console. The
// filter refuses both, whatever the request's high 32 bits hold (the
// kernel reads 32).
func TestEscapeTerminalInjection(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("calls ioctl by its x86_64 system call number")
	}
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		for _, req := range []string{"0x5412", "0x100005412", "0xffffffff00005412", "0x541C"} {
			// ioctl is system call 16 on x86_64; perl passes the request
			// as the full 64 bits given.
			out := bash(t, sb, proc.Grant{}, `perl -e 'syscall(16, 0, `+req+`, 0) == -1 and print "refused: $!\n"' 2>/dev/null </dev/null`)
			if !strings.Contains(string(out.Stdout), "refused: Operation not permitted") {
				t.Errorf("ioctl(stdin, %s): stdout %q stderr %q; want EPERM from the filter", req, out.Stdout, out.Stderr)
			}
		}
	})
}

// TestEscapeNoPrivileges: no_new_privs (a setuid program gains nothing),
// no capabilities, the filter in place, never uid 0.
func TestEscapeNoPrivileges(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		out := bash(t, sb, proc.Grant{}, `grep -E '^(NoNewPrivs|Seccomp|CapEff|CapPrm):' /proc/self/status; su -c 'echo SU-RAN' root </dev/null; echo "su=$?"; mount -t tmpfs none /tmp 2>&1; echo "mount=$?"`)
		got := string(out.Stdout)
		for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "mount=32"} {
			if !strings.Contains(got, want) {
				t.Errorf("stdout %q lacks %q (stderr %q)", got, want, out.Stderr)
			}
		}
		if strings.Contains(got, "SU-RAN") || strings.Contains(got, "su=0") {
			t.Errorf("setuid su ran a command: %q", got)
		}
		if os.Geteuid() == 0 && mech == proc.MechanismLandlock {
			out = bash(t, sb, proc.Grant{}, `id -u; head -c 64 /etc/shadow`)
			if uid, _, _ := strings.Cut(string(out.Stdout), "\n"); uid == "0" || strings.Contains(string(out.Stdout), "root:") {
				t.Errorf("the daemon is root: the tool runs as uid %s and read /etc/shadow: %q", uid, out.Stdout)
			}
		}
	})
}

// TestEscapeNamespaces: no user namespace (the one an unprivileged
// process may make, and with it every other), no mount.
func TestEscapeNamespaces(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		for _, cmd := range []string{"unshare -U true", "unshare -Ur true", "unshare -m true", "unshare -n true"} {
			out := bash(t, sb, proc.Grant{}, cmd)
			if out.ExitCode == 0 {
				t.Errorf("%s: exit 0 (stderr %q); want a refusal", cmd, out.Stderr)
			}
		}
	})
}

// TestEscapeHostSocketsWithoutNetwork: a call without network reaches no
// Unix socket of a host service under /run, opens no raw, UDP or
// netlink socket, and (TestSandboxNetwork) no TCP port.
func TestEscapeHostSocketsWithoutNetwork(t *testing.T) {
	path := filepath.Join("/run", "toolagent-test-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Skipf("no Unix socket in /run here: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	must(t, os.Chmod(path, 0o777)) // any user may connect: only the sandbox stands between
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
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		out := bash(t, sb, proc.Grant{}, fmt.Sprintf(`perl -MIO::Socket::UNIX -e 'my $s = IO::Socket::UNIX->new(Peer => "%s") or die "refused: $!\n"; print <$s>'`, path))
		if strings.Contains(string(out.Stdout), "reached") {
			t.Errorf("a call without network reached %s: %q", path, out.Stdout)
		}
		for _, sock := range []string{"PF_INET, SOCK_RAW, 1", "PF_INET, SOCK_DGRAM, 0", "PF_PACKET, SOCK_RAW, 0", "PF_NETLINK, SOCK_RAW, 0"} {
			out := bash(t, sb, proc.Grant{}, `perl -MSocket -e 'socket(my $s, `+sock+`) and print "OPENED\n"'`)
			if strings.Contains(string(out.Stdout), "OPENED") {
				t.Errorf("a call without network opened socket(%s)", sock)
			}
		}
	})
}

// TestEscapeInheritedDescriptor: a descriptor the daemon inherited
// without close-on-exec (a shell's 7>>log) does not reach a tool.
func TestEscapeInheritedDescriptor(t *testing.T) {
	log := filepath.Join(proctest.HostDir(t), "daemon.log")
	fd, err := syscall.Open(log, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_APPEND, 0o666) // no O_CLOEXEC: as a shell opens it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		out := bash(t, sb, proc.Grant{}, fmt.Sprintf(`echo LEAKED >&%d; ls /proc/self/fd | tr '\n' ' '`, fd))
		if b, _ := os.ReadFile(log); len(b) != 0 {
			t.Errorf("the tool wrote the daemon's inherited descriptor %d: %q", fd, b)
		}
		// 0-2, and ls's own directory descriptor.
		if fds := strings.Fields(string(out.Stdout)); len(fds) > 4 {
			t.Errorf("the tool holds descriptors %v; want 0, 1, 2 and ls's own", fds)
		}
	})
}

// TestEscapeGrantPaths: a write grant holds for the path as it was when
// the call started: swapped for a symbolic link mid-call it leads
// nowhere else; a granted directory made after the sandbox works.
func TestEscapeGrantPaths(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		granted, elsewhere := proctest.GrantDir(t, sb), proctest.GrantDir(t, sb)
		var once sync.Once
		swapped := make(chan error, 1)
		s := proc.Spec{
			Argv: []string{"/bin/bash", "-c", fmt.Sprintf(`echo ready; for i in $(seq 600); do [ -L %[1]s ] && break; sleep 0.05; done; echo planted > %[1]s/planted; echo "write=$?"`, granted)},
			Dir:  "/", Env: proc.SandboxEnv(), Timeout: 60 * time.Second, Sandbox: sb, Grant: proc.Grant{Write: []string{granted}},
			OnOutput: func(stream string, p []byte) {
				if stream == "stdout" && bytes.Contains(p, []byte("ready")) {
					once.Do(func() {
						err := os.Rename(granted, granted+".real")
						if err == nil {
							err = os.Symlink(elsewhere, granted)
						}
						swapped <- err
					})
				}
			},
		}
		o := mustRun(t, t.Context(), s)
		if err := <-swapped; err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(granted + ".real") })
		if _, err := os.Stat(filepath.Join(elsewhere, "planted")); err == nil {
			t.Errorf("a grant swapped for a symlink mid-call let the call write where it points (stdout %q)", o.Stdout)
		}

		later := filepath.Join(proctest.HostDir(t), "made-later")
		must(t, os.Mkdir(later, 0o777))
		must(t, os.Chmod(later, 0o777))
		o = bash(t, sb, proc.Grant{Write: []string{later}}, "echo ok > "+later+"/f")
		if b, err := os.ReadFile(filepath.Join(later, "f")); err != nil || string(b) != "ok\n" {
			t.Errorf("a grant of a directory made after the sandbox: %q %v (stderr %q)", b, err, o.Stderr)
		}
	})
}

// TestEscapePlantedHelper: nothing the sandbox runs is found through the
// daemon's working directory or PATH, where a caller might have planted
// a program of the same name.
func TestEscapePlantedHelper(t *testing.T) {
	dir := proctest.HostDir(t)
	marker := filepath.Join(dir, "PLANTED-RAN")
	for _, name := range []string{"bwrap", "bash", "true", "unshare"} {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755))
	}
	t.Chdir(dir)
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	eachMechanism(t, func(t *testing.T, mech string) {
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		o := mustRun(t, t.Context(), proc.Spec{Argv: []string{"bash", "-c", "echo hello"}, Env: proc.SandboxEnv(), Timeout: 30 * time.Second, Sandbox: sb})
		if string(o.Stdout) != "hello\n" {
			t.Errorf("stdout %q stderr %q; want hello from the real bash", o.Stdout, o.Stderr)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("a program planted in the working directory or the daemon's PATH ran")
		}
	})
}

// TestEscapeSecondCaller: two calls at once. The second sees nothing of
// the first: not its processes (nor their command lines, which may hold
// secrets), not its files in /tmp, and cannot signal or trace it; and
// what the first left running in the background is gone when it ends,
// so a later call meets no agent of it.
//
// The mechanisms run in parallel: most of the test is the first call's
// sleep. Each has a sandbox of its own and a marker of its own (no
// marker is a prefix of the other), and the few processes both run are
// far under any per-user process limit.
func TestEscapeSecondCaller(t *testing.T) {
	eachMechanism(t, func(t *testing.T, mech string) {
		t.Parallel()
		sb := proctest.NewSandbox(t, proc.SandboxOptions{Mechanism: mech})
		marker := "toolagent-first-" + mech + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		secret := "carol-key-PRIVATE-" + marker
		first := make(chan proc.Outcome, 1)
		go func() {
			o, _ := proc.Run(t.Context(), proc.Spec{
				Argv: []string{"/bin/bash", "-c", fmt.Sprintf(`echo %[2]s > /tmp/secret; setsid -f bash -c 'exec -a %[1]s-agent sleep 1000'; exec -a %[1]s bash -c 'sleep 8; : %[2]s'`, marker, secret)},
				Dir:  "/", Env: proc.SandboxEnv(), Timeout: 60 * time.Second, Sandbox: sb,
			})
			first <- o
		}()
		var pid int
		waitFor := func(what string, cond func() bool) {
			t.Helper()
			deadline := time.Now().Add(60 * time.Second)
			for !cond() {
				if time.Now().After(deadline) {
					t.Fatalf("%s: not within 60s", what)
				}
				time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
			}
		}
		waitFor("the first call's process", func() bool { pid = markedPID(marker); return pid > 0 })
		out := bash(t, sb, proc.Grant{}, fmt.Sprintf(`cat /tmp/secret; cat /proc/%[1]d/cmdline; ls /proc | grep -c .; grep -l %[2]s /proc/[0-9]*/cmdline; kill -0 %[1]d && echo SIGNALLED; perl -e 'syscall(101, 16, %[1]d, 0, 0) == -1 and print "ptrace: $!\n"'`, pid, marker))
		if strings.Contains(string(out.Stdout), secret) || strings.Contains(string(out.Stdout), "SIGNALLED") {
			t.Errorf("the second call saw or signalled the first: stdout %q", out.Stdout)
		}
		if runtime.GOARCH == "amd64" && !strings.Contains(string(out.Stdout), "ptrace: Operation not permitted") {
			t.Errorf("the second call's ptrace of the first: stdout %q stderr %q; want EPERM", out.Stdout, out.Stderr)
		}
		if markedPID(marker) != pid {
			t.Errorf("the first call's process is gone after the second ran")
		}
		<-first
		waitNoneMarked(t, marker, 30*time.Second)
	})
}

// markedPID returns the pid of a live process whose name begins with
// marker, or 0.
func markedPID(marker string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		name, _, _ := bytes.Cut(b, []byte{0})
		if err == nil && string(name) == marker {
			return pid
		}
	}
	return 0
}
