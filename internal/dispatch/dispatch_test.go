package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
)

// fakeExec answers from a function of the request; it is the one seam the
// dispatcher's consumers own, so a fake is fine here (the real shell
// executor is tested with real processes in its package and in cmd).
type fakeExec struct {
	run func(ctx context.Context, req executors.Request) (executors.Outcome, error)
}

func (f fakeExec) Execute(ctx context.Context, req executors.Request) (executors.Outcome, error) {
	return f.run(ctx, req)
}
func (f fakeExec) Plan(req executors.Request) (executors.Plan, error) {
	return executors.Plan{Argv: []string{"/bin/sh", "-c", req.Params["cmd"].(string)}, TimeoutMS: req.Tool.Constraints.Timeout.Milliseconds()}, nil
}
func (f fakeExec) Health(context.Context) error { return nil }

// parse parses an exec tool whose constraints are shell_policy: none plus
// the given constraint entries: these tests run a fake executor and are
// about statuses, not the shell policy (see policy_test.go for that).
func parse(t *testing.T, name, constraints string) *hldp.Tool {
	t.Helper()
	if constraints != "" {
		constraints = ", " + constraints
	}
	src := "name: " + name + `
display: d
intent: i
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true, description: "command" }
  n: { type: integer, required: false, minimum: 1, description: "count" }
author: a
created: 2026-11-30
why: w
constraints: { shell_policy: none` + constraints + ` }
`
	tl, err := hldp.Parse("tools/"+name+"/TOOL.hdlp", []byte(src))
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return tl
}

func newStore(t *testing.T, entries ...catalog.Entry) *catalog.Store {
	st := new(catalog.Store)
	st.Swap(catalog.New("rev1", entries, catalog.Options{LazyIndex: true}))
	return st
}

// behave maps the cmd param to what the fake executor does.
func behave(ctx context.Context, req executors.Request) (executors.Outcome, error) {
	switch req.Params["cmd"] {
	case "echo hello":
		return executors.Outcome{Completed: true, Output: []byte("hello\n"), Duration: 3 * time.Millisecond}, nil
	case "true":
		return executors.Outcome{Completed: true}, nil
	case "ls /nonexistent":
		return executors.Outcome{Completed: true, Stderr: []byte("ls: cannot access '/nonexistent': No such file or directory\n"), ExitCode: 2}, nil
	case "sleep 5":
		return executors.Outcome{Output: []byte("partial"), TimedOut: true, ExitCode: 143}, nil
	case "binary":
		return executors.Outcome{Completed: true, Output: []byte{0xff, 0xfe, 0}}, nil
	case "cannot start":
		return executors.Outcome{}, errors.New("exec: \"nope\": executable file not found in $PATH")
	case "returned without completing":
		// A buggy executor: no error, no status. Never a success.
		return executors.Outcome{}, nil
	case "refused by a guard":
		return executors.Outcome{}, fmt.Errorf("%w: path \"../x\" is not a relative path inside the files root", executors.ErrRefused)
	}
	return executors.Outcome{}, errors.New("unexpected cmd")
}

