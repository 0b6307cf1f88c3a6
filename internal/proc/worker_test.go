package proc

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestWorkerRefusesTheDaemonsPIDNamespace: the worker kills every process
// it may signal between calls, so it must never run outside a sandbox's
// PID namespace: started in the caller's own, it refuses before it reads
// anything.
func TestWorkerRefusesTheDaemonsPIDNamespace(t *testing.T) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skip("no /proc/self/ns/pid:", err)
	}
	cmd := exec.Command(os.Args[0], workerArg, ns, "256", "4294967296", "1024")
	cmd.Env = []string{workerEnv + "=1"}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not in a PID namespace of its own") {
		t.Errorf("worker in the caller's PID namespace: %v, %q; want a refusal", err, out)
	}
}

func TestParseWorkerLimits(t *testing.T) {
	l := Limits{MaxProcs: 16, MaxMemory: 1 << 30, MaxOpenFiles: 64}
	got, err := parseWorkerLimits(workerLimitArgs(l))
	if err != nil || got != l {
		t.Errorf("parseWorkerLimits(workerLimitArgs(%+v)) = %+v, %v", l, got, err)
	}
	for _, bad := range [][]string{nil, {"1", "2"}, {"1", "2", "x"}, {"0", "1", "1"}, {"-1", "1", "1"}} {
		if _, err := parseWorkerLimits(bad); err == nil {
			t.Errorf("parseWorkerLimits(%q) = nil error", bad)
		}
	}
}
