// Package dispatch is the one invoke path every caller (CLI, HTTP API, MCP)
// goes through, in this order: lookup, status, params validation, policy
// (internal/policy: allow, confirm or deny, naming the rule), approval
// (internal/approval: a confirm verdict becomes a pending request an
// approver decides), concurrency limits, the executor call, and the audit
// line. Every outcome of a call is a ResultStatus in a Result, never a Go
// error.
//
// Approved calls run on the server: Decide records an approver's decision
// and, on approve, claims the approval (bound to the tool, the definition
// revision and the params hash, used once) and runs the call through the
// same limits and executor path, storing its Result for the caller to
// fetch (Approval). See approvals.go.
//
// A Dispatcher is safe for concurrent use. Imports: catalog, executors,
// hldp, policy, approval, runs. Imported by the doors (api, mcpserver,
// console), the daemon, host, operator, cli and cmd/toolagent.
package dispatch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/policy"
	"github.com/toolagent/toolagent/internal/runs"
	"github.com/toolagent/toolagent/internal/telemetry"
)

// DefaultMaxConcurrent is the global cap on calls running at once.
const DefaultMaxConcurrent = 64

// backstop is added to a tool's timeout for the context given to an
// executor, which enforces the timeout itself; the context only catches an
// executor that does not. It counts from the start of the tool's process
// when the executor reports it (executors.Request.Started), as the tool's
// timeout does; until then a host too loaded to start the process soon
// gets startWait more (the time is the call's queue, not the tool's run).
const (
	backstop  = 5 * time.Second
	startWait = time.Minute
)

// errBackstop is the cause of an executor's context ended by the backstop.
var errBackstop = fmt.Errorf("the call outlived its timeout and the backstop: %w", context.DeadlineExceeded)

// Options configure a Dispatcher.
type Options struct {
	// MaxConcurrent caps calls running at once; more get status busy
	// (0: DefaultMaxConcurrent; negative: no cap).
	MaxConcurrent int
	// Kept, when set, receives every call's final Result (with its
	// RunID), for the console's history to open; it must not block.
	Kept func(Call, Result)
	// Runs, when set, keeps every call as a run (its output events as
	// the tool writes them, then its result), whatever door it came
	// through, for GET /v1/runs/{id}. A call whose RunID names a run
	// already there (a streaming API call made it) feeds that one.
	Runs *runs.Registry
	// Audit receives one line per call (nil: discarded).
	Audit *slog.Logger
	// OnHeld, when set, is told of every new held call (not of a call
	// asked again while its request is pending); OnDecided of every
	// decision Decide recorded (the request after it: approved or
	// denied). They must not block: the daemon counts them in its
	// metrics and hands them to its notifier.
	OnHeld, OnDecided func(Approval)
	// Now returns the time (nil: time.Now). Tests set it.
	Now func() time.Time
	// Approvals is the server-side queue a call whose policy verdict is
	// confirm is put in (approval_required with an approval id). nil: such
	// calls answer approval_required saying that this daemon has no
	// approval queue, and can never run here.
	Approvals approval.Queue
	// SharedSlots, when set, holds constraints.max_concurrency for the
	// whole deployment (replicas on one database, pgstore.Slots), on top
	// of this process's own count; nil: per process.
	SharedSlots SharedSlots
	// ShellPolicy replaces the built-in default shell policy
	// (policy.DefaultShellPolicy) for exec tools whose shell_policy is
	// absent or "default"; nil keeps the built-in one. Give the shell
	// executor (shell.Options.ShellPolicy) the same value: its re-check
	// before a process starts refuses what its policy refuses.
	ShellPolicy *policy.ShellPolicy
	// ApproveHint says, for an approval_required result, how an approver
	// approves the call with this id where this dispatcher runs (the
	// daemon: its HTTP API; the CLI: `toolagent approvals`). nil: both are
	// named.
	ApproveHint func(id string) string
	// NoQueueReason replaces the default explanation given when Approvals
	// is nil (e.g. "the approval queue belongs to the daemon running on
	// this state directory; call through it").
	NoQueueReason string
}

