// Package proc runs one child process safely: with a deadline, in a
// session and process group of its own, with a grace period between
// SIGTERM and SIGKILL, with a byte cap on stdout and stderr, and with a
// minimal environment instead of the daemon's own (STYLE.md rule 8).
//
// proc owns the mechanics of a single child and nothing else: it knows no
// tools, params or policy. With a Sandbox, the child runs in a sandbox of
// its own, which serves that call alone (sandbox.go, isolate.go: the
// mechanisms; seccomp.go: the filter; reaper.go: what ends a dead daemon's
// calls). Run is safe for concurrent use; a Spec must not be mutated while
// Run uses it. It is a leaf package (the standard library, golang.org/x/sys,
// go-landlock and go-seccomp-bpf), imported by executors/shell and
// gatekeeper so both enforce the same limits.
//
// Process groups and signals make this package Unix-only.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sandboxDrainBound bounds the wait for a sandboxed child's pipes to
// reach EOF after it exited; see Run.
const sandboxDrainBound = time.Minute

// DefaultGrace is the time between SIGTERM and SIGKILL when Spec.Grace is 0.
const DefaultGrace = 2 * time.Second

// DefaultMaxOutput is the per-stream cap used when Spec.MaxOutput is 0 or
// negative, so memory stays bounded even for a careless caller.
const DefaultMaxOutput = 64 << 10

// DrainLimit is how many bytes beyond MaxOutput Run keeps reading (and
// counting, then discarding) from one stream. Once a stream has produced
// more than MaxOutput+DrainLimit bytes, Run closes its end of that pipe, so
// a child that writes without end (like yes) gets SIGPIPE (or EPIPE) instead
// of running until the timeout. Past that point Outcome.StdoutBytes /
// StderrBytes are lower bounds.
const DrainLimit = 8 << 20

// MinimalPath is the PATH of MinimalEnv, and the only PATH used to find
// Argv[0] when the environment has none.
const MinimalPath = "/usr/local/bin:/usr/bin:/bin"

// Spec describes one child process.
type Spec struct {
	// Argv is the program and its arguments. Argv[0] is looked up in the
	// PATH of Env (never the daemon's PATH) unless it contains a slash;
	// only absolute PATH entries are searched.
	Argv []string
	// Dir is the working directory; "" means the daemon's own.
	Dir string
	// Env is the complete environment of the child as KEY=VALUE entries.
	// nil means MinimalEnv(Dir); the daemon's environment is never
	// inherited. A non-nil empty slice gives an empty environment.
	Env []string
	// Stdin is the child's standard input; nil means /dev/null.
	Stdin io.Reader
	// Timeout bounds the child's run time; 0 means no timeout (callers
	// always set one). When it fires, the process group gets SIGTERM.
	Timeout time.Duration
	// Grace is how long the child has after SIGTERM before the process
	// group is killed with SIGKILL and the pipes are closed; 0 means
	// DefaultGrace.
	Grace time.Duration
	// MaxOutput is the number of bytes kept of stdout and, separately, of
	// stderr; 0 or negative means DefaultMaxOutput.
	MaxOutput int64
	// Keep says which bytes past MaxOutput are kept: the head (the
	// zero value), the tail, or both ends.
	Keep Keep
	// OnOutput, when set, gets every chunk read from stdout ("stdout")
	// and stderr ("stderr") as it is read, before any cap; it runs on
	// the reading goroutines and must not keep p. While it blocks, the
	// child's pipe fills and the child waits in its write (a follower's
	// back-pressure): the caller bounds how long.
	OnOutput func(stream string, p []byte)
	// Followed, when set, says whether someone follows OnOutput: while
	// it returns true, a stream past MaxOutput+DrainLimit is read on (and
	// discarded) rather than cut, since the follower is shown all of it.
	Followed func() bool
	// Started, when set, is called when the process runs (in a sandbox:
	// set up and released), as its Timeout starts.
	Started func()
	// Sandbox, when non-nil, runs the child inside it with Grant (see
	// Sandbox). The timeout then kills the whole sandbox at once: every
	// process in it gets SIGKILL, with no grace period.
	Sandbox *Sandbox
	// Grant is what a sandboxed child may change and reach; ignored
	// without Sandbox.
	Grant Grant
}

