package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// MechanismLandlock names the mechanism of a daemon that runs as root:
// each call's process is started from an OS thread of its own, which
// first makes the call's sandbox and then forks the tool, which inherits
// it. Nothing is executed but the tool: no helper, no bubblewrap.
//
// Why (measured on a loaded 2-core VM, CPU per `bash -c 'echo hello'`,
// interleaved rounds; docs/security.md has the table): bubblewrap per
// call costs about three times the tool itself (19.9 against 5.9-7.5 ms),
// so single-use bubblewrap sandboxes cannot reach 0.8 of unsandboxed
// throughput, prewarmed or not: prewarming moves the cost, it does not
// remove it. A re-executed Go helper costs more than bash itself (the
// daemon's own binary 42 ms, a minimal Go program 3.5 ms). The thread
// costs 0.3-1.2 ms with its mount namespace, Landlock, seccomp, its PID,
// IPC and UTS namespaces and its control group. A network namespace
// would cost about 1 ms more; Landlock's TCP rules and the seccomp
// filter's socket rule take its place where the kernel offers them.
//
// Go cannot run code between fork and exec, but a child inherits its
// forking thread's mount namespace, Landlock domain, seccomp filter,
// no_new_privs and umask. So the thread, locked to its goroutine and
// never unlocked (the runtime then ends the thread with the goroutine,
// and makes new threads from a clean template thread, never from a
// locked one), does:
//
//	unshare(CLONE_NEWNS)  — mounts of its own, not propagated to the host
//	tmpfs on /tmp, /var/tmp, /dev/shm; /run too without network
//	proc on /proc with hidepid=invisible (other users' processes unseen)
//	empty covers on hidden paths, then what is shown inside them
//	no_new_privs, Landlock (writes only to the scratch directories and
//	  the grant; TCP bind never, TCP connect only with network;
//	  abstract Unix sockets and signals scoped to the call), seccomp
//	fork with new IPC and UTS namespaces, a new session, as a user of
//	  the call's own (never uid 0), with the parent-death signal
//
// and it stays alive, blocked, until the call ended: the parent-death
// signal belongs to the thread that forked. When the call's first
// process ended, the thread (by then the call's user) ends the rest.
const MechanismLandlock = "landlock"

// Defaults of the users calls run as with MechanismLandlock.
const (
	// DefaultUIDBase is where the blocks of sandbox ids start. A daemon
	// claims the first free block of UIDCount ids: the block's first id
	// is the group of its calls, the others their users. It lies in the
	// range systemd's UIDS-GIDS.md leaves unused (1879048192-2147352575).
	DefaultUIDBase = 2000000000
	// DefaultUIDCount is the size of a block: its first id is the
	// group, so one daemon runs at most DefaultUIDCount-1 calls at once,
	// each as a user of its own.
	DefaultUIDCount = 4096
)

// isolation is the state of MechanismLandlock shared by every call.
type isolation struct {
	abi     int
	filters [2]*filterProgram // [0] without network, [1] with
	// uids hands each call a uid of its own; nil when the operator
	// named one user for every call (SandboxOptions.User).
	uids *uidPool
	gid  uint32
	// netNS gives calls without network a network namespace of their
	// own, where Landlock cannot refuse TCP (ABI below 4).
	netNS bool
	// reaper ends the calls' processes when this process ends (reaper.go).
	reaper *reaper
	// proc and empty are detached mounts made once, which every call
	// gets a clone of: a proc with hidepid=invisible (a call sees its own
	// user's processes only) and an empty read-only tmpfs (the cover of
	// a hidden directory, of /run without network, of /dev/mqueue). A new
	// superblock per call for each would cost more; neither can hold
	// anything of a call (proc shows each caller its own, the cover is
	// read-only and empty).
	proc, empty int
}

// uidPool hands out the uids of calls: base+1 to base+n, one per running
// call, in turn, so a uid comes back only after all the others were used.
type uidPool struct {
	base uint32
	mu   sync.Mutex
	busy []bool
	next int
}

