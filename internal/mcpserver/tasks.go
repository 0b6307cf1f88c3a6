package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/telemetry"
)

// Tasks (MCP 2025-11-25, experimental): a client that declares nothing
// special may augment a tools/call of a catalog tool with params.task
// (every catalog tool says execution.taskSupport "optional" in
// tools/list, and the server declares capabilities.tasks). The answer is
// a CreateTaskResult at once:
//
//   - a call the policy holds becomes the task of its approval: the task
//     id is the approval id, and its state is the approval's, read from
//     the approval store (files or PostgreSQL) on every tasks/get, so it
//     is as durable as the approval (written before the reply), survives
//     a restart and is seen by every replica. pending is input_required
//     (the status message names the approval and where to decide it),
//     approved and running are working, executed is completed (failed
//     when the tool's result is an error, as 2025-11-25 says), denied is
//     failed with who denied it, or cancelled when its caller withdrew it
//     (tasks/cancel denies the request as its caller), expired, void and
//     interrupted are failed with the store's note;
//   - a call that is not held has its result at once: its task is
//     completed (or failed) when created, kept in this process's memory
//     for its TTL (memTaskTTL at most) for the client's tasks/result.
//
// tasks/result blocks until the task is terminal and returns the
// CallToolResult the call would have returned; tasks/cancel withdraws a
// pending request (an approved call runs on the server and cannot be
// withdrawn). tasks/list is not served (not declared): tasks are bound
// to the caller, and a daemon without tokens cannot tell callers apart.
//
// The SDK (go-sdk v1.8.0) knows none of this: it drops params.task and
// refuses the tasks/ methods. So these requests are served below it: by
// Transport (stdio) and HTTPHandler (streamable HTTP), which hand them to
// serveTask before the SDK sees them; the capability and the tools'
// execution field are added to the SDK's answers by the middleware.

// Task statuses (the wire words).
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// taskPollInterval is the polling interval tasks suggest.
const taskPollInterval = 2 * time.Second

// memTaskTTL bounds how long the task of a call that was not held keeps
// its result; memTaskMax how many such tasks a process keeps.
const (
	memTaskTTL = time.Hour
	memTaskMax = 4096
)

// relatedTaskKey is the _meta key that ties a message to its task.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// TasksCapability is the server capability of 2025-11-25's tasks, as
// initialize declares it: task-augmented tools/call and tasks/cancel.
func TasksCapability() map[string]any {
	return map[string]any{
		"cancel":   map[string]any{},
		"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
	}
}

// wireTask is a Task of 2025-11-25.
type wireTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

func (t wireTask) terminal() bool {
	return t.Status == taskCompleted || t.Status == taskFailed || t.Status == taskCancelled
}

// approvalSource is what tasks need of the dispatcher beyond Invoke;
// *dispatch.Dispatcher has it.
type approvalSource interface {
	ApprovalOn(id string, sf catalog.Surface) (dispatch.Approval, error)
	ApprovalWait(ctx context.Context, id string, sf catalog.Surface, wait time.Duration) (dispatch.Approval, error)
	DecideOn(ctx context.Context, id string, by dispatch.Decider, sf catalog.Surface, approve bool, edited json.RawMessage) (dispatch.Approval, *dispatch.Result, error)
}

// The dispatcher is the approval source the daemon gives; a change to its
// methods must not turn tasks off silently.
var _ approvalSource = (*dispatch.Dispatcher)(nil)

// memTask is the task of a call that was not held: done at creation.
type memTask struct {
	task    wireTask
	caller  string
	result  *mcp.CallToolResult
	expires time.Time
}

// memTasks keeps memTasks, oldest first, at most memTaskMax.
type memTasks struct {
	mu    sync.Mutex
	m     map[string]*memTask
	order []string
}

func (ms *memTasks) put(id string, t *memTask, now time.Time) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.m == nil {
		ms.m = map[string]*memTask{}
	}
	for len(ms.order) > 0 {
		old, ok := ms.m[ms.order[0]]
		if ok && len(ms.order) < memTaskMax && now.Before(old.expires) {
			break
		}
		delete(ms.m, ms.order[0])
		ms.order = ms.order[1:]
	}
	ms.m[id] = t
	ms.order = append(ms.order, id)
}

