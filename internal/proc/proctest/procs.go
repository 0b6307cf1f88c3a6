package proctest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Descendants returns the pids of every process below this one.
func Descendants(t testing.TB) []int {
	t.Helper()
	parent := map[int]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	mine := map[int]bool{os.Getpid(): true}
	for changed := true; changed; {
		changed = false
		for pid, pp := range parent {
			if mine[pp] && !mine[pid] {
				mine[pid] = true
				out = append(out, pid)
				changed = true
			}
		}
	}
	return out
}

// WithMarker returns the pids whose command line holds marker, wherever
// they were reparented.
func WithMarker(marker string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(marker)) {
			pid, _ := strconv.Atoi(e.Name())
			out = append(out, pid)
		}
	}
	return out
}
