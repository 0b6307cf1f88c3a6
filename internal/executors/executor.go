// Package executors defines the contract every executor meets: Execute a
// validated call and report Health. The interface lives here, beside its
// implementations in the sub-packages, on purpose: it is the plugin contract
// of the package family (like database/sql/driver), not a consumer-side
// abstraction. Consumers that need less still declare narrower interfaces.
//
// Imports: hldp only. Imported by dispatch and the executor sub-packages.
package executors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolagent/toolagent/internal/hldp"
)

// Executor runs calls for the tools of one executor kind. Implementations
// must be safe for concurrent use.
type Executor interface {
	// Execute runs one call. The context carries the deadline the dispatcher
	// derived from the tool's timeout. A command that ran and failed is not
	// an error: it is an Outcome with its exit code and stderr. The error is
	// for "could not run at all" (and wraps ErrRefused when a guard refused).
	Execute(ctx context.Context, req Request) (Outcome, error)
	// Plan describes, without side effects, exactly what Execute would do
	// for req (argv, cwd, limits, HTTP request, ...). Used by dry runs.
	Plan(req Request) (Plan, error)
	// Health reports whether the executor can run calls here.
	Health(ctx context.Context) error
}

// Request is one validated call.
type Request struct {
	Tool   *hldp.Tool
	Params map[string]any // validated, defaults filled
	Rev    string         // revision of the definition
	// Approval is the id of the approval dispatch claimed for exactly this
	// tool, revision and params; "" when the call needed none. Executors
	// that re-check the policy before a side effect (shell, the gatekeeper
	// server) refuse a call whose verdict is confirm when it is empty.
	Approval string
	// Output, when set, receives the tool's output as it is written:
	// stream "stdout" or "stderr" and a chunk (valid only during the
	// call). Executors that start a process call it from their readers;
	// the others call nothing, and the result carries the output.
	Output func(stream string, p []byte)
	// Followed, when set, says whether someone follows Output as it
	// comes: an executor that stops reading a process past its output
	// cap then reads on, since the follower is shown all of it.
	Followed func() bool
	// Started, when set, is called once when the tool's own work starts:
	// an executor that starts a process calls it when the process runs,
	// as its timeout starts (the time before is the call's queue). The
	// dispatcher's backstop counts from then; others need not call it.
	Started func()
}

// Outcome is the raw result of one execution.
type Outcome struct {
	Output     []byte
	Stderr     []byte
	ExitCode   int
	HTTPStatus int  // for HTTP executors; 0 otherwise
	Truncated  bool // Output or Stderr was cut at the tool's cap
	// CutOff: the runtime closed an output pipe past the cap, so a
	// SIGPIPE death is the cap's doing, not the tool's failure.
	CutOff      bool
	OutputBytes int64 // bytes the command produced on stdout, before the cap
	TimedOut    bool
	Duration    time.Duration
	// Queued is how long the call waited before its process started.
	Queued time.Duration
	// Sandbox says what the process could change and reach, and under
	// which limits ("read-only, no network; limits: ..."); "" for
	// executors that start no local process.
	Sandbox string
	// LimitHit says which sandbox limit refused the call something, as
	// its control group counted it (proc.Outcome.LimitHit); "" when none
	// did or nothing counted.
	LimitHit string
	// Completed says the executor saw the call through: a process was
	// reaped with its status, a file operation finished, a server
	// answered. Dispatch reports an Outcome without it (and without
	// TimedOut) as an error, never as a success: the zero Outcome did not
	// run, so no result can claim exit code 0 for it.
	Completed bool
}

// Plan is what a call would do, for dry runs.
type Plan struct {
	Argv           []string      `json:"argv,omitempty"`
	Dir            string        `json:"cwd,omitempty"`
	Env            []string      `json:"env,omitempty"`
	Path           string        `json:"path,omitempty"` // file methods
	Timeout        time.Duration `json:"-"`
	TimeoutMS      int64         `json:"timeout_ms"`
	MaxOutputBytes int64         `json:"max_output_bytes"`
	// OutputKeep is constraints.output.keep when it is not the head:
	// which bytes past the cap are kept (tail, both).
	OutputKeep string            `json:"output_keep,omitempty"`
	Extra      map[string]string `json:"extra,omitempty"`
}

// OutputKeep returns t's constraints.output.keep for a Plan: "" for the
// head (the default), else "tail" or "both".
func OutputKeep(t *hldp.Tool) string {
	if k := t.Constraints.OutputKeep; k != "" && k != hldp.DefaultOutputKeep {
		return k
	}
	return ""
}

// CheckHeadOnly refuses a tool whose constraints.output.keep is not the
// head, for an executor whose output is an HTTP body it keeps the head of.
func CheckHeadOnly(t *hldp.Tool, executor string) error {
	if k := OutputKeep(t); k != "" {
		return fmt.Errorf("constraints.output.keep: %s is for process output (executors shell and gatekeeper); %s keeps the head of a response body", k, executor)
	}
	return nil
}

// ErrRefused marks an execution a guard inside the executor refused right
// before the side effect (defence in depth). Wrap it with the reason.
var ErrRefused = errors.New("refused")

// ErrNotConfigured is returned by Health of an executor that has no
// configuration on this host.
var ErrNotConfigured = errors.New("not configured")