func (ms *memTasks) get(id string, now time.Time) (*memTask, bool) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	t, ok := ms.m[id]
	if !ok || !now.Before(t.expires) {
		return nil, false
	}
	return t, true
}

// taskRequest is a request this package serves below the SDK, with who
// sent it.
type taskRequest struct {
	method string
	params json.RawMessage
	extra  *mcp.RequestExtra // the HTTP request's token and header; nil over stdio
}

// servesBelowSDK reports whether a JSON-RPC call is one of the task
// requests (see the comment at the top of this file).
func servesBelowSDK(method string, params json.RawMessage) bool {
	switch method {
	case "tasks/get", "tasks/result", "tasks/cancel", "tasks/list", "tasks/update":
		return true
	case "tools/call":
		var p struct {
			Task json.RawMessage `json:"task"`
		}
		return json.Unmarshal(params, &p) == nil && len(p.Task) > 0 && string(p.Task) != "null"
	}
	return false
}

// invalidParams is the JSON-RPC error of a bad or unknown task request.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// serveTask answers one task request: the result to send, or a
// *jsonrpc.Error.
func (s *Server) serveTask(ctx context.Context, r taskRequest) (any, error) {
	caller := s.opts.Caller(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}, Extra: r.extra})
	if r.method == "tools/call" {
		return s.createTask(ctx, r, caller)
	}
	if r.method == "tasks/list" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/list is not served: tasks are bound to their caller (capabilities.tasks.list is not declared)"}
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	if err := json.Unmarshal(r.params, &p); err != nil || p.TaskID == "" {
		return nil, invalidParams("%s: params.taskId is required: a string, the taskId of a CreateTaskResult", r.method)
	}
	if meta := paramsMeta(r.params); meta[mcp.MetaKeyProtocolVersion] != nil { // the 2026-07-28 extension (tasksext.go)
		if r.method == "tasks/result" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/result is not part of the tasks extension: tasks/get carries the result"}
		}
		if !declaresTasks(meta) {
			return nil, missingCapability(r.method, TasksExtension)
		}
		return s.serveExtTask(ctx, r.method, p.TaskID, caller)
	}
	switch r.method {
	case "tasks/update":
		return nil, missingCapability(r.method, TasksExtension)
	case "tasks/get":
		t, _, err := s.taskState(p.TaskID, caller)
		return t, err
	case "tasks/result":
		return s.taskResult(ctx, p.TaskID, caller)
	default: // tasks/cancel
		return s.cancelTask(ctx, p.TaskID, caller)
	}
}

// createTask runs a task-augmented tools/call and returns its
// CreateTaskResult.
func (s *Server) createTask(ctx context.Context, r taskRequest, caller string) (any, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Task      struct {
			TTL *int64 `json:"ttl"`
		} `json:"task"`
	}
	if err := json.Unmarshal(r.params, &p); err != nil {
		return nil, invalidParams("tools/call: %v", err)
	}
	if isMetaName(p.Name) || !s.lists(p.Name) {
		// Only the listed catalog tools say taskSupport "optional".
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("tool %q does not support task-augmented calls (its execution.taskSupport is not optional): call it without params.task", p.Name)}
	}
	if telemetry.Enabled() {
		var span trace.Span
		ctx, span = startCallSpan(ctx, p.Name, taskMeta(r.params))
		defer span.End()
	}
	res := s.inv.Invoke(ctx, dispatch.Call{Tool: p.Name, Params: p.Arguments, Caller: caller, Door: dispatch.DoorMCP, Surface: s.opts.Surface})
	now := time.Now()
	if res.Status == dispatch.ApprovalRequired && res.ApprovalID != "" {
		// The approval is in the store already (Hold wrote it): the task
		// is it, and tasks/get resolves from now on.
		t, _, err := s.taskState(res.ApprovalID, caller)
		if err != nil {
			return nil, err
		}
		return createTaskResult(t, fmt.Sprintf("The call waits for an approval (%s). %s", res.ApprovalID, t.StatusMessage)), nil
	}
	ttl := memTaskTTL
	if p.Task.TTL != nil && *p.Task.TTL > 0 {
		ttl = min(ttl, time.Duration(*p.Task.TTL)*time.Millisecond)
	}
	ms := ttl.Milliseconds()
	ct := s.callResult(res)
	t := wireTask{TaskID: newTaskID(), Status: taskCompleted, CreatedAt: stamp(now), LastUpdatedAt: stamp(now), TTL: &ms, PollInterval: taskPollInterval.Milliseconds()}
	if ct.IsError {
		t.Status, t.StatusMessage = taskFailed, fmt.Sprintf("%s: %s", res.Status, headline(res.Status))
	}
	s.tasks.put(t.TaskID, &memTask{task: t, caller: caller, result: ct, expires: now.Add(ttl)}, now)
	return createTaskResult(t, "The call finished; its result is ready."), nil
}

