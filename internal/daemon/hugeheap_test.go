package daemon

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/hugeheap"
)

// TestReturnMemorySettles: the daemon's first quiet moment after a sync
// (returnMemory) ends the start's request for huge pages, so a daemon
// that runs for months is not given them again by khugepaged. In a
// process of its own (this test binary again): Settle holds once per
// process, and other tests here may have reached it.
func TestReturnMemorySettles(t *testing.T) {
	if os.Getenv("DAEMON_HUGEHEAP_CHILD") == "1" {
		if !hugeheap.Asking() {
			t.Fatal("child: not asking for huge pages at start")
		}
		returnMemory()
		if hugeheap.Asking() {
			t.Fatal("child: still asking for huge pages after returnMemory")
		}
		return
	}
	if _, n := hugeheap.Region(); n == 0 {
		t.Skipf("this process asked for no huge pages (the kernel's setting is %q; %s=%q): nothing to settle", hugeheap.Mode(hugeheap.ModeFile), hugeheap.OffEnv, os.Getenv(hugeheap.OffEnv))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReturnMemorySettles$", "-test.v")
	cmd.Env = append(os.Environ(), "DAEMON_HUGEHEAP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReturnMemorySettles") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
