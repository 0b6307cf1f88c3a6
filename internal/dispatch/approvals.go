package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/policy"
)

// Approval is one approval request: the call waiting for (or past) a
// decision, who asked, who decided, and the Result once it ran. It is
// approval.Request, named here so the API need not import approval.
type Approval = approval.Request

// Decider is who decides an approval: a principal's name, and whether it
// is the operator (approval.Decider). The door that authenticated the
// decider fills it; it is never read from a request's body.
type Decider = approval.Decider

// ReasonOperatorOwn is the decision reason of an operator confirming a
// call they asked for themselves (Approval.DecisionReason, the audit
// line's decision_reason).
const ReasonOperatorOwn = approval.ReasonOperatorOwn

// The errors of the approval methods, the same values as package
// approval's, so callers test them with errors.Is without importing it.
// The API maps them to HTTP statuses.
var (
	// ErrNoApprovals: the dispatcher has no approval queue (Options.Approvals).
	ErrNoApprovals = errors.New("dispatch: this daemon has no approval queue")
	// ErrApprovalNotFound: no approval with that id.
	ErrApprovalNotFound = approval.ErrNotFound
	// ErrApprovalExpired: the request or the approval expired.
	ErrApprovalExpired = approval.ErrExpired
	// ErrAlreadyDecided: the request was approved or denied before.
	ErrAlreadyDecided = approval.ErrAlreadyDecided
	// ErrSelfApproval: the caller of a call may not approve it (unless the
	// store allows it, or the decider is the operator confirming their
	// own call).
	ErrSelfApproval = approval.ErrSelfApproval
	// ErrNoIdentity: the decider is empty.
	ErrNoIdentity = approval.ErrNoIdentity
	// ErrNotApproved: the request is pending or denied, so it cannot run.
	ErrNotApproved = approval.ErrNotApproved
	// ErrApprovalUsed: the approval ran already; it is used once.
	ErrApprovalUsed = approval.ErrAlreadyUsed
	// ErrBindingMismatch: the tool, its definition revision or the params
	// changed since the approval; the approval is void.
	ErrBindingMismatch = approval.ErrBindingMismatch
	// ErrInvalidEdit: the approver's edited params fail the schema or the
	// policy denies them; the request stays pending.
	ErrInvalidEdit = approval.ErrInvalidEdit
	// ErrStoreUnavailable: the approval store does not answer (the
	// database is down, the directory cannot be written); the message
	// gives the cause. Nothing was decided or changed.
	ErrStoreUnavailable = approval.ErrUnavailable
)

// Approval returns the approval request with id, with the Result of the
// call once it ran (Approval.Result, the Result as JSON). It is what GET
// /v1/approvals/{id} answers. Errors: ErrNoApprovals, ErrApprovalNotFound.
func (d *Dispatcher) Approval(id string) (Approval, error) {
	if d.opts.Approvals == nil {
		return Approval{}, ErrNoApprovals
	}
	return d.opts.Approvals.Get(id)
}

// MayApprove reports whether by may approve a as asked (nil), or why
// not: the approval store's rules (approval.Queue.MayApprove), asked
// without deciding, so that a page shows Approve or Confirm only to who
// may use it. The role is the caller's to check, as for Decide.
func (d *Dispatcher) MayApprove(a Approval, by Decider) error {
	if d.opts.Approvals == nil {
		return ErrNoApprovals
	}
	return d.opts.Approvals.MayApprove(a, by)
}

// onSurface reports whether the approval's tool is on sf (judged by the
// tool's current definition; a tool gone from the catalog is judged by
// its name alone).
func (d *Dispatcher) onSurface(a Approval, sf catalog.Surface) bool {
	if len(sf) == 0 {
		return true
	}
	var t *hldp.Tool
	if snap := d.store.Load(); snap != nil {
		if e, ok := snap.Lookup(a.Tool); ok {
			t = e.Tool
		}
	}
	return sf.Allows(a.Tool, t)
}

// ApprovalOn is Approval for a caller whose surface is sf: an approval of
// a tool off it is ErrApprovalNotFound, as if it did not exist.
func (d *Dispatcher) ApprovalOn(id string, sf catalog.Surface) (Approval, error) {
	a, err := d.Approval(id)
	if err == nil && !d.onSurface(a, sf) {
		return Approval{}, fmt.Errorf("%w: %s", ErrApprovalNotFound, id)
	}
	return a, err
}

