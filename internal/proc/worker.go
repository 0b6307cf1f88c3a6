package proc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The sandbox worker is this same executable, started by bubblewrap inside
// a reusable sandbox (see pool.go) with argv[1] workerArg and workerEnv=1
// in its environment. It serves one call at a time over the socket the
// daemon passed it as descriptor 3, and between calls it makes the
// sandbox as it was: every process of the call killed and reaped, the
// private temporary directories emptied, SysV IPC objects and POSIX
// message queues removed, the user keyrings cleared.
const (
	workerArg = "toolagent-sandbox-worker"
	workerEnv = "TOOLAGENT_SANDBOX_WORKER"
	// workerSock and workerExe are the worker's descriptors of its
	// socket and of its own executable (which bwrap executed as
	// /proc/self/fd/4; the worker closes it at once).
	workerSock = 3
	workerExe  = 4
)

// workerScratch lists the directories a call may write in every sandbox,
// which the worker empties after each call. /dev/mqueue is where the
// sandbox's POSIX message queues show.
var workerScratch = []string{SandboxTmp, "/var/tmp", "/dev/shm", "/dev/mqueue"}

func init() {
	// Any binary that links proc can be the worker; nothing else runs
	// in that process, not even the rest of its packages' init.
	if len(os.Args) >= 2 && os.Args[1] == workerArg && os.Getenv(workerEnv) == "1" {
		// Not on this goroutine: during init the main goroutine is
		// locked to the main thread, and a locked goroutine that blocks
		// and wakes costs two thread switches each time.
		go func() { os.Exit(workerMain(os.Args[2:])) }()
		select {}
	}
}

// workerRequest is one call, sent with the descriptors of its stdout,
// stderr and, when Stdin is set, stdin (in that order).
type workerRequest struct {
	Path  string   `json:"path"`
	Args  []string `json:"args"`
	Env   []string `json:"env"`
	Dir   string   `json:"dir"`
	Stdin bool     `json:"stdin"`
}

// workerReply is what the worker says: Ready once after it started; per
// call, Started or Error, then Exited.
type workerReply struct {
	Ready   bool   `json:"ready,omitempty"`
	Started bool   `json:"started,omitempty"`
	Error   string `json:"error,omitempty"`
	Exited  bool   `json:"exited,omitempty"`
	Code    int    `json:"code,omitempty"`
	Signal  int    `json:"signal,omitempty"`
	// Dirty says why the sandbox cannot serve another call (something
	// of the call could not be removed); the daemon then discards it.
	Dirty string `json:"dirty,omitempty"`
}

// workerMain runs the worker; its result is the process's exit status.
func workerMain(args []string) int {
	unix.Close(workerExe)
	pin := newSysmonPin()
	go pin.run()
	spareThreads(workerSpareThreads)
	// Not dumpable: a tool, running as the same user, can neither trace
	// the worker nor read its memory or descriptors through /proc.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return workerFail("prctl(PR_SET_DUMPABLE): %v", err)
	}
	// Orphans of a call become the worker's children, so it can reap
	// them and know when all are gone.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return workerFail("prctl(PR_SET_CHILD_SUBREAPER): %v", err)
	}
	// kill(-1) between calls must reach only the sandbox: refuse to run
	// in the daemon's PID namespace (args[0] names it).
	if len(args) == 0 {
		return workerFail("no PID namespace given")
	}
	if ns, err := os.Readlink("/proc/self/ns/pid"); err != nil || ns == args[0] {
		return workerFail("not in a PID namespace of its own (%s, %v)", ns, err)
	}
	lim, err := parseWorkerLimits(args[1:])
	if err != nil {
		return workerFail("%v", err)
	}
	perCallAS, err := carryLimits(lim)
	if err != nil {
		return workerFail("%v", err)
	}
	// A session keyring of the sandbox's own, not the daemon's: arg 0 is
	// NULL, an anonymous keyring, never one found by name. It is
	// inherited by every call and cleared after each (cleanUp).
	if _, err := unix.KeyctlInt(unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0); err != nil && !errors.Is(err, unix.ENOSYS) {
		return workerFail("join a session keyring of its own: %v", err)
	}
	base := map[string]scratchTree{}
	for _, d := range workerScratch {
		t, err := readScratch(d)
		if err != nil {
			return workerFail("read %s: %v", d, err)
		}
		base[d] = t
	}
	stamps := map[string]scratchStamp{}
	for _, d := range workerScratch {
		stamps[d] = stampScratch(d, base[d])
	}
	f := os.NewFile(workerSock, "sandbox")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return workerFail("socket: %v", err)
	}
	conn := c.(*net.UnixConn)
	in := &frameReader{conn: conn}
	if err := writeFrame(conn, workerReply{Ready: true}, nil); err != nil {
		return 1
	}
	for {
		var req workerRequest
		fds, err := in.readFrame(&req)
		if err != nil {
			return 0 // the daemon closed the socket: done
		}
		pin.busy()
		if err := serveCall(conn, req, fds, lim, perCallAS, base, stamps); err != nil {
			return 1
		}
	}
}

