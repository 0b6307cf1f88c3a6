package daemon

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// TestServe500Calls fires 500 concurrent calls, a mix of fast, failing and
// timing-out tools, at a live daemon: every call gets its correct result
// (busy counts as correct over the cap), and afterwards no process and no
// goroutine is left.
// Not parallel: it wants no process below the test binary and the
// goroutine count back where it was, which other tests would change.
// (Moved here from cmd/toolagent: it tests the daemon, not the command
// line.)
func TestServe500Calls(t *testing.T) {
	if testing.Short() {
		t.Skip("500 processes")
	}
	const marker = "7.31337" // sleep's argument: finds the slow tool's processes anywhere
	tools := t.TempDir()
	writeTestTool(t, tools, "fast", testTool("fast", "intent: echo\nmethod: run\nexecutor: shell\nargv: [echo, \"{n}\"]\nparams_schema:\n  n: { type: integer, required: true, description: n }\n"))
	writeTestTool(t, tools, "failing", testTool("failing", "intent: fail\nmethod: run\nexecutor: shell\nargv: [sh, -c, \"echo no >&2; exit 7\"]\nparams_schema: {}\n"))
	writeTestTool(t, tools, "slow", testTool("slow", "intent: hang\nmethod: run\nexecutor: shell\nargv: [sleep, \""+marker+"\"]\nparams_schema: {}\nconstraints:\n  timeout_ms: 300\n"))
	writeTestTool(t, tools, "long", testTool("long", "intent: print too much\nmethod: run\nexecutor: shell\nargv: [seq, \"1\", \"200\"]\nparams_schema: {}\nconstraints:\n  max_output_bytes: 64\n"))
	seqOut := ""
	for i := 1; i <= 200; i++ {
		seqOut += strconv.Itoa(i) + "\n"
	}

	goroutinesBefore := runtime.NumGoroutine()
	d := serveForTest(t, "--tools", tools, "--max-concurrent", "400")

	const n = 500
	type outcome struct {
		i    int
		code int
		res  dispatch.Result
	}
	results := make(chan outcome, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var code int
			var res dispatch.Result
			switch i % 4 {
			case 0:
				code, res = d.call(t, "fast", map[string]any{"n": i})
			case 1:
				code, res = d.call(t, "failing", nil)
			case 2:
				code, res = d.call(t, "slow", nil)
			case 3:
				code, res = d.call(t, "long", nil)
			}
			results <- outcome{i, code, res}
		}()
	}
	wg.Wait()
	close(results)
	took := time.Since(start)
	counts := map[dispatch.ResultStatus]int{}
	for o := range results {
		counts[o.res.Status]++
		if o.res.Status == dispatch.Busy {
			if o.code != 429 {
				t.Errorf("call %d: busy with HTTP %d; want 429", o.i, o.code)
			}
			continue
		}
		var ok bool
		switch o.i % 4 {
		case 0:
			ok = o.code == 200 && o.res.Status == dispatch.Success && o.res.Output == fmt.Sprintf("%d\n", o.i) && o.res.ExitCode == 0 && !o.res.Truncated
		case 1:
			ok = o.code == 200 && o.res.Status == dispatch.Error && o.res.ExitCode == 7 && o.res.Stderr == "no\n" && o.res.Output == ""
		case 2:
			// The timeout counts from the start of the process, so the
			// process ran and was killed: a signal's exit code.
			ok = o.code == 200 && o.res.Status == dispatch.Timeout && o.res.ExitCode > 128
		case 3:
			ok = o.code == 200 && o.res.Status == dispatch.Success && o.res.Truncated && o.res.Output == seqOut[:64] &&
				o.res.OutputBytes == int64(len(seqOut)) && o.res.ExitCode == 0
		}
		if !ok {
			t.Errorf("call %d (tool %s) = HTTP %d %+v; wrong result", o.i, o.res.Tool, o.code, o.res)
		}
	}
	t.Logf("500 concurrent calls in %v: %v", took, counts)
	if counts[dispatch.Busy] > n/4 {
		t.Errorf("%d of %d calls were busy; want most to run", counts[dispatch.Busy], n)
	}

	if err := d.stop(); err != nil {
		t.Errorf("run() = %v; want nil", err)
	}
	d.client.CloseIdleConnections()
	pollUntil(t, "no child processes", func() bool { return len(proctest.Descendants(t)) == 0 && len(proctest.WithMarker(marker)) == 0 })
	pollUntil(t, fmt.Sprintf("goroutines back to %d", goroutinesBefore), func() bool { return runtime.NumGoroutine() <= goroutinesBefore })
}