// MaxApprovalWait bounds ApprovalWait's wait.
const MaxApprovalWait = time.Minute

// approvalReread is how often a wait reads the request again even
// without a wake-up (one may be missed while the shared store's listener
// reconnects).
const approvalReread = 5 * time.Second

// ApprovalWait is ApprovalOn that waits, at most wait (and at most
// MaxApprovalWait), until the request is final (executed, denied,
// expired, invalid or interrupted): a caller fetches the result of its
// held call in one request instead of polling. The store says when the
// request changes (approval.Watcher: across replicas on the shared store);
// the request is read again on every wake-up, never taken from it.
func (d *Dispatcher) ApprovalWait(ctx context.Context, id string, sf catalog.Surface, wait time.Duration) (a Approval, err error) {
	ctx, span := step(ctx, "approval wait", attribute.String("toolagent.approval_id", id))
	defer func() {
		span.SetAttributes(attribute.String("toolagent.approval_status", string(a.Status)))
		span.End()
	}()
	wait = min(wait, MaxApprovalWait)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	w, _ := d.opts.Approvals.(approval.Watcher)
	for {
		var changed <-chan struct{}
		stop := func() {}
		if w != nil {
			changed, stop = w.Watch(id) // before the read: no change falls between
		}
		a, err := d.ApprovalOn(id, sf)
		if err != nil || a.Status.Final() || ctx.Err() != nil {
			stop()
			return a, err
		}
		t := time.NewTimer(approvalReread)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		stop()
	}
}

// ApprovalsOn is Approvals of the tools on the surface sf alone.
func (d *Dispatcher) ApprovalsOn(pendingOnly bool, sf catalog.Surface) ([]Approval, error) {
	list, err := d.Approvals(pendingOnly)
	if err != nil || len(sf) == 0 {
		return list, err
	}
	out := list[:0:0]
	for _, a := range list {
		if d.onSurface(a, sf) {
			out = append(out, a)
		}
	}
	return out, nil
}

// DecideOn is Decide for an approver whose surface is sf: the approval of
// a tool off it cannot be decided (ErrApprovalNotFound, as if it did not
// exist; the audit line records the refusal).
func (d *Dispatcher) DecideOn(ctx context.Context, id string, by Decider, sf catalog.Surface, approve bool, edited json.RawMessage) (Approval, *Result, error) {
	if len(sf) > 0 {
		a, err := d.Approval(id)
		if err != nil {
			return Approval{}, nil, err
		}
		if !d.onSurface(a, sf) {
			d.opts.Audit.LogAttrs(ctx, slog.LevelInfo, "approval",
				slog.String("event", "refused"), slog.String("approval_id", id), slog.String("tool", a.Tool),
				slog.String("decided_by", by.Name), slog.String("why", "the tool is outside the approver's scope"))
			return Approval{}, nil, fmt.Errorf("%w: %s", ErrApprovalNotFound, id)
		}
	}
	return d.Decide(ctx, id, by, approve, edited)
}

// Approvals lists approval requests, oldest first; with pendingOnly only
// those waiting for a decision (GET /v1/approvals). Error: ErrNoApprovals.
func (d *Dispatcher) Approvals(pendingOnly bool) ([]Approval, error) {
	if d.opts.Approvals == nil {
		return nil, ErrNoApprovals
	}
	return d.opts.Approvals.ListRequests(pendingOnly)
}