// workerSpareThreads is how many idle OS threads the worker makes at
// start, above what it needs to get ready (spareThreads).
const workerSpareThreads = 8

// spareThreads makes the runtime start n more OS threads and keep them
// idle (it never ends an idle thread): later, when a goroutine blocks in a
// system call and another needs a thread, one is taken from them rather
// than created. A call may use up the sandbox's process limit, which
// counts the worker's threads too; a worker that could not create a
// thread then would die with the call's result.
func spareThreads(n int) {
	var locked, release sync.WaitGroup
	locked.Add(n)
	release.Add(1)
	for range n {
		go func() {
			runtime.LockOSThread() // a thread of its own while all n are held
			locked.Done()
			release.Wait()
			runtime.UnlockOSThread() // the thread goes idle, not away
		}()
	}
	locked.Wait()
	release.Done()
}

// sysmonPin keeps the Go runtime's monitor thread (sysmon) at its slow
// pace while the worker serves calls. The monitor sleeps for good only
// while every P is idle, and then the first system call of the next
// call wakes it, after which it polls every 20 µs until the worker is
// idle again: on each call, while the call is started and cleaned up.
// That was a fifth of the worker's CPU. A goroutine that holds a P in a
// raw pause(2) (the runtime sees it running, not in a system call) keeps
// one P busy, so the monitor never sleeps for good; finding nothing to
// do, it backs off to a tick every 10 ms, and a system call never wakes
// it. Each tick past 10 ms preempts the pinned goroutine with a signal,
// which ends the pause: it yields (letting a stop-the-world through)
// and pauses again (so the worker must keep async preemption: its
// environment has no GODEBUG). After a second without a call it parks on a channel,
// so an idle sandbox costs nothing, and the next call wakes it.
type sysmonPin struct {
	wake chan struct{}
	last atomic.Int64 // unix nanoseconds of the last call's start
	idle time.Duration
	// parked counts the times the pin parked for want of calls.
	parked atomic.Int64
}

func newSysmonPin() *sysmonPin { return &sysmonPin{wake: make(chan struct{}, 1), idle: time.Second} }

func (p *sysmonPin) run() {
	for {
		_, _, _ = unix.RawSyscall(unix.SYS_PAUSE, 0, 0, 0) // returns at a signal
		runtime.Gosched()
		if time.Now().UnixNano()-p.last.Load() > int64(p.idle) {
			p.parked.Add(1)
			<-p.wake
		}
	}
}

// busy tells the pin a call starts.
func (p *sysmonPin) busy() {
	p.last.Store(time.Now().UnixNano())
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// workerFail reports a start-up failure on stderr, which the daemon
// shows when the worker does not become ready.
func workerFail(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "sandbox worker: "+format+"\n", a...)
	return 1
}

// parseWorkerLimits reads the worker's arguments: nproc, as and nofile,
// in that order; as is 0 where the call's control group holds its memory.
func parseWorkerLimits(args []string) (Limits, error) {
	if len(args) != 3 {
		return Limits{}, fmt.Errorf("want 3 limits (nproc, as, nofile), got %q", args)
	}
	var n [3]int64
	for i, a := range args {
		v, err := strconv.ParseInt(a, 10, 64)
		if err != nil || v < 0 || v == 0 && i != 1 {
			return Limits{}, fmt.Errorf("limit %q is not a positive number (0 only for as: none)", a)
		}
		n[i] = v
	}
	return Limits{MaxProcs: int(n[0]), MaxMemory: n[1], MaxOpenFiles: int(n[2])}, nil
}