// Outcome is what a child did. It is returned for every child that
// started, whatever its exit status.
type Outcome struct {
	// Stdout and Stderr hold MaxOutput bytes of each stream as Spec.Keep
	// says (KeepBoth adds OmittedMarker between the two ends), including
	// output written before a timeout.
	Stdout, Stderr []byte
	// StdoutBytes and StderrBytes count the bytes the child wrote to each
	// stream, before the cap. Once a stream passes MaxOutput+DrainLimit,
	// reading stops and the count is a lower bound.
	StdoutBytes, StderrBytes int64
	// ExitCode is the exit status; for a child killed by a signal it is
	// 128+signo, as a shell reports it.
	ExitCode int
	// Signal names the signal that killed the child ("SIGKILL"), or "".
	Signal string
	// Truncated reports that stdout or stderr was cut at MaxOutput.
	Truncated bool
	// CutOff reports that Run closed a stream's pipe because the child
	// wrote past MaxOutput+DrainLimit: a child that then dies of SIGPIPE
	// died of the cap, not of its own failure.
	CutOff bool
	// TimedOut reports that Spec.Timeout fired and the child was signalled
	// because of it. It is false when the caller's context ended first.
	TimedOut bool
	// Duration is the wall time from the start of the process (in a
	// sandbox: once it is set up) until both streams were read; the
	// timeout counts on the same clock.
	Duration time.Duration
	// Queued is the wall time from the call of Run until the process
	// started: forking, and setting up the sandbox, on a loaded host.
	Queued time.Duration
	// LimitHit says which of the sandbox's limits refused the call
	// something ("process limit: the kernel refused 3 new process(es)
	// ..."), as the call's control group counted it; "" when none did,
	// or when there is no control group to count (Sandbox.Cgroups).
	LimitHit string
}

// bounds returns the output cap and the grace period of s, defaults
// filled in.
func (s Spec) bounds() (maxOut int64, grace time.Duration) {
	maxOut, grace = s.MaxOutput, s.Grace
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	if grace <= 0 {
		grace = DefaultGrace
	}
	return maxOut, grace
}

// errTimeout is the cause of the context Run derives from Spec.Timeout; it
// tells a timeout from the caller's cancellation.
var errTimeout = errors.New("proc: timeout")

// MinimalEnv returns the environment a child gets when Spec.Env is nil:
//
//	PATH=/usr/local/bin:/usr/bin:/bin
//	LANG=C.UTF-8
//	HOME=<home, or / when home is "">
//	SHELL=/bin/sh
//
// SHELL is there because bash looks up the user's passwd entry for it
// when it is unset, and a sandboxed call's user has none: the lookup
// then tries every NSS module (systemd's among them), which cost 2 ms
// of CPU per call on the measured VM.
//
// Callers that need more append KEY=VALUE entries to it; for duplicate keys
// the last entry wins.
func MinimalEnv(home string) []string {
	if home == "" {
		home = "/"
	}
	return []string{"PATH=" + MinimalPath, "LANG=C.UTF-8", "HOME=" + home, "SHELL=/bin/sh"}
}

