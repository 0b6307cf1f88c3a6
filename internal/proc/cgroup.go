package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Where the host lets the daemon make control groups, every sandbox gets
// one of its own, below the daemon's. The group enforces the process
// limit (pids) and the memory limit of the whole call (memory), and its
// event counters say when either refused something: that is how a result
// can state "the call hit its process limit" as a fact rather than a
// guess from the tool's stderr. rlimits alone cannot: a refused fork or
// mmap leaves no trace outside the process.
//
// Both hierarchies are read: cgroup v1 (a hierarchy per controller) and
// v2 (one hierarchy, where the daemon's own group must already offer the
// controllers to its children, as systemd's Delegate=yes does). The
// daemon never moves itself. Where neither works (no controller, no
// permission, the daemon not root), the rlimits hold alone and
// Sandbox.Cgroups says why.

// cgroupPrefix names a Sandbox's parent group in each hierarchy:
// toolagent-<daemon pid>-<n>. A daemon killed with SIGKILL leaves its
// groups behind, empty (its sandboxes died with it); the next daemon
// removes them.
const cgroupPrefix = "toolagent-"

// cgroupParents counts the parent groups this process made, and
// ownParents names them, so that removeStale tells them from those of an
// earlier process with the same pid.
var (
	cgroupParents atomic.Int64
	ownParents    sync.Map // parent group name → struct{}
)

// cgroups are the daemon's parent groups, one per controller.
type cgroups struct {
	version string // "v1" or "v2"
	pids    string // parent group of the pids controller
	memory  string // parent group of the memory controller
	next    atomic.Int64
	// live counts the sandboxes' groups not yet removed; the parents go
	// once close was called and the last one is removed.
	mu     sync.Mutex
	live   int
	closed bool
}

// cgroup is the group of one sandbox, in each controller's hierarchy.
type cgroup struct {
	c            *cgroups
	pids, memory string
	version      string
	// seen is the event counters when the call began (zero: a group
	// serves one call).
	seen cgroupEvents
	// pidsEvents and oomEvents are the counter files, open while the
	// group lives. mu guards them: the group may be removed (its sandbox
	// died) while a call reads them.
	mu                    sync.Mutex
	pidsEvents, oomEvents *os.File
}

// cgroupEvents count what the kernel refused a group.
type cgroupEvents struct {
	forksRefused int64 // pids.events "max"
	oomKills     int64 // memory.oom_control (v1) or memory.events (v2) "oom_kill"
}

// openCgroups finds where this process may make control groups for pids
// and memory, makes its parent groups there and removes those of daemons
// that are gone. Both controllers must work; otherwise the error says why
// and no group is left.
func openCgroups() (*cgroups, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	c := &cgroups{}
	name := fmt.Sprintf("%s%d-%d", cgroupPrefix, os.Getpid(), cgroupParents.Add(1))
	ownParents.Store(name, struct{}{})
	for _, ctl := range []string{"pids", "memory"} {
		dir, version, err := controllerDir(ctl, own, mounts)
		if err != nil {
			c.close()
			return nil, err
		}
		if c.version == "" {
			c.version = version
		} else if c.version != version {
			c.version = "v1+v2"
		}
		removeStale(dir)
		parent := filepath.Join(dir, name)
		if err := os.Mkdir(parent, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			c.close()
			return nil, fmt.Errorf("cgroup %s: make %s: %v", ctl, parent, err)
		}
		probe := map[string]string{"pids": "pids.max", "memory": memoryLimitFile(version)}[ctl]
		if _, err := os.Stat(filepath.Join(parent, probe)); err != nil {
			os.Remove(parent)
			c.close()
			return nil, fmt.Errorf("cgroup %s: %s offers no %s to its children (with cgroup v2 the daemon's group must delegate it, e.g. systemd's Delegate=yes)", ctl, dir, ctl)
		}
		if ctl == "pids" {
			c.pids = parent
		} else {
			c.memory = parent
		}
	}
	if c.version == "v2" {
		// v2 moves a process only into a leaf; a group made here is one,
		// but say it in the probe rather than at the first call.
		g, err := c.create(Limits{MaxProcs: 1, MaxMemory: 1 << 30}, 0)
		if err != nil {
			c.close()
			return nil, err
		}
		g.remove()
	}
	return c, nil
}

// ownCgroups maps each controller ("" for the v2 hierarchy) to this
// process's group in it, from /proc/self/cgroup.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroup: %v", err)
	}
	own := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			own[ctl] = parts[2]
		}
	}
	return own, nil
}