// Dispatcher invokes tools of the current snapshot.
type Dispatcher struct {
	store *catalog.Store
	execs map[hldp.ExecutorKind]executors.Executor
	opts  Options
	sem   chan struct{} // nil when uncapped

	mu    sync.Mutex
	perTo map[string]chan struct{} // "name\x00cap" -> slots

	// held keeps held calls' secret params in memory (secrets.go).
	held heldSecrets
}

// New returns a dispatcher over store. execs maps each configured executor
// kind to its executor; a kind missing from it makes its tools disabled.
func New(store *catalog.Store, execs map[hldp.ExecutorKind]executors.Executor, opts Options) *Dispatcher {
	if store == nil {
		panic("dispatch: nil store")
	}
	if opts.MaxConcurrent == 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.Audit == nil {
		opts.Audit = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	d := &Dispatcher{store: store, execs: make(map[hldp.ExecutorKind]executors.Executor, len(execs)), opts: opts, perTo: map[string]chan struct{}{}}
	for k, e := range execs {
		d.execs[k] = e
	}
	if opts.MaxConcurrent > 0 {
		d.sem = make(chan struct{}, opts.MaxConcurrent)
	}
	return d
}

// Call is one request to run a tool.
type Call struct {
	Tool   string          // exact tool name
	Params json.RawMessage // a JSON object; empty means {}
	// Caller is who asks: one name whatever door the call came through
	// (the token's name; Anonymous without tokens; the operator's user
	// name on the CLI). Approvals compare it, so it never carries the door.
	Caller string
	// Door is how the call came in (DoorAPI, DoorMCP, DoorCLI), recorded
	// beside the caller in the audit line and the approval.
	Door   string
	DryRun bool // validate and plan, do not run
	// Surface is what the caller may see (its token's scope, a profile's):
	// a tool off it answers not_found exactly as one that does not exist,
	// and the audit line records the refusal. Nil: every tool.
	Surface catalog.Surface
	// RunID, when set, names the call (Result.RunID) instead of a new
	// id: the API creates the run before the call, so a streaming client
	// knows it at once.
	RunID string
	// Output, when set, receives the tool's output as it is written
	// (executors.Request.Output).
	Output func(stream string, p []byte)
	// Followed, when set, says whether someone follows the output as it
	// comes (executors.Request.Followed).
	Followed func() bool
	// CollectHeld: a call the policy holds that repeats one of the same
	// caller's held calls (tool, revision, params) gets that call's
	// outcome instead of a new request once it is approved: the stored
	// result of the approved call, which ran once when approved
	// (Result.Collected; one retry gets it), or, if the approved call
	// could not run then (busy), it runs now under the approval, still
	// once (the approval is claimed once). While the request is pending
	// every door gets it back. The MCP door sets it: a client of
	// 2025-11-25 without tasks has no other way to the result.
	CollectHeld bool
}

// Anonymous is the caller of a daemon without tokens (loopback only),
// through every door.
const Anonymous = "anonymous"

// The doors a call comes through (Call.Door).
const (
	DoorAPI = "api"
	DoorMCP = approval.AgentDoor // an agent's door: its calls are never confirmed as anyone's own
	DoorCLI = "cli"
)

// Invoke runs c and returns its result. It never panics on bad input and
// never returns a Go error: every outcome is a status.
func (d *Dispatcher) Invoke(ctx context.Context, c Call) (result Result) {
	start := d.opts.Now()
	id := c.RunID
	if id == "" {
		id = NewRunID()
	}
	ctx, span := startCall(ctx, c, "", "")
	defer func() { endCall(span, result, c.DryRun) }()
	if d.opts.Runs != nil && !c.DryRun {
		run, ok := d.opts.Runs.Get(id)
		if !ok {
			run = d.opts.Runs.Start(id, c.Tool, c.Caller)
		}
		out := c.Output
		c.Output = func(stream string, p []byte) {
			run.Output(stream, p)
			if out != nil {
				out(stream, p)
			}
		}
		if c.Followed == nil {
			c.Followed = run.Followed
		}
		defer func() { run.Finish(result) }()
	}
	if snap := d.store.Load(); snap != nil && len(c.Surface) > 0 {
		if e, ok := snap.Lookup(c.Tool); ok && !c.Surface.AllowsEntry(e) {
			r := notFound(snap, c.Tool, c.Surface)
			r.RunID = id
			d.audit(ctx, c, r, nil, d.opts.Now().Sub(start), slog.String("refused", "the tool is outside the caller's scope"))
			return r
		}
	}
	r, params := d.invoke(ctx, c)
	noteStale(d.store.Load(), c.Tool, &r)
	if r.DurationMS == 0 && r.ExitCode >= 0 {
		r.DurationMS = d.opts.Now().Sub(start).Milliseconds()
	}
	r.OK = r.Status == Success || r.Status == NoData || r.Status == DryRun
	r.RunID = id
	d.audit(ctx, c, r, params, d.opts.Now().Sub(start))
	if d.opts.Kept != nil {
		d.opts.Kept(c, r)
	}
	return r
}

// NewRunID returns a new run id: 16 random hex digits.
func NewRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// invoke runs c; it returns the Result and, for the audit line, the
// params with each secret param's value replaced by hldp.Redacted (the
// Result's own words are scrubbed of the secret values too).
func (d *Dispatcher) invoke(ctx context.Context, c Call) (res Result, audited map[string]any) {
	var tool *hldp.Tool
	defer func() {
		var secrets map[string]any
		audited, secrets = tool.RedactParams(audited)
		scrubResult(&res, secrets)
	}()
	snap := d.store.Load()
	if snap == nil {
		r := newResult(c.Tool, nil, "")
		r.Status, r.Error = Disabled, "the catalog is not loaded yet"
		return r, nil
	}
	e, ok := snap.Lookup(c.Tool)
	if !ok || e.Tool == nil && e.Status != catalog.Failed {
		return notFound(snap, c.Tool, c.Surface), nil
	}
	r := newResult(c.Tool, e.Tool, e.Rev)
	r.Signed = e.Signed
	if !e.Status.Callable() || e.Tool == nil {
		r.Status = Disabled
		r.Error = fmt.Sprintf("tool %s is %s: %s", c.Tool, e.Status, e.Reason)
		return r, nil
	}
	t := e.Tool
	tool = t
	_, pspan := step(ctx, "params")
	raw, err := decodeParams(c.Params)
	if err != nil {
		pspan.End()
		r.Status, r.Error, r.Problems = InvalidParams, err.Error(), []string{err.Error()}
		return r, nil
	}
	params, err := t.CheckParams(raw)
	pspan.End()
	if err != nil {
		r.Status = InvalidParams
		probs := splitErrors(err)
		r.Problems = capList(probs, MaxProblems, "problems")
		r.Error = fmt.Sprintf("%d problem(s) with the params of %s: %s", len(probs), t.Name, strings.Join(r.Problems, "; "))
		return r, raw
	}
	ex, ok := d.execs[t.Executor]
	if !ok {
		r.Status, r.Error = Disabled, fmt.Sprintf("executor %s is not configured", t.Executor)
		return r, params
	}
	req := executors.Request{Tool: t, Params: params, Rev: e.Rev, Output: c.Output, Followed: c.Followed}
	_, vspan := step(ctx, "policy")
	v := policy.Evaluate(t, params, policy.ForTool(t, d.opts.ShellPolicy))
	vspan.SetAttributes(attribute.String("toolagent.decision", v.Decision.String()))
	vspan.End()
	if c.DryRun {
		// A dry run never creates an approval; it says what the policy
		// would decide.
		r.setVerdict(v)
		plan, err := ex.Plan(req)
		if err != nil {
			r.Status, r.Error = Error, err.Error()
			return r, params
		}
		r.Status, r.Plan = DryRun, &plan
		return r, params
	}
	switch v.Decision {
	case policy.Deny:
		r.setVerdict(v)
		r.Status, r.Error = Denied, fmt.Sprintf("refused by policy: %s: %s", v.Rule, v.Reason)
		return r, params
	case policy.Confirm:
		r.setVerdict(v)
		d.hold(ctx, c, t, e.Rev, params, v, &r)
		return r, params
	}
	release, refused, why := d.acquire(ctx, t)
	if refused != "" {
		r.Status, r.Error = refused, why
		return r, params
	}
	defer release()
	d.execute(ctx, ex, req, &r)
	return r, params
}

// hold turns a call the policy wants confirmed into approval_required:
// with an approval queue, a pending request the caller can point an
// approver to; without one, a plain refusal that says so.
func (d *Dispatcher) hold(ctx context.Context, c Call, t *hldp.Tool, rev string, params map[string]any, v policy.Verdict, r *Result) {
	ctx, span := step(ctx, "approval hold")
	defer func() {
		span.SetAttributes(attribute.String("toolagent.status", string(r.Status)), attribute.String("toolagent.approval_id", r.ApprovalID))
		span.End()
	}()
	r.Status = ApprovalRequired
	r.Error = fmt.Sprintf("did not run: the call needs an approval: %s: %s", v.Rule, v.Reason)
	if d.opts.Approvals == nil {
		r.Suggestion = "an approver must confirm this call, but this daemon has no approval queue enabled, so it cannot run here (use --dry-run to see what would run)"
		if d.opts.NoQueueReason != "" {
			r.Suggestion = "an approver must confirm this call, and it cannot be queued here: " + d.opts.NoQueueReason
		}
		return
	}
	// A secret param's value stays in this process (d.held): the store,
	// the approver and the notifications see hldp.Redacted.
	stored, secrets := t.RedactParams(params)
	in := approval.Request{Tool: t.Name, Revision: rev, Params: stored, Caller: c.Caller, Door: c.Door, Why: v.Rule + ": " + v.Reason, TraceParent: telemetry.TraceParent(ctx)}
	keepSecrets := func(a approval.Request) {
		if secrets != nil {
			d.held.keep(a.ID, secrets, a.ExpiresAt, d.opts.Now())
		}
	}
	if t.Executor == hldp.Shell || t.Executor == hldp.Gatekeeper {
		// Once approved, the call runs with the tool's declared grant;
		// the approver sees it before deciding.
		in.Sandbox = t.Sandbox().String()
		if g, ok := d.execs[t.Executor].(grantDescriber); ok {
			in.Sandbox = g.DescribeGrant(t) // ${files_root} resolved, or "off"
		}
	}
	if c.CollectHeld && d.collect(ctx, c, in, keepSecrets, r) {
		return
	}
	a, again, err := d.opts.Approvals.Hold(in)
	if errors.Is(err, approval.ErrUnavailable) {
		r.Status, r.Error = Unavailable, fmt.Sprintf("%v; the call needs an approval and did not run, and no approval was recorded: call again once the store answers", err)
		return
	}
	if err != nil {
		r.Status, r.Error = Error, fmt.Sprintf("the call needs an approval, and the approval could not be recorded: %v", err)
		return
	}
	keepSecrets(a)
	r.ApprovalID, r.Params, r.ParamsHash, r.ExpiresAt = a.ID, a.Params, a.ParamsHash, a.ExpiresAt
	how := fmt.Sprintf("an approver with the approve role: POST /v1/approvals/%[1]s {\"decision\":\"approve\"} (or \"deny\"; \"params\" to approve with edits) or `toolagent approvals approve %[1]s`", a.ID)
	if d.opts.ApproveHint != nil {
		how = d.opts.ApproveHint(a.ID)
	}
	fetch := fmt.Sprintf("Fetch the result with GET /v1/approvals/%s once it ran", a.ID)
	if c.CollectHeld {
		fetch = "Once it is approved it runs once; call this tool again with the same arguments to get its result"
	}
	r.Suggestion = fmt.Sprintf("%s; it expires at %s. %s", how, a.ExpiresAt.UTC().Format(time.RFC3339), fetch)
	if !again && d.opts.OnHeld != nil {
		d.opts.OnHeld(a)
	}
	if again {
		r.Suggestion = fmt.Sprintf("you asked for this call before and it still waits for a decision: this is that request (%s, asked at %s), not a new one; %s", a.ID, a.CreatedAt.UTC().Format(time.RFC3339), r.Suggestion)
	}
}

// setVerdict records the policy's verdict in the result.
func (r *Result) setVerdict(v policy.Verdict) {
	r.Decision, r.Rule, r.Reason = v.Decision.String(), v.Rule, v.Reason
}

// execute runs req on ex under the tool's timeout and fills r from the
// outcome. The caller holds the concurrency slots.
func (d *Dispatcher) execute(ctx context.Context, ex executors.Executor, req executors.Request, r *Result) {
	t := req.Tool
	ctx, span := step(ctx, "execute "+string(t.Executor))
	span.SetAttributes(attribute.String("toolagent.executor", string(t.Executor)))
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.String("toolagent.status", string(r.Status)), attribute.Int("toolagent.exit_code", r.ExitCode), attribute.Int64("toolagent.output_bytes", r.OutputBytes))
		}
		span.End()
	}()
	if req.Approval != "" {
		span.SetAttributes(attribute.String("toolagent.approval_id", req.Approval))
		if l, ok := telemetry.Link(heldAt(ctx)); ok {
			span.AddLink(l)
		}
	}
	xctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var started atomic.Bool
	bound := time.AfterFunc(t.Constraints.Timeout+backstop+startWait, func() { cancel(errBackstop) })
	defer bound.Stop()
	start := d.opts.Now()
	begun := time.Now()
	req.Started = func() {
		if started.CompareAndSwap(false, true) {
			bound.Reset(t.Constraints.Timeout + backstop)
			sandboxStarted(xctx, begun)
		}
	}
	out, err := ex.Execute(xctx, req)
	backstopped := errors.Is(context.Cause(xctx), errBackstop)
	r.fill(out)
	if err != nil {
		// The executor could not run the call, or gave up waiting for it:
		// there is no exit code to report.
		r.ExitCode = -1
	}
	var refused *policy.RefusedError
	switch {
	case ctx.Err() != nil && !errors.As(err, &refused) && !out.TimedOut:
		// Ended from outside: the caller or the daemon, not the tool.
		r.Status, r.Error = Cancelled, "cancelled: "+cancelCause(ctx)
		if err != nil {
			r.Error += ": " + err.Error()
		}
	case errors.As(err, &refused):
		// The executor's own re-check refused what dispatch let through:
		// a policy mismatch (e.g. a different shell policy override) or a
		// bug; either way nothing ran, and the rule is named.
		r.setVerdict(refused.Verdict)
		r.Status, r.Error = Denied, err.Error()
	case errors.Is(err, executors.ErrRefused):
		// A guard of the executor refused the call (a path leaving the
		// files root, a gatekeeper's allowlist): a refusal, not a failure.
		r.setVerdict(policy.Verdict{Decision: policy.Deny, Rule: fmt.Sprintf("executor %s refused the call", t.Executor), Reason: err.Error()})
		r.Status, r.Error = Denied, err.Error()
	case err != nil && backstopped && !started.Load():
		r.Status, r.Error = Timeout, fmt.Sprintf("timed out: the tool's process did not start within %s (its timeout of %s, the %s backstop and %s for a loaded host): %v", t.Constraints.Timeout+backstop+startWait, t.Constraints.Timeout, backstop, startWait, err)
		r.DurationMS = d.opts.Now().Sub(start).Milliseconds()
	case err != nil && backstopped:
		r.Status, r.Error = Timeout, fmt.Sprintf("timed out after %s: %v", t.Constraints.Timeout, err)
		r.DurationMS = d.opts.Now().Sub(start).Milliseconds()
	case err != nil:
		r.Status, r.Error = Error, err.Error()
	case out.TimedOut && out.ExitCode < 0:
		// An HTTP executor (hlpd-api, git-forgejo): no process ran.
		r.Status, r.Error = Timeout, fmt.Sprintf("timed out after %s: no complete answer within the timeout; the request was abandoned", t.Constraints.Timeout)
	case out.TimedOut:
		r.Status, r.Error = Timeout, fmt.Sprintf("timed out after %s; the process group was killed", t.Constraints.Timeout)
	case backstopped:
		// The executor's own timeout did not fire, the backstop did (the
		// executor hung past the tool's timeout and the backstop, counted
		// from the start it reported, or from the call plus startWait):
		// a timeout all the same, not the tool's failure.
		r.Status, r.Error = Timeout, fmt.Sprintf("timed out: the call did not finish within its timeout of %s plus the %s backstop (queued %s before its process started)", t.Constraints.Timeout, backstop, out.Queued.Round(time.Millisecond))
	case !out.Completed:
		// The executor returned without seeing the call through and
		// without an error: a bug, but never a success with exit code 0.
		r.ExitCode = -1
		r.Status, r.Error = Error, fmt.Sprintf("executor %s returned without completing the call (no exit status, no answer): nothing says it ran to the end", t.Executor)
	case out.CutOff && out.ExitCode == sigpipeExit:
		// Its only problem is the cap: the runtime closed the pipe it
		// wrote past max_output_bytes to, and SIGPIPE ended it.
		r.Status, r.Error = Success, fmt.Sprintf("output cut at max_output_bytes (%d): the runtime stopped reading after %d bytes and closed the pipe, and the tool died of SIGPIPE (exit status %d)", t.Constraints.MaxOutputBytes, out.OutputBytes, out.ExitCode)
	case out.ExitCode != 0:
		r.Status, r.Error = Error, fmt.Sprintf("exit status %d", out.ExitCode)
	case out.HTTPStatus >= 300:
		r.Status, r.Error = Error, fmt.Sprintf("HTTP status %d", out.HTTPStatus)
		if line, _, _ := strings.Cut(string(out.Stderr), "\n"); strings.HasPrefix(line, "HTTP ") {
			r.Error = line // the server's own reason, e.g. "HTTP 422 Unprocessable Entity: repository file already exists [path: README.md]"
		}
	case len(out.Output) == 0:
		r.Status = NoData
	default:
		r.Status = Success
	}
	if r.LimitHit != "" && r.Error != "" {
		r.Error += "; the call hit a sandbox limit: " + r.LimitHit
	}
}