// Run starts the child described by s, waits for it and returns its
// Outcome. The returned error is non-nil only when the child could not be
// started (empty Argv, executable not found, bad Dir, ctx already done);
// a child that ran and failed, timed out or was killed is an Outcome.
//
// When s.Timeout fires or ctx is done, the child's whole process group gets
// SIGTERM; if the child has not exited after the grace period it is killed
// and its pipes closed. After the child exits, the process group always
// gets SIGKILL, so no background grandchild outlives the call.
func Run(ctx context.Context, s Spec) (Outcome, error) {
	entered := time.Now()
	if len(s.Argv) == 0 {
		return Outcome{}, errors.New("start: empty argv")
	}
	if err := markInherited(); err != nil {
		return Outcome{}, fmt.Errorf("start %q: %w", s.Argv[0], err)
	}
	maxOut, grace := s.bounds()
	env := s.Env
	if env == nil {
		env = MinimalEnv(s.Dir)
	}
	path, err := lookPath(s.Argv[0], getenv(env, "PATH"))
	if err != nil {
		return Outcome{}, fmt.Errorf("start %q: %w", s.Argv[0], err)
	}
	if s.Dir != "" {
		// fork/exec reports a bad Dir as the program's path not existing;
		// check it first so the message names the directory.
		if fi, err := os.Stat(s.Dir); err != nil {
			return Outcome{}, fmt.Errorf("start %q: working directory: %w", s.Argv[0], err)
		} else if !fi.IsDir() {
			return Outcome{}, fmt.Errorf("start %q: working directory %s: %w", s.Argv[0], s.Dir, syscall.ENOTDIR)
		}
	}

	// The timeout counts from the start of the process, not from here: a
	// loaded host may take long to fork, and that time is the call's wait
	// (Outcome.Queued), not the tool's run time. Its timer starts below.
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)

	cmd := exec.CommandContext(runCtx, path)
	cmd.Args = append([]string(nil), s.Argv...) // Args[0] as the caller wrote it
	cmd.Dir = s.Dir
	cmd.Env = env // never nil here: nil would inherit the daemon's environment
	cmd.Stdin = s.Stdin
	// A session of its own, not only a process group: the child has no
	// controlling terminal (a daemon started from a shell would otherwise
	// lend a tool /dev/tty, to read the operator's keys or to push
	// keystrokes with TIOCSTI), and where the kernel groups by session
	// for scheduling (sched_autogroup) a call is a group of its own, as a
	// sandboxed call is, instead of taking the daemon's share. Its
	// process group is the session's, led by it: signalGroup reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var sb *sandboxed     // MechanismBubblewrap
	var iso *isolatedCall // MechanismLandlock
	if s.Sandbox != nil {
		dir := s.Dir
		if dir == "" {
			// The daemon's own, as for an unsandboxed child.
			if dir, err = os.Getwd(); err != nil {
				return Outcome{}, fmt.Errorf("start %q: working directory: %w", s.Argv[0], err)
			}
		}
		if err := s.Sandbox.CheckGrant(s.Grant); err != nil {
			return Outcome{}, fmt.Errorf("start %q: %w", s.Argv[0], err)
		}
		if s.Sandbox.iso != nil {
			cmd.Dir = dir
			if iso, err = s.Sandbox.iso.begin(s.Sandbox, cmd, s.Grant, dir); err != nil {
				return Outcome{}, fmt.Errorf("start %q: %w", s.Argv[0], err)
			}
		} else {
			sb = &sandboxed{s: s.Sandbox}
			if err := sb.prepare(cmd, append([]string{path}, s.Argv[1:]...), s.Grant, dir); err != nil {
				return Outcome{}, fmt.Errorf("start %q: %w", s.Argv[0], err)
			}
		}
	}
	// abort undoes what the sandbox prepared when the child did not start.
	abort := func() {
		if sb != nil {
			sb.cleanupBeforeStart()
		}
		if iso != nil {
			iso.abort()
		}
	}
	var timedOut atomic.Bool
	cmd.Cancel = func() error {
		if context.Cause(runCtx) == errTimeout {
			timedOut.Store(true)
		}
		if sb != nil || iso != nil {
			// A sandbox ends all at once: SIGKILL to its first process
			// (under bubblewrap, to bwrap, whose death kills it), and
			// with it the PID namespace and everything in it.
			return signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		}
		return signalGroup(cmd.Process.Pid, syscall.SIGTERM)
	}
	// After the grace period os/exec kills the leader and closes the stdin
	// pipe; Wait then returns and the group kill below takes the rest.
	cmd.WaitDelay = grace

	// Our own pipes rather than os/exec's copying goroutines: Wait then
	// returns as soon as the leader exits, even if a grandchild still holds
	// the write end, and the group kill below ends that grandchild.
	outR, outW, err := os.Pipe()
	if err != nil {
		abort()
		return Outcome{}, fmt.Errorf("start %q: %w", s.Argv[0], err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		abort()
		return Outcome{}, fmt.Errorf("start %q: %w", s.Argv[0], err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if s.OnOutput != nil {
		growPipe(outR)
	}

	if iso != nil {
		err = iso.start(cmd)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		closeAll(outR, outW, errR, errW)
		abort()
		return Outcome{}, fmt.Errorf("start %q: %w", s.Argv[0], err)
	}
	closeAll(outW, errW) // the child holds its copies; EOF comes when all are closed
	pid := cmd.Process.Pid

	stdout, stderr := newCaptures(s, maxOut)
	var wg sync.WaitGroup
	wg.Go(func() { stdout.drain(outR) })
	wg.Go(func() { stderr.drain(errR) })

	var sbErr error
	if sb != nil {
		if sbErr = sb.afterStart(runCtx); sbErr != nil {
			_ = signalGroup(pid, syscall.SIGKILL)
		}
	}
	// The process runs (in a sandbox: it is set up and released): its
	// time starts now.
	start := time.Now()
	if s.Started != nil {
		s.Started()
	}
	if s.Timeout > 0 {
		timer := time.AfterFunc(s.Timeout, func() { cancelRun(errTimeout) })
		defer timer.Stop()
	}

	waitErr := cmd.Wait()
	if iso != nil {
		iso.finish() // every process of the call, wherever it went
	}
	// Always: background children of the child die with it. ESRCH (the
	// group is already empty) is the normal case. In a sandbox the kernel
	// kills them: its PID namespace ends with its first process.
	_ = signalGroup(pid, syscall.SIGKILL)

	// The group is dead, so the pipes reach EOF unless a process that left
	// the group (setsid) holds them; bound that wait by the grace period.
	// In a sandbox nothing can leave: EOF comes once the kernel has torn
	// the PID namespace down, which a loaded host may take longer for, so
	// the bound is only a safety net there.
	readersDone := make(chan struct{})
	go func() { wg.Wait(); close(readersDone) }()
	bound := grace
	if sb != nil || iso != nil {
		bound = max(grace, sandboxDrainBound)
	}
	t := time.NewTimer(bound)
	select {
	case <-readersDone:
		t.Stop()
	case <-t.C:
		// A deadline, not a close: the readers still take what the pipes
		// hold (output written before the child exited is never lost),
		// then stop instead of waiting for an EOF that may not come.
		now := time.Now()
		if outR.SetReadDeadline(now) != nil || errR.SetReadDeadline(now) != nil {
			closeAll(outR, errR)
		}
		<-readersDone
	}

	out := Outcome{
		Stdout:      stdout.bytes(),
		Stderr:      stderr.bytes(),
		StdoutBytes: stdout.n,
		StderrBytes: stderr.n,
		Truncated:   stdout.n > maxOut || stderr.n > maxOut,
		CutOff:      stdout.cut || stderr.cut,
		TimedOut:    timedOut.Load(),
		Duration:    time.Since(start),
		Queued:      start.Sub(entered),
	}
	if iso != nil {
		out.LimitHit = iso.end()
	}
	st := cmd.ProcessState
	if st == nil {
		// Wait could not reap the child; there is no status to report.
		out.ExitCode = -1
		if sb != nil {
			go sb.wait() // removes the control group once bwrap is gone
		}
		return out, fmt.Errorf("wait %q: %w", s.Argv[0], waitErr)
	}
	if sb != nil {
		bst, hit := sb.wait()
		out.LimitHit = hit
		switch {
		case sbErr != nil:
			return Outcome{}, fmt.Errorf("start %q: %w", s.Argv[0], sbErr)
		case bst.exitCode != nil:
			// The command ran; bwrap reports its status (128+signal for
			// a signal), which is the truth even when bwrap itself was
			// then killed.
			out.ExitCode = *bst.exitCode
			if out.ExitCode > 128 && (out.TimedOut || ctx.Err() != nil) {
				out.Signal = unix.SignalName(syscall.Signal(out.ExitCode - 128))
			}
			return out, nil
		case out.TimedOut || ctx.Err() != nil:
			// Killed before the command's status was known: the status
			// of bwrap (SIGKILL) below says how.
		default:
			// The command never ran: bwrap could not set the sandbox
			// up, or could not execute the program. Its message is on
			// stderr.
			msg := strings.TrimSpace(string(out.Stderr))
			if msg == "" {
				msg = "bwrap exited with " + st.String()
			}
			return Outcome{}, fmt.Errorf("start %q: %w: %s", s.Argv[0], ErrSandbox, msg)
		}
	}
	// Other Wait errors (context done, WaitDelay expired) are described by
	// TimedOut and the exit status; the status itself is the truth.
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		out.ExitCode = 128 + int(ws.Signal())
		out.Signal = unix.SignalName(ws.Signal())
	} else {
		out.ExitCode = st.ExitCode()
	}
	return out, nil
}

// streamPipeSize is the stdout pipe's buffer of a child whose output is
// followed (Spec.OnOutput): the pipe is the buffer while the follower
// catches up, and a bigger one means fewer, larger chunks.
const streamPipeSize = 256 << 10

// markInherited marks every descriptor above stderr close-on-exec, before
// each child starts. Descriptors the process inherited without it (a
// shell's 7>>log, a launcher's sockets or credentials) would otherwise
// stay open in every child, sandboxed or not; what the process opens
// itself is close-on-exec already (Go opens everything so), and what a
// child is meant to get it gets through os/exec, which clears the flag on
// its copy. Once per child rather than once per process: it costs one
// system call (close_range), and it also catches a descriptor some
// library opened without the flag after the start.
func markInherited() error {
	switch err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL): // before Linux 5.11
		return closeOnExecEach(3)
	default:
		return fmt.Errorf("mark inherited descriptors close-on-exec: %w", err)
	}
}

