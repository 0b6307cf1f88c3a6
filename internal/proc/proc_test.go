package proc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/toolagent/toolagent/internal/proc"
)

// helperEnv selects a helper behaviour of the test binary (see TestMain).
const helperEnv = "TOOLAGENT_PROC_HELPER"

// TestMain turns the test binary into a helper command when helperEnv is
// set, in the manner of os/exec/exec_test.go: the value names the
// behaviour, os.Args[1:] are its arguments.
func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(helper(name, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func helper(name string, args []string) int {
	switch name {
	case "echo": // print args, space separated, with a newline
		fmt.Println(strings.Join(args, " "))
	case "exit": // exit with args[0]
		code, _ := strconv.Atoi(args[0])
		return code
	case "stderr": // "out" on stdout, args on stderr, exit 3
		fmt.Println("out")
		fmt.Fprintln(os.Stderr, strings.Join(args, " "))
		return 3
	case "ignoreterm": // ignore SIGTERM, say so, then sleep
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "yes": // write "y\n" until the pipe breaks
		line := bytes.Repeat([]byte("y\n"), 4096)
		for {
			if _, err := os.Stdout.Write(line); err != nil {
				return 1
			}
		}
	case "env": // print the environment, one entry a line
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
	case "leakfd": // open args[0] as a shell's 7>>log does, then run a tool, unsandboxed, that writes to it and lists its descriptors
		fd, err := syscall.Open(args[0], syscall.O_WRONLY|syscall.O_APPEND, 0) // no O_CLOEXEC
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		out, err := proc.Run(context.Background(), proc.Spec{
			Argv:    []string{"/bin/sh", "-c", fmt.Sprintf("echo LEAKED >&%d; ls /proc/self/fd | tr '\\n' ' '", fd)},
			Timeout: 10 * time.Second,
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Printf("%d %s", fd, out.Stdout)
	case "ctty": // with a controlling terminal, run a tool that opens /dev/tty
		f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "the helper has no terminal:", err)
			return 2
		}
		f.Close()
		out, err := proc.Run(context.Background(), proc.Spec{
			Argv:    []string{"/bin/sh", "-c", "if (: <>/dev/tty) 2>/dev/null; then echo OPENED; else echo REFUSED; fi"},
			Timeout: 10 * time.Second,
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		os.Stdout.Write(out.Stdout)
	default:
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
		return 2
	}
	return 0
}

// helperSpec returns a Spec that runs the test binary as helper name.
func helperSpec(t testing.TB, name string, args ...string) proc.Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return proc.Spec{
		Argv: append([]string{exe}, args...),
		// GORACE: the race runtime otherwise sleeps 1s before a clean exit.
		Env:     append(proc.MinimalEnv(""), helperEnv+"="+name, "GORACE=atexit_sleep_ms=0"),
		Timeout: 10 * time.Second,
	}
}

func mustRun(t *testing.T, ctx context.Context, s proc.Spec) proc.Outcome {
	t.Helper()
	out, err := proc.Run(ctx, s)
	if err != nil {
		t.Fatalf("Run(%q) error: %v", s.Argv, err)
	}
	return out
}

func TestRunExit(t *testing.T) {
	tests := []struct {
		name       string
		spec       proc.Spec
		wantStdout string
		wantStderr string
		wantCode   int
	}{
		{"echo", helperSpec(t, "echo", "hello", "world"), "hello world\n", "", 0},
		{"exit 0", helperSpec(t, "exit", "0"), "", "", 0},
		{"exit 1", helperSpec(t, "exit", "1"), "", "", 1},
		{"exit 42", helperSpec(t, "exit", "42"), "", "", 42},
		{"stderr separate", helperSpec(t, "stderr", "boom"), "out\n", "boom\n", 3},
		{"real sh", proc.Spec{Argv: []string{"/bin/sh", "-c", "echo a; echo b >&2; exit 7"}}, "a\n", "b\n", 7},
		{"argv0 via PATH", proc.Spec{Argv: []string{"printf", "%s|", "a b", "; rm -rf /"}}, "a b|; rm -rf /|", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := mustRun(t, t.Context(), tt.spec)
			if string(out.Stdout) != tt.wantStdout || string(out.Stderr) != tt.wantStderr || out.ExitCode != tt.wantCode {
				t.Errorf("Run(%q) = stdout %q, stderr %q, exit %d; want %q, %q, %d",
					tt.spec.Argv, out.Stdout, out.Stderr, out.ExitCode, tt.wantStdout, tt.wantStderr, tt.wantCode)
			}
			if out.Signal != "" || out.TimedOut || out.Truncated {
				t.Errorf("Run(%q) = signal %q, timedOut %v, truncated %v; want none", tt.spec.Argv, out.Signal, out.TimedOut, out.Truncated)
			}
			if out.StdoutBytes != int64(len(tt.wantStdout)) || out.StderrBytes != int64(len(tt.wantStderr)) {
				t.Errorf("Run(%q) = byte counts %d/%d; want %d/%d", tt.spec.Argv, out.StdoutBytes, out.StderrBytes, len(tt.wantStdout), len(tt.wantStderr))
			}
		})
	}
}

func TestRunSignalExitCode(t *testing.T) {
	t.Parallel()
	out := mustRun(t, t.Context(), proc.Spec{Argv: []string{"/bin/sh", "-c", "kill -KILL $$"}, Timeout: 10 * time.Second})
	if out.ExitCode != 137 || out.Signal != "SIGKILL" {
		t.Errorf("Run(kill -KILL $$) = exit %d, signal %q; want 137, SIGKILL", out.ExitCode, out.Signal)
	}
}

func TestRunTimeoutKeepsPartialOutput(t *testing.T) {
	t.Parallel()
	// A real shell starts in a millisecond, so "partial" is written long
	// before the timeout even on a loaded machine.
	s := proc.Spec{Argv: []string{"/bin/sh", "-c", "echo partial; exec sleep 10"}, Timeout: 300 * time.Millisecond}
	out := mustRun(t, t.Context(), s)
	if !out.TimedOut || string(out.Stdout) != "partial\n" {
		t.Errorf("Run(echo; sleep, timeout 300ms) = timedOut %v, stdout %q; want true, %q", out.TimedOut, out.Stdout, "partial\n")
	}
	if out.ExitCode != 128+int(syscall.SIGTERM) || out.Signal != "SIGTERM" {
		t.Errorf("Run(echo; sleep, timeout 300ms) = exit %d, signal %q; want %d, SIGTERM", out.ExitCode, out.Signal, 128+int(syscall.SIGTERM))
	}
	if out.Duration > 5*time.Second {
		t.Errorf("Run(echo; sleep, timeout 300ms) took %v; want about the timeout", out.Duration)
	}
}

func TestRunParentCancelIsNotTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	s := proc.Spec{Argv: []string{"/bin/sh", "-c", "echo partial; exec sleep 10"}, Timeout: 10 * time.Second}
	out := mustRun(t, ctx, s)
	if out.TimedOut {
		t.Errorf("Run(echo; sleep) with cancelled ctx = timedOut true; want false (only Spec.Timeout sets it)")
	}
	if out.Signal != "SIGTERM" || string(out.Stdout) != "partial\n" {
		t.Errorf("Run(echo; sleep) with cancelled ctx = signal %q, stdout %q; want SIGTERM, %q", out.Signal, out.Stdout, "partial\n")
	}
}

// TestRunIgnoreSIGTERMIsKilledAfterGrace: a child that ignores SIGTERM
// gets SIGKILL once the grace period after it has passed. The run is
// ended when the child says it ignores SIGTERM (by cancelling its
// context, the same path as the timeout), never by a timeout that a
// slow start could beat.
func TestRunIgnoreSIGTERMIsKilledAfterGrace(t *testing.T) {
	t.Parallel()
	s := helperSpec(t, "ignoreterm")
	s.Grace = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var seen bytes.Buffer
	var mu sync.Mutex
	var readyAt time.Time
	s.OnOutput = func(stream string, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		if stream == "stdout" && readyAt.IsZero() {
			if seen.Write(p); bytes.Contains(seen.Bytes(), []byte("ready\n")) {
				readyAt = time.Now()
				cancel()
			}
		}
	}
	out := mustRun(t, ctx, s)
	ended := time.Now()
	if string(out.Stdout) != "ready\n" {
		t.Fatalf("Run(ignoreterm) stdout = %q; want %q", out.Stdout, "ready\n")
	}
	if out.ExitCode != 137 || out.Signal != "SIGKILL" {
		t.Errorf("Run(ignoreterm) = exit %d, signal %q; want 137, SIGKILL (SIGTERM ignored, killed after the grace)", out.ExitCode, out.Signal)
	}
	mu.Lock()
	defer mu.Unlock()
	if waited := ended.Sub(readyAt); waited < s.Grace {
		t.Errorf("Run(ignoreterm) ended %v after it was cancelled; want the grace period (%v) first", waited, s.Grace)
	}
}

func TestRunKillsGrandchildren(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		timeout time.Duration
	}{
		// The shell waits for its background child; the timeout ends both.
		{"wait", `sleep 100 & echo $!; wait`, 300 * time.Millisecond},
		// The shell exits at once, leaving the child behind holding stdout.
		{"orphan", `sleep 100 & echo $!`, 10 * time.Second},
		// The grandchild ignores SIGTERM (inherited from the shell's trap).
		{"ignores term", `trap '' TERM; sleep 100 & echo $!; wait`, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := proc.Spec{Argv: []string{"/bin/sh", "-c", tt.script}, Timeout: tt.timeout, Grace: 200 * time.Millisecond}
			out := mustRun(t, t.Context(), s)
			pid, err := strconv.Atoi(strings.TrimSpace(string(out.Stdout)))
			if err != nil {
				t.Fatalf("Run(%q) stdout = %q; want the grandchild's pid", tt.script, out.Stdout)
			}
			waitGone(t, pid, 5*time.Second)
			if out.Duration > 3*time.Second {
				t.Errorf("Run(%q) took %v; want well under the grandchild's 100s", tt.script, out.Duration)
			}
		})
	}
}