// Decide records the decision of by on the pending approval id and, when
// it approves, runs the call on the server at once (RunApproved) and
// returns its Result; the Result is nil when nothing ran (a denial, or an
// error). It is what POST /v1/approvals/{id} does.
//
// by is the authenticated principal; the caller of Decide must have
// checked that it holds the approve role. A decider may not approve a call
// it asked for itself (ErrSelfApproval) unless the approval store allows
// it, or it is the operator confirming a call they asked for themselves
// (not through MCP), as asked: that approval's DecisionReason, and its
// audit line's decision_reason, is ReasonOperatorOwn (approval.Store.Decide
// has the rules). It may always deny (withdraw) its own call.
//
// edited, when not empty or null, is approve-with-edits: a JSON object of
// params that replaces the asked ones. It is validated against the tool's
// current schema (defaults filled) and judged by the policy again; a
// schema problem or a deny verdict refuses the edit with ErrInvalidEdit
// and the request stays pending. The approval then binds to the hash of
// the edited params. edited is ignored when denying.
//
// The error is for a decision or a run that could not happen:
// ErrNoApprovals, ErrApprovalNotFound, ErrApprovalExpired,
// ErrAlreadyDecided, ErrSelfApproval, ErrNoIdentity, ErrInvalidEdit, and
// from the run ErrApprovalUsed and ErrBindingMismatch (the definition
// changed since the request: the approval is void, its status invalid).
// Approval is the request after the decision (and the run).
func (d *Dispatcher) Decide(ctx context.Context, id string, by Decider, approve bool, edited json.RawMessage) (Approval, *Result, error) {
	st := d.opts.Approvals
	if st == nil {
		return Approval{}, nil, ErrNoApprovals
	}
	var editedParams map[string]any
	if t := bytes.TrimSpace(edited); approve && len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		m, err := decodeParams(edited)
		if err != nil {
			return Approval{}, nil, fmt.Errorf("%w: %w", ErrInvalidEdit, err)
		}
		editedParams = m
	}
	validate := func(m map[string]any) (map[string]any, error) {
		a, err := st.Get(id)
		if err != nil {
			return nil, err
		}
		e, err := d.callable(a.Tool)
		if err != nil {
			return nil, err
		}
		if err := checkSecretEdits(e.Tool, m); err != nil {
			return nil, err
		}
		// A secret param keeps its asked value, which the store holds
		// as hldp.Redacted and this process in memory.
		m = maps.Clone(m)
		for _, p := range e.Tool.Params {
			if v, ok := a.Params[p.Name]; p.Secret && ok {
				m[p.Name] = v
			}
		}
		held, _ := d.held.get(id)
		full, _ := withSecrets(e.Tool, m, held)
		params, err := e.Tool.CheckParams(full)
		if err != nil {
			return nil, fmt.Errorf("the edited params do not fit tool %s: %s", e.Tool.Name, strings.Join(splitErrors(err), "; "))
		}
		if v := policy.Evaluate(e.Tool, params, policy.ForTool(e.Tool, d.opts.ShellPolicy)); v.Decision == policy.Deny {
			return nil, fmt.Errorf("the edited params are refused by policy: %s: %s", v.Rule, v.Reason)
		}
		stored, _ := e.Tool.RedactParams(params)
		return stored, nil
	}
	a, err := st.Decide(id, by, approve, editedParams, validate)
	if err != nil {
		return Approval{}, nil, err
	}
	event := "denied"
	if approve {
		event = "approved"
	}
	if d.opts.OnDecided != nil {
		d.opts.OnDecided(a)
	}
	d.opts.Audit.LogAttrs(ctx, slog.LevelInfo, "approval", append([]slog.Attr{
		slog.String("event", event),
		slog.String("approval_id", a.ID),
		slog.String("tool", a.Tool),
		slog.String("revision", a.Revision),
		slog.String("asked_by", a.Caller),
		slog.String("decided_by", a.Decider),
		slog.Time("decided_at", a.DecidedAt),
		slog.Bool("edited", a.EditedParams != nil),
		slog.String("params_sha256", a.ParamsHash),
		slog.String("why", a.Why),
	}, decisionReason(a)...)...)
	if !approve {
		d.held.forget(id)
		return a, nil, nil
	}
	return d.RunApproved(ctx, id)
}

// decisionReason is the audit attribute of a's decision reason, when it
// has one (an operator's own request, a self-approval).
func decisionReason(a Approval) []slog.Attr {
	if a.DecisionReason == "" {
		return nil
	}
	return []slog.Attr{slog.String("decision_reason", a.DecisionReason)}
}

