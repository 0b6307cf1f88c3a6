package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
)

// Approvals are the settings of the local approval queue. It allows no
// self-approval: whoever decides there holds the state directory, the
// operator, who confirms their own calls (Queue.Act).
type Approvals struct {
	TTL time.Duration
}

// Call makes one call on l's catalog as a command on this host does
// without a daemon: through dispatch, auditing nothing. A call the policy
// holds goes into the local approval queue, STATE/approvals, for
// `toolagent approvals approve ID`; when another process (a daemon) owns
// that queue, the call is held without an id and its suggestion says to
// ask that daemon. The error is for a queue that cannot be opened.
func (s *Setup) Call(ctx context.Context, l *Loaded, call dispatch.Call, ap Approvals) (dispatch.Result, error) {
	store := new(catalog.Store)
	store.Swap(l.Snap)
	var q *approval.Store
	var qErr error
	if !call.DryRun {
		q, qErr = OpenApprovals(s.State, ap.TTL, false, slog.New(slog.DiscardHandler))
		if qErr == nil {
			defer q.Close()
		} else if !errors.Is(qErr, approval.ErrLocked) {
			return dispatch.Result{}, qErr
		}
	}
	d := dispatch.New(store, l.Execs, dispatch.Options{
		Audit:     slog.New(slog.DiscardHandler),
		Approvals: QueueOf(q),
		// The CLI holds the call in the local queue: approvers use the CLI.
		ApproveHint: func(id string) string {
			return fmt.Sprintf("an approver on this host: `toolagent approvals approve %s` (or `deny`; --params JSON to approve with edits)", id)
		},
	})
	res := d.Invoke(ctx, call)
	if res.Status == dispatch.ApprovalRequired && qErr != nil {
		res.Suggestion = fmt.Sprintf("an approver must confirm this call, and this command cannot hold it: %v. Call the tool through that daemon (POST /v1/call) to get an approval id", qErr)
	}
	return res, nil
}

// Queue is the local approval queue with the dispatcher that decides it.
type Queue struct {
	*dispatch.Dispatcher
	store  *approval.Store
	loaded *Loaded
}

// OpenQueue opens the local approval queue, STATE/approvals, as a command
// on this host decides it; with runs (approve), on s's catalog, loaded
// now, so an approved call runs. It fails with approval.ErrLocked while
// another process holds the queue. Decisions are audited to audit.
func (s *Setup) OpenQueue(ap Approvals, log, audit *slog.Logger, runs bool) (*Queue, error) {
	st, err := OpenApprovals(s.State, ap.TTL, false, log)
	if err != nil {
		return nil, err
	}
	q := &Queue{store: st}
	store := new(catalog.Store)
	var execs map[hldp.ExecutorKind]executors.Executor
	if runs {
		s.RunsTools = true
		if q.loaded, err = s.Load(true); err != nil {
			st.Close()
			return nil, err
		}
		store.Swap(q.loaded.Snap)
		execs = q.loaded.Execs
	}
	q.Dispatcher = dispatch.New(store, execs, dispatch.Options{Approvals: st, Audit: audit})
	return q, nil
}

// Close releases the queue's lock and the catalog's sandbox.
func (q *Queue) Close() {
	q.store.Close()
	if q.loaded != nil {
		q.loaded.Close()
	}
}

// Act runs an approvals action on the queue by decider — list (every
// approval with all, else the pending ones), show ID, approve ID (with
// edited params when edits is not empty), deny ID — and returns what the
// command prints, and for an approval that ran its call, the call's
// status ("" otherwise). The error is dispatch's.
//
// The decider is the operator: whoever opens the queue holds the state
// directory (0700, the daemon's user), so they confirm the calls they
// asked for themselves on this host (`toolagent call` holds them as the
// same user name).
func (q *Queue) Act(ctx context.Context, verb, id string, all bool, edits json.RawMessage, decider string) (any, dispatch.ResultStatus, error) {
	switch verb {
	case "list":
		list, err := q.Approvals(!all)
		if list == nil {
			list = []dispatch.Approval{}
		}
		return struct {
			Approvals []dispatch.Approval `json:"approvals"`
		}{list}, "", err
	case "show":
		a, err := q.Approval(id)
		return a, "", err
	}
	a, res, err := q.Decide(ctx, id, dispatch.Decider{Name: decider, Operator: true}, verb == "approve", edits)
	if err != nil {
		return nil, "", err
	}
	if res == nil {
		return a, "", nil
	}
	if len(a.Result) == 0 {
		if b, err := json.Marshal(res); err == nil {
			a.Result = b // busy or disabled: not stored, shown anyway
		}
	}
	return a, res.Status, nil
}