func (p *uidPool) get() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.busy {
		s := (p.next + i) % len(p.busy)
		if !p.busy[s] {
			p.busy[s] = true
			p.next = s + 1
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w: all %d users of the sandbox's range run a call (sandbox_uids)", ErrSandbox, len(p.busy))
}

func (p *uidPool) put(s int) {
	p.mu.Lock()
	p.busy[s] = false
	p.mu.Unlock()
}

// landlockABI returns the kernel's Landlock ABI version, 0 without it.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// landlockAvailable says why MechanismLandlock cannot run here, or nil.
func landlockAvailable() error {
	if os.Geteuid() != 0 {
		return errors.New("the daemon is not root: a mount namespace per call and a user per call need root")
	}
	if landlockABI() < 1 {
		return errors.New("the kernel offers no Landlock (CONFIG_SECURITY_LANDLOCK, and landlock in the lsm= boot parameter)")
	}
	if err := unix.Prctl(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("the kernel offers no seccomp: %v", err)
	}
	return nil
}

// newIsolation prepares MechanismLandlock: the filters, the users and
// the reaper; groups is the directory of the calls' control groups (pids
// controller), "" without them.
func newIsolation(opts SandboxOptions, groups string) (*isolation, error) {
	iso := &isolation{abi: landlockABI()}
	for i, network := range []bool{false, true} {
		f, err := newFilter(network)
		if err != nil {
			return nil, err
		}
		iso.filters[i] = f
	}
	iso.netNS = iso.abi < 4
	var err error
	if iso.proc, err = detachedMount("proc", map[string]string{"hidepid": "invisible"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC); err != nil {
		return nil, err
	}
	if iso.empty, err = detachedMount("tmpfs", map[string]string{"size": "4k", "mode": "755"}, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC); err != nil {
		iso.close()
		return nil, err
	}
	if opts.User != nil {
		if opts.User.Uid == 0 {
			return nil, fmt.Errorf("%w: the sandbox user is root; tools never run as root", ErrSandbox)
		}
		iso.gid = opts.User.Gid
		// Not every process of a named user: it may run more than the
		// calls. The calls' control groups, where there are some.
		r, err := startReaper(nil, 0, 0, groups)
		if err != nil {
			iso.close()
			return nil, err
		}
		iso.reaper = r
		return iso, nil
	}
	base, n := opts.UIDBase, opts.UIDCount
	if base == 0 {
		base = DefaultUIDBase
	}
	if n <= 0 {
		n = DefaultUIDCount
	}
	first, lock, err := claimUIDs(base, n)
	if err != nil {
		iso.close()
		return nil, err
	}
	// The block: its first id is the calls' group, the others their users.
	r, err := startReaper(lock, first+1, first+uint32(n)-1, groups)
	lock.Close() // the reaper holds the claim now, as long as it lives
	if err != nil {
		iso.close()
		return nil, err
	}
	iso.reaper = r
	iso.uids = &uidPool{base: first, busy: make([]bool, n-1)}
	iso.gid = first
	return iso, nil
}

// uidLockDir holds the claims on blocks of sandbox uids, so that daemons
// on one host (serve, mcp, gatekeeper, call) never share a user.
const uidLockDir = "/run/toolagent"

// claimUIDs claims the first free block of n ids at base+k*n: a lock
// file held (flock) by this process and its reaper. A claim ends with
// both, so a block comes back only once every process of its calls is
// gone.
func claimUIDs(base uint32, n int) (first uint32, lock *os.File, err error) {
	if err := os.MkdirAll(uidLockDir, 0o700); err != nil {
		return 0, nil, fmt.Errorf("%w: sandbox users: %v", ErrSandbox, err)
	}
	for k := uint64(0); ; k++ {
		start := uint64(base) + k*uint64(n)
		if start+uint64(n) > 1<<31 {
			return 0, nil, fmt.Errorf("%w: sandbox users: every block of %d ids from %d up to 2^31 is claimed (%s)", ErrSandbox, n, base, uidLockDir)
		}
		f, err := os.OpenFile(filepath.Join(uidLockDir, "uids-"+strconv.FormatUint(start, 10)+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: sandbox users: %v", ErrSandbox, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
			return uint32(start), f, nil
		}
		f.Close()
	}
}

// close ends the reaper, which then ends what is left of the calls, and
// lets the shared mounts go.
func (iso *isolation) close() {
	if iso.reaper != nil {
		iso.reaper.close()
	}
	for _, fd := range []int{iso.proc, iso.empty} {
		if fd > 0 {
			unix.Close(fd)
		}
	}
}

// detachedMount makes a mount of fstype with opts that is attached
// nowhere; clone returns a copy to attach.
func detachedMount(fstype string, opts map[string]string, attrs int) (int, error) {
	fs, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("%w: %s: %v", ErrSandbox, fstype, err)
	}
	defer unix.Close(fs)
	for k, v := range opts {
		if err := unix.FsconfigSetString(fs, k, v); err != nil {
			return -1, fmt.Errorf("%w: %s %s=%s: %v", ErrSandbox, fstype, k, v, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("%w: %s: %v", ErrSandbox, fstype, err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return -1, fmt.Errorf("%w: %s: %v", ErrSandbox, fstype, err)
	}
	return m, nil
}

// attach attaches a copy of the mount fd (at sub inside it, "" for its
// root) at the path at.
func attach(fd int, sub, at string) error {
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
	if sub == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	c, err := unix.OpenTree(fd, sub, flags)
	if err != nil {
		return fmt.Errorf("%w: mount on %s: %v", ErrSandbox, at, err)
	}
	defer unix.Close(c)
	if err := unix.MoveMount(c, "", unix.AT_FDCWD, at, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("%w: mount on %s: %v", ErrSandbox, at, err)
	}
	return nil
}

// Group returns the group every call runs in under MechanismLandlock (ok
// false otherwise, and for a nil Sandbox): a path granted to calls must
// let this group write it (the daemon makes its files root so).
func (s *Sandbox) Group() (gid uint32, ok bool) {
	if s == nil || s.iso == nil {
		return 0, false
	}
	return s.iso.gid, true
}

// isolatedCall is one call's sandbox under MechanismLandlock.
type isolatedCall struct {
	s     *Sandbox
	grant Grant
	shown string
	cred  *syscall.Credential
	slot  int // the uid's slot, or -1
	cg    *cgroup
	// procs are the call's groups' process lists, opened before Landlock
	// confines the thread, which writes the child's pid into them.
	procs []*os.File

	started chan error       // the start's outcome
	done    chan struct{}    // closed by finish: end the call's processes
	report  chan isolateNote // what the thread did and saw at the end
	note    isolateNote      // the report, once finish took it
}

// isolateNote is what the forking thread reports when the call ended.
type isolateNote struct {
	full bool // the call's scratch space has no room left
}

// begin prepares the call: its user, its control group, the command's
// process attributes. Nothing runs yet.
func (iso *isolation) begin(s *Sandbox, cmd *exec.Cmd, g Grant, dir string) (*isolatedCall, error) {
	c := &isolatedCall{s: s, grant: g, slot: -1}
	if inScratch(dir) {
		c.shown = dir
	}
	if iso.uids != nil {
		slot, err := iso.uids.get()
		if err != nil {
			return nil, err
		}
		c.slot = slot
		c.cred = &syscall.Credential{Uid: iso.uids.base + 1 + uint32(slot), Gid: iso.gid, Groups: []uint32{}}
	} else {
		u := *s.user
		u.Groups = []uint32{}
		c.cred = &u
	}
	if s.cg != nil {
		var err error
		if c.cg, err = s.cg.create(s.limits, 0); err != nil {
			c.free()
			return nil, err
		}
		if err := c.openGroupFiles(); err != nil {
			c.free()
			return nil, err
		}
	}
	// No PID namespace: its first process would be the tool, and a
	// namespace's init ignores the signals it does not handle (kill $$,
	// SIGPIPE at the output cap). A user of its own per call does what
	// the namespace did: /proc shows no other call's processes
	// (hidepid), none can be signalled, and kill(-1) by that user ends
	// every process of the call (see finish).
	var flags uintptr = unix.CLONE_NEWIPC | unix.CLONE_NEWUTS
	if iso.netNS && !g.Network {
		flags |= unix.CLONE_NEWNET
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setsid:     true,
		Pdeathsig:  syscall.SIGKILL,
		Cloneflags: flags,
		Credential: c.cred,
		// The child stops at its exec, before the tool's first
		// instruction: its control group and rlimits are set then.
		Ptrace: true,
	}
	return c, nil
}

// openGroupFiles opens the call's groups' process lists, which the
// forking thread writes once Landlock confines it (Landlock checks a file
// when it is opened, not when it is written).
func (c *isolatedCall) openGroupFiles() error {
	for _, d := range []string{c.cg.pids, c.cg.memory} {
		f, err := os.OpenFile(filepath.Join(d, "cgroup.procs"), os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("%w: cgroup: %v", ErrSandbox, err)
		}
		c.procs = append(c.procs, f)
	}
	return nil
}

// start makes the sandbox on a thread of its own and starts cmd there.
func (c *isolatedCall) start(cmd *exec.Cmd) error {
	c.started = make(chan error, 1)
	c.done = make(chan struct{})
	c.report = make(chan isolateNote, 1)
	go c.thread(cmd)
	return <-c.started
}

// thread is the call's forking thread; see MechanismLandlock.
func (c *isolatedCall) thread(cmd *exec.Cmd) {
	runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
	if unix.Gettid() == unix.Getpid() {
		// The main thread: what the process shows of itself in /proc
		// (its mounts, its seccomp) is this thread's, and the runtime
		// never ends it but parks it for good when its locked goroutine
		// ends. So leave it parked, untouched, and start again on
		// another thread; this happens once per process at most.
		go c.thread(cmd)
		return
	}
	var note isolateNote
	defer func() { c.report <- note }()
	if err := c.setup(); err != nil {
		c.started <- err
		return
	}
	if err := cmd.Start(); err != nil {
		c.started <- err
		return
	}
	err := c.release(cmd.Process.Pid)
	c.started <- err
	<-c.done
	if err == nil {
		c.killAll()
	}
	note.full = scratchFull()
}

// killAll ends every process of the call, from the forking thread. With
// a user per call, kill(-1) as that user reaches exactly the call's
// processes, at once: the kernel signals them all under the lock fork
// needs, so none can fork past it (and the thread, the caller, is
// spared). With one user for every call (SandboxOptions.User), the
// call's control group lists them; without one, its process group died
// with its first process, and what left the group is not reached until
// the sandbox closes (the reaper).
func (c *isolatedCall) killAll() {
	if c.slot >= 0 {
		_ = c.asCallUser(func() error { return unix.Kill(-1, unix.SIGKILL) })
		return
	}
	if c.cg == nil {
		return
	}
	for range 100 { // a bound, as the group's process limit is one
		b, err := os.ReadFile(filepath.Join(c.cg.pids, "cgroup.procs"))
		pids := strings.Fields(string(b))
		if err != nil || len(pids) == 0 {
			return
		}
		for _, p := range pids {
			if n, err := strconv.Atoi(p); err == nil {
				_ = unix.Kill(n, unix.SIGKILL)
			}
		}
	}
}

// setup builds the sandbox in the calling thread.
func (c *isolatedCall) setup() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("%w: mount namespace: %v", ErrSandbox, err)
	}
	unix.Umask(0o002) // the thread's own (CLONE_NEWNS unshares CLONE_FS): the call's files are its group's to change
	if err := c.mounts(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("%w: no_new_privs: %v", ErrSandbox, err)
	}
	if err := c.landlock(); err != nil {
		return err
	}
	f := c.s.iso.filters[0]
	if c.grant.Network {
		f = c.s.iso.filters[1]
	}
	return f.install()
}

// release waits for the child to stop at its exec, moves it into the
// call's control group, sets its rlimits and lets it run. A child that
// cannot be given its limits is killed: it never runs without them.
func (c *isolatedCall) release(pid int) error {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return killStarted(pid, fmt.Errorf("%w: wait for the start: %v", ErrSandbox, err))
		}
		break
	}
	if !ws.Stopped() {
		// Killed before its first instruction (the call was cancelled).
		// The status is taken: Wait reports an error, and so does Run.
		return fmt.Errorf("%w: the process ended as it started (%v)", ErrSandbox, ws)
	}
	for _, f := range c.procs {
		if _, err := f.WriteString(strconv.Itoa(pid)); err != nil {
			return killStarted(pid, fmt.Errorf("%w: cgroup: %v", ErrSandbox, err))
		}
	}
	for _, r := range []struct {
		res int
		n   uint64
	}{
		{unix.RLIMIT_NPROC, uint64(c.s.procLimit())},
		{unix.RLIMIT_AS, uint64(c.s.asLimit())},
		{unix.RLIMIT_NOFILE, uint64(c.s.limits.MaxOpenFiles)},
	} {
		if r.n == 0 {
			continue
		}
		lim := unix.Rlimit{Cur: r.n, Max: r.n}
		err := unix.Prlimit(pid, r.res, &lim, nil)
		if errors.Is(err, unix.EPERM) {
			// Root without CAP_SYS_RESOURCE (a container's root): the
			// kernel lets a process set the limits of another of its
			// own user. The child is stopped: nothing of the call runs
			// while the thread is its user.
			err = c.asCallUser(func() error { return unix.Prlimit(pid, r.res, &lim, nil) })
		}
		if err != nil {
			return killStarted(pid, fmt.Errorf("%w: set resource limits: %v", ErrSandbox, err))
		}
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return killStarted(pid, fmt.Errorf("%w: release the process: %v", ErrSandbox, err))
	}
	return nil
}

// asCallUser runs f with the thread as the call's user, and root again
// after: its saved user stays root. Raw system calls change the calling
// thread alone (the C library and Go change every thread). The window
// is short and nothing of the call can reach the thread in it: see the
// callers.
func (c *isolatedCall) asCallUser(f func() error) error {
	uid, gid := uintptr(c.cred.Uid), uintptr(c.cred.Gid)
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, gid, gid, 0); e != 0 {
		return e
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uid, uid, 0); e != 0 {
		unix.RawSyscall(unix.SYS_SETRESGID, 0, 0, 0)
		return e
	}
	err := f()
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, 0, 0, 0); e != 0 {
		// Cannot be: the saved user is root. Were it, the thread must
		// not serve anything more; it ends with the call anyway.
		return errors.Join(err, e)
	}
	unix.RawSyscall(unix.SYS_SETRESGID, 0, 0, 0)
	return err
}