// closeOnExecEach marks every open descriptor from first on close-on-exec,
// one at a time from /proc/self/fd: markInherited for a kernel without
// close_range.
func closeOnExecEach(first int) error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("mark inherited descriptors close-on-exec: %w", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < first {
			continue
		}
		// EBADF: the directory's own descriptor, closed by now.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("mark inherited descriptor %d close-on-exec: %w", fd, err)
		}
	}
	return nil
}

// growPipe raises p's buffer to streamPipeSize where the host allows it
// (fs.pipe-max-size, the user's pipe quota); the default stays otherwise.
func growPipe(p *os.File) {
	if sc, err := p.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, streamPipeSize)
		})
	}
}

// signalGroup sends sig to the process group led by pid. A group that no
// longer exists is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// Keep says which bytes of a stream past MaxOutput are kept.
type Keep string

const (
	// KeepHead keeps the first MaxOutput bytes (the zero Keep): once a
	// stream is DrainLimit past the cap, its pipe is closed.
	KeepHead Keep = ""
	// KeepTail keeps the last MaxOutput bytes: what a log's end says.
	// The stream is read to its end.
	KeepTail Keep = "tail"
	// KeepBoth keeps the first and the last half of MaxOutput, with a
	// line between them saying how many bytes were left out. The
	// stream is read to its end.
	KeepBoth Keep = "both"
)

