package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A sandbox costs a bubblewrap start (namespaces, mounts, several ms of
// CPU); a plain fork and exec costs well under one. So that a call does
// not pay for it, a Sandbox with SandboxOptions.Reuse > 0 keeps sandboxes
// that serve one call at a time: bubblewrap starts the sandbox worker
// (worker.go) in it once, and each call is a fork and exec by the worker.
//
// What a call gets is what a sandbox of its own gives (see Sandbox), with
// these differences, none of which lets one call see or change another:
//
//   - the sandbox serves calls one after another, never two at once;
//   - between calls the worker kills and reaps every process of the call
//     (kill(-1) in the sandbox's PID namespace, as their subreaper) and
//     empties /tmp, /var/tmp, /dev/shm and /dev/mqueue, removes SysV IPC
//     objects and clears the user keyrings; a sandbox it cannot empty is
//     discarded, and so is one whose call timed out or was cancelled
//     (the whole sandbox is killed then, as one of its own would be);
//   - the worker runs in the sandbox too (not dumpable: a call can neither
//     trace it nor read its memory), so the call's /proc shows it and
//     bubblewrap's init besides the call's own processes;
//   - a working directory under /tmp or /var/tmp is shown to the call
//     when its sandbox starts, so sandboxes are kept per directory shown
//     as well as per grant.
//
// Idle sandboxes are kept per grant and directory shown, at most Reuse of
// them in all, for at most poolIdle; they die with the daemon
// (PR_SET_PDEATHSIG).
const poolIdle = 30 * time.Second

// poolStart bounds the start of a sandbox worker; poolRetry is the pause
// after a start failed.
const (
	poolStart = 30 * time.Second
	poolRetry = 30 * time.Second
)

type pool struct {
	s      *Sandbox
	exe    *os.File // the daemon's executable, which is the worker
	pidns  string   // the daemon's PID namespace, which the worker must not be in
	max    int
	mu     sync.Mutex
	idle   []*worker // oldest first
	timer  *time.Timer
	closed bool
	stats  PoolStats
	// starting is set while grow starts a sandbox; retryAt is when it
	// may try again after a failure.
	starting bool
	retryAt  time.Time
}

// PoolStats count what the reusable sandboxes did.
type PoolStats struct {
	// Reuse is SandboxOptions.Reuse: most idle sandboxes kept.
	Reuse int `json:"reuse"`
	// Idle is how many sandboxes wait for a call now.
	Idle int `json:"idle"`
	// Started counts the reusable sandboxes started; Served the calls
	// they served; Fresh the calls that found none idle for their grant
	// and got a sandbox of their own; Discarded the sandboxes ended
	// because their call timed out, was cancelled, or could not be
	// cleaned up after.
	Started   int64 `json:"started"`
	Served    int64 `json:"served"`
	Fresh     int64 `json:"fresh"`
	Discarded int64 `json:"discarded"`
	// LastDiscarded says why the last sandbox was discarded;
	// LastStartError why the last one could not start.
	LastDiscarded  string `json:"last_discarded,omitempty"`
	LastStartError string `json:"last_start_error,omitempty"`
}

type worker struct {
	key    string
	bwrap  *exec.Cmd
	conn   *net.UnixConn
	in     *frameReader
	gone   chan struct{} // closed once bwrap has exited
	stderr *bytes.Buffer // bwrap's and the worker's own messages; read after gone
	idleAt time.Time
	served int
	cg     *cgroup // the sandbox's control group, or nil
}

// grantKey names the sandboxes that can serve a grant and show the
// working directory shown under /tmp or /var/tmp ("" for none).
func grantKey(g Grant, shown string) string {
	w := slices.Clone(g.Write)
	slices.Sort(w)
	return fmt.Sprintf("%t\x00%s\x00\x00%s", g.Network, shown, strings.Join(w, "\x00"))
}

func newPool(s *Sandbox, max int) (*pool, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%w: find the daemon's executable for the sandbox worker: %v", ErrSandbox, err)
	}
	f, err := os.Open(exe)
	if err != nil {
		return nil, fmt.Errorf("%w: open the daemon's executable for the sandbox worker: %v", ErrSandbox, err)
	}
	pidns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: the daemon's PID namespace: %v", ErrSandbox, err)
	}
	return &pool{s: s, exe: f, pidns: pidns, max: max, stats: PoolStats{Reuse: max}}, nil
}

// get returns an idle sandbox for g, or nil when there is none: the call
// then gets a sandbox of its own (as with Reuse 0), and a sandbox for g is
// started in the background, one at a time, so that a burst of calls
// never waits for sandboxes to start and the pool grows to the load.
func (p *pool) get(g Grant, shown string) *worker {
	key := grantKey(g, shown)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.idle) - 1; i >= 0; i-- {
		if w := p.idle[i]; w.key == key {
			p.idle = slices.Delete(p.idle, i, i+1)
			p.stats.Served++
			return w
		}
	}
	p.stats.Fresh++
	if !p.closed && !p.starting && time.Now().After(p.retryAt) {
		p.starting = true
		go p.grow(g, shown)
	}
	return nil
}