// killStarted ends a child that must not run and returns err.
func killStarted(pid int, err error) error {
	_ = unix.Kill(pid, unix.SIGKILL)
	return err
}

// mounts gives the thread's mount namespace the call's view of the host.
func (c *isolatedCall) mounts() error {
	s := c.s
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("%w: mount propagation: %v", ErrSandbox, err)
	}
	// What is shown inside a cover or a scratch directory is cloned
	// before anything covers it, then grafted back.
	type graft struct {
		fd  int
		at  string
		dir bool
	}
	var grafts []graft
	defer func() {
		for _, g := range grafts {
			unix.Close(g.fd)
		}
	}()
	clone := func(p string, readOnly bool) error {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSandbox, err)
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("%w: clone %s: %v", ErrSandbox, p, err)
		}
		grafts = append(grafts, graft{fd: fd, at: p, dir: fi.IsDir()})
		if readOnly {
			attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
			if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
				return fmt.Errorf("%w: read-only %s: %v", ErrSandbox, p, err)
			}
		}
		return nil
	}
	if c.shown != "" {
		if err := clone(c.shown, true); err != nil {
			return err
		}
	}
	shownGrafts := len(grafts)
	for _, p := range s.expose {
		if s.insideHidden(p) || inScratch(p) {
			if err := clone(p, true); err != nil {
				return err
			}
		}
	}
	for _, w := range c.grant.Write {
		if inScratch(w) || s.insideHidden(w) {
			if err := clone(w, false); err != nil {
				return err
			}
		}
	}
	tmpfs := func(at, opts string, flags uintptr) error {
		if err := unix.Mount("tmpfs", at, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|flags, opts); err != nil {
			return fmt.Errorf("%w: tmpfs on %s: %v", ErrSandbox, at, err)
		}
		return nil
	}
	if err := c.scratch(); err != nil {
		return err
	}
	if !c.grant.Network {
		if err := attach(s.iso.empty, "", "/run"); err != nil {
			return err
		}
	}
	if fi, err := os.Stat("/dev/mqueue"); err == nil && fi.IsDir() {
		// The host's message queues: a call has its own IPC namespace,
		// whose queues this mount would not show anyway.
		if err := attach(s.iso.empty, "", "/dev/mqueue"); err != nil {
			return err
		}
	}
	if err := attach(s.iso.proc, "", "/proc"); err != nil {
		return err
	}
	place := func(g graft) error {
		if g.dir {
			if err := os.MkdirAll(g.at, 0o755); err != nil {
				return fmt.Errorf("%w: graft %s: %v", ErrSandbox, g.at, err)
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(g.at), 0o755); err != nil {
				return fmt.Errorf("%w: graft %s: %v", ErrSandbox, g.at, err)
			}
			f, err := os.OpenFile(g.at, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return fmt.Errorf("%w: graft %s: %v", ErrSandbox, g.at, err)
			}
			f.Close()
		}
		if err := unix.MoveMount(g.fd, "", unix.AT_FDCWD, g.at, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("%w: graft %s: %v", ErrSandbox, g.at, err)
		}
		return nil
	}
	for _, g := range grafts[:shownGrafts] {
		if err := place(g); err != nil {
			return err
		}
	}
	// Covers: an empty directory over a hidden one, /dev/null over a
	// hidden file. A hidden path under a scratch directory is gone with
	// it, unless the working directory shown there holds it.
	var covered []string
	for _, h := range s.hide {
		if inScratch(h.path) && (c.shown == "" || !within(h.path, c.shown)) {
			continue
		}
		if _, err := os.Lstat(h.path); err != nil {
			continue // not in the call's view (under a covered /run, say)
		}
		if h.dir {
			if !slices.ContainsFunc(grafts[shownGrafts:], func(g graft) bool { return within(g.at, h.path) }) {
				if err := attach(s.iso.empty, "", h.path); err != nil {
					return err
				}
				continue
			}
			// What is shown inside needs a place to be grafted: a
			// cover of the call's own, read-only once grafted.
			if err := tmpfs(h.path, "size=4k,mode=755", 0); err != nil {
				return err
			}
			covered = append(covered, h.path)
			continue
		}
		if err := unix.Mount(os.DevNull, h.path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("%w: cover %s: %v", ErrSandbox, h.path, err)
		}
	}
	for _, g := range grafts[shownGrafts:] {
		if err := place(g); err != nil {
			return err
		}
	}
	for _, p := range covered {
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(unix.AT_FDCWD, p, 0, &attr); err != nil {
			return fmt.Errorf("%w: read-only %s: %v", ErrSandbox, p, err)
		}
	}
	return nil
}