// cgroupMount is one mounted cgroup hierarchy.
type cgroupMount struct {
	point, root string
	v2          bool
	controllers []string // v1: the super options that name controllers
}

// cgroupMounts reads the cgroup hierarchies from /proc/self/mountinfo.
func cgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroup: %v", err)
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - type source super
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		switch b[0] {
		case "cgroup2":
			out = append(out, cgroupMount{point: unescapeMount(a[4]), root: unescapeMount(a[3]), v2: true})
		case "cgroup":
			out = append(out, cgroupMount{point: unescapeMount(a[4]), root: unescapeMount(a[3]), controllers: strings.Split(b[2], ",")})
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// controllerDir returns the directory of this process's group for ctl:
// in ctl's v1 hierarchy when there is one, else in the v2 hierarchy when
// the group offers ctl to its children.
func controllerDir(ctl string, own map[string]string, mounts []cgroupMount) (dir, version string, err error) {
	join := func(m cgroupMount, path string) string {
		rel, ok := strings.CutPrefix(path, m.root)
		if !ok && m.root != "/" {
			return "" // our group is outside what is mounted here
		}
		if !ok {
			rel = path
		}
		return filepath.Join(m.point, rel)
	}
	for _, m := range mounts {
		if !m.v2 && containsString(m.controllers, ctl) {
			if path, ok := own[ctl]; ok {
				if d := join(m, path); d != "" {
					return d, "v1", nil
				}
			}
		}
	}
	for _, m := range mounts {
		if !m.v2 {
			continue
		}
		path, ok := own[""]
		if !ok {
			break
		}
		d := join(m, path)
		if d == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cgroup.subtree_control"))
		if err != nil {
			return "", "", fmt.Errorf("cgroup %s: %v", ctl, err)
		}
		if !containsString(strings.Fields(string(b)), ctl) {
			return "", "", fmt.Errorf("cgroup %s: the daemon's cgroup v2 group %s does not delegate %s to its children (cgroup.subtree_control: %q)", ctl, d, ctl, strings.TrimSpace(string(b)))
		}
		return d, "v2", nil
	}
	return "", "", fmt.Errorf("cgroup %s: no hierarchy with the %s controller is mounted", ctl, ctl)
}

func containsString(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func memoryLimitFile(version string) string {
	if version == "v1" {
		return "memory.limit_in_bytes"
	}
	return "memory.max"
}

// removeStale removes the groups a daemon that is gone left in dir, and
// those of an earlier daemon with this one's pid (a restarted container).
// Their sandboxes died with that daemon, so the groups are empty.
func removeStale(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		p, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(p)
		if err != nil {
			continue
		}
		if _, mine := ownParents.Load(e.Name()); mine {
			continue
		}
		if pid != os.Getpid() && !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue // its daemon runs
		}
		removeGroupTree(filepath.Join(dir, e.Name()))
	}
}

// removeGroupTree removes the group p and the groups below it (rmdir is
// the only way to remove a group; its files go with it).
func removeGroupTree(p string) {
	ents, _ := os.ReadDir(p)
	for _, e := range ents {
		if e.IsDir() {
			removeGroupTree(filepath.Join(p, e.Name()))
		}
	}
	_ = syscall.Rmdir(p)
}

// close removes the parent groups now, or once the last sandbox's group
// is removed.
func (c *cgroups) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.live == 0 {
		c.removeParents()
	}
}

func (c *cgroups) removeParents() {
	for _, p := range []string{c.pids, c.memory} {
		if p != "" {
			removeGroupTree(p)
		}
	}
}

// released counts a sandbox's group removed.
func (c *cgroups) released() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live--
	if c.closed && c.live == 0 {
		c.removeParents()
	}
}

// describe says where the groups are, for the daemon's status.
func (c *cgroups) describe() string {
	return fmt.Sprintf("cgroup %s (pids in %s, memory in %s)", c.version, filepath.Dir(c.pids), filepath.Dir(c.memory))
}

// create makes the group of one sandbox with the call's limits: at most
// lim.MaxProcs+extra tasks (extra for the sandbox's own processes) and
// lim.MaxMemory bytes.
func (c *cgroups) create(lim Limits, extra int) (*cgroup, error) {
	name := "s" + strconv.FormatInt(c.next.Add(1), 10)
	g := &cgroup{c: c, pids: filepath.Join(c.pids, name), memory: filepath.Join(c.memory, name), version: c.version}
	c.mu.Lock()
	c.live++
	c.mu.Unlock()
	for _, d := range []string{g.pids, g.memory} {
		if err := os.Mkdir(d, 0o700); err != nil {
			g.remove()
			return nil, fmt.Errorf("%w: cgroup: %v", ErrSandbox, err)
		}
	}
	if err := g.setProcs(lim.MaxProcs + extra); err != nil {
		g.remove()
		return nil, err
	}
	if err := g.setMemory(lim.MaxMemory); err != nil {
		g.remove()
		return nil, err
	}
	if err := g.openEvents(); err != nil {
		g.remove()
		return nil, err
	}
	return g, nil
}