// workerLimitArgs are the arguments parseWorkerLimits reads.
func workerLimitArgs(l Limits) []string {
	return []string{strconv.Itoa(l.MaxProcs), strconv.FormatInt(l.MaxMemory, 10), strconv.Itoa(l.MaxOpenFiles)}
}

// serveCall runs one call and cleans up after it. Its error is a broken
// socket: the worker then exits.
func serveCall(conn *net.UnixConn, req workerRequest, fds []int, lim Limits, perCallAS bool, base map[string]scratchTree, stamps map[string]scratchStamp) error {
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "call")
	}
	defer closeAll(files...)
	want := 2
	if req.Stdin {
		want = 3
	}
	if len(files) != want || len(req.Args) == 0 {
		return writeFrame(conn, workerReply{Error: fmt.Sprintf("bad request: %d descriptors, %d args", len(files), len(req.Args))}, nil)
	}
	cmd := &exec.Cmd{Path: req.Path, Args: req.Args, Env: req.Env, Dir: req.Dir, Stdout: files[0], Stderr: files[1]}
	if req.Stdin {
		cmd.Stdin = files[2]
	}
	restore := func() {}
	if lim.MaxMemory == 0 {
		// The call's memory limit is the sandbox's control group, which
		// counts the worker too: when the call fills it, the kernel's
		// out-of-memory killer must pick a process of the call, not the
		// worker (whose Go heap may be the largest there, under the race
		// detector in tests). At 1000 every process of the call ranks
		// above the worker (the kernel adds the whole limit to its
		// badness), so the worker goes last, when no call process is
		// left. The worker raises its own score around the start, so the
		// call inherits it from the fork on: set on the call after it
		// started, what the call forked at once kept the worker's score
		// and could outlive the worker. Setting its score back to what it
		// was needs no privilege (the kernel refuses only going below the
		// lowest a privileged writer set).
		restore = raiseOOMScore()
	}
	err := startLimited(cmd, lim, perCallAS)
	restore()
	if err != nil {
		msg := err.Error()
		// Start may fail after the fork (a limit could not be set):
		// clean up whatever ran.
		dirty := cleanUp(base, stamps)
		return writeFrame(conn, workerReply{Error: msg, Dirty: dirty}, nil)
	}
	closeAll(files...) // the call holds its copies; EOF comes when it ends
	if err := writeFrame(conn, workerReply{Started: true}, nil); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	awaitExit(cmd.Process.Pid)
	_ = cmd.Wait()
	r := workerReply{Exited: true}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Code, r.Signal = 128+int(ws.Signal()), int(ws.Signal())
	} else {
		r.Code = cmd.ProcessState.ExitCode()
	}
	// Nothing a call starts outlives it: its first process has ended, so
	// everything else of it goes now, before the daemon hears the end.
	r.Dirty = cleanUp(base, stamps)
	return writeFrame(conn, r, nil)
}

// carryLimits sets on the worker itself the limits it can carry, so that
// every call inherits them with no work per call: the process count and
// open files always, the address space when it leaves the Go runtime (which
// reserves about a GiB up front) room to spare. It reports whether the
// address space limit must still be set on each call (startLimited).
func carryLimits(lim Limits) (perCallAS bool, err error) {
	set := func(res int, n uint64) error {
		return unix.Setrlimit(res, &unix.Rlimit{Cur: n, Max: n})
	}
	if err := set(unix.RLIMIT_NOFILE, uint64(lim.MaxOpenFiles)); err != nil {
		return false, fmt.Errorf("set RLIMIT_NOFILE: %v", err)
	}
	if err := set(unix.RLIMIT_NPROC, uint64(lim.MaxProcs)); err != nil {
		return false, fmt.Errorf("set RLIMIT_NPROC: %v", err)
	}
	if lim.MaxMemory == 0 {
		return false, nil // the call's control group holds its memory
	}
	vm, err := vmSize()
	if err != nil || uint64(lim.MaxMemory) < 2*vm+(1<<30) {
		return true, nil
	}
	if err := set(unix.RLIMIT_AS, uint64(lim.MaxMemory)); err != nil {
		return false, fmt.Errorf("set RLIMIT_AS: %v", err)
	}
	return false, nil
}