// scratchDirs are the directories every call gets empty and private.
var scratchDirs = []string{SandboxTmp, "/var/tmp", "/dev/shm"}

// scratch gives the call its scratch directories: one tmpfs of
// Limits.MaxTmp, made detached, whose three directories are attached at
// /tmp, /var/tmp and /dev/shm (one superblock a call, not three); the
// three share its size.
func (c *isolatedCall) scratch() error {
	m, err := detachedMount("tmpfs", map[string]string{"size": strconv.FormatInt(c.s.limits.MaxTmp, 10), "mode": "755"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return err
	}
	defer unix.Close(m)
	for i, d := range scratchDirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		name := strconv.Itoa(i)
		if err := unix.Mkdirat(m, name, 0o1777); err != nil {
			return fmt.Errorf("%w: scratch %s: %v", ErrSandbox, d, err)
		}
		if err := unix.Fchmodat(m, name, 0o1777, 0); err != nil { // past the umask
			return fmt.Errorf("%w: scratch %s: %v", ErrSandbox, d, err)
		}
		if err := attach(m, name, d); err != nil {
			return err
		}
	}
	return nil
}

// scratchFull says whether the call's scratch space has no room left,
// in the calling thread's mount namespace (the three directories share
// one filesystem).
func scratchFull() bool {
	var st unix.Statfs_t
	return unix.Statfs(SandboxTmp, &st) == nil && st.Blocks > 0 && st.Bavail == 0
}