// A process that leaves the group (setsid) escapes the group kill; Run
// cannot kill it, but must not wait for it longer than the grace period
// even though it holds stdout open.
func TestRunEscapedChildDoesNotBlock(t *testing.T) {
	t.Parallel()
	// The shell exits only once the child is in its own session (field 6
	// of /proc/pid/stat), so the group kill cannot catch it before.
	script := `setsid sleep 100 & p=$!; echo $p; while [ "$(cut -d' ' -f6 /proc/$p/stat)" != "$p" ]; do sleep 0.01; done`
	s := proc.Spec{Argv: []string{"/bin/sh", "-c", script}, Timeout: 10 * time.Second, Grace: 300 * time.Millisecond}
	out := mustRun(t, t.Context(), s)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out.Stdout)))
	if err != nil {
		t.Fatalf("Run(setsid sleep) stdout = %q; want the escaped child's pid", out.Stdout)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := syscall.Kill(pid, 0); err != nil || isZombie(pid) {
		t.Fatalf("escaped child %d is gone (kill(pid, 0) = %v); the test did not test anything", pid, err)
	}
	if out.ExitCode != 0 || out.Duration < s.Grace || out.Duration > 3*time.Second {
		t.Errorf("Run(setsid sleep) = exit %d after %v; want 0 after about the grace period %v", out.ExitCode, out.Duration, s.Grace)
	}
}