// vmSize is this process's address space in bytes (VmSize).
func vmSize() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmSize in /proc/self/status")
}

// startLimited starts cmd. When perCallAS, the address space limit is set
// before its program runs: the child stops at its exec (it is traced),
// gets the limit and is let go (Go cannot run code between fork and
// exec).
func startLimited(cmd *exec.Cmd, lim Limits, perCallAS bool) error {
	// A new session: the call leads its own, and its process group
	// tells it apart from the worker.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Ptrace: perCallAS}
	if !perCallAS {
		return cmd.Start()
	}
	runtime.LockOSThread() // ptrace requests come from the tracing thread
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	fail := func(what string, err error) error {
		_ = unix.Kill(pid, unix.SIGKILL)
		_ = cmd.Wait()
		return fmt.Errorf("sandbox worker: %s: %v", what, err)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
		return fail("wait for exec", err)
	}
	if !ws.Stopped() {
		return fail("wait for exec", fmt.Errorf("the child did not stop at exec (status %#x)", ws))
	}
	l := unix.Rlimit{Cur: uint64(lim.MaxMemory), Max: uint64(lim.MaxMemory)}
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, &l, nil); err != nil {
		return fail("set RLIMIT_AS", err)
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return fail("release", err)
	}
	return nil
}

// awaitExit returns once process pid has exited, waiting in the Go
// runtime's poller on a pidfd rather than in a blocking wait: while a
// goroutine sits in a blocking system call the runtime's monitor thread
// polls every few microseconds, which on a busy host costs more than the
// wait itself. Cmd.Wait then reaps at once. Without a pidfd (a kernel
// before 5.3) it returns at once, and Cmd.Wait blocks as usual.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		return n > 0 || (err != nil && !errors.Is(err, unix.EINTR))
	})
}

// cleanUp kills and reaps every process of the call and removes what it
// left in the sandbox. It returns "" when the sandbox is as it was, else
// why not.
func cleanUp(base map[string]scratchTree, stamps map[string]scratchStamp) string {
	// Every process of the call descends from the worker, which is their
	// subreaper: while one is left, the worker has a child (a parent
	// that exits hands its children to the worker before it can be
	// reaped). So when there is no child to wait for, none is left, and
	// the kill below (which walks every process of the host) is not
	// needed; that is the common case, a call whose processes all ended.
	for {
		pid, err := unix.Wait4(-1, nil, unix.WALL|unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) || err == nil && pid > 0 {
			continue
		}
		if errors.Is(err, unix.ECHILD) {
			return cleanScratch(base, stamps)
		}
		break
	}
	// kill(-1) reaches every process of the sandbox the worker may
	// signal (all run as its user) except itself and bubblewrap's init;
	// once none is left to reap and none to signal, none is left.
	for {
		err := unix.Kill(-1, unix.SIGKILL)
		for {
			if _, werr := unix.Wait4(-1, nil, unix.WALL, nil); werr != nil {
				if errors.Is(werr, unix.EINTR) {
					continue
				}
				break // ECHILD: no child left
			}
		}
		if errors.Is(err, unix.ESRCH) {
			break
		}
	}
	return cleanScratch(base, stamps)
}

