package dispatch

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
)

// ResultStatus says what happened to one call; the value is the wire word.
type ResultStatus string

// The statuses of a call result (DESIGN.md "Result"), plus busy, dry_run
// and denied.
const (
	// Success: ran, exit code 0 (or HTTP 2xx), and produced output.
	Success ResultStatus = "success"
	// NoData: ran successfully and nothing came back.
	NoData ResultStatus = "no_data"
	// Error: ran (or tried to) and failed; stderr, exit code and message say how.
	Error ResultStatus = "error"
	// Timeout: killed at the tool's timeout; partial output is kept.
	Timeout ResultStatus = "timeout"
	// InvalidParams: did not run; every problem with the params is listed.
	InvalidParams ResultStatus = "invalid_params"
	// ApprovalRequired: did not run; the policy says an approver must
	// confirm the call first. ApprovalID names the pending approval (when
	// the daemon has an approval queue), Rule and Reason say why, and
	// Suggestion says how to approve and fetch the result.
	ApprovalRequired ResultStatus = "approval_required"
	// Denied: did not run; a policy rule refuses the call and no approval
	// can change that. Rule and Reason name the rule and say why.
	Denied ResultStatus = "denied"
	// NotFound: no such tool in the repository; it has to be written.
	NotFound ResultStatus = "not_found"
	// Disabled: the tool exists but cannot run here; the error says why.
	Disabled ResultStatus = "disabled"
	// Busy: did not run; the concurrency cap (global or the tool's) is reached.
	Busy ResultStatus = "busy"
	// Unavailable: did not run; the call needs the store (to hold it
	// for an approval, or to count its max_concurrency across replicas)
	// and the store does not answer. Error starts "approval store
	// unavailable: " or "shared store unavailable: " and gives the
	// cause; nothing was held or taken, so the same call may be made
	// again once the store answers.
	Unavailable ResultStatus = "unavailable"
	// Cancelled: the call was ended from outside before it finished: the
	// daemon shut down, or the caller hung up. Error says which
	// ("cancelled: shutdown", "cancelled: client gone"); the real exit
	// code and partial output stay.
	Cancelled ResultStatus = "cancelled"
	// DryRun: did not run; Plan holds exactly what would run.
	DryRun ResultStatus = "dry_run"
)

// Result is the one JSON object every call returns (DESIGN.md "Result").
// The seed's fields keep their names; the rest are additions.
type Result struct {
	// RunID names this call: in its audit line and the console's
	// history, which opens the result by it.
	RunID    string       `json:"run_id,omitempty"`
	OK       bool         `json:"ok"`
	Status   ResultStatus `json:"status"`
	Tool     string       `json:"tool"`
	Method   string       `json:"method,omitempty"`
	Executor string       `json:"executor,omitempty"`
	Revision string       `json:"revision,omitempty"`
	// Signed is, with trusted_signers set, the commit that last changed
	// the definition that ran and the allowed key that signed it.
	Signed     *catalog.Signature `json:"signed,omitempty"`
	Output     string             `json:"output"`
	Stderr     string             `json:"stderr"`
	ExitCode   int                `json:"exit_code"` // -1 when nothing ran
	Truncated  bool               `json:"truncated"`
	Error      string             `json:"error"`
	DurationMS int64              `json:"duration_ms"`
	// QueuedMS is the time the call waited before its process started
	// (forking and sandbox setup on a loaded host); the timeout and
	// DurationMS count from the start.
	QueuedMS int64 `json:"queued_ms,omitempty"`

	// OutputBytes is how many bytes the tool wrote to stdout, before the cap.
	OutputBytes int64 `json:"output_bytes"`
	// OutputEncoding is "base64" when the raw output is not valid UTF-8 and
	// Output holds it base64-encoded; empty for text. StderrEncoding likewise.
	OutputEncoding string `json:"output_encoding,omitempty"`
	StderrEncoding string `json:"stderr_encoding,omitempty"`
	// HTTPStatus is the upstream status code of an HTTP executor.
	HTTPStatus int `json:"http_status,omitempty"`
	// Sandbox says what the tool's process could change and reach and
	// under which resource limits, so a write refused as "Read-only file
	// system" or a failed fork can be read against it (executors.Outcome).
	Sandbox string `json:"sandbox,omitempty"`
	// LimitHit says which of the sandbox's limits refused the tool
	// something — "process limit: the kernel refused 3 new process(es) or
	// thread(s) at the call's limit of 256" or "memory limit: the
	// out-of-memory killer ended 1 process(es) ..." — as the call's
	// control group counted it. Absent when no limit was hit, and where
	// the host gives sandboxes no control group (GET /v1/status says).
	LimitHit string `json:"limit_hit,omitempty"`
	// Found is false for not_found (the seed's found:false).
	Found *bool `json:"found,omitempty"`
	// Suggestion tells a caller what to do next (not_found, approval_required).
	Suggestion string `json:"suggestion,omitempty"`
	// Problems lists every params problem (invalid_params).
	Problems []string `json:"problems,omitempty"`
	// Plan is what would run (dry_run).
	Plan *executors.Plan `json:"plan,omitempty"`

	// Decision is the policy's verdict, "allow", "confirm" or "deny", on
	// dry_run, denied and approval_required results (and on results whose
	// run the executor's own re-check refused).
	Decision string `json:"decision,omitempty"`
	// Rule names the policy rule that decided, e.g. "shell: command `rm`
	// deletes files (default policy: delete)" or "param cmd: deny pattern
	// `rm\s+-rf`"; set with Decision.
	Rule string `json:"rule,omitempty"`
	// Reason explains the rule in a sentence; set with Decision.
	Reason string `json:"reason,omitempty"`
	// ApprovalID is the id of the approval this call waits for
	// (approval_required) or ran under (the result of an approved call).
	ApprovalID string `json:"approval_id,omitempty"`
	// Params are the validated params (defaults filled) that will run once
	// approved (approval_required).
	Params map[string]any `json:"params,omitempty"`
	// ParamsHash is the hash the approval binds to (approval.HashParams).
	ParamsHash string `json:"params_hash,omitempty"`
	// ExpiresAt is when the pending approval expires (approval_required).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Collected: this is the stored result of the approved call
	// ApprovalID, which ran when it was approved, given to its caller's
	// retry of the same call (Call.CollectHeld); nothing ran again.
	Collected bool `json:"collected,omitempty"`
}

func newResult(name string, t *hldp.Tool, rev string) Result {
	r := Result{Tool: name, Revision: rev, ExitCode: -1}
	if t != nil {
		r.Method, r.Executor = t.Method, string(t.Executor)
	}
	return r
}

// encodeRaw returns b as a string, or base64 with encoding "base64" when b
// is not valid UTF-8, so no byte is lost or replaced in JSON.
func encodeRaw(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}