func writeGroupFile(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("%w: cgroup: %v", ErrSandbox, err)
	}
	return nil
}

// setProcs sets the most tasks (processes and threads) of the group.
func (g *cgroup) setProcs(n int) error {
	return writeGroupFile(g.pids, "pids.max", strconv.Itoa(n))
}

// setMemory sets the most memory of the group, swap included.
func (g *cgroup) setMemory(n int64) error {
	v := strconv.FormatInt(n, 10)
	if err := writeGroupFile(g.memory, memoryLimitFile(g.version), v); err != nil {
		return err
	}
	swap := "memory.memsw.limit_in_bytes" // v1, when swap is accounted
	if g.version != "v1" {
		swap, v = "memory.swap.max", "0"
	}
	if _, err := os.Stat(filepath.Join(g.memory, swap)); err == nil {
		return writeGroupFile(g.memory, swap, v)
	}
	return nil
}

// current returns the group's tasks and memory in use now.
func (g *cgroup) current() (tasks int, memory int64) {
	tasks = int(readGroupNumber(g.pids, "pids.current"))
	if g.version == "v1" {
		memory = readGroupNumber(g.memory, "memory.usage_in_bytes")
	} else {
		memory = readGroupNumber(g.memory, "memory.current")
	}
	return tasks, memory
}

func readGroupNumber(dir, file string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// add moves the process pid into the group, before it starts anything.
func (g *cgroup) add(pid int) error {
	for _, d := range []string{g.pids, g.memory} {
		if err := writeGroupFile(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// events reads the group's counters; zero once the group is removed.
func (g *cgroup) events() cgroupEvents {
	g.mu.Lock()
	defer g.mu.Unlock()
	return cgroupEvents{forksRefused: readGroupKey(g.pidsEvents, "max"), oomKills: readGroupKey(g.oomEvents, "oom_kill")}
}

// openEvents opens the counter files.
func (g *cgroup) openEvents() error {
	oom := filepath.Join(g.memory, "memory.events")
	if g.version == "v1" {
		oom = filepath.Join(g.memory, "memory.oom_control")
	}
	var err error
	if g.pidsEvents, err = os.Open(filepath.Join(g.pids, "pids.events")); err != nil {
		return fmt.Errorf("%w: cgroup: %v", ErrSandbox, err)
	}
	if g.oomEvents, err = os.Open(oom); err != nil {
		return fmt.Errorf("%w: cgroup: %v", ErrSandbox, err)
	}
	return nil
}

// readGroupKey reads the number after key in a flat-keyed group file,
// from its start.
func readGroupKey(f *os.File, key string) int64 {
	if f == nil {
		return 0
	}
	var buf [1024]byte
	n, err := f.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0
	}
	for _, l := range strings.Split(string(buf[:n]), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// hits says which limits the group hit since the last call of hits (or
// since it was made), in the words of Outcome.LimitHit, and starts
// counting anew.
func (g *cgroup) hits(lim Limits) string {
	now := g.events()
	var out []string
	if n := now.forksRefused - g.seen.forksRefused; n > 0 {
		out = append(out, fmt.Sprintf("process limit: the kernel refused %d new process(es) or thread(s) at the call's limit of %d", n, lim.MaxProcs))
	}
	if n := now.oomKills - g.seen.oomKills; n > 0 {
		out = append(out, fmt.Sprintf("memory limit: the out-of-memory killer ended %d process(es) at the call's limit of %s", n, byteSize(lim.MaxMemory)))
	}
	g.seen = now
	return strings.Join(out, "; ")
}

// remove removes the group once its processes are gone. The kernel
// takes a moment to release a group whose last process was just reaped,
// so an EBUSY is tried again, for a bounded while. It is called once per
// group.
func (g *cgroup) remove() {
	defer g.c.released()
	g.mu.Lock()
	closeAll(g.pidsEvents, g.oomEvents)
	g.pidsEvents, g.oomEvents = nil, nil
	g.mu.Unlock()
	for _, d := range []string{g.pids, g.memory} {
		deadline := time.Now().Add(2 * time.Second)
		for {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