// cleanScratch removes what a call left in the scratch directories, in
// SysV IPC and in the keyrings; it returns "" when the sandbox is as it
// was, else why not.
func cleanScratch(base map[string]scratchTree, stamps map[string]scratchStamp) string {
	var dirty []string
	for _, d := range workerScratch {
		if stamps[d].same(d) {
			continue // nothing added, removed, replaced or marked
		}
		if err := emptyScratch(d, base[d]); err != nil {
			dirty = append(dirty, err.Error())
			continue
		}
		if err := stamps[d].restore(d); err != nil {
			dirty = append(dirty, err.Error())
			continue
		}
		stamps[d] = stampScratch(d, base[d]) // the clean-up moved the ctimes
	}
	if err := removeSysVIPC(); err != nil {
		dirty = append(dirty, err.Error())
	}
	for _, k := range []int{unix.KEY_SPEC_SESSION_KEYRING, unix.KEY_SPEC_USER_KEYRING, unix.KEY_SPEC_USER_SESSION_KEYRING} {
		if _, err := unix.KeyctlInt(unix.KEYCTL_CLEAR, k, 0, 0, 0); err != nil && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EACCES) {
			dirty = append(dirty, fmt.Sprintf("clear keyring %d: %v", k, err))
		}
	}
	return strings.Join(dirty, "; ")
}

// scratchTree is what a scratch directory holds when the sandbox starts:
// nothing but the directories bubblewrap made there as mount points (a
// working directory shown under /tmp, a grant or an exposed path under
// it), by path relative to the directory. A call's leftovers are what is
// not in it.
type scratchTree map[string]bool

// scratchStamp is what Lstat says of a scratch directory and of the
// directories of its base, by path relative to it. tmpfs and mqueue count
// a directory's entries in its size, and any change of a directory's
// entries, mode, times or extended attributes moves its ctime (to a
// fine-grained time on kernels with multigrain timestamps, 6.13 on, once
// it has been read): a call that added, removed or replaced anything in
// the tree, or marked one of its directories, changed the stamp.
type scratchStamp map[string]dirStamp

type dirStamp struct {
	ino, size    uint64
	mode         uint32
	ctime        unix.Timespec
	atime, mtime unix.Timespec
}

// mqueueMagic is the mqueue filesystem's f_type (linux/magic.h).
const mqueueMagic = 0x19800202

// stampScratch returns the stamp of dir and base, or nil when dir is not
// on tmpfs or mqueue (then the tree is read after every call).
func stampScratch(dir string, base scratchTree) scratchStamp {
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil || (fs.Type != unix.TMPFS_MAGIC && fs.Type != mqueueMagic) {
		return nil
	}
	st := scratchStamp{}
	var root unix.Stat_t
	if unix.Lstat(dir, &root) != nil {
		return nil
	}
	for _, rel := range append([]string{"."}, mapsKeys(base)...) {
		var s unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, rel), &s); err != nil {
			return nil
		}
		// A mount (a grant, a cover) is not the sandbox's to stamp.
		if s.Mode&unix.S_IFMT == unix.S_IFDIR && s.Dev == root.Dev {
			st[rel] = dirStamp{ino: s.Ino, size: uint64(s.Size), mode: s.Mode, ctime: s.Ctim, atime: s.Atim, mtime: s.Mtim}
		}
	}
	return st
}

// same reports whether dir's stamp is still st.
func (st scratchStamp) same(dir string) bool {
	if st == nil {
		return false
	}
	for rel, want := range st {
		var s unix.Stat_t
		if unix.Lstat(filepath.Join(dir, rel), &s) != nil || s.Ino != want.ino || uint64(s.Size) != want.size || s.Mode != want.mode || s.Ctim != want.ctime {
			return false
		}
	}
	return true
}

// restore gives the directories of st back their mode and times and
// removes extended attributes a call set on them.
func (st scratchStamp) restore(dir string) error {
	for rel, want := range st {
		p := filepath.Join(dir, rel)
		var s unix.Stat_t
		if err := unix.Lstat(p, &s); err != nil || s.Ino != want.ino {
			return fmt.Errorf("%s was replaced", p)
		}
		if err := unix.Chmod(p, want.mode&0o7777); err != nil {
			return fmt.Errorf("chmod %s: %v", p, err)
		}
		if n, _ := unix.Llistxattr(p, nil); n > 0 {
			buf := make([]byte, n)
			n, _ = unix.Llistxattr(p, buf)
			for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
				if err := unix.Lremovexattr(p, name); err != nil {
					return fmt.Errorf("remove xattr %s of %s: %v", name, p, err)
				}
			}
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{want.atime, want.mtime}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("reset the times of %s: %v", p, err)
		}
	}
	return nil
}