func (r *Result) fill(o executors.Outcome) {
	r.Output, r.OutputEncoding = encodeRaw(o.Output)
	r.Stderr, r.StderrEncoding = encodeRaw(o.Stderr)
	r.ExitCode = o.ExitCode
	r.Truncated = o.Truncated
	r.OutputBytes = o.OutputBytes
	if r.OutputBytes < int64(len(o.Output)) {
		r.OutputBytes = int64(len(o.Output))
	}
	r.HTTPStatus = o.HTTPStatus
	r.Sandbox = o.Sandbox
	r.LimitHit = o.LimitHit
	r.DurationMS = o.Duration.Milliseconds()
	r.QueuedMS = o.Queued.Milliseconds()
}

// SharedSlots hold a tool's concurrency cap across processes.
type SharedSlots interface {
	// Acquire takes one of tool's n slots; ok false: all are held; the
	// error says why the shared count cannot be read (it names no secret).
	Acquire(ctx context.Context, tool string, n int) (release func(), ok bool, err error)
}

// acquire takes a global slot and a slot of the tool's own cap. When it
// cannot, refused is Busy (a cap is full: callers get busy, not a
// queue) or Unavailable (the shared count cannot be read), and why says
// so.
func (d *Dispatcher) acquire(ctx context.Context, t *hldp.Tool) (release func(), refused ResultStatus, why string) {
	var held []chan struct{}
	release = func() {
		for _, ch := range held {
			<-ch
		}
	}
	if d.sem != nil {
		select {
		case d.sem <- struct{}{}:
			held = append(held, d.sem)
		default:
			return release, Busy, fmt.Sprintf("busy: %d calls are already running (the daemon's cap); retry later", cap(d.sem))
		}
	}
	if n := t.Constraints.MaxConcurrency; n > 0 {
		ch := d.toolSlots(t.Name, n)
		select {
		case ch <- struct{}{}:
			held = append(held, ch)
		default:
			release()
			return func() {}, Busy, fmt.Sprintf("busy: tool %s allows %d call(s) at a time (constraints.max_concurrency) and that many are running; retry later", t.Name, n)
		}
		if d.opts.SharedSlots != nil {
			free, ok, err := d.opts.SharedSlots.Acquire(ctx, t.Name, n)
			switch {
			case err != nil:
				// Fail closed: without the shared count the cap cannot
				// be kept.
				release()
				return func() {}, Unavailable, fmt.Sprintf("%v; tool %s allows %d call(s) at a time across the replicas (constraints.max_concurrency), counted in the shared store, so the call did not run: retry once the store answers", err, t.Name, n)
			case !ok:
				release()
				return func() {}, Busy, fmt.Sprintf("busy: tool %s allows %d call(s) at a time (constraints.max_concurrency) and that many are running across the replicas; retry later", t.Name, n)
			}
			local := release
			release = func() { free(); local() }
		}
	}
	return release, "", ""
}