// createTaskResult is a CreateTaskResult of 2025-11-25 with the message
// a host may give the model at once.
func createTaskResult(t wireTask, immediate string) map[string]any {
	return map[string]any{
		"task":  t,
		"_meta": map[string]any{"io.modelcontextprotocol/model-immediate-response": immediate},
	}
}

func newTaskID() string {
	var b [16]byte
	rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// taskState is the task taskID as caller may see it, and the approval
// behind it when there is one. A task of another caller, or of a tool
// off the server's surface, is not found.
func (s *Server) taskState(taskID, caller string) (wireTask, *dispatch.Approval, error) {
	notFound := invalidParams("Failed to retrieve task: task %q not found (unknown, expired, or not yours)", taskID)
	if mt, ok := s.tasks.get(taskID, time.Now()); ok {
		if mt.caller != caller {
			return wireTask{}, nil, notFound
		}
		return mt.task, nil, nil
	}
	src, ok := s.inv.(approvalSource)
	if !ok {
		return wireTask{}, nil, notFound
	}
	a, err := src.ApprovalOn(taskID, s.opts.Surface)
	if errors.Is(err, dispatch.ErrApprovalNotFound) || errors.Is(err, dispatch.ErrNoApprovals) || err == nil && a.Caller != caller {
		return wireTask{}, nil, notFound
	}
	if err != nil {
		return wireTask{}, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the approval store cannot say where task %s stands: %v", taskID, err)}
	}
	return s.approvalTask(a), &a, nil
}

// approvalTask maps an approval to its task.
func (s *Server) approvalTask(a dispatch.Approval) wireTask {
	last := a.CreatedAt
	for _, t := range []time.Time{a.DecidedAt, a.ClaimedAt, a.CompletedAt, a.InterruptedAt} {
		if t.After(last) {
			last = t
		}
	}
	ttl := a.ExpiresAt.Sub(a.CreatedAt).Milliseconds()
	t := wireTask{TaskID: a.ID, CreatedAt: stamp(a.CreatedAt), LastUpdatedAt: stamp(last), TTL: &ttl, PollInterval: taskPollInterval.Milliseconds()}
	switch a.Status {
	case "pending":
		t.Status = taskInputRequired
		t.StatusMessage = s.waitingMessage(a)
	case "approved", "running":
		t.Status = taskWorking
		t.StatusMessage = fmt.Sprintf("approved by %s at %s; the call runs on the server", a.Decider, stamp(a.DecidedAt))
	case "executed":
		var r dispatch.Result
		if json.Unmarshal(a.Result, &r) == nil && isError(r.Status) {
			t.Status, t.StatusMessage = taskFailed, fmt.Sprintf("approved by %s; the call ran: %s — %s", a.Decider, r.Status, headline(r.Status))
		} else {
			t.Status, t.StatusMessage = taskCompleted, fmt.Sprintf("approved by %s; the call ran at %s", a.Decider, stamp(a.ClaimedAt))
		}
	case "denied":
		if a.Decider == a.Caller {
			t.Status, t.StatusMessage = taskCancelled, fmt.Sprintf("withdrawn by its caller %s at %s", a.Caller, stamp(a.DecidedAt))
		} else {
			t.Status, t.StatusMessage = taskFailed, fmt.Sprintf("denied by %s at %s; the call did not run", a.Decider, stamp(a.DecidedAt))
		}
	default: // expired, invalid, interrupted
		t.Status, t.StatusMessage = taskFailed, fmt.Sprintf("%s: %s", a.Status, a.Note)
	}
	return t
}

// waitingMessage says what a pending request waits for and where it is
// decided.
func (s *Server) waitingMessage(a dispatch.Approval) string {
	var b strings.Builder
	fmt.Fprintf(&b, "waiting for an approver to decide approval %s (tool %s, asked by %s; %s)", a.ID, a.Tool, a.Caller, a.Why)
	switch {
	case s.opts.ApprovalURL != nil:
		fmt.Fprintf(&b, "; decide it in the web console: %s", s.opts.ApprovalURL(a.ID))
	case s.opts.DecideHint != nil:
		fmt.Fprintf(&b, "; %s", s.opts.DecideHint(a.ID))
	default:
		fmt.Fprintf(&b, "; an operator on the server's host decides it with `toolagent approvals approve %s` (or deny)", a.ID)
	}
	fmt.Fprintf(&b, "; the request expires at %s", stamp(a.ExpiresAt))
	return b.String()
}

// taskResultWait bounds one wait of tasks/result between reads of the
// approval; the request itself waits until its context ends.
const taskResultWait = time.Minute

// taskResult waits until the task is terminal and returns the
// CallToolResult its call would have returned, tied to the task.
func (s *Server) taskResult(ctx context.Context, taskID, caller string) (any, error) {
	if mt, ok := s.tasks.get(taskID, time.Now()); ok {
		if mt.caller != caller {
			return nil, invalidParams("Failed to retrieve task: task %q not found (unknown, expired, or not yours)", taskID)
		}
		return relate(mt.result, taskID), nil
	}
	for {
		t, a, err := s.taskState(taskID, caller)
		if err != nil {
			return nil, err
		}
		if t.terminal() && a != nil {
			return relate(s.approvalResult(*a, t), taskID), nil
		}
		src := s.inv.(approvalSource) // taskState found the approval through it
		if _, err := src.ApprovalWait(ctx, taskID, s.opts.Surface, taskResultWait); err != nil && ctx.Err() == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("waiting for task %s: %v", taskID, err)}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// approvalResult is the CallToolResult of a terminal approval's task:
// the stored result of the call that ran, or a tool error saying why it
// did not run.
func (s *Server) approvalResult(a dispatch.Approval, t wireTask) *mcp.CallToolResult {
	if a.Status == "executed" {
		var r dispatch.Result
		if err := json.Unmarshal(a.Result, &r); err == nil {
			return s.callResult(r)
		}
	}
	// Not run: withdrawn by its caller (cancelled), or without the
	// approval it needed (denied by an approver, expired, void). No
	// ApprovalID: the text of a held call would say to call again.
	r := dispatch.Result{Tool: a.Tool, Revision: a.Revision, ExitCode: -1, Status: dispatch.ApprovalRequired,
		Error: fmt.Sprintf("the call did not run: approval %s is %s: %s", a.ID, a.Status, t.StatusMessage)}
	if t.Status == taskCancelled {
		r.Status = dispatch.Cancelled
	}
	return s.callResult(r)
}

// relate ties a result to its task (tasks/result must say which).
func relate(r *mcp.CallToolResult, taskID string) *mcp.CallToolResult {
	c := *r
	meta := map[string]any{}
	for k, v := range r.Meta {
		meta[k] = v
	}
	meta[relatedTaskKey] = map[string]any{"taskId": taskID}
	c.Meta = meta
	return &c
}

// cancelTask withdraws a pending request: its caller denies it, which
// the store records with who and when. A terminal task cannot be
// cancelled (the spec's -32602); neither can an approved call, which
// runs on the server.
func (s *Server) cancelTask(ctx context.Context, taskID, caller string) (any, error) {
	t, a, err := s.taskState(taskID, caller)
	if err != nil {
		return nil, err
	}
	if t.terminal() {
		return nil, invalidParams("Cannot cancel task %s: already in terminal status '%s'", taskID, t.Status)
	}
	if a == nil || t.Status != taskInputRequired {
		return nil, invalidParams("Cannot cancel task %s: the call was approved and runs on the server; its result follows", taskID)
	}
	src := s.inv.(approvalSource)
	if _, _, err := src.DecideOn(ctx, taskID, dispatch.Decider{Name: caller}, s.opts.Surface, false, nil); err != nil {
		// Decided meanwhile: say where it stands now.
		if now, _, gerr := s.taskState(taskID, caller); gerr == nil && now.terminal() {
			return nil, invalidParams("Cannot cancel task %s: already in terminal status '%s'", taskID, now.Status)
		}
		return nil, invalidParams("Cannot cancel task %s: %v", taskID, err)
	}
	now, _, err := s.taskState(taskID, caller)
	return now, err
}