// waitGone waits until pid no longer exists (or is a zombie nobody has
// reaped yet: it is dead, and in a container PID 1 may not reap it),
// failing the test if that takes longer than d.
func waitGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) || isZombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild pid %d still alive after %v (kill(pid, 0) = %v)", pid, d, err)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Format: pid (comm) state ...; comm may hold spaces, so cut at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

func TestRunCapsOutput(t *testing.T) {
	tests := []struct {
		name string
		spec proc.Spec
	}{
		{"helper yes", helperSpec(t, "yes")},
		{"real yes", proc.Spec{Argv: []string{"yes"}, Timeout: 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.spec
			s.MaxOutput = 1024
			out := mustRun(t, t.Context(), s)
			if len(out.Stdout) != 1024 || cap(out.Stdout) > 1024 {
				t.Errorf("Run(yes, MaxOutput 1024) stdout len %d cap %d; want len 1024, cap <= 1024", len(out.Stdout), cap(out.Stdout))
			}
			if want := strings.Repeat("y\n", 512); string(out.Stdout) != want {
				t.Errorf("Run(yes) stdout is not the first 1024 bytes of the stream: %q...", out.Stdout[:min(len(out.Stdout), 20)])
			}
			if !out.Truncated || out.TimedOut {
				t.Errorf("Run(yes) = truncated %v, timedOut %v; want true, false", out.Truncated, out.TimedOut)
			}
			if out.StdoutBytes <= s.MaxOutput+proc.DrainLimit {
				t.Errorf("Run(yes) StdoutBytes = %d; want > MaxOutput+DrainLimit = %d", out.StdoutBytes, s.MaxOutput+proc.DrainLimit)
			}
			if out.Signal != "SIGPIPE" {
				t.Errorf("Run(yes) signal = %q; want SIGPIPE (stopped by the drain limit)", out.Signal)
			}
			if out.Duration > 5*time.Second {
				t.Errorf("Run(yes) took %v; want quick", out.Duration)
			}
		})
	}
}