func (d *Dispatcher) toolSlots(name string, n int) chan struct{} {
	key := fmt.Sprintf("%s\x00%d", name, n)
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := d.perTo[key]
	if !ok {
		ch = make(chan struct{}, n)
		d.perTo[key] = ch
	}
	return ch
}

// notFound is the answer for a tool that does not exist, or is not on the
// caller's surface sf: the two are the same, and a near name is only ever
// one on the surface.
func notFound(snap *catalog.Snapshot, name string, sf catalog.Surface) Result {
	r := newResult(name, nil, snap.Rev())
	f := false
	r.Found = &f
	r.Status = NotFound
	r.Error = fmt.Sprintf("no tool named %q is registered in the repository", name)
	r.Suggestion = fmt.Sprintf("the tool is not in the repository yet and has to be written: add tools/%s/%s (scaffold one with `toolagent new %s`) and commit it; it registers without a restart", name, hldp.FileName, name)
	if rev, ok := snap.Gone(name); ok {
		r.Error = fmt.Sprintf("tool %q was deleted from the repository (it is gone at revision %s)", name, rev)
		r.Suggestion = fmt.Sprintf("it was registered before: restore tools/%s/ from the repository's history (git log -- tools/%s) if it is still wanted, or call another tool", name, name)
	}
	if near := nearest(snap, name, sf); near != "" {
		r.Suggestion += fmt.Sprintf(". A registered tool with a similar name: %s", near)
	}
	return r
}

