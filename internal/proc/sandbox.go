package proc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MechanismBubblewrap names the mechanism of a daemon that is not root:
// every call's process runs in a bubblewrap sandbox of its own, with new
// user, mount, PID, IPC, UTS and (without network) network namespaces,
// under the same seccomp filter as MechanismLandlock's. A sandbox serves
// one call; bubblewrap costs several milliseconds of CPU per call, which
// is why a root daemon uses MechanismLandlock (see there).
const MechanismBubblewrap = "bubblewrap"

// Defaults of Limits fields left zero.
const (
	// DefaultMaxProcs caps the processes (and threads) of one call.
	DefaultMaxProcs = 256
	// DefaultMaxMemory caps the address space of each process of a call.
	DefaultMaxMemory = 4 << 30
	// DefaultMaxTmp caps the private /tmp of a call (it lives in memory).
	DefaultMaxTmp = 256 << 20
	// DefaultMaxOpenFiles caps the open files of each process of a call.
	DefaultMaxOpenFiles = 1024
)

// SandboxTmp is the private, empty directory every sandboxed call gets as
// /tmp (and as HOME, see SandboxEnv); it is removed with the call.
const SandboxTmp = "/tmp"

// Limits are the resource limits of every sandboxed call. They are
// rlimits, set on the sandbox before the tool's first process starts and
// inherited by everything it starts.
type Limits struct {
	// MaxProcs is RLIMIT_NPROC: the processes of the sandbox user. The
	// kernel does not apply it to uid 0, so it holds only when the
	// children run as another user (SandboxOptions.User, or a daemon that
	// is not root).
	MaxProcs int `json:"max_procs"`
	// MaxMemory, in bytes, is the memory of the whole call where its
	// control group enforces it (Sandbox.Cgroups), else RLIMIT_AS: the
	// address space of each process.
	MaxMemory int64 `json:"max_memory_bytes"`
	// MaxOpenFiles is RLIMIT_NOFILE per process.
	MaxOpenFiles int `json:"max_open_files"`
	// MaxTmp is the size of the private /tmp, in bytes.
	MaxTmp int64 `json:"max_tmp_bytes"`
}

// String says the limits in one line: "256 processes, 4 GiB address
// space per process, 1024 open files, 256 MiB /tmp".
func (l Limits) String() string {
	return fmt.Sprintf("%d processes, %s address space per process, %d open files, %s /tmp",
		l.MaxProcs, byteSize(l.MaxMemory), l.MaxOpenFiles, byteSize(l.MaxTmp))
}

// byteSize spells n in the largest binary unit that divides it.
func byteSize(n int64) string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