// RunApproved runs the approved call id on the server and stores its
// Result in the approval for the caller to fetch. Decide calls it after an
// approval; call it directly to retry an approved call whose run answered
// busy or disabled (those leave the approval approved and unused until it
// expires).
//
// In order: the tool is looked up in the current snapshot; the approved
// params are validated against its current schema; the concurrency slots
// are taken (busy: nothing is claimed); the approval is claimed, exactly
// once, bound to the tool, the CURRENT definition revision and the hash of
// the params about to run, so a definition that changed since the request
// voids it (ErrBindingMismatch, naming both revisions); the policy is
// judged again (a deny is stored as the result); the executor runs the
// call with the approval id, so its own re-check lets the confirmed call
// through; the Result is stored (status executed).
//
// The run is detached from ctx's cancellation (an approver who goes away
// does not kill it); the tool's timeout still bounds it. The error is for
// a run that could not be attempted: ErrNoApprovals, ErrApprovalNotFound,
// ErrApprovalExpired, ErrNotApproved, ErrApprovalUsed, ErrBindingMismatch.
func (d *Dispatcher) RunApproved(ctx context.Context, id string) (Approval, *Result, error) {
	st := d.opts.Approvals
	if st == nil {
		return Approval{}, nil, ErrNoApprovals
	}
	a, err := st.Get(id)
	if err != nil {
		return Approval{}, nil, err
	}
	start := d.opts.Now()
	call := Call{Tool: a.Tool, Caller: a.Caller, Door: a.Door}
	var tool *hldp.Tool // the definition that runs, once looked up
	ctx, span := startCall(ctx, call, id, a.TraceParent)
	ctx = withHeldAt(ctx, a.TraceParent)
	finish := func(r Result, params map[string]any) *Result {
		if r.DurationMS == 0 && r.ExitCode >= 0 {
			r.DurationMS = d.opts.Now().Sub(start).Milliseconds()
		}
		r.OK = r.Status == Success || r.Status == NoData
		r.ApprovalID = id
		r.RunID = NewRunID() // the approved run is a call of its own: the audit line names it
		var secrets map[string]any
		params, secrets = tool.RedactParams(params)
		scrubResult(&r, secrets)
		endCall(span, r, false)
		d.audit(ctx, call, r, params, d.opts.Now().Sub(start), append([]slog.Attr{
			slog.String("asked_by", a.Caller), slog.String("decided_by", a.Decider), slog.Time("decided_at", a.DecidedAt)}, decisionReason(a)...)...)
		if d.opts.Kept != nil {
			d.opts.Kept(call, r) // so the history's link to the run finds its result
		}
		return &r
	}
	if a.Status != approval.Approved {
		// Let the store say why it cannot run (pending, denied, expired,
		// used, void), with its error kinds.
		_, err := st.Claim(id, a.Tool, a.Revision, a.ParamsHash)
		if err == nil {
			err = fmt.Errorf("%w: %s is %s", ErrNotApproved, id, a.Status)
		}
		span.End()
		return a, nil, err
	}
	e, lerr := d.callable(a.Tool)
	tool = e.Tool
	if lerr != nil {
		// Not claimed: the tool may come back before the approval expires.
		r := newResult(a.Tool, e.Tool, e.Rev)
		r.Status, r.Error = Disabled, lerr.Error()+" (the approval stays approved and unused until it expires)"
		return a, finish(r, nil), nil
	}
	t := e.Tool
	r := newResult(a.Tool, t, e.Rev)
	r.Signed = e.Signed
	held, _ := d.held.get(id)
	full, missing := withSecrets(t, a.RunParams(), held)
	if len(missing) > 0 {
		// Not claimed: a repeat of the call by its caller gives the
		// values again (Hold keeps them for this approval).
		r.Status = Error
		r.Error = fmt.Sprintf("the secret params (%s) of held call %s were kept in the memory of the daemon that held it, which restarted since (or is another replica): they are gone; it must be asked again (the caller repeats the call)", strings.Join(missing, ", "), id)
		return a, finish(r, nil), nil
	}
	params, perr := t.CheckParams(full)
	hash := "invalid params"
	if perr == nil {
		// The approval binds to the params as stored: secrets redacted.
		stored, _ := t.RedactParams(params)
		hash = ParamsHash(stored)
	}
	ex, ok := d.execs[t.Executor]
	if !ok {
		r.Status, r.Error = Disabled, fmt.Sprintf("executor %s is not configured", t.Executor)
		return a, finish(r, params), nil
	}
	release, refused, why := d.acquire(ctx, t)
	if refused != "" {
		r.Status, r.Error = refused, why+" (the approval stays approved and unused; run it again before it expires)"
		return a, finish(r, params), nil
	}
	defer release()
	claimed, err := st.Claim(id, t.Name, e.Rev, hash)
	if err != nil {
		if errors.Is(err, ErrBindingMismatch) && e.Rev != a.Revision {
			// A rug pull, or an honest change: either way the approver
			// judged another definition than the one that would run.
			err = fmt.Errorf("the definition changed; ask again: %w", err)
		}
		if perr != nil && e.Rev == a.Revision {
			err = fmt.Errorf("%w (the approved params fail the schema: %s)", err, strings.Join(splitErrors(perr), "; "))
		}
		cur, gerr := st.Get(id)
		if gerr != nil {
			cur = a
		}
		span.End()
		return cur, nil, err
	}
	if v := policy.Evaluate(t, params, policy.ForTool(t, d.opts.ShellPolicy)); v.Decision == policy.Deny {
		r.setVerdict(v)
		r.Status, r.Error = Denied, fmt.Sprintf("refused by policy: %s: %s", v.Rule, v.Reason)
	} else {
		rctx := context.WithoutCancel(ctx)
		d.execute(rctx, ex, executors.Request{Tool: t, Params: params, Rev: e.Rev, Approval: id}, &r)
	}
	res := finish(r, params)
	d.held.forget(id)
	b, err := json.Marshal(res)
	if err == nil {
		claimed, err = st.Complete(id, b)
	}
	if err != nil {
		// The call ran; its result is returned here even though the store
		// could not keep it for a later GET.
		d.opts.Audit.LogAttrs(ctx, slog.LevelError, "approval result not stored", slog.String("approval_id", id), slog.String("err", err.Error()))
	}
	return claimed, res, nil
}