// OmittedMarker is the line KeepBoth puts between the head and the tail.
func OmittedMarker(n int64) string {
	return fmt.Sprintf("\n[toolagent: %d bytes left out]\n", n)
}

// capture keeps max bytes of a stream as keep says and counts the rest.
// Its buffers never grow beyond max in all.
type capture struct {
	max     int64
	keep    Keep
	buf     []byte // the head: len <= cap <= max (KeepBoth: max/2; KeepTail: 0)
	tail    []byte // the tail ring: len <= its share of max
	tailAt  int    // where the ring's next byte goes once it is full
	n       int64  // bytes read from the stream
	discard []byte // read buffer once the head is full; allocated only then
	cut     bool   // reading stopped at the drain limit and the pipe was closed
	// on, when set, sees every chunk read (Spec.OnOutput).
	on func(p []byte)
	// followed is Spec.Followed.
	followed func() bool
}

// newCaptures returns the captures of stdout and stderr for s.
func newCaptures(s Spec, maxOut int64) (stdout, stderr capture) {
	stdout, stderr = capture{max: maxOut, keep: s.Keep, followed: s.Followed}, capture{max: maxOut, keep: s.Keep, followed: s.Followed}
	if f := s.OnOutput; f != nil {
		stdout.on = func(p []byte) { f("stdout", p) }
		stderr.on = func(p []byte) { f("stderr", p) }
	}
	return stdout, stderr
}