func (l Limits) withDefaults() Limits {
	if l.MaxProcs <= 0 {
		l.MaxProcs = DefaultMaxProcs
	}
	if l.MaxMemory <= 0 {
		l.MaxMemory = DefaultMaxMemory
	}
	if l.MaxOpenFiles <= 0 {
		l.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if l.MaxTmp <= 0 {
		l.MaxTmp = DefaultMaxTmp
	}
	return l
}

// Grant is what one sandboxed call may touch beyond reading the
// filesystem. The zero Grant is read-only with no network.
type Grant struct {
	// Write lists the absolute paths (files or directories) the call may
	// change. Everything else is read-only.
	Write []string `json:"write"`
	// Network lets the call use the host's network. Without it the call
	// has only a loopback interface of its own and no /run (so no Unix
	// sockets of host services either).
	Network bool `json:"network"`
}

// String says the grant in one line: "read-only, no network",
// "write /srv/out, network".
func (g Grant) String() string {
	w := "read-only"
	if len(g.Write) > 0 {
		w = "write " + strings.Join(g.Write, ", ")
	}
	if g.Network {
		return w + ", network"
	}
	return w + ", no network"
}

// SandboxOptions configure NewSandbox.
type SandboxOptions struct {
	// Bwrap is the bubblewrap program; "" looks up "bwrap" in MinimalPath.
	Bwrap string
	// Hide lists files and directories no child may see: the state
	// directory, token and secret files, the repository clone. A
	// directory is covered by an empty one, a file by an empty file.
	// Paths that do not exist are skipped.
	Hide []string
	// Expose lists directories inside hidden ones that children may read
	// (the files root inside the state directory). An exposed path may
	// not contain a hidden one.
	Expose []string
	// User, when non-nil, is the user the children run as. nil: under
	// MechanismLandlock a user per call (UIDBase), under bubblewrap the
	// daemon's own user (the daemon refuses that when it is root:
	// tools never run as the host's root).
	User *syscall.Credential
	// Limits are the resource limits of every call.
	Limits Limits
	// Mechanism is MechanismLandlock or MechanismBubblewrap; "" chooses:
	// Landlock where the daemon is root and the kernel offers it, else
	// bubblewrap.
	Mechanism string
	// UIDBase and UIDCount are the users calls run as under
	// MechanismLandlock: UIDBase+1 to UIDBase+UIDCount, one per running
	// call, all in group UIDBase (0: DefaultUIDBase, DefaultUIDCount).
	// A set User takes their place: every call then runs as User.
	UIDBase  uint32
	UIDCount int
	// NoCgroups keeps the limits to rlimits even where the daemon could
	// give every sandbox a control group of its own (cgroup.go).
	NoCgroups bool
}

// Sandbox runs each child in a sandbox of its own, which serves that
// call alone and is gone with it (see MechanismLandlock and
// MechanismBubblewrap for how). Build it with NewSandbox; it is read-only
// afterwards and safe for concurrent use. Set Spec.Sandbox to use it.
//
// Whatever the mechanism, a child gets: the host's files read-only but
// for its grant and its private, empty /tmp, /var/tmp and /dev/shm;
// hidden paths covered; its own PID namespace (nothing it starts
// outlives it) showing no other call's processes; its own IPC and UTS
// namespaces; no network unless granted; the seccomp filter of
// seccomp.go; no_new_privs and no capabilities; a new session, and the
// limits of Limits. No descriptor but its stdin, stdout and stderr.
type Sandbox struct {
	mech    string
	bwrap   string
	version string
	hide    []hidden
	expose  []string
	user    *syscall.Credential
	limits  Limits
	// iso is MechanismLandlock's state; nil under bubblewrap.
	iso *isolation
	// filters are bubblewrap's --seccomp programs: [0] without network,
	// [1] with.
	filters [2][]byte
	// prlimit is util-linux's prlimit, which sets the limits from inside
	// the sandbox when the daemon may not set them on a process of
	// another user (no CAP_SYS_RESOURCE); "" when the daemon sets them.
	prlimit string
	// cg makes a control group per sandbox, which enforces the process
	// and memory limits and counts their hits; nil when the host does
	// not let the daemon (cgErr says why): then the rlimits hold alone.
	cg    *cgroups
	cgErr error
}

type hidden struct {
	path string
	dir  bool
}

// ErrSandbox marks a failure of the sandbox itself (bubblewrap missing, or
// refusing to set up), as opposed to a failure of the tool in it.
var ErrSandbox = errors.New("sandbox")

// NewSandbox chooses the mechanism (SandboxOptions.Mechanism) and
// proves it works on this host by running /bin/true in a sandbox with
// everything a call gets. The error names what is missing: the package,
// the privilege, or the kernel feature.
func NewSandbox(opts SandboxOptions) (*Sandbox, error) {
	// Before the reaper and bwrap --version start (Run marks before each
	// call, the probe's too): no child gets what this process inherited
	// (markInherited).
	if err := markInherited(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSandbox, err)
	}
	s := &Sandbox{user: opts.User, limits: opts.Limits.withDefaults()}
	switch opts.Mechanism {
	case "":
		s.mech = MechanismBubblewrap
		if landlockAvailable() == nil {
			s.mech = MechanismLandlock
		}
	case MechanismLandlock:
		if err := landlockAvailable(); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrSandbox, MechanismLandlock, err)
		}
		s.mech = MechanismLandlock
	case MechanismBubblewrap:
		s.mech = MechanismBubblewrap
	default:
		return nil, fmt.Errorf("%w: mechanism %q: want %s or %s", ErrSandbox, opts.Mechanism, MechanismLandlock, MechanismBubblewrap)
	}
	if s.mech == MechanismBubblewrap {
		if err := s.findBwrap(opts.Bwrap); err != nil {
			return nil, err
		}
		for i, network := range []bool{false, true} {
			f, err := newFilter(network)
			if err != nil {
				return nil, err
			}
			s.filters[i] = f.bytes()
		}
	}
	for _, p := range opts.Hide {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("%w: hide %s: %v", ErrSandbox, p, err)
		}
		for _, q := range []string{abs, resolved(abs)} {
			fi, err := os.Stat(q)
			if err != nil {
				continue // nothing there to hide
			}
			s.hide = append(s.hide, hidden{path: q, dir: fi.IsDir()})
		}
	}
	s.hide = pruneHidden(s.hide)
	for _, p := range opts.Expose {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("%w: expose %s: %v", ErrSandbox, p, err)
		}
		if _, err := os.Stat(abs); err != nil {
			continue
		}
		if h, ok := s.uncovers(abs); ok {
			return nil, fmt.Errorf("%w: %s cannot be shown to tools: it contains %s, which is hidden", ErrSandbox, abs, h)
		}
		s.expose = append(s.expose, abs)
	}
	if s.mech == MechanismBubblewrap && s.user != nil && int(s.user.Uid) != os.Geteuid() && !hasCapSysResource() {
		p, err := lookPath("prlimit", MinimalPath)
		if err != nil {
			return nil, fmt.Errorf("%w: running tools as uid %d needs util-linux's prlimit to set their limits: %v", ErrSandbox, s.user.Uid, err)
		}
		s.prlimit = p
	}
	if opts.NoCgroups {
		s.cgErr = errors.New("turned off")
	} else {
		s.cg, s.cgErr = openCgroups()
	}
	if s.mech == MechanismLandlock {
		groups := ""
		if s.cg != nil {
			groups = s.cg.pids
		}
		iso, err := newIsolation(opts, groups)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.iso = iso
		what := fmt.Sprintf("a user per call in group %d", iso.gid)
		if opts.User != nil {
			what = fmt.Sprintf("uid %d", opts.User.Uid)
		}
		s.version = fmt.Sprintf("Landlock ABI %d, seccomp, namespaces (mount, ipc, uts), %s", iso.abi, what)
	}

	// The probe: everything a call gets.
	o, err := Run(context.Background(), Spec{Argv: []string{"/bin/true"}, Dir: "/", Env: SandboxEnv(), Sandbox: s, Timeout: 30 * time.Second})
	if err != nil || o.ExitCode != 0 {
		msg := strings.TrimSpace(string(o.Stderr))
		if err != nil {
			msg = err.Error()
		}
		s.Close()
		if s.mech == MechanismLandlock {
			return nil, fmt.Errorf("%w: %s cannot set up a sandbox on this host: %s; or run without a sandbox explicitly (--sandbox=off)", ErrSandbox, s.mech, msg)
		}
		return nil, fmt.Errorf("%w: %s cannot set up a sandbox on this host: %s (the kernel must allow user namespaces: sysctl user.max_user_namespaces > 0 and, on Debian/Ubuntu, kernel.unprivileged_userns_clone=1 or an AppArmor profile for bwrap); or run without a sandbox explicitly (--sandbox=off)", ErrSandbox, s.bwrap, msg)
	}
	return s, nil
}

