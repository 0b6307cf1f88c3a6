package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/hldp"
)

// TestBenchTools: every synthetic tool is a valid definition named after
// its folder, so a start serves them all (none is a problem that a start
// would skip).
func TestBenchTools(t *testing.T) {
	for _, i := range []int{0, 1, 9999, 12345} {
		name := fmt.Sprintf("tool-%05d", i)
		tool, err := hldp.Parse("tools/"+name+"/TOOL.hdlp", benchTool(i))
		if err != nil {
			t.Fatalf("tool %d does not parse: %v", i, err)
		}
		if tool.Name != name {
			t.Errorf("tool %d is named %q; want %q", i, tool.Name, name)
		}
	}
}

// TestSummary: the median and range of each figure.
func TestSummary(t *testing.T) {
	got := summary([]sample{
		{wall: 300 * time.Millisecond, cpu: 30 * time.Millisecond, rss: 3 << 20, anon: 3 << 19},
		{wall: 100 * time.Millisecond, cpu: 10 * time.Millisecond, rss: 1 << 20, anon: 1 << 19},
		{wall: 200 * time.Millisecond, cpu: 20 * time.Millisecond, rss: 2 << 20, restRSS: 4 << 20, anon: 2 << 19, restAnon: 3 << 20, peak: 5 << 20},
	})
	for _, want := range []string{"wall 200 (100-300)", "cpu 20 (10-30)", "rss 2.0 (1.0-3.0)", "rest 0.0 (0.0-4.0)", "anon 1.0 (0.5-1.5)", "rest anon 0.0 (0.0-3.0)", "peak 0.0 (0.0-5.0)"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary = %q; want it to contain %q", got, want)
		}
	}
}

// TestProcRSS: this process's resident set, its anonymous part, which a
// heap that was just touched is in, and its peak.
func TestProcRSS(t *testing.T) {
	heap := make([]byte, 8<<20)
	for i := range heap {
		heap[i] = 1
	}
	rss, anon, peak := procRSS(os.Getpid())
	if anon < 8<<20 || rss < anon || peak < rss {
		t.Errorf("procRSS = %d, %d, %d; want an anonymous part of at least 8 MiB (the heap touched) within the resident set, within the peak", rss, anon, peak)
	}
	runtime.KeepAlive(heap)
}