// headMax and tailMax are the shares of max the head and the tail keep.
func (c *capture) headMax() int64 {
	switch c.keep {
	case KeepTail:
		return 0
	case KeepBoth:
		return c.max / 2
	}
	return c.max
}

func (c *capture) tailMax() int64 { return c.max - c.headMax() }

// drain reads r until EOF, an error, or (KeepHead) the drain limit, then
// closes r.
func (c *capture) drain(r *os.File) {
	defer r.Close()
	head := c.headMax()
	for c.keep != KeepHead || c.n <= c.max+DrainLimit || (c.followed != nil && c.followed()) {
		var p []byte
		if int64(len(c.buf)) < head {
			if len(c.buf) == cap(c.buf) {
				c.grow(head)
			}
			p = c.buf[len(c.buf):cap(c.buf)]
		} else {
			if c.discard == nil {
				n := 32 << 10
				if c.on != nil {
					n = streamPipeSize // a whole pipe's worth per chunk
				}
				c.discard = make([]byte, n)
			}
			p = c.discard
		}
		n, err := r.Read(p)
		if n > 0 && c.on != nil {
			c.on(p[:n])
		}
		if n > 0 && int64(len(c.buf)) < head {
			c.buf = c.buf[:len(c.buf)+n]
		} else if n > 0 && c.keep != KeepHead {
			c.keepTail(p[:n])
		}
		c.n += int64(n)
		if err != nil {
			return
		}
	}
	c.cut = true // past the drain limit: closing r sends the writer SIGPIPE
}

// keepTail adds p to the tail ring.
func (c *capture) keepTail(p []byte) {
	limit := int(c.tailMax())
	if limit == 0 {
		return
	}
	if len(p) >= limit {
		c.tail = append(c.tail[:0], p[len(p)-limit:]...)
		c.tailAt = 0
		return
	}
	if len(c.tail) < limit {
		k := min(limit-len(c.tail), len(p))
		c.tail = append(c.tail, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // the ring is full: overwrite its oldest bytes
		k := copy(c.tail[c.tailAt:], p)
		p = p[k:]
		c.tailAt = (c.tailAt + k) % limit
	}
}

// bytes returns what the capture kept: the head, or the tail in order, or
// the head, the marker and the tail.
func (c *capture) bytes() []byte {
	if c.keep == KeepHead {
		return c.buf
	}
	tail := append(append([]byte(nil), c.tail[c.tailAt:]...), c.tail[:c.tailAt]...)
	omitted := c.n - int64(len(c.buf)) - int64(len(tail))
	out := append([]byte(nil), c.buf...)
	if omitted > 0 && c.keep == KeepBoth {
		out = append(out, OmittedMarker(omitted)...)
	}
	return append(out, tail...)
}

// grow doubles buf's capacity, starting at 4 KiB and never beyond limit.
func (c *capture) grow(limit int64) {
	n := int64(2 * cap(c.buf))
	n = max(n, 4<<10)
	n = min(n, limit)
	b := make([]byte, len(c.buf), n)
	copy(b, c.buf)
	c.buf = b
}

// lookPath finds file in the absolute directories of pathList. A name with
// a slash is returned as is; os/exec reports it if it cannot be started.
func lookPath(file, pathList string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	if file == "" {
		return "", exec.ErrNotFound
	}
	for _, dir := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(dir) {
			continue // never resolve a program against the working directory
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (PATH=%s)", exec.ErrNotFound, pathList)
}

// getenv returns the value of the last key entry in env.
func getenv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
