package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/dispatch"
)

// The Tasks extension of MCP 2026-07-28 (io.modelcontextprotocol/tasks):
// server-directed, so only a held call becomes a task, and only for a
// client whose request declares the extension in its per-request
// capabilities. The task is the approval, as in tasks.go; what differs
// is the shape: the CreateTaskResult is the task itself with resultType
// "task", tasks/get inlines the result (completed also for a tool error;
// a request denied, expired or void completes with a tool error saying
// so, since no JSON-RPC error occurred), a pending request is
// input_required with one URL-mode elicitation pointing at the console's
// page of the approval (a form elicitation naming the CLI command where
// there is no console), tasks/update is acknowledged (the approver
// decides, not the client's answer), and tasks/cancel withdraws a
// pending request and is acknowledged with an empty result.

// TasksExtension is the extension's identifier, for capabilities.extensions
// (server/discover).
const TasksExtension = "io.modelcontextprotocol/tasks"

// tasksExtension is the extension as the server declares it
// (capabilities.go). Its methods are answered below the SDK, which has no
// tasks (taskwire.go), so they are not listed for extensionGate: the
// handlers refuse them with missingCapability to a client that did not
// declare the extension.
var tasksExtension = Extension{ID: TasksExtension}

// declaresTasks reports whether a request's _meta declares the tasks
// extension in its per-request client capabilities.
func declaresTasks(meta map[string]any) bool {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[TasksExtension]
	return ok
}

// paramsMeta is the _meta of raw params.
func paramsMeta(params json.RawMessage) map[string]any {
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	json.Unmarshal(params, &p)
	return p.Meta
}

// extTask is a DetailedTask of the extension (and, with ResultType
// "task", a CreateTaskResult).
type extTask struct {
	mcp.ResultBase
	ResultType    string         `json:"resultType"`
	TaskID        string         `json:"taskId"`
	Status        string         `json:"status"`
	StatusMessage string         `json:"statusMessage,omitempty"`
	CreatedAt     string         `json:"createdAt"`
	LastUpdatedAt string         `json:"lastUpdatedAt"`
	TTLMs         *int64         `json:"ttlMs"`
	PollIntervalM int64          `json:"pollIntervalMs,omitempty"`
	InputRequests map[string]any `json:"inputRequests,omitempty"`
	Result        any            `json:"result,omitempty"`
}

// extTaskOf is the extension's view of an approval's task.
func (s *Server) extTaskOf(a dispatch.Approval) *extTask {
	t := s.approvalTask(a)
	out := &extTask{ResultType: "complete", TaskID: t.TaskID, Status: t.Status, StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt, LastUpdatedAt: t.LastUpdatedAt, TTLMs: t.TTL, PollIntervalM: t.PollInterval}
	switch {
	case t.Status == taskInputRequired:
		out.InputRequests = map[string]any{"approval-" + a.ID: s.approvalElicitation(a, t.StatusMessage)}
	case t.Status == taskCancelled || t.Status == taskWorking:
	default: // completed or failed in 2025-11-25's words: a result either way
		out.Status, out.Result = taskCompleted, s.approvalResult(a, t)
	}
	return out
}