// noteStale says in r's error that tool is stale, when it is and r is an
// answer of its definition: its file does not load now, and the call was
// judged (and ran) by its last good definition.
func noteStale(snap *catalog.Snapshot, tool string, r *Result) {
	if snap == nil || r.Status == NotFound {
		return
	}
	e, ok := snap.Lookup(tool)
	if !ok || e.Status != catalog.Stale {
		return
	}
	note := fmt.Sprintf("tool %s is stale: %s does not load now (%s); this call used its last good definition, of revision %s", tool, e.File, e.Reason, e.Rev)
	if r.Error == "" {
		r.Error = note
	} else {
		r.Error += "; " + note
	}
}

// nearest returns the callable tool name closest to name by edit distance,
// when it is close enough to be a likely typo.
func nearest(snap *catalog.Snapshot, name string, sf catalog.Surface) string {
	best, bestD := "", 3
	for _, e := range sf.Filter(snap.Enabled()) {
		if d := editDistance(name, e.Name); d < bestD {
			best, bestD = e.Name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func decodeParams(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("params must be a JSON object: %v", err)
	}
	if dec.More() {
		return nil, errors.New("params must be one JSON object; found trailing data")
	}
	if err := CheckKeys(raw, "params", nil); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// sigpipeExit is the exit code of a process killed by SIGPIPE (128+13).
const sigpipeExit = 128 + 13

// grantDescriber is an executor that says what an approved call of a tool
// may change and reach, as the approver should see it (the shell
// executor); for others the approval shows the declared grant.
type grantDescriber interface {
	DescribeGrant(*hldp.Tool) string
}

// ErrShutdown is the cause a daemon cancels its calls' context with when
// it shuts down, so their results say cancelled: shutdown.
var ErrShutdown = errors.New("shutdown (the daemon is stopping)")

// cancelCause says who ended a call whose context is done.
func cancelCause(ctx context.Context) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrShutdown):
		return cause.Error()
	case errors.Is(cause, context.Canceled):
		return "client gone (the caller hung up or cancelled the call)"
	case errors.Is(cause, context.DeadlineExceeded):
		return "the caller's deadline passed"
	default:
		return cause.Error()
	}
}

