package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file carries the task requests (tasks.go) past the SDK, which
// refuses methods it does not know and drops params.task: Transport for
// stdio, taskHTTP for streamable HTTP, and the middleware's additions to
// initialize (capabilities.tasks) and tools/list (execution.taskSupport).

// Transport wraps an MCP transport (stdio) so that the task requests
// are answered by this server and never reach the SDK; everything else
// passes through unchanged.
func (s *Server) Transport(t mcp.Transport) mcp.Transport { return &taskTransport{s: s, inner: t} }

type taskTransport struct {
	s     *Server
	inner mcp.Transport
}

func (t *taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &taskConn{Connection: c, s: t.s, ctx: cctx, cancel: cancel}, nil
}

// taskConn answers the task requests read from its connection itself,
// each in its own goroutine (tasks/result may wait for a decision), and
// writes the answers on the connection (its writes are safe for
// concurrent use, as the SDK needs).
type taskConn struct {
	mcp.Connection
	s      *Server
	ctx    context.Context // ends at Close: waits of tasks/result with it
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() || !servesBelowSDK(req.Method, req.Params) {
			return msg, nil
		}
		c.wg.Go(func() {
			res, err := c.s.serveTask(c.ctx, taskRequest{method: req.Method, params: req.Params})
			c.Connection.Write(c.ctx, response(req.ID, res, err))
		})
	}
}

func (c *taskConn) Close() error {
	c.cancel()
	err := c.Connection.Close()
	c.wg.Wait()
	return err
}

// response is the JSON-RPC response of a task request.
func response(id jsonrpc.ID, res any, err error) *jsonrpc.Response {
	if err != nil {
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			we = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		return &jsonrpc.Response{ID: id, Error: we}
	}
	b, merr := json.Marshal(res)
	if merr != nil {
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: merr.Error()}}
	}
	return &jsonrpc.Response{ID: id, Result: b}
}

// taskHTTP answers the task requests POSTed to h itself, as JSON (a
// single request, never a batch, per 2025-11-25); every other request
// goes to h with its body as read. The caller's token is the one the
// auth middleware in front put in the request's context, so tasks are
// bound to the same identity as calls. Tasks do not depend on the
// session: a client whose session ended (a daemon restart) still reaches
// its tasks.
//
// maxBody is the SDK's limit of a request body (0: its default), kept
// here too: the body is read before the SDK sees it. Only a body that
// names a task method or a "task" field is decoded here.
func (s *Server) taskHTTP(h http.Handler, maxBody int64) http.Handler {
	if maxBody <= 0 {
		maxBody = mcp.DefaultMaxRequestBodyBytes
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		r.Body.Close()
		if err != nil {
			http.Error(w, "reading the request body: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(`"tasks/`)) && !bytes.Contains(body, []byte(`"task"`)) {
			h.ServeHTTP(w, r)
			return
		}
		msg, err := jsonrpc.DecodeMessage(body)
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok || !req.IsCall() || !servesBelowSDK(req.Method, req.Params) {
			h.ServeHTTP(w, r)
			return
		}
		extra := &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header}
		res, err := s.serveTask(r.Context(), taskRequest{method: req.Method, params: req.Params, extra: extra})
		resp := response(req.ID, res, err)
		out, err := jsonrpc.EncodeMessage(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if code := errorStatus(r, req.Params, resp); code != 0 {
			w.WriteHeader(code)
		}
		w.Write(out)
	})
}

// errorStatus is the HTTP status of a task request's error response under
// the sessionless revision, as the SDK gives its own (SEP-2575): 404 for
// -32601, 400 for -32602, -32022 and -32021; 0 (200) for any other
// response, and for every response of the handshake era.
func errorStatus(r *http.Request, params json.RawMessage, resp *jsonrpc.Response) int {
	if resp.Error == nil {
		return 0
	}
	v := r.Header.Get(headerProtocolVersion)
	if _, ok := paramsMeta(params)[mcp.MetaKeyProtocolVersion]; !ok && (v == "" || slices.Contains(handshakeVersions, v)) {
		return 0
	}
	var je *jsonrpc.Error
	if !errors.As(resp.Error, &je) {
		return 0
	}
	switch je.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}

// initializeResult is the SDK's InitializeResult with capabilities.tasks
// added (the SDK's ServerCapabilities has no field for it).
type initializeResult struct{ *mcp.InitializeResult }

func (r initializeResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.InitializeResult)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var caps map[string]any
	if err := json.Unmarshal(m["capabilities"], &caps); err != nil || caps == nil {
		caps = map[string]any{}
	}
	caps["tasks"] = TasksCapability()
	if m["capabilities"], err = json.Marshal(caps); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// taskTool is a tool of tools/list with its execution field (the SDK's
// Tool has none): the catalog's tools may be called as tasks.
type taskTool struct {
	*mcp.Tool
	Execution *toolExecution `json:"execution,omitempty"`
}

type toolExecution struct {
	TaskSupport string `json:"taskSupport"`
}

// listToolsResult is a tools/list page with the tools' execution fields.
type listToolsResult struct {
	*mcp.ListToolsResult
	Tools []taskTool `json:"tools"`
}