// findBwrap finds bubblewrap and its version.
func (s *Sandbox) findBwrap(bw string) error {
	if bw == "" {
		bw = "bwrap"
	}
	p, err := lookPath(bw, MinimalPath)
	if err == nil {
		_, err = os.Stat(p)
	}
	if err != nil {
		why := "the daemon is not root"
		if lerr := landlockAvailable(); lerr != nil {
			why = lerr.Error()
		}
		return fmt.Errorf("%w: bubblewrap (%s) is not installed, and the Landlock sandbox cannot run (%s): install the bubblewrap package (Debian: apt-get install bubblewrap), or run without a sandbox explicitly (--sandbox=off)", ErrSandbox, bw, why)
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil {
		return fmt.Errorf("%w: %s --version: %v", ErrSandbox, p, err)
	}
	s.bwrap, s.version = p, strings.TrimSpace(string(out))
	return nil
}

// Close releases what the sandbox holds. Under MechanismLandlock the
// processes of calls still running end (the reaper ends them); close it
// once the calls are done.
func (s *Sandbox) Close() {
	if s.iso != nil {
		s.iso.close()
	}
	if s.cg != nil {
		// The groups of calls still running stay until the next daemon
		// removes them (removeStale).
		s.cg.close()
	}
}

// Cgroups says how the process and memory limits are enforced: by a
// control group per sandbox (where, and a result then states a limit
// hit), or by rlimits alone (err says why).
func (s *Sandbox) Cgroups() (where string, err error) {
	if s.cg == nil {
		return "", s.cgErr
	}
	return s.cg.describe(), nil
}

// DescribeLimits says the limits in one line, as they are enforced here:
// "256 processes, 4 GiB memory per call, 1024 open files, 256 MiB /tmp"
// with a control group per sandbox, else Limits.String.
func (s *Sandbox) DescribeLimits() string {
	if s.cg == nil {
		return s.limits.String()
	}
	l := s.limits
	return fmt.Sprintf("%d processes, %s memory per call, %d open files, %s /tmp",
		l.MaxProcs, byteSize(l.MaxMemory), l.MaxOpenFiles, byteSize(l.MaxTmp))
}

// asLimit is the RLIMIT_AS of a call's processes, 0 for none: where the
// call's control group holds its memory, an address space limit would
// only break programs that reserve more than they use (Go, Java).
func (s *Sandbox) asLimit() int64 {
	if s.cg != nil {
		return 0
	}
	return s.limits.MaxMemory
}

// procLimit is the RLIMIT_NPROC of a call: the process limit itself, or,
// where the call's control group enforces it (and counts its hits), a
// backstop above it, so that the group is what refuses.
func (s *Sandbox) procLimit() int {
	if s.cg != nil {
		return 2*s.limits.MaxProcs + 64
	}
	return s.limits.MaxProcs
}

// hasCapSysResource reports whether this process may set the rlimits of a
// process of another user.
func hasCapSysResource() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_SYS_RESOURCE/32].Effective&(1<<(unix.CAP_SYS_RESOURCE%32)) != 0
}