func mapsKeys(m scratchTree) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// readScratch lists dir's tree on dir's own filesystem: it never descends
// into a mount (a grant or an exposed path), whose files are the host's.
func readScratch(dir string) (scratchTree, error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return scratchTree{}, nil
	}
	if err != nil {
		return nil, err
	}
	dev := devOf(fi)
	t := scratchTree{}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		t[rel] = true
		if d.IsDir() {
			if fi, err := os.Lstat(p); err != nil || devOf(fi) != dev {
				return filepath.SkipDir // a mount: its contents are not the sandbox's
			}
		}
		return nil
	})
	return t, err
}

func devOf(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Dev
	}
	return 0
}

// emptyScratch removes from dir what is not in base, on dir's own
// filesystem only, and reports an error when dir's tree is not base
// afterwards (something could not be removed, or a mount point was moved).
func emptyScratch(dir string, base scratchTree) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && len(base) == 0 {
			return nil
		}
		return fmt.Errorf("empty %s: %v", dir, err)
	}
	dev := devOf(fi)
	left := false // something not in base was found
	var clean func(p string)
	clean = func(p string) {
		ents, err := os.ReadDir(p)
		if err != nil {
			_ = os.Chmod(p, 0o700) // a call may have left it unreadable
			if ents, err = os.ReadDir(p); err != nil {
				return
			}
		}
		for _, e := range ents {
			q := filepath.Join(p, e.Name())
			rel, _ := filepath.Rel(dir, q)
			if base[rel] {
				if fi, err := os.Lstat(q); err == nil && fi.IsDir() && devOf(fi) == dev {
					clean(q) // a mount point's parent: it may hold leftovers
				}
				continue
			}
			left = true
			removeOnDev(q, dev)
		}
	}
	clean(dir)
	if !left {
		return nil
	}
	after, err := readScratch(dir)
	if err != nil {
		return fmt.Errorf("empty %s: %v", dir, err)
	}
	if len(after) != len(base) {
		return fmt.Errorf("empty %s: %d entries left, want %d", dir, len(after), len(base))
	}
	for rel := range after {
		if !base[rel] {
			return fmt.Errorf("empty %s: %s is left", dir, rel)
		}
	}
	return nil
}

// removeOnDev removes p and what is below it on filesystem dev; a mount
// below it (another device) is left alone, and with it its parents.
func removeOnDev(p string, dev uint64) {
	fi, err := os.Lstat(p)
	if err != nil || devOf(fi) != dev {
		return
	}
	if fi.IsDir() {
		_ = os.Chmod(p, 0o700)
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			removeOnDev(filepath.Join(p, e.Name()), dev)
		}
	}
	_ = os.Remove(p)
}

// removeSysVIPC removes the SysV shared memory segments, message queues
// and semaphore sets of the sandbox's IPC namespace. It asks the kernel
// how many there are first (one call each), and reads /proc/sysvipc only
// when some exist.
func removeSysVIPC() error {
	for _, k := range []struct {
		file  string
		count func() (int, error)
		rm    func(id int) error
	}{
		{"shm", func() (int, error) { return sysvCount(unix.SYS_SHMCTL, shmInfo, 0) },
			func(id int) error { _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); return err }},
		{"msg", func() (int, error) { return sysvCount(unix.SYS_MSGCTL, msgInfo, 0) },
			func(id int) error { return sysvRm(unix.SYS_MSGCTL, id, 0) }},
		{"sem", func() (int, error) { return sysvCount(unix.SYS_SEMCTL, semInfo, 7) },
			func(id int) error { return sysvRm(unix.SYS_SEMCTL, id, 0) }},
	} {
		if n, err := k.count(); err == nil && n == 0 {
			continue
		}
		ids, err := sysvIDs("/proc/sysvipc/" + k.file)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := k.rm(id); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM) {
				return fmt.Errorf("remove SysV %s %d: %v", k.file, id, err)
			}
		}
	}
	return nil
}

// The *_INFO commands of shmctl, msgctl and semctl (linux/ipc.h).
const (
	shmInfo = 14
	msgInfo = 12
	semInfo = 19
)