// Landlock rights.
const (
	llWrite = ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo |
		ll.AccessFSMakeBlock | ll.AccessFSMakeSym
	llFileWrite = ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// landlock confines the thread: what it and its children may change,
// which TCP ports they may use, what they may signal and reach.
func (c *isolatedCall) landlock() error {
	abi := c.s.iso.abi
	handled := landlock.AccessFSSet(llWrite)
	if abi >= 2 {
		handled |= ll.AccessFSRefer
	}
	if abi >= 3 {
		handled |= ll.AccessFSTruncate
	}
	if abi >= 5 {
		handled |= ll.AccessFSIoctlDev
	}
	cfg := landlock.Config{HandledAccessFS: handled}
	if abi >= 4 {
		cfg.HandledAccessNet = ll.AccessNetBindTCP
		if !c.grant.Network {
			cfg.HandledAccessNet |= ll.AccessNetConnectTCP
		}
	}
	if abi >= 6 {
		cfg.Scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
	}
	dirs := append([]string{}, scratchDirs...)
	files := []string{os.DevNull, "/dev/zero", "/dev/full"}
	for _, w := range c.grant.Write {
		fi, err := os.Stat(w)
		if err != nil {
			return fmt.Errorf("%w: write grant %s: %v", ErrSandbox, w, err)
		}
		if fi.IsDir() {
			dirs = append(dirs, w)
		} else {
			files = append(files, w)
		}
	}
	fd, flags, err := cfg.NewRulesetFD(
		landlock.PathAccess(handled, dirs...).IgnoreIfMissing(),
		landlock.PathAccess(handled&llFileWrite, files...).IgnoreIfMissing(),
	)
	if err != nil {
		return fmt.Errorf("%w: landlock: %v", ErrSandbox, err)
	}
	defer unix.Close(fd)
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("%w: landlock: %v", ErrSandbox, err)
	}
	return nil
}