func TestInvokeStatuses(t *testing.T) {
	ok := parse(t, "ok", "")
	confirm := parse(t, "confirm", "require_confirm: true")
	gk := parse(t, "gk", "")
	gk.Executor = hldp.Gatekeeper
	st := newStore(t,
		catalog.Entry{Name: "ok", Tool: ok, Rev: "rev1", Status: catalog.Enabled},
		catalog.Entry{Name: "confirm", Tool: confirm, Rev: "rev1", Status: catalog.Enabled},
		catalog.Entry{Name: "gk", Tool: gk, Rev: "rev1", Status: catalog.Enabled},
		catalog.Entry{Name: "off", Tool: ok, Rev: "rev1", Status: catalog.Disabled, Reason: "executor gatekeeper is not configured"},
		catalog.Entry{Name: "broken", Status: catalog.Failed, Reason: "tools/broken/TOOL.hdlp:3:1: bad"},
	)
	d := New(st, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: fakeExec{behave}}, Options{})
	tests := []struct {
		name       string
		call       Call
		status     ResultStatus
		ok         bool
		output     string
		stderr     string
		exit       int
		errSub     string
		suggestion string
	}{
		{"success", Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"echo hello"}`)}, Success, true, "hello\n", "", 0, "", ""},
		{"no data", Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"true"}`)}, NoData, true, "", "", 0, "", ""},
		{"command fails", Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"ls /nonexistent"}`)}, Error, false, "", "ls: cannot access '/nonexistent': No such file or directory\n", 2, "exit status 2", ""},
		{"cannot start", Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"cannot start"}`)}, Error, false, "", "", -1, "executable file not found", ""},
		// Issue 12, item 2: a call that did not run to completion is
		// never reported with exit code 0.
		{"executor returned without completing", Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"returned without completing"}`)}, Error, false, "", "", -1, "without completing the call", ""},
		// A guard of the executor refusing is a refusal, not a failure.
		{"executor guard refuses", Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"refused by a guard"}`)}, Denied, false, "", "", -1, "not a relative path inside the files root", ""},
		{"timeout keeps partial output", Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"sleep 5"}`)}, Timeout, false, "partial", "", 143, "timed out after 30s", ""},
		{"binary output is base64", Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"binary"}`)}, Success, true, "//4A", "", 0, "", ""},
		{"missing param", Call{Tool: "ok", Params: json.RawMessage(`{}`)}, InvalidParams, false, "", "", -1, "cmd", ""},
		{"every problem listed", Call{Tool: "ok", Params: json.RawMessage(`{"n":0,"x":1}`)}, InvalidParams, false, "", "", -1, "3 problem(s)", ""},
		{"params not an object", Call{Tool: "ok", Params: json.RawMessage(`[1]`)}, InvalidParams, false, "", "", -1, "params must be a JSON object", ""},
		{"not found", Call{Tool: "deploy-app", Params: nil}, NotFound, false, "", "", -1, "no tool named", "has to be written"},
		{"not found near name", Call{Tool: "okk"}, NotFound, false, "", "", -1, "", "similar name: ok"},
		{"disabled entry", Call{Tool: "off", Params: json.RawMessage(`{"cmd":"true"}`)}, Disabled, false, "", "", -1, "executor gatekeeper is not configured", ""},
		{"failed entry", Call{Tool: "broken"}, Disabled, false, "", "", -1, "tools/broken/TOOL.hdlp:3:1", ""},
		{"executor missing", Call{Tool: "gk", Params: json.RawMessage(`{"cmd":"true"}`)}, Disabled, false, "", "", -1, "executor gatekeeper is not configured", ""},
		{"approval required", Call{Tool: "confirm", Params: json.RawMessage(`{"cmd":"true"}`)}, ApprovalRequired, false, "", "", -1, "require_confirm", "approver"},
		{"dry run", Call{Tool: "confirm", Params: json.RawMessage(`{"cmd":"rm -rf /tmp/x"}`), DryRun: true}, DryRun, true, "", "", -1, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := d.Invoke(context.Background(), tt.call)
			if r.Status != tt.status || r.OK != tt.ok {
				t.Fatalf("Invoke(%s) status = %s ok=%v, want %s ok=%v (error %q)", tt.call.Tool, r.Status, r.OK, tt.status, tt.ok, r.Error)
			}
			if r.Output != tt.output || r.Stderr != tt.stderr || r.ExitCode != tt.exit {
				t.Errorf("output %q stderr %q exit %d, want %q %q %d", r.Output, r.Stderr, r.ExitCode, tt.output, tt.stderr, tt.exit)
			}
			if !strings.Contains(r.Error, tt.errSub) {
				t.Errorf("error %q does not contain %q", r.Error, tt.errSub)
			}
			if !strings.Contains(r.Suggestion, tt.suggestion) {
				t.Errorf("suggestion %q does not contain %q", r.Suggestion, tt.suggestion)
			}
			if tt.status == NotFound && (r.Found == nil || *r.Found) {
				t.Errorf("not_found result has found = %v, want false", r.Found)
			}
			if tt.status == DryRun && (r.Plan == nil || r.Plan.Argv[2] != "rm -rf /tmp/x") {
				t.Errorf("dry run plan = %+v", r.Plan)
			}
			if r.Tool != tt.call.Tool {
				t.Errorf("result tool = %q", r.Tool)
			}
		})
	}
}