// approvalElicitation is the input a pending request waits for: an
// approver's decision, made on the console's page (URL mode), or with
// the CLI where there is none (a form with nothing to fill, naming it).
func (s *Server) approvalElicitation(a dispatch.Approval, msg string) map[string]any {
	if s.opts.ApprovalURL != nil {
		return map[string]any{"method": "elicitation/create", "params": map[string]any{
			"mode": "url", "elicitationId": a.ID, "url": s.opts.ApprovalURL(a.ID), "message": msg}}
	}
	return map[string]any{"method": "elicitation/create", "params": map[string]any{
		"mode": "form", "message": msg, "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}}}}
}

// heldAsTask is the CreateTaskResult of a held call for a client that
// declared the extension, or nil when r is not a held call or the
// client did not declare it.
func (s *Server) heldAsTask(meta map[string]any, r dispatch.Result) mcp.Result {
	if r.Status != dispatch.ApprovalRequired || r.ApprovalID == "" || !declaresTasks(meta) {
		return nil
	}
	src, ok := s.inv.(approvalSource)
	if !ok {
		return nil
	}
	a, err := src.ApprovalOn(r.ApprovalID, s.opts.Surface)
	if err != nil {
		return nil // the call's own answer says what it can
	}
	t := s.extTaskOf(a)
	t.ResultType, t.Result = "task", nil
	return t
}

// serveExtTask answers tasks/get, tasks/update and tasks/cancel of the
// extension.
func (s *Server) serveExtTask(ctx context.Context, method, taskID, caller string) (any, error) {
	ack := map[string]any{"resultType": "complete"}
	_, a, err := s.taskState(taskID, caller)
	if err != nil {
		return nil, err
	}
	if a == nil { // a task of 2025-11-25's kind (not held): not the extension's
		return nil, invalidParams("Failed to retrieve task: task %q not found", taskID)
	}
	switch method {
	case "tasks/get":
		return s.extTaskOf(*a), nil
	case "tasks/update":
		return ack, nil
	default: // tasks/cancel: cooperative; a pending request is withdrawn
		if a.Status == "pending" {
			src := s.inv.(approvalSource)
			if _, _, err := src.DecideOn(ctx, taskID, dispatch.Decider{Name: caller}, s.opts.Surface, false, nil); err != nil {
				s.log.Info("tasks/cancel: the request was decided meanwhile", "task", taskID, "err", err)
			}
		}
		return ack, nil
	}
}

// heldAsInput is, for a client of 2026-07-28 that takes multi-round-trip
// results and URL-mode elicitations (and did not declare tasks), a held
// call's InputRequiredResult: one URL elicitation of the console's page
// of the approval, the approval id as the request state. The client
// retries the same call once the user is done there; the retry is the
// same call (Call.CollectHeld), so it gets the result once the approver
// approved and it ran, or the same elicitation while the request waits.
// A user who declines or cancels the elicitation gets the held call's
// plain answer. Nil: answer as usual (no console to point at over stdio,
// an older client, a call not held).
func (s *Server) heldAsInput(req *mcp.CallToolRequest, r dispatch.Result) *mcp.CallToolResult {
	if r.Status != dispatch.ApprovalRequired || r.ApprovalID == "" || s.opts.ApprovalURL == nil || !takesURLInput(req) {
		return nil
	}
	key := "approval-" + r.ApprovalID
	if resp, ok := req.Params.InputResponses[key].(*mcp.ElicitResult); ok && resp.Action != "accept" {
		return nil
	}
	msg := fmt.Sprintf("The call of %s needs an approval (%s): an approver decides it on this page. Once it is approved it runs once on the server, and retrying the call returns its result. %s", r.Tool, r.ApprovalID, r.Suggestion)
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{key: &mcp.ElicitParams{Mode: "url", Message: msg, URL: s.opts.ApprovalURL(r.ApprovalID), ElicitationID: r.ApprovalID}},
		RequestState:  r.ApprovalID,
	}
}

// takesURLInput reports whether the client of req speaks 2026-07-28
// (multi-round-trip results) and takes URL-mode elicitations, by its
// session's or its request's capabilities.
func takesURLInput(req *mcp.CallToolRequest) bool {
	if req.Session == nil {
		return false
	}
	ip := req.Session.InitializeParams()
	if ip == nil || ip.ProtocolVersion < "2026-07-28" {
		return false
	}
	if ip.Capabilities != nil && ip.Capabilities.Elicitation != nil && ip.Capabilities.Elicitation.URL != nil {
		return true
	}
	caps, _ := req.Params.Meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	el, _ := caps["elicitation"].(map[string]any)
	_, ok := el["url"]
	return ok
}
