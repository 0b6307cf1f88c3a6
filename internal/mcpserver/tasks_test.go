package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
)

// TestApprovalTask: every approval status maps to the task status of
// 2025-11-25 and of the 2026-07-28 extension, with a message that says
// why; a withdrawal by the caller is cancelled, a denial by another is
// not; a tool error that ran is failed in 2025-11-25 and completed in
// the extension; a pending request's elicitation points at the page.
func TestApprovalTask(t *testing.T) {
	s := New(new(catalog.Store), nopInvoker{}, Options{ApprovalURL: func(id string) string { return "http://console/ui/approvals#" + id }})
	at := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	ran := func(st dispatch.ResultStatus) json.RawMessage {
		b, _ := json.Marshal(dispatch.Result{Tool: "t", Status: st, Output: "out\n"})
		return b
	}
	base := dispatch.Approval{ID: "0123456789abcdef0123456789abcdef", Tool: "t", Caller: "alice", Why: "rule: reason", CreatedAt: at, ExpiresAt: at.Add(15 * time.Minute)}
	for _, tc := range []struct {
		name            string
		change          func(*dispatch.Approval)
		legacy, ext     string
		message         string
		extHasResult    bool
		extInputRequest bool
	}{
		{"pending", func(a *dispatch.Approval) { a.Status = "pending" }, taskInputRequired, taskInputRequired, "http://console/ui/approvals#" + base.ID, false, true},
		{"approved", func(a *dispatch.Approval) { a.Status, a.Decider, a.DecidedAt = "approved", "bob", at }, taskWorking, taskWorking, "approved by bob", false, false},
		{"running", func(a *dispatch.Approval) { a.Status, a.Decider = "running", "bob" }, taskWorking, taskWorking, "runs on the server", false, false},
		{"executed", func(a *dispatch.Approval) { a.Status, a.Decider, a.Result = "executed", "bob", ran(dispatch.Success) }, taskCompleted, taskCompleted, "the call ran", true, false},
		{"executed with an error", func(a *dispatch.Approval) { a.Status, a.Decider, a.Result = "executed", "bob", ran(dispatch.Error) }, taskFailed, taskCompleted, "error", true, false},
		{"withdrawn", func(a *dispatch.Approval) { a.Status, a.Decider = "denied", "alice" }, taskCancelled, taskCancelled, "withdrawn by its caller alice", false, false},
		{"denied", func(a *dispatch.Approval) { a.Status, a.Decider = "denied", "bob" }, taskFailed, taskCompleted, "denied by bob", true, false},
		{"expired", func(a *dispatch.Approval) { a.Status, a.Note = "expired", "no decision before it expired" }, taskFailed, taskCompleted, "no decision before it expired", true, false},
		{"interrupted", func(a *dispatch.Approval) { a.Status, a.Note = "interrupted", "the process stopped" }, taskFailed, taskCompleted, "the process stopped", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := base
			tc.change(&a)
			lt := s.approvalTask(a)
			if lt.Status != tc.legacy || !strings.Contains(lt.StatusMessage, tc.message) || lt.TaskID != a.ID || lt.TTL == nil {
				t.Errorf("2025-11-25 task = %+v; want %s saying %q", lt, tc.legacy, tc.message)
			}
			et := s.extTaskOf(a)
			if et.Status != tc.ext || et.ResultType != "complete" || (et.Result != nil) != tc.extHasResult || (et.InputRequests != nil) != tc.extInputRequest {
				t.Errorf("extension task = %+v; want %s, result %v, input requests %v", et, tc.ext, tc.extHasResult, tc.extInputRequest)
			}
			if tc.extInputRequest {
				b, _ := json.Marshal(et.InputRequests)
				if !strings.Contains(string(b), `"mode":"url"`) || !strings.Contains(string(b), "http://console/ui/approvals#"+a.ID) {
					t.Errorf("input requests %s; want a URL elicitation of the console page", b)
				}
			}
		})
	}
}

// nopInvoker runs nothing: approvalTask reads only the approval given.
type nopInvoker struct{}

func (nopInvoker) Invoke(context.Context, dispatch.Call) dispatch.Result { return dispatch.Result{} }