func TestResultJSONFields(t *testing.T) {
	st := newStore(t, catalog.Entry{Name: "ok", Tool: parse(t, "ok", ""), Rev: "abc123", Status: catalog.Enabled})
	d := New(st, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: fakeExec{behave}}, Options{})
	r := d.Invoke(context.Background(), Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"echo hello"}`)})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	// The seed's field names (DESIGN.md "Result") must all be there.
	for _, k := range []string{"ok", "status", "tool", "method", "executor", "revision", "output", "stderr", "exit_code", "truncated", "error", "duration_ms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("result JSON lacks %q: %s", k, b)
		}
	}
	if m["revision"] != "abc123" || m["executor"] != "shell" || m["method"] != "exec" || m["duration_ms"] != float64(3) {
		t.Errorf("result JSON = %s", b)
	}
}

// TestBusy fills the global cap and a tool's own cap with calls blocked in
// the executor; the next call gets busy at once instead of queueing.
func TestBusy(t *testing.T) {
	serial := parse(t, "serial", "max_concurrency: 1")
	free := parse(t, "free", "")
	st := newStore(t,
		catalog.Entry{Name: "serial", Tool: serial, Rev: "r", Status: catalog.Enabled},
		catalog.Entry{Name: "free", Tool: free, Rev: "r", Status: catalog.Enabled},
	)
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	block := fakeExec{func(ctx context.Context, req executors.Request) (executors.Outcome, error) {
		started <- struct{}{}
		<-release
		return executors.Outcome{Completed: true, Output: []byte("done")}, nil
	}}
	d := New(st, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: block}, Options{MaxConcurrent: 2})
	results := make(chan Result, 2)
	go func() {
		results <- d.Invoke(context.Background(), Call{Tool: "serial", Params: json.RawMessage(`{"cmd":"x"}`)})
	}()
	<-started
	if r := d.Invoke(context.Background(), Call{Tool: "serial", Params: json.RawMessage(`{"cmd":"x"}`)}); r.Status != Busy || !strings.Contains(r.Error, "max_concurrency") {
		t.Errorf("second serial call: %s %q, want busy naming max_concurrency", r.Status, r.Error)
	}
	go func() {
		results <- d.Invoke(context.Background(), Call{Tool: "free", Params: json.RawMessage(`{"cmd":"x"}`)})
	}()
	<-started
	if r := d.Invoke(context.Background(), Call{Tool: "free", Params: json.RawMessage(`{"cmd":"x"}`)}); r.Status != Busy || !strings.Contains(r.Error, "2 calls") {
		t.Errorf("third call over the global cap: %s %q, want busy", r.Status, r.Error)
	}
	close(release)
	for range 2 {
		if r := <-results; r.Status != Success {
			t.Errorf("blocked call ended %s", r.Status)
		}
	}
	// Slots are released: a new call runs.
	releaseNow := fakeExec{func(ctx context.Context, req executors.Request) (executors.Outcome, error) {
		return executors.Outcome{Completed: true, Output: []byte("ok")}, nil
	}}
	d.execs[hldp.Shell] = releaseNow
	if r := d.Invoke(context.Background(), Call{Tool: "serial", Params: json.RawMessage(`{"cmd":"x"}`)}); r.Status != Success {
		t.Errorf("after release: %s %q", r.Status, r.Error)
	}
}

// TestAuditNeverLogsValues: one line per call, with param names and a
// hash, never the raw values.
func TestAuditNeverLogsValues(t *testing.T) {
	var buf bytes.Buffer
	st := newStore(t, catalog.Entry{Name: "ok", Tool: parse(t, "ok", ""), Rev: "rev9", Status: catalog.Enabled})
	d := New(st, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: fakeExec{behave}}, Options{Audit: slog.New(slog.NewJSONHandler(&buf, nil))})
	d.Invoke(context.Background(), Call{Tool: "ok", Caller: "alice", Params: json.RawMessage(`{"cmd":"echo hello"}`)})
	line := buf.String()
	if strings.Count(line, "\n") != 1 {
		t.Fatalf("want exactly one audit line, got:\n%s", line)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	if m["caller"] != "alice" || m["tool"] != "ok" || m["revision"] != "rev9" || m["status"] != "success" || m["params_sha256"] == "" {
		t.Errorf("audit line = %s", line)
	}
	if strings.Contains(line, "echo hello") {
		t.Errorf("audit line holds a raw param value: %s", line)
	}
	if names, _ := m["param_names"].([]any); len(names) != 1 || names[0] != "cmd" {
		t.Errorf("param_names = %v", m["param_names"])
	}
}

// TestBoundedAnswers: a request with 80,000 unknown params gets an answer
// and an audit line of bounded size that still count every problem, and
// a duplicate key in params (from any door) is refused, not resolved
// silently to its last value.
func TestBoundedAnswers(t *testing.T) {
	var audit bytes.Buffer
	st := newStore(t, catalog.Entry{Name: "ok", Tool: parse(t, "ok", ""), Rev: "rev1", Status: catalog.Enabled})
	d := New(st, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: fakeExec{behave}}, Options{Audit: slog.New(slog.NewJSONHandler(&audit, nil))})
	var b strings.Builder
	b.WriteString(`{"cmd":"true"`)
	const n = 80000
	for i := range n {
		fmt.Fprintf(&b, `,"p%d":1`, i)
	}
	b.WriteString("}")
	r := d.Invoke(context.Background(), Call{Tool: "ok", Params: json.RawMessage(b.String())})
	if r.Status != InvalidParams {
		t.Fatalf("status %s, want invalid_params", r.Status)
	}
	if len(r.Problems) != MaxProblems+1 || !strings.HasPrefix(r.Problems[MaxProblems], fmt.Sprintf("... and %d more problems", n-MaxProblems)) {
		t.Errorf("problems: %d listed, last %q; want %d and the count of the rest", len(r.Problems), r.Problems[len(r.Problems)-1], MaxProblems)
	}
	if !strings.HasPrefix(r.Error, fmt.Sprintf("%d problem(s)", n)) {
		t.Errorf("error %.80q does not count all %d problems", r.Error, n)
	}
	body, _ := json.Marshal(r)
	if len(body) > 64<<10 {
		t.Errorf("answer is %d bytes for %d problems; want it bounded", len(body), n)
	}
	if audit.Len() > 16<<10 {
		t.Errorf("audit line is %d bytes; want it bounded", audit.Len())
	}

	r = d.Invoke(context.Background(), Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"rm -rf /","cmd":"true"}`)})
	if r.Status != InvalidParams || !strings.Contains(r.Error, `key "cmd" appears twice in params`) {
		t.Errorf("duplicate param: %s %q; want invalid_params naming the key", r.Status, r.Error)
	}
}

