package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestCgroupsRemoveWhatAGoneDaemonLeft: a daemon killed with SIGKILL
// leaves its parent groups behind (empty: its sandboxes died with it).
// The next one removes them, and those of an earlier process with its own
// pid, but neither the groups of a daemon that runs nor its own; and
// close removes its own once the last sandbox's group is gone.
func TestCgroupsRemoveWhatAGoneDaemonLeft(t *testing.T) {
	first, err := openCgroups()
	if err != nil {
		t.Skipf("no control groups for sandboxes here (%v): run as root where the pids and memory controllers are mounted", err)
	}
	dir := filepath.Dir(first.pids)
	// pid 2^22+1 is above any pid_max, so no process has it.
	gone := filepath.Join(dir, cgroupPrefix+"4194305-1")
	samePid := filepath.Join(dir, cgroupPrefix+strconv.Itoa(os.Getpid())+"-999")
	running := filepath.Join(dir, cgroupPrefix+"1-1") // init runs
	for _, d := range []string{gone, filepath.Join(gone, "s1"), samePid, running} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { removeGroupTree(running) })
	g, err := first.create(Limits{MaxProcs: 4, MaxMemory: 64 << 20}, 0)
	if err != nil {
		t.Fatal(err)
	}

	second, err := openCgroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want bool
	}{{gone, false}, {samePid, false}, {running, true}, {first.pids, true}, {g.pids, true}, {second.pids, true}} {
		if _, err := os.Stat(c.path); (err == nil) != c.want {
			t.Errorf("after a second openCgroups: %s exists = %v; want %v", c.path, err == nil, c.want)
		}
	}
	second.close()
	first.close()
	if _, err := os.Stat(first.pids); err != nil {
		t.Errorf("close with a sandbox's group left removed the parent %s: %v", first.pids, err)
	}
	g.remove()
	for _, p := range []string{first.pids, first.memory, second.pids, second.memory} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("after close and the last group removed: %s still there (%v)", p, err)
		}
	}
}