// finish ends every process of the call once its first one was reaped,
// and lets the forking thread go.
func (c *isolatedCall) finish() {
	if c.done == nil {
		return
	}
	close(c.done)
	c.note = <-c.report
	c.done = nil
}

// end returns which limits the call hit; the call's user and group are
// released.
func (c *isolatedCall) end() string {
	c.finish()
	note := c.note
	hit := ""
	if c.cg != nil {
		hit = c.cg.hits(c.s.limits)
	}
	if note.full {
		full := fmt.Sprintf("scratch space: the call's %s (with %s) is full at its %s", SandboxTmp, strings.Join(scratchDirs[1:], " and "), byteSize(c.s.limits.MaxTmp))
		if hit != "" {
			hit += "; "
		}
		hit += full
	}
	c.free()
	return hit
}

// abort releases a call whose process did not start.
func (c *isolatedCall) abort() {
	c.finish()
	c.free()
}

// free gives back the call's user, files and control group.
func (c *isolatedCall) free() {
	closeAll(c.procs...)
	c.procs = nil
	if c.cg != nil {
		c.cg.remove()
		c.cg = nil
	}
	if c.slot >= 0 {
		c.s.iso.uids.put(c.slot)
		c.slot = -1
	}
}

// insideHidden reports whether p is inside (or is) a hidden directory.
func (s *Sandbox) insideHidden(p string) bool {
	for _, h := range s.hide {
		if h.dir && within(p, h.path) {
			return true
		}
	}
	return false
}

// LandlockABI is the kernel's Landlock ABI version, 0 without Landlock
// (toolagent doctor).
func LandlockABI() int { return landlockABI() }

// GroupClaimed reports whether gid is the group of a block of sandbox ids
// that a live process (another daemon, or this one) has claimed: the
// block's lock file is held. A files root in such a group is that
// process's; another must not take it over.
func GroupClaimed(gid uint32) bool {
	f, err := os.Open(filepath.Join(uidLockDir, "uids-"+strconv.FormatUint(uint64(gid), 10)+".lock"))
	if err != nil {
		return false
	}
	defer f.Close() // closing drops a lock this test took
	return unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) != nil
}