// sysvCount asks the kernel how many objects of a kind exist: the field
// at int index field of the info struct (shm_info.used_ids,
// msginfo.msgpool, seminfo.semusz).
func sysvCount(trap, cmd uintptr, field int) (int, error) {
	var buf [64]int32 // larger than each info struct
	p := uintptr(unsafe.Pointer(&buf[0]))
	var errno syscall.Errno
	if trap == unix.SYS_SEMCTL {
		_, _, errno = unix.Syscall6(trap, 0, 0, cmd, p, 0, 0)
	} else {
		_, _, errno = unix.Syscall(trap, 0, cmd, p)
	}
	if errno != 0 {
		return 0, errno
	}
	return int(buf[field]), nil
}

// sysvRm is msgctl(id, IPC_RMID) or semctl(id, 0, IPC_RMID).
func sysvRm(trap uintptr, id, semnum int) error {
	var errno syscall.Errno
	if trap == unix.SYS_MSGCTL {
		_, _, errno = unix.Syscall(trap, uintptr(id), unix.IPC_RMID, 0)
	} else {
		_, _, errno = unix.Syscall6(trap, uintptr(id), uintptr(semnum), unix.IPC_RMID, 0, 0, 0)
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// sysvIDs reads the ids (second column) of a /proc/sysvipc table.
func sysvIDs(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // a kernel without SysV IPC
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %v", path, err)
	}
	var ids []int
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		id, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("%s: bad line %q", path, l)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// maxFrame bounds one message between the daemon and a worker: a request
// carries argv and environment, which the kernel bounds far lower.
const maxFrame = 16 << 20

// writeFrame sends v as a length-prefixed JSON frame, with fds attached
// to its first bytes.
func writeFrame(conn *net.UnixConn, v any, fds []int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	msg := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	msg = append(msg, b...)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, _, err := conn.WriteMsgUnix(msg, oob, nil)
	if err != nil {
		return err
	}
	if n < len(msg) {
		_, err = conn.Write(msg[n:])
	}
	return err
}

// frameReader reads frames from one connection, keeping what a read took
// beyond a frame (two replies may arrive in one read) for the next one.
type frameReader struct {
	conn    *net.UnixConn
	pending []byte
}

// readFrame reads one frame into v and returns the descriptors that came
// with it. A frame usually arrives whole, so one read takes it.
func (r *frameReader) readFrame(v any) ([]int, error) {
	var fds []int
	fail := func(err error) ([]int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, err
	}
	buf := r.pending
	r.pending = nil
	for {
		if len(buf) >= 4 {
			size := int(binary.BigEndian.Uint32(buf))
			if size > maxFrame {
				return fail(fmt.Errorf("frame of %d bytes", size))
			}
			if len(buf) >= 4+size {
				if err := json.Unmarshal(buf[4:4+size], v); err != nil {
					return fail(err)
				}
				if rest := buf[4+size:]; len(rest) > 0 {
					r.pending = append([]byte(nil), rest...)
				}
				return fds, nil
			}
		}
		chunk := make([]byte, 4<<10)
		oob := make([]byte, unix.CmsgSpace(4*4))
		n, oobn, _, _, err := r.conn.ReadMsgUnix(chunk, oob)
		if n == 0 && err == nil {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return fail(err)
		}
		if oobn > 0 {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				return fail(err)
			}
			for _, m := range msgs {
				got, err := unix.ParseUnixRights(&m)
				if err != nil {
					return fail(err)
				}
				fds = append(fds, got...)
			}
		}
		buf = append(buf, chunk[:n]...)
	}
}

// raiseOOMScore sets the worker's oom_score_adj to 1000 and returns the
// function that sets it back (see runCall).
func raiseOOMScore() (restore func()) {
	const file = "/proc/self/oom_score_adj"
	was, err := ownOOMScore()
	if err != nil {
		return func() {}
	}
	if err := os.WriteFile(file, []byte("1000"), 0); err != nil {
		return func() {}
	}
	return func() { _ = os.WriteFile(file, was, 0) }
}

// ownOOMScore is the worker's oom_score_adj as it started, read once.
var ownOOMScore = sync.OnceValues(func() ([]byte, error) {
	was, err := os.ReadFile("/proc/self/oom_score_adj")
	return bytes.TrimSpace(was), err
})