// TestCancelledSaysWho: a call ended from outside is cancelled, with who
// ended it and the real exit code; the tool's own failure is not claimed.
func TestCancelledSaysWho(t *testing.T) {
	st := newStore(t, catalog.Entry{Name: "ok", Tool: parse(t, "ok", ""), Rev: "rev1", Status: catalog.Enabled})
	running := make(chan struct{}, 1)
	wait := func(ctx context.Context, req executors.Request) (executors.Outcome, error) {
		running <- struct{}{}
		<-ctx.Done()
		return executors.Outcome{Completed: true, Output: []byte("part"), ExitCode: 137}, nil
	}
	d := New(st, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: fakeExec{wait}}, Options{})
	for _, tc := range []struct {
		name  string
		cause error
		want  string
	}{
		{"shutdown", ErrShutdown, "cancelled: shutdown"},
		{"client gone", nil, "cancelled: client gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			got := make(chan Result, 1)
			go func() { got <- d.Invoke(ctx, Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"sleep 9"}`)}) }()
			<-running
			cancel(tc.cause) // nil: context.Canceled, what net/http does when the client hangs up
			r := <-got
			if r.Status != Cancelled || !strings.HasPrefix(r.Error, tc.want) || r.ExitCode != 137 || r.Output != "part" || r.OK {
				t.Errorf("result %s %q exit %d output %q; want cancelled %q, exit 137, the partial output", r.Status, r.Error, r.ExitCode, r.Output, tc.want)
			}
		})
	}
}

// TestBackstopCountsFromStart: the backstop on an executor counts from
// the start of the tool's process (Request.Started), as the tool's own
// timeout does, so a call that waited long for a loaded host to start it
// runs to its end; a process that never starts, or an executor that hangs
// after the start, still ends as a timeout that says which.
func TestBackstopCountsFromStart(t *testing.T) {
	tool := parse(t, "ok", "timeout_ms: 300")
	tests := []struct {
		cmd    string
		status ResultStatus
		errSub string
		took   time.Duration // in the bubble's time, exact
	}{
		{"slow start", Success, "", 15600 * time.Millisecond},
		{"never starts", Timeout, "did not start within 1m5.3s", 65300 * time.Millisecond},
		{"hangs after the start", Timeout, "timed out after 300ms", 5300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				run := func(ctx context.Context, req executors.Request) (executors.Outcome, error) {
					wait := func(d time.Duration) error {
						select {
						case <-time.After(d):
							return nil
						case <-ctx.Done():
							return fmt.Errorf("start %q: %w", "sleep", ctx.Err())
						}
					}
					switch tt.cmd {
					case "slow start":
						// Longer than the timeout and the backstop.
						if err := wait(tool.Constraints.Timeout + backstop + 10*time.Second); err != nil {
							return executors.Outcome{}, err
						}
						req.Started()
						time.Sleep(tool.Constraints.Timeout) // runs to its end
						return executors.Outcome{Completed: true, Output: []byte("done\n")}, nil
					case "never starts":
						return executors.Outcome{}, wait(time.Hour)
					default:
						req.Started()
						return executors.Outcome{}, wait(time.Hour)
					}
				}
				d := New(newStore(t, catalog.Entry{Name: "ok", Tool: tool, Rev: "rev1", Status: catalog.Enabled}),
					map[hldp.ExecutorKind]executors.Executor{hldp.Shell: fakeExec{run}}, Options{})
				t0 := time.Now()
				r := d.Invoke(context.Background(), Call{Tool: "ok", Params: json.RawMessage(`{"cmd":"x"}`)})
				if r.Status != tt.status || !strings.Contains(r.Error, tt.errSub) {
					t.Errorf("Invoke = %s, %q; want %s, an error containing %q", r.Status, r.Error, tt.status, tt.errSub)
				}
				if took := time.Since(t0); took != tt.took {
					t.Errorf("Invoke returned after %s; want %s", took, tt.took)
				}
			})
		})
	}
}
