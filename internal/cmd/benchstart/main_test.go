package main

import (
	"fmt"
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
		{wall: 300 * time.Millisecond, cpu: 30 * time.Millisecond, rss: 3 << 20},
		{wall: 100 * time.Millisecond, cpu: 10 * time.Millisecond, rss: 1 << 20},
		{wall: 200 * time.Millisecond, cpu: 20 * time.Millisecond, rss: 2 << 20, restRSS: 4 << 20},
	})
	for _, want := range []string{"wall 200 (100-300)", "cpu 20 (10-30)", "rss 2.0 (1.0-3.0)", "rest 0.0 (0.0-4.0)"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary = %q; want it to contain %q", got, want)
		}
	}
}
