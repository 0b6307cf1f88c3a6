package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
)

// Approver is the approval queue behind the /v1/approvals routes;
// *dispatch.Dispatcher is one. Its errors are dispatch's Err* values,
// which approvalError maps to HTTP statuses.
type Approver interface {
	// ApprovalsOn lists the approvals of the tools on the surface, oldest
	// first; with pendingOnly only those waiting for a decision.
	ApprovalsOn(pendingOnly bool, sf catalog.Surface) ([]dispatch.Approval, error)
	// ApprovalOn returns one approval with the Result once it ran; one of
	// a tool off the surface is not found.
	ApprovalOn(id string, sf catalog.Surface) (dispatch.Approval, error)
	// ApprovalWait is ApprovalOn that waits, at most wait, until the
	// approval is final (GET /v1/approvals/{id}?wait=30s).
	ApprovalWait(ctx context.Context, id string, sf catalog.Surface, wait time.Duration) (dispatch.Approval, error)
	// DecideOn records the decision of by and, on approve, runs the call;
	// the approval of a tool off the decider's surface is not found.
	DecideOn(ctx context.Context, id string, by dispatch.Decider, sf catalog.Surface, approve bool, edited json.RawMessage) (dispatch.Approval, *dispatch.Result, error)
}

// approvalList is the answer of GET /v1/approvals.
type approvalList struct {
	Approvals []dispatch.Approval `json:"approvals"`
}

// decisionRequest is the body of POST /v1/approvals/{id}.
type decisionRequest struct {
	Decision string `json:"decision"`
	// Params, when given with approve, replace the asked params
	// (approve-with-edits); they are validated and judged again.
	Params json.RawMessage `json:"params"`
}

var errNoApprover = errorf(http.StatusNotImplemented, "this daemon has no approval queue")

func (s *server) handleApprovals(w http.ResponseWriter, r *http.Request) {
	all, err := boolQuery(r.URL.Query().Get("all"))
	if err != nil {
		writeError(w, s.log, errorf(http.StatusBadRequest, "query all: %v", err))
		return
	}
	if s.opts.Approvals == nil {
		writeError(w, s.log, errNoApprover)
		return
	}
	list, err := s.opts.Approvals.ApprovalsOn(!all, surfaceFrom(r.Context()))
	if err != nil {
		writeError(w, s.log, approvalError(err))
		return
	}
	if list == nil {
		list = []dispatch.Approval{}
	}
	encode(w, s.log, http.StatusOK, approvalList{Approvals: list})
}

// handleApproval answers one approval. A token below the approve role
// sees only the approvals of its own calls: another caller's is answered
// 404, as if it did not exist.
func (s *server) handleApproval(w http.ResponseWriter, r *http.Request) {
	if s.opts.Approvals == nil {
		writeError(w, s.log, errNoApprover)
		return
	}
	id := r.PathValue("id")
	var a dispatch.Approval
	var err error
	if q := r.URL.Query(); q.Has("wait") {
		wait, perr := time.ParseDuration(q.Get("wait"))
		if perr != nil || wait < 0 || wait > dispatch.MaxApprovalWait {
			writeError(w, s.log, errorf(http.StatusBadRequest, "query parameter wait=%q: want a duration from 0s to %s, e.g. 30s", q.Get("wait"), dispatch.MaxApprovalWait))
			return
		}
		// The caller's own approval only, as below; a wait for another's
		// learns nothing either.
		a, err = s.opts.Approvals.ApprovalWait(r.Context(), id, surfaceFrom(r.Context()), wait)
	} else {
		a, err = s.opts.Approvals.ApprovalOn(id, surfaceFrom(r.Context()))
	}
	if err == nil && roleFrom(r.Context()) < RoleApprove && a.Caller != callerFrom(r.Context()) {
		err = dispatch.ErrApprovalNotFound
	}
	if err != nil {
		writeError(w, s.log, approvalError(err))
		return
	}
	encode(w, s.log, http.StatusOK, a)
}

// handleDecide records an approve or deny decision; the decider is the
// token's name (and whether it is the operator token), never a field of
// the body. On approve the call runs here, and the answer is the approval
// with the call's result in it; the operator's approval of a call they
// asked for themselves is their confirmation, recorded with
// dispatch.ReasonOperatorOwn.
func (s *server) handleDecide(w http.ResponseWriter, r *http.Request) {
	var req decisionRequest
	if err := decode(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeError(w, s.log, err)
		return
	}
	var approve bool
	switch req.Decision {
	case "approve":
		approve = true
	case "deny":
		if len(req.Params) > 0 && string(req.Params) != "null" {
			writeError(w, s.log, errorf(http.StatusBadRequest, "request body: params are edits for an approval; a deny takes none"))
			return
		}
	default:
		writeError(w, s.log, errorf(http.StatusBadRequest, "request body: decision %q: want approve or deny", req.Decision))
		return
	}
	if s.opts.Approvals == nil {
		writeError(w, s.log, errNoApprover)
		return
	}
	decider := deciderFrom(r.Context())
	a, res, err := s.opts.Approvals.DecideOn(r.Context(), r.PathValue("id"), decider, surfaceFrom(r.Context()), approve, req.Params)
	if err != nil {
		if errors.Is(err, dispatch.ErrSelfApproval) && decider.Name == Anonymous {
			err = fmt.Errorf("%w; without a token a caller is %s: approve with the daemon's operator token (STATE/operator.token; `toolagent approvals approve ID` on the daemon's host sends it) or a token with the approve role", err, Anonymous)
		}
		writeError(w, s.log, approvalError(err))
		return
	}
	if res != nil && len(a.Result) == 0 {
		// A run that answered busy or disabled leaves the approval
		// approved and unused, with no stored result: show it anyway.
		if b, err := json.Marshal(res); err == nil {
			a.Result = b
		}
	}
	if res != nil {
		s.metrics.observe(r.Context(), *res, time.Duration(res.DurationMS)*time.Millisecond)
	}
	encode(w, s.log, http.StatusOK, a)
}

// approvalError is the one mapping from an approval error to an HTTP
// status. The message is the error's: it names the approval and what was
// found, never a secret (params are not in it).
func approvalError(err error) error {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, dispatch.ErrNoApprovals):
		status = http.StatusNotImplemented
	case errors.Is(err, dispatch.ErrStoreUnavailable):
		// "approval store unavailable: " and the cause, which names no
		// secret; nothing was changed, so the same request may be sent
		// again.
		return &apiError{status: http.StatusServiceUnavailable, msg: err.Error(), retryAfter: storeRetryAfter}
	case errors.Is(err, dispatch.ErrApprovalNotFound):
		return errorf(http.StatusNotFound, "no approval with this id (approvals of other callers are not shown to a call token)")
	case errors.Is(err, dispatch.ErrSelfApproval), errors.Is(err, dispatch.ErrNoIdentity):
		status = http.StatusForbidden
	case errors.Is(err, dispatch.ErrApprovalExpired):
		status = http.StatusGone
	case errors.Is(err, dispatch.ErrInvalidEdit):
		status = http.StatusUnprocessableEntity
	case errors.Is(err, dispatch.ErrAlreadyDecided), errors.Is(err, dispatch.ErrApprovalUsed),
		errors.Is(err, dispatch.ErrNotApproved), errors.Is(err, dispatch.ErrBindingMismatch):
		status = http.StatusConflict
	default:
		return err // logged, answered 500
	}
	return &apiError{status: status, msg: err.Error()}
}