// grow starts one sandbox for g and makes it idle.
func (p *pool) grow(g Grant, shown string) {
	err := p.warm(g, shown)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting = false
	if err != nil {
		// Calls go on with sandboxes of their own; try again later.
		p.stats.LastStartError = err.Error()
		p.retryAt = time.Now().Add(poolRetry)
	}
}

// warm starts one sandbox for g (showing shown) and makes it idle.
func (p *pool) warm(g Grant, shown string) error {
	ctx, cancel := context.WithTimeout(context.Background(), poolStart)
	defer cancel()
	w, err := p.start(ctx, g, shown)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.stats.Started++
	p.mu.Unlock()
	p.put(w)
	return nil
}

// put takes back a sandbox whose call ended cleanly.
func (p *pool) put(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.max <= 0 {
		w.kill()
		return
	}
	if len(p.idle) >= p.max {
		p.idle[0].kill()
		p.idle = slices.Delete(p.idle, 0, 1)
	}
	w.idleAt = time.Now()
	p.idle = append(p.idle, w)
	if p.timer == nil {
		p.timer = time.AfterFunc(poolIdle, p.expire)
	}
}

// discard ends a sandbox that must not serve another call, for why.
func (p *pool) discard(w *worker, why string) {
	w.kill()
	p.mu.Lock()
	p.stats.Discarded++
	p.stats.LastDiscarded = why
	p.mu.Unlock()
}

// expire ends the sandboxes idle for poolIdle and runs again while some
// are left.
func (p *pool) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timer = nil
	cut := time.Now().Add(-poolIdle)
	n := 0
	for _, w := range p.idle {
		if w.idleAt.Before(cut) {
			w.kill()
			continue
		}
		p.idle[n] = w
		n++
	}
	clear(p.idle[n:])
	p.idle = p.idle[:n]
	if len(p.idle) > 0 && !p.closed {
		p.timer = time.AfterFunc(poolIdle, p.expire)
	}
}

// close ends every idle sandbox; calls running keep theirs until they end,
// and none is kept afterwards.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, w := range p.idle {
		w.kill()
	}
	p.idle = nil
	if p.timer != nil {
		p.timer.Stop()
	}
}

func (p *pool) snapshot() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Idle = len(p.idle)
	return st
}

