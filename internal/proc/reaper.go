package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The reaper ends what is left of the calls of a MechanismLandlock
// sandbox once the process that made it is gone, whatever ended it (a
// SIGKILL included). A call's first process dies with its forking thread
// (the parent-death signal), and when a call ends its thread kills every
// process of the call's user (isolatedCall.killAll); but what a call
// started in the background would outlive a daemon killed outright, as
// nothing is left to kill it. The reaper is this same executable, started
// once per sandbox (not per call) with argv[1] reaperArg and reaperEnv=1:
// it waits for the end of a pipe whose other end only the daemon holds,
// then kills every process of the sandbox's users, until none is left,
// and exits. It holds the claim on the sandbox's block of users (a lock
// file) until then, so no other daemon gets those users before it is
// done. It is in a session of its own (a terminal's signals do not reach
// it), ignores the signals that end a daemon, and is not dumpable.
const (
	reaperArg = "toolagent-sandbox-reaper"
	reaperEnv = "TOOLAGENT_SANDBOX_REAPER"
	// reaperPipe and reaperLock are the reaper's descriptors of the
	// daemon's pipe and of the claim's lock file.
	reaperPipe = 3
	reaperLock = 4
)

func init() {
	// Any binary that links proc can be the reaper; nothing else runs in
	// that process.
	if len(os.Args) == 5 && os.Args[1] == reaperArg && os.Getenv(reaperEnv) == "1" {
		os.Exit(reaperMain(os.Args[2], os.Args[3], os.Args[4]))
	}
}

// reaper is the daemon's end of a reaper.
type reaper struct {
	w   *os.File // closing it (or the daemon's death) starts the reaping
	cmd *exec.Cmd
}

// startReaper starts the reaper of the users first to last (none when
// first is 0: a user the operator named may run other things too) and of
// the processes in the control groups below groups ("" for none). lock,
// when set, is the claim on the users; the reaper keeps it.
func startReaper(lock *os.File, first, last uint32, groups string) (*reaper, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%w: reaper: %v", ErrSandbox, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: reaper: %v", ErrSandbox, err)
	}
	cmd := exec.Command(self, reaperArg, strconv.FormatUint(uint64(first), 10), strconv.FormatUint(uint64(last), 10), groups)
	cmd.Env = []string{reaperEnv + "=1"}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{r}
	if lock != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, lock)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("%w: reaper: %v", ErrSandbox, err)
	}
	// Reaped by a goroutine of its own: the reaper outlives Close.
	go cmd.Wait()
	return &reaper{w: w, cmd: cmd}, nil
}

// close lets the reaper reap: every process of the sandbox's users ends.
func (r *reaper) close() { r.w.Close() }

// reaperMain waits for the daemon's end, then kills every process whose
// real user is within first..last, and every process in a control group
// below groups.
func reaperMain(firstArg, lastArg, groups string) int {
	first, err1 := strconv.ParseUint(firstArg, 10, 32)
	last, err2 := strconv.ParseUint(lastArg, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, "toolagent sandbox reaper:", err)
		return 2
	}
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	pipe := os.NewFile(reaperPipe, "daemon")
	_, _ = io.Copy(io.Discard, pipe) // returns at the daemon's end
	for range 1000 {                 // passes, until one finds nothing
		n := 0
		if first > 0 {
			n += killUsersOnce(uint32(first), uint32(last))
		}
		if groups != "" {
			n += killGroups(groups)
		}
		if n == 0 {
			break
		}
	}
	return 0
}

// killGroups kills the processes of the control groups in dir and says
// how many.
func killGroups(dir string) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, p := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(p); err == nil && unix.Kill(pid, unix.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

// killUsersOnce kills the processes of first..last it finds in /proc and
// says how many.
func killUsersOnce(first, last uint32) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if uid, ok := liveUID(pid); ok && uid >= first && uid <= last {
			if unix.Kill(pid, unix.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

// liveUID reads the real user of process pid; ok is false for a zombie
// (dead already, waiting for its parent) and a process that is gone.
func liveUID(pid int) (uint32, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "State:"); ok && strings.HasPrefix(strings.TrimSpace(rest), "Z") {
			return 0, false
		}
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				return 0, false
			}
			u, err := strconv.ParseUint(fs[0], 10, 32)
			return uint32(u), err == nil
		}
	}
	return 0, false
}