// Bounds of what a caller's input can make the daemon say.
const (
	// MaxProblems is the most params problems a result lists; the count
	// of the rest follows them.
	MaxProblems = 50
	// MaxAuditNames is the most param names an audit line lists.
	MaxAuditNames = 64
	// maxAuditString caps a caller-chosen string (a tool or param name)
	// in an audit line.
	maxAuditString = 200
)

// capList returns the first n of list, and then "... and K more what"
// when there were more.
func capList(list []string, n int, what string) []string {
	if len(list) <= n {
		return list
	}
	return append(list[:n:n], fmt.Sprintf("... and %d more %s", len(list)-n, what))
}

// clip cuts s to maxAuditString bytes (on a rune boundary), saying so.
func clip(s string) string {
	if len(s) <= maxAuditString {
		return s
	}
	cut := maxAuditString
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... (%d bytes)", len(s))
}

func splitErrors(err error) []string {
	var out []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, splitErrors(e)...)
		}
		return out
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// audit writes one structured line per call. Param values never appear:
// only their names and a hash of the values, which may hold secrets.
// extra carries the approval attributes of an approved run.
func (d *Dispatcher) audit(ctx context.Context, c Call, r Result, params map[string]any, took time.Duration, extra ...slog.Attr) {
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, clip(k))
	}
	slices.Sort(names)
	attrs := []slog.Attr{
		slog.String("run_id", r.RunID),
		slog.String("caller", c.Caller),
		slog.String("door", c.Door),
		slog.String("tool", clip(c.Tool)),
		slog.String("revision", r.Revision),
		slog.String("status", string(r.Status)),
		slog.Int("exit_code", r.ExitCode),
		slog.Int64("duration_ms", took.Milliseconds()),
		slog.Any("param_names", capList(names, MaxAuditNames, "names")),
		slog.String("params_sha256", ParamsHash(params)),
		slog.Bool("dry_run", c.DryRun),
	}
	if r.Rule != "" {
		attrs = append(attrs, slog.String("decision", r.Decision), slog.String("rule", r.Rule))
	}
	if r.ApprovalID != "" {
		attrs = append(attrs, slog.String("approval_id", r.ApprovalID))
	}
	if s := r.Signed; s != nil {
		attrs = append(attrs, slog.String("signer", s.Principal), slog.String("signer_key", s.Fingerprint), slog.String("signed_commit", s.Commit))
	}
	if r.Collected {
		// The approved run has its own line; this one gave its result.
		attrs = append(attrs, slog.Bool("collected", true))
	}
	d.opts.Audit.LogAttrs(ctx, slog.LevelInfo, "call", append(attrs, extra...)...)
}

// ParamsHash is the stable hash of validated param values that approvals
// bind to and audit lines carry: approval.HashParams, the SHA-256 of their
// canonical JSON.
func ParamsHash(params map[string]any) string {
	return approval.HashParams(params)
}