// resolved returns p with symlinks resolved, or p when that fails.
func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// pruneHidden drops duplicates and paths inside another hidden directory
// (covering the directory already hides them). Paths under /tmp stay: the
// working directory of a call may be shown there (see args).
func pruneHidden(hs []hidden) []hidden {
	slices.SortFunc(hs, func(a, b hidden) int { return strings.Compare(a.path, b.path) })
	var out []hidden
	for _, h := range hs {
		if slices.ContainsFunc(out, func(o hidden) bool { return o.dir && within(h.path, o.path) }) {
			continue
		}
		out = append(out, h)
	}
	return out
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// Mechanism is MechanismLandlock or MechanismBubblewrap.
func (s *Sandbox) Mechanism() string { return s.mech }

// Version says what the mechanism is made of: what bwrap --version
// printed ("bubblewrap 0.8.0"), or the Landlock ABI and the layers.
func (s *Sandbox) Version() string { return s.version }

// Limits returns the resource limits every call gets.
func (s *Sandbox) Limits() Limits { return s.limits }

// Hidden returns the paths covered in every sandbox.
func (s *Sandbox) Hidden() []string {
	out := make([]string, len(s.hide))
	for i, h := range s.hide {
		out[i] = h.path
	}
	return out
}

// SandboxEnv is MinimalEnv for a sandboxed child: HOME is its private
// /tmp, so no rc file planted in a working directory is read.
func SandboxEnv() []string { return MinimalEnv(SandboxTmp) }

// CheckGrant reports a grant Run would refuse: a write path that is not
// absolute, does not exist, or would uncover a hidden path (it is one, or
// contains one). A path inside a hidden directory may be granted: only it
// becomes visible.
func (s *Sandbox) CheckGrant(g Grant) error {
	for _, w := range g.Write {
		if !filepath.IsAbs(w) || filepath.Clean(w) != w {
			return fmt.Errorf("%w: write grant %q is not a clean absolute path", ErrSandbox, w)
		}
		if _, err := os.Lstat(w); err != nil {
			return fmt.Errorf("%w: write grant %q: %v", ErrSandbox, w, errors.Unwrap(err))
		}
		if h, ok := s.uncovers(w); ok {
			return fmt.Errorf("%w: write grant %q would uncover %s, which no tool may see", ErrSandbox, w, h)
		}
	}
	return nil
}

// uncovers reports the hidden path that binding p would make visible.
func (s *Sandbox) uncovers(p string) (string, bool) {
	r := resolved(p)
	for _, h := range s.hide {
		if within(h.path, p) || within(h.path, r) || (!h.dir && (p == h.path || r == h.path)) {
			return h.path, true
		}
	}
	return "", false
}

// mountArgs returns the bwrap arguments every sandbox gets: namespaces,
// the read-only root, the private /tmp, /var/tmp and /dev/shm, the grant
// and the covers of hidden paths. shown is a working directory under /tmp
// or /var/tmp to show read-only, or "".
func (s *Sandbox) mountArgs(g Grant, shown string) []string {
	tmp := strconv.FormatInt(s.limits.MaxTmp, 10)
	a := []string{
		"--die-with-parent", "--new-session",
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--disable-userns", "--cap-drop", "ALL",
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--size", tmp, "--tmpfs", "/dev/shm",
		"--mqueue", "/dev/mqueue",
		"--proc", "/proc",
		"--size", tmp, "--tmpfs", SandboxTmp,
		"--size", tmp, "--tmpfs", "/var/tmp",
	}
	if !g.Network {
		a = append(a, "--unshare-net", "--tmpfs", "/run")
	}
	// A working directory under the private /tmp or /var/tmp (a checkout
	// in /tmp) is shown read-only, and only it: the rest of the host's
	// /tmp stays out of sight. What is hidden inside it is covered below.
	if shown != "" {
		a = append(a, "--ro-bind", shown, shown)
	}
	// Hidden paths first, then what is shown or granted inside them, then
	// the covers are made read-only, and so are /dev and /run: a call
	// writes only in its grant and in the scratch directories.
	for _, h := range s.hide {
		if h.dir {
			a = append(a, "--tmpfs", h.path)
		} else {
			a = append(a, "--ro-bind", os.DevNull, h.path)
		}
	}
	for _, p := range s.expose {
		a = append(a, "--ro-bind", p, p)
	}
	for _, w := range g.Write {
		a = append(a, "--bind", w, w)
	}
	for _, h := range s.hide {
		if h.dir {
			a = append(a, "--remount-ro", h.path)
		}
	}
	a = append(a, "--remount-ro", "/dev")
	if !g.Network {
		a = append(a, "--remount-ro", "/run")
	}
	return a
}

// inScratch reports whether dir is under /tmp or /var/tmp, which are
// private in a sandbox: such a working directory must be shown to the
// call (mountArgs' shown).
func inScratch(dir string) bool {
	return within(dir, SandboxTmp) || within(dir, "/var/tmp")
}

// args returns the bwrap arguments for one child in a sandbox of its own,
// up to and including "--". statusFD, blockFD and seccompFD are the
// child's descriptor numbers of the status pipe (bwrap writes), the block
// pipe (bwrap waits on it) and the seccomp program (bwrap reads it).
func (s *Sandbox) args(g Grant, dir string, statusFD, blockFD, seccompFD int) []string {
	shown := ""
	if dir != "" && inScratch(dir) {
		shown = dir
	}
	a := s.mountArgs(g, shown)
	if dir != "" {
		a = append(a, "--chdir", dir)
	}
	a = append(a, "--json-status-fd", strconv.Itoa(statusFD), "--seccomp", strconv.Itoa(seccompFD))
	if s.blocks() {
		a = append(a, "--block-fd", strconv.Itoa(blockFD))
	}
	if s.prlimit == "" {
		return append(a, "--")
	}
	l := s.limits
	a = append(a, "--", s.prlimit,
		fmt.Sprintf("--nproc=%d:%d", s.procLimit(), s.procLimit()),
		fmt.Sprintf("--nofile=%d:%d", l.MaxOpenFiles, l.MaxOpenFiles))
	if as := s.asLimit(); as > 0 {
		a = append(a, fmt.Sprintf("--as=%d:%d", as, as))
	}
	return append(a, "--")
}

// blocks reports whether bwrap must wait for the daemon before it starts
// the command: to set the rlimits, or to move the sandbox into its
// control group.
func (s *Sandbox) blocks() bool { return s.prlimit == "" || s.cg != nil }

// sandboxed is the part of Run that belongs to a sandboxed child: the
// pipe bwrap reports on and, when the daemon sets the limits or the
// control group, the pipe bwrap waits on until they are set.
type sandboxed struct {
	s                *Sandbox
	statusR, statusW *os.File
	blkR, blkW       *os.File // nil when bwrap need not wait (Sandbox.blocks)
	seccompR         *os.File // the filter, written whole before the start
	status           chan sandboxStatus
	cg               *cgroup // the sandbox's control group, or nil
}

// sandboxStatus is what bwrap wrote to its status pipe.
type sandboxStatus struct {
	exitCode *int // nil: the command was never executed
}

// prepare wraps cmd in bwrap. It must be called before cmd.Start.
func (sb *sandboxed) prepare(cmd *exec.Cmd, argv []string, g Grant, dir string) error {
	if err := sb.s.CheckGrant(g); err != nil {
		return err
	}
	var err error
	if sb.statusR, sb.statusW, err = os.Pipe(); err != nil {
		return err
	}
	// ExtraFiles[i] is descriptor 3+i in bwrap.
	cmd.ExtraFiles = []*os.File{sb.statusW}
	if sb.s.blocks() {
		if sb.blkR, sb.blkW, err = os.Pipe(); err != nil {
			closeAll(sb.statusR, sb.statusW)
			return err
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, sb.blkR)
	}
	// The filter is a few hundred bytes: it fits the pipe's buffer, so
	// it is written whole, and the write end closed, before bwrap starts.
	r, w, err := os.Pipe()
	if err != nil {
		closeAll(sb.statusR, sb.statusW, sb.blkR, sb.blkW)
		return err
	}
	filter := sb.s.filters[0]
	if g.Network {
		filter = sb.s.filters[1]
	}
	_, err = w.Write(filter)
	w.Close()
	if err != nil {
		closeAll(sb.statusR, sb.statusW, sb.blkR, sb.blkW, r)
		return err
	}
	sb.seccompR = r
	seccompFD := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	if sb.s.cg != nil {
		// One more task than the call's own: the sandbox's init.
		if sb.cg, err = sb.s.cg.create(sb.s.limits, 1); err != nil {
			closeAll(sb.statusR, sb.statusW, sb.blkR, sb.blkW, sb.seccompR)
			return err
		}
	}
	cmd.Path = sb.s.bwrap
	cmd.Args = append(append([]string{"bwrap"}, sb.s.args(g, dir, 3, 4, seccompFD)...), argv...)
	cmd.Dir = "" // bwrap changes into dir inside the sandbox (--chdir)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Credential = sb.s.user
	return nil
}

// afterStart closes the parent's copies of bwrap's ends and reads the
// status pipe in the background. When bwrap waits (Sandbox.blocks), it
// waits for the child's pid, moves it into its control group, sets the
// rlimits on it and lets it go on; waiting stops when ctx is done (then
// the call is being killed).
func (sb *sandboxed) afterStart(ctx context.Context) error {
	closeAll(sb.statusW, sb.blkR, sb.seccompR)
	sb.status = make(chan sandboxStatus, 1)
	first := make(chan int, 1)
	go func() {
		defer sb.statusR.Close()
		var st sandboxStatus
		dec := json.NewDecoder(sb.statusR)
		for {
			var doc struct {
				ChildPID *int `json:"child-pid"`
				ExitCode *int `json:"exit-code"`
			}
			if err := dec.Decode(&doc); err != nil {
				break
			}
			if doc.ChildPID != nil {
				first <- *doc.ChildPID
			}
			if doc.ExitCode != nil {
				st.exitCode = doc.ExitCode
			}
		}
		close(first)
		sb.status <- st
	}()
	if sb.blkW == nil {
		return nil // prlimit sets the limits inside; bwrap does not wait
	}
	defer sb.blkW.Close() // lets bwrap go on, or fail, in every case
	var pid int
	select {
	case p, ok := <-first:
		if !ok {
			return nil // bwrap failed before it started the sandbox; Wait tells
		}
		pid = p
	case <-ctx.Done():
		return nil
	}
	if sb.cg != nil {
		if err := sb.cg.add(pid); err != nil {
			// Without its limits the sandbox must not run: kill it.
			_ = unix.Kill(pid, unix.SIGKILL)
			return err
		}
	}
	if sb.s.prlimit != "" {
		return sb.release()
	}
	l := sb.s.limits
	for _, r := range []struct {
		res int
		n   uint64
	}{
		{unix.RLIMIT_NPROC, uint64(sb.s.procLimit())},
		{unix.RLIMIT_AS, uint64(sb.s.asLimit())},
		{unix.RLIMIT_NOFILE, uint64(l.MaxOpenFiles)},
	} {
		if r.n == 0 {
			continue
		}
		lim := unix.Rlimit{Cur: r.n, Max: r.n}
		if err := unix.Prlimit(pid, r.res, &lim, nil); err != nil && !errors.Is(err, unix.ESRCH) {
			// Without its limits the sandbox must not run: kill it.
			_ = unix.Kill(pid, unix.SIGKILL)
			return fmt.Errorf("%w: set resource limits: %v", ErrSandbox, err)
		}
	}
	return sb.release()
}

// release lets bwrap start the command.
func (sb *sandboxed) release() error {
	if _, err := sb.blkW.Write([]byte{1}); err != nil && !errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%w: release sandbox: %v", ErrSandbox, err)
	}
	return nil
}

// wait returns what bwrap reported once it has exited, and which limits
// the call hit; the control group is removed then.
func (sb *sandboxed) wait() (sandboxStatus, string) {
	st := <-sb.status
	hit := ""
	if sb.cg != nil {
		hit = sb.cg.hits(sb.s.limits)
		sb.cg.remove()
	}
	return st, hit
}

// cleanupBeforeStart closes every pipe when Start failed.
func (sb *sandboxed) cleanupBeforeStart() {
	closeAll(sb.statusR, sb.statusW, sb.blkR, sb.blkW, sb.seccompR)
	if sb.cg != nil {
		sb.cg.remove()
	}
}