// start starts a sandbox for g, showing shown, and waits until its
// worker is ready.
func (p *pool) start(ctx context.Context, g Grant, shown string) (*worker, error) {
	key := grantKey(g, shown)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: socketpair: %v", ErrSandbox, err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "sandbox"), os.NewFile(uintptr(fds[1]), "sandbox")
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("%w: socket: %v", ErrSandbox, err)
	}
	conn := c.(*net.UnixConn)
	w := &worker{key: key, conn: conn, in: &frameReader{conn: conn}, gone: make(chan struct{}), stderr: new(bytes.Buffer)}
	args := append(p.s.mountArgs(g, shown), "--chdir", "/")
	var statusR, statusW, blkR, blkW *os.File
	extra := []*os.File{theirs, p.exe} // descriptors 3 and 4
	if p.s.cg != nil {
		// The sandbox goes into a control group of its own before the
		// worker starts: bwrap reports its first process on a status
		// pipe (5) and waits on a block pipe (6) until it is moved.
		// The group's limits leave the worker room to start; they are
		// set for the calls once it is ready (below).
		var err error
		if w.cg, err = p.s.cg.create(Limits{MaxProcs: p.s.limits.MaxProcs + 64, MaxMemory: p.s.limits.MaxMemory + 256<<20}, 0); err != nil {
			closeAll(theirs)
			w.conn.Close()
			return nil, err
		}
		sr, sw, err := os.Pipe()
		if err != nil {
			closeAll(theirs)
			w.conn.Close()
			w.cg.remove()
			return nil, fmt.Errorf("%w: %v", ErrSandbox, err)
		}
		br, bw, err := os.Pipe()
		if err != nil {
			closeAll(theirs, sr, sw)
			w.conn.Close()
			w.cg.remove()
			return nil, fmt.Errorf("%w: %v", ErrSandbox, err)
		}
		statusR, statusW, blkR, blkW = sr, sw, br, bw
		extra = append(extra, sw, br)
		args = append(args, "--json-status-fd", "5", "--block-fd", "6")
	}
	lim := p.s.limits
	lim.MaxProcs, lim.MaxMemory = p.s.procLimit(), p.s.asLimit()
	args = append(args, "--", fmt.Sprintf("/proc/self/fd/%d", workerExe), workerArg, p.pidns)
	cmd := exec.Command(p.s.bwrap, append(args, workerLimitArgs(lim)...)...)
	cmd.Args[0] = "bwrap"
	// Two Ps, not one: with one, the runtime takes it back from every
	// blocking wait (for the call, for the next request) and hands it
	// over, which costs more CPU than the second P ever does; and the
	// worker's sysmonPin holds one of them.
	cmd.Env = []string{workerEnv + "=1", "GOMAXPROCS=2"}
	cmd.ExtraFiles = extra
	cmd.Stderr = &limitedWriter{w: w.stderr, n: 64 << 10}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.s.user}
	err = cmd.Start()
	theirs.Close() // the worker's end: EOF comes when the worker is gone
	if statusW != nil {
		closeAll(statusW, blkR) // bubblewrap's ends
	}
	if err != nil {
		w.conn.Close()
		if w.cg != nil {
			closeAll(statusR, blkW)
			w.cg.remove()
		}
		return nil, fmt.Errorf("%w: start %s: %v", ErrSandbox, p.s.bwrap, err)
	}
	w.bwrap = cmd
	go func() {
		_ = cmd.Wait()
		close(w.gone)
		if w.cg != nil {
			w.cg.remove()
		}
	}()
	if w.cg != nil {
		if err := w.enterGroup(statusR, blkW); err != nil {
			w.kill()
			<-w.gone
			return nil, err
		}
	}
	ready := make(chan error, 1)
	go func() {
		var r workerReply
		_ = w.conn.SetReadDeadline(time.Now().Add(poolStart))
		_, err := w.in.readFrame(&r)
		if err == nil && !r.Ready {
			err = fmt.Errorf("unexpected %+v", r)
		}
		_ = w.conn.SetReadDeadline(time.Time{})
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		w.kill()
		<-w.gone
		msg := strings.TrimSpace(w.stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: the sandbox worker did not start: %s", ErrSandbox, msg)
	}
	if w.cg != nil {
		// The calls' limits: the worker and bubblewrap's init keep what
		// they use now, and every call gets the limits on top (two
		// tasks to spare for threads the worker's runtime may add).
		tasks, mem := w.cg.current()
		err := w.cg.setProcs(tasks + p.s.limits.MaxProcs + 2)
		if err == nil {
			err = w.cg.setMemory(mem + p.s.limits.MaxMemory)
		}
		if err != nil {
			w.kill()
			<-w.gone
			return nil, err
		}
		w.cg.seen = w.cg.events()
	}
	return w, nil
}

// enterGroup moves the sandbox's first process, which bubblewrap reports
// on statusR, into the worker's control group and lets bubblewrap go on
// (closing blkW). The rest of the status pipe is read until bubblewrap
// exits.
func (w *worker) enterGroup(statusR, blkW *os.File) error {
	defer blkW.Close()
	pids := make(chan int, 1)
	go func() {
		defer statusR.Close()
		dec := json.NewDecoder(statusR)
		sent := false
		for {
			var doc struct {
				ChildPID *int `json:"child-pid"`
			}
			if err := dec.Decode(&doc); err != nil {
				break
			}
			if doc.ChildPID != nil && !sent {
				pids <- *doc.ChildPID
				sent = true
			}
		}
		close(pids)
	}()
	t := time.NewTimer(poolStart)
	defer t.Stop()
	select {
	case pid, ok := <-pids:
		if !ok {
			return fmt.Errorf("%w: the sandbox worker did not start: %s", ErrSandbox, strings.TrimSpace(w.stderr.String()))
		}
		if err := w.cg.add(pid); err != nil {
			return err
		}
	case <-t.C:
		return fmt.Errorf("%w: the sandbox worker did not start within %s", ErrSandbox, poolStart)
	}
	if _, err := blkW.Write([]byte{1}); err != nil {
		return fmt.Errorf("%w: release sandbox: %v", ErrSandbox, err)
	}
	return nil
}

// kill ends the sandbox at once: SIGKILL to bubblewrap, whose death kills
// the worker and with it the PID namespace and everything in it.
func (w *worker) kill() {
	_ = signalGroup(w.bwrap.Process.Pid, syscall.SIGKILL)
	w.conn.Close()
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
	n  int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := min(len(p), l.n-l.w.Len()); k > 0 {
		l.w.Write(p[:k])
	}
	return len(p), nil
}