func TestRunEnvNotInherited(t *testing.T) {
	t.Setenv("TOOLAGENT_TEST_SECRET", "s3cret")
	dir := t.TempDir()
	out := mustRun(t, t.Context(), proc.Spec{Argv: []string{"env"}, Dir: dir, Timeout: 10 * time.Second})
	got := strings.Split(strings.TrimSpace(string(out.Stdout)), "\n")
	slices.Sort(got)
	want := proc.MinimalEnv(dir)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Run(env, Env nil) environment mismatch (-want +got):\n%s", diff)
	}
	if bytes.Contains(out.Stdout, []byte("s3cret")) {
		t.Errorf("Run(env) leaked the daemon's environment: %q", out.Stdout)
	}

	// An explicit Env is the whole environment too.
	s := helperSpec(t, "env")
	out = mustRun(t, t.Context(), s)
	if bytes.Contains(out.Stdout, []byte("s3cret")) {
		t.Errorf("Run(env, explicit Env) leaked the daemon's environment: %q", out.Stdout)
	}
}

func TestMinimalEnv(t *testing.T) {
	tests := []struct {
		home string
		want []string
	}{
		{"", []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/", "SHELL=/bin/sh"}},
		{"/srv/x", []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/srv/x", "SHELL=/bin/sh"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, proc.MinimalEnv(tt.home)); diff != "" {
			t.Errorf("MinimalEnv(%q) mismatch (-want +got):\n%s", tt.home, diff)
		}
	}
}

func TestRunStdin(t *testing.T) {
	t.Parallel()
	out := mustRun(t, t.Context(), proc.Spec{Argv: []string{"cat"}, Stdin: strings.NewReader("in\n"), Timeout: 10 * time.Second})
	if string(out.Stdout) != "in\n" {
		t.Errorf("Run(cat) with Stdin = %q; want %q", out.Stdout, "in\n")
	}
}

func TestRunStartErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		spec    proc.Spec
		wantIs  error
		wantMsg string
	}{
		{"not in PATH", t.Context(), proc.Spec{Argv: []string{"toolagent-no-such-program"}}, exec.ErrNotFound, `start "toolagent-no-such-program": executable file not found in $PATH (PATH=/usr/local/bin:/usr/bin:/bin)`},
		{"no such path", t.Context(), proc.Spec{Argv: []string{"/no/such/program"}}, os.ErrNotExist, `start "/no/such/program"`},
		{"bad dir", t.Context(), proc.Spec{Argv: []string{"true"}, Dir: "/no/such/dir"}, os.ErrNotExist, "/no/such/dir"},
		{"empty argv", t.Context(), proc.Spec{}, nil, "empty argv"},
		{"ctx done", cancelled, proc.Spec{Argv: []string{"true"}}, context.Canceled, `start "true"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := proc.Run(tt.ctx, tt.spec)
			if err == nil {
				t.Fatalf("Run(%q) error = nil; want one", tt.spec.Argv)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Run(%q) error = %v; want errors.Is %v", tt.spec.Argv, err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Run(%q) error = %q; want it to contain %q", tt.spec.Argv, err, tt.wantMsg)
			}
		})
	}
}

func BenchmarkRunTrue(b *testing.B) {
	b.ReportAllocs()
	s := proc.Spec{Argv: []string{"true"}, Timeout: 10 * time.Second}
	for b.Loop() {
		out, err := proc.Run(b.Context(), s)
		if err != nil || out.ExitCode != 0 {
			b.Fatalf("Run(true) = exit %d, %v", out.ExitCode, err)
		}
	}
}

func BenchmarkExecTrue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTimeoutCountsFromTheStart: the timeout counts from the start of
// the process, so even a 1ns timeout starts the child and then kills it
// (a timeout, never a start failure), and the time before the start is
// reported apart, as Queued, not as run time.
func TestTimeoutCountsFromTheStart(t *testing.T) {
	before := time.Now()
	out, err := proc.Run(t.Context(), proc.Spec{Argv: []string{"/bin/sleep", "5"}, Timeout: time.Nanosecond})
	total := time.Since(before)
	if err != nil {
		t.Fatalf("Run(timeout 1ns) error = %v; want a timed-out outcome", err)
	}
	if !out.TimedOut || out.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("Run(sleep 5, timeout 1ns) = %+v; want TimedOut and killed by SIGTERM", out)
	}
	if out.Queued <= 0 || out.Queued+out.Duration > total {
		t.Errorf("Queued %v + Duration %v; want a positive wait reported apart, within the %v the call took", out.Queued, out.Duration, total)
	}
}

// TestRunKeep: past MaxOutput, KeepTail keeps the last bytes and KeepBoth
// the first and last halves with a marker naming the bytes left out; the
// byte count is the whole stream's either way, and a stream that fits is
// kept whole, with no marker.
func TestRunKeep(t *testing.T) {
	full := ""
	for i := 1; i <= 20000; i++ {
		full += strconv.Itoa(i) + "\n"
	}
	n := int64(len(full))
	for _, tc := range []struct {
		name string
		keep proc.Keep
		max  int64
		want string
	}{
		{"head", proc.KeepHead, 100, full[:100]},
		{"tail", proc.KeepTail, 100, full[n-100:]},
		{"both", proc.KeepBoth, 101, full[:50] + proc.OmittedMarker(n-101) + full[n-51:]},
		{"tail, all fits", proc.KeepTail, n, full},
		{"both, all fits", proc.KeepBoth, n + 1, full},
		{"both, one byte", proc.KeepBoth, 1, proc.OmittedMarker(n-1) + full[n-1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mustRun(t, t.Context(), proc.Spec{Argv: []string{"seq", "1", "20000"}, MaxOutput: tc.max, Keep: tc.keep, Timeout: 30 * time.Second})
			if string(o.Stdout) != tc.want {
				t.Errorf("stdout: %d bytes %q...; want %d bytes %q...", len(o.Stdout), head(o.Stdout), len(tc.want), head([]byte(tc.want)))
			}
			if o.StdoutBytes != n || o.ExitCode != 0 || o.Truncated != (tc.max < n) {
				t.Errorf("stdout bytes %d exit %d truncated %v; want %d, 0, %v", o.StdoutBytes, o.ExitCode, o.Truncated, n, tc.max < n)
			}
		})
	}
	// A tail is read to the end, past the drain limit that stops a head.
	o := mustRun(t, t.Context(), proc.Spec{Argv: []string{"/bin/sh", "-c", fmt.Sprintf("head -c %d /dev/zero; echo END", proc.DrainLimit+(1<<20))}, MaxOutput: 4, Keep: proc.KeepTail, Timeout: 60 * time.Second})
	if string(o.Stdout) != "END\n" || o.CutOff || o.ExitCode != 0 {
		t.Errorf("a tail past the drain limit: %q cut %v exit %d; want END, read to the end", o.Stdout, o.CutOff, o.ExitCode)
	}
}

func head(b []byte) []byte { return b[:min(len(b), 60)] }

// TestRunInheritedDescriptor: a descriptor the process inherited without
// close-on-exec (a shell's 7>>log) does not reach a tool run without a
// sandbox either. The helper is a fresh process that never made a
// sandbox, so nothing but Run marked its descriptors.
func TestRunInheritedDescriptor(t *testing.T) {
	log := filepath.Join(t.TempDir(), "daemon.log")
	if err := os.WriteFile(log, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, t.Context(), helperSpec(t, "leakfd", log))
	if out.ExitCode != 0 {
		t.Fatalf("helper: exit %d, stderr %q", out.ExitCode, out.Stderr)
	}
	if b, _ := os.ReadFile(log); len(b) != 0 {
		t.Errorf("the tool wrote the inherited descriptor: %q", b)
	}
	// The helper's descriptor number, then the tool's: 0-2 and ls's own.
	f := strings.Fields(string(out.Stdout))
	if len(f) == 0 {
		t.Fatalf("helper printed nothing; stderr %q", out.Stderr)
	}
	if inherited, tool := f[0], f[1:]; slices.Contains(tool, inherited) || len(tool) > 4 {
		t.Errorf("the tool holds descriptors %v; want 0, 1, 2 and ls's own, not the inherited %s", tool, inherited)
	}
}

// TestRunOwnSession: a child leads a session and process group of its
// own, not the daemon's.
func TestRunOwnSession(t *testing.T) {
	out := mustRun(t, t.Context(), proc.Spec{Argv: []string{"/bin/sh", "-c", "cat /proc/$$/stat"}, Timeout: 10 * time.Second})
	// pid (comm) state ppid pgrp session ...
	stat := string(out.Stdout)
	pid, rest, ok := strings.Cut(stat, " (")
	_, rest, ok2 := strings.Cut(rest, ") ")
	f := strings.Fields(rest)
	if !ok || !ok2 || len(f) < 4 {
		t.Fatalf("stat of the child: %q", stat)
	}
	pgrp, session := f[2], f[3]
	if pgrp != pid || session != pid {
		t.Errorf("the child %s is in process group %s, session %s; want both its own", pid, pgrp, session)
	}
	if own, err := unix.Getsid(0); err == nil && strconv.Itoa(own) == session {
		t.Errorf("the child shares this process's session %d", own)
	}
}

// TestRunNoControllingTerminal: a daemon started from a terminal does not
// lend it to a tool run without a sandbox: the tool cannot open /dev/tty
// (to read the operator's keys, or to push keystrokes into the shell).
// The helper is given a terminal of its own (a pseudo-terminal), checks
// it can open /dev/tty, then runs the tool.
func TestRunNoControllingTerminal(t *testing.T) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here (%v): mount devpts on /dev/pts", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe)
	cmd.Env = append(proc.MinimalEnv(""), helperEnv+"=ctty", "GORACE=atexit_sleep_ms=0")
	cmd.Stdin = slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, stderr.Bytes())
	}
	if got := strings.TrimSpace(string(out)); got != "REFUSED" {
		t.Errorf("a tool of a daemon with a terminal opening /dev/tty: %q; want REFUSED", got)
	}
}