// callable returns the current snapshot's entry of the named tool when it
// can run now, or an error saying why not.
func (d *Dispatcher) callable(name string) (catalog.Entry, error) {
	snap := d.store.Load()
	if snap == nil {
		return catalog.Entry{}, errors.New("the catalog is not loaded yet")
	}
	e, ok := snap.Lookup(name)
	if !ok || e.Tool == nil && e.Status != catalog.Failed {
		return catalog.Entry{}, fmt.Errorf("no tool named %q is registered in the repository any more", name)
	}
	if !e.Status.Callable() || e.Tool == nil {
		return e, fmt.Errorf("tool %s is %s: %s", name, e.Status, e.Reason)
	}
	return e, nil
}

// collectWait bounds how long a retry of a held call waits for its
// approved call to finish running.
const collectWait = 30 * time.Second

// collect answers a retry of a held call (Call.CollectHeld) from the
// approval of the same call, when the store has one to give; it reports
// whether r is the answer. An approved call that has not run runs now
// (claimed once, so it cannot run twice); one that runs is waited for; a
// stored result is given once. Anything else (pending, denied, void,
// expired, a store error) is left to Hold.
func (d *Dispatcher) collect(ctx context.Context, c Call, in approval.Request, keepSecrets func(approval.Request), r *Result) bool {
	st := d.opts.Approvals
	a, ok, err := st.Collect(in)
	if err != nil || !ok {
		return false
	}
	keepSecrets(a) // a restarted daemon gets the secret values again

	if a.Status == approval.Approved {
		_, res, err := d.RunApproved(ctx, a.ID)
		switch {
		case err == nil && res != nil && (res.Status == Busy || res.Status == Disabled):
			*r = *res // not claimed: the approval waits for the next retry
			return true
		case err == nil && res != nil:
			// It ran now, under the approval, and its result is stored:
			// this retry takes it, so the next one is a new call.
			if _, _, err := st.Collect(in); err != nil {
				d.opts.Audit.LogAttrs(ctx, slog.LevelWarn, "approval result not marked collected", slog.String("approval_id", a.ID), slog.String("err", err.Error()))
			}
			*r = *res
			r.Collected = true
			return true
		case errors.Is(err, ErrApprovalUsed):
			// The approver's own run claimed it first: wait for it below.
		default:
			return false // void or expired meanwhile: a new request is due
		}
	}
	if a.Status != approval.Executed {
		w, err := d.ApprovalWait(ctx, a.ID, c.Surface, collectWait)
		if err != nil {
			return false
		}
		if w.Status != approval.Executed {
			if w.Status.Final() {
				return false // interrupted or void: a new request is due
			}
			r.Status, r.ApprovalID = Busy, a.ID
			r.Error = fmt.Sprintf("the approved call %s is still running (approved by %s at %s); call again with the same arguments for its result", a.ID, w.Decider, w.DecidedAt.UTC().Format(time.RFC3339))
			return true
		}
		got, ok, err := st.Collect(in)
		if err != nil || !ok || got.ID != a.ID || got.Status != approval.Executed {
			return false
		}
		a = got
	}
	var res Result
	if err := json.Unmarshal(a.Result, &res); err != nil {
		r.Status, r.ApprovalID = Error, a.ID
		r.Error = fmt.Sprintf("the approved call %s ran, but its stored result cannot be read: %v", a.ID, err)
		return true
	}
	*r = res
	r.ApprovalID, r.Collected = a.ID, true
	return true
}