// run is Run for a sandboxed child served by the reusable sandbox w.
// path is the resolved program, dir the working directory (never under
// /tmp or /var/tmp), env the child's environment.
func (p *pool) run(ctx context.Context, w *worker, s Spec, path, dir string, env []string, entered time.Time) (Outcome, error) {
	fail := func(err error) (Outcome, error) {
		return Outcome{}, fmt.Errorf("start %q: %w", s.Argv[0], err)
	}
	maxOut, grace := s.bounds()
	if err := ctx.Err(); err != nil {
		p.put(w)
		return fail(err)
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		p.put(w)
		return fail(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		p.put(w)
		return fail(err)
	}
	fds := []int{int(outW.Fd()), int(errW.Fd())}
	var stdinW *os.File
	req := workerRequest{Path: path, Args: s.Argv, Env: env, Dir: dir}
	var stdinR *os.File
	switch in := s.Stdin.(type) {
	case nil:
	case *os.File:
		req.Stdin = true
		fds = append(fds, int(in.Fd()))
	default:
		if stdinR, stdinW, err = os.Pipe(); err != nil {
			closeAll(outR, outW, errR, errW)
			p.put(w)
			return fail(err)
		}
		req.Stdin = true
		fds = append(fds, int(stdinR.Fd()))
	}
	err = writeFrame(w.conn, req, fds)
	closeAll(outW, errW) // the worker holds its copies now
	if stdinR != nil {
		stdinR.Close()
	}
	if err != nil {
		closeAll(outR, errR)
		if stdinW != nil {
			stdinW.Close()
		}
		p.discard(w, "the worker is gone")
		return fail(fmt.Errorf("%w: the sandbox worker is gone: %v", ErrSandbox, err))
	}
	if stdinW != nil {
		go func() {
			_, _ = stdinW.ReadFrom(s.Stdin)
			stdinW.Close()
		}()
	}

	stdout, stderr := newCaptures(s, maxOut)
	var wg sync.WaitGroup
	wg.Go(func() { stdout.drain(outR) })
	wg.Go(func() { stderr.drain(errR) })
	replies := make(chan workerReply, 2)
	go func() {
		defer close(replies)
		for range 2 {
			var r workerReply
			if _, err := w.in.readFrame(&r); err != nil {
				return
			}
			replies <- r
			if !r.Started {
				return
			}
		}
	}()
	// drained waits for the streams (bounded: see Run).
	drained := func() {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		t := time.NewTimer(max(grace, sandboxDrainBound))
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			now := time.Now()
			if outR.SetReadDeadline(now) != nil || errR.SetReadDeadline(now) != nil {
				closeAll(outR, errR)
			}
			<-done
		}
	}

	// The start: the worker says it started the program, or why not.
	var r workerReply
	var ok bool
	select {
	case r, ok = <-replies:
	case <-ctx.Done():
	}
	switch {
	case !ok:
		p.discard(w, "the call was cancelled before it started, or the worker died")
		drained()
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		<-w.gone
		return fail(fmt.Errorf("%w: the sandbox worker died: %s", ErrSandbox, strings.TrimSpace(w.stderr.String())))
	case r.Error != "":
		if r.Dirty != "" {
			p.discard(w, "could not clean up: "+r.Dirty)
		} else {
			p.put(w)
		}
		drained()
		return fail(errors.New(r.Error))
	}
	start := time.Now()
	if s.Started != nil {
		s.Started()
	}
	var timeout <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	out := Outcome{Queued: start.Sub(entered)}
	killed := false
	select {
	case r, ok = <-replies:
	case <-timeout:
		out.TimedOut, killed = true, true
	case <-ctx.Done():
		killed = true
	}
	if w.cg != nil {
		// Before the sandbox serves another call, or is removed.
		out.LimitHit = w.cg.hits(p.s.limits)
	}
	switch {
	case killed:
		// Killed, as a sandbox of its own would be: all at once.
		p.discard(w, "its call timed out or was cancelled")
		<-w.gone
	case !ok:
		p.discard(w, "the worker died")
		<-w.gone
	case r.Dirty != "":
		p.discard(w, "could not clean up: "+r.Dirty)
	default:
		p.put(w)
	}
	drained()
	out.Stdout, out.Stderr = stdout.bytes(), stderr.bytes()
	out.StdoutBytes, out.StderrBytes = stdout.n, stderr.n
	out.Truncated = stdout.n > maxOut || stderr.n > maxOut
	out.CutOff = stdout.cut || stderr.cut
	out.Duration = time.Since(start)
	switch {
	case killed:
		out.ExitCode, out.Signal = 128+int(syscall.SIGKILL), unix.SignalName(syscall.SIGKILL)
	case !ok:
		// Nobody killed it: the worker died, and the call's status is
		// unknown. That is not a result.
		out.ExitCode = -1
		why := strings.TrimSpace(w.stderr.String())
		if out.LimitHit != "" {
			why += " (the call hit a limit: " + out.LimitHit + ")"
		}
		return out, fmt.Errorf("wait %q: %w: the sandbox worker died: %s", s.Argv[0], ErrSandbox, why)
	default:
		out.ExitCode = r.Code
		if r.Signal != 0 {
			out.Signal = unix.SignalName(syscall.Signal(r.Signal))
		}
	}
	return out, nil
}
