package mcpserver

import (
	"context"
	"encoding/base64"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The catalog's tools are not registered with the SDK one by one: each
// registration kept the SDK's tool (its description, schema and hints)
// for as long as it was listed, about 600 bytes a tool, and cost the
// SDK's checks (it marshals and decodes every schema twice): 5.6 s and
// some 60 MB at 100,000 tools. Only the meta-tools are the SDK's. The
// server's receiving middleware answers tools/list from what Sync last
// published, a page at a time, each tool made for the page it is on,
// and serves tools/call of a listed catalog tool itself. A change of the
// list replaces find_tool in the SDK, which is what makes the SDK send
// notifications/tools/list_changed to the sessions.

// listPageSize is how many tools one tools/list page holds, as the SDK's
// own pages.
const listPageSize = mcp.DefaultPageSize

// errInvalidCursor answers a tools/list whose cursor is not one a page
// gave (the spec's Invalid params).
var errInvalidCursor = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: pass the nextCursor of the page before, or none"}

// middleware serves tools/list and the tools/call of catalog tools; any
// other method, and the meta-tools' calls, go on to the SDK.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "initialize" {
			res, err := next(ctx, method, req)
			if ir, ok := res.(*mcp.InitializeResult); ok && err == nil {
				return initializeResult{ir}, nil // tasks.go: capabilities.tasks
			}
			return res, err
		}
		switch r := req.(type) {
		case *mcp.ListToolsRequest:
			return s.listTools(ctx, method, r, next)
		case *mcp.CallToolRequest:
			if r.Params != nil && !isMetaName(r.Params.Name) && s.lists(r.Params.Name) {
				return s.callCatalog(ctx, r.Params.Name, r)
			}
		}
		return next(ctx, method, req)
	}
}

// lists reports whether name is a catalog tool this server lists.
func (s *Server) lists(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := find(s.published, name)
	return ok
}

// listTools is one page of the meta-tools and the listed catalog tools
// together, in name order, after the page the cursor names. The SDK's
// answer for the meta-tools (asked without the cursor, which is ours)
// is the page's frame, so the result is the SDK's in all but its tools
// and its next cursor.
func (s *Server) listTools(ctx context.Context, method string, req *mcp.ListToolsRequest, next mcp.MethodHandler) (mcp.Result, error) {
	after := ""
	if req.Params != nil && req.Params.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(req.Params.Cursor)
		if err != nil || len(b) == 0 {
			return nil, errInvalidCursor
		}
		after = string(b)
	}
	metaReq := *req
	if req.Params != nil {
		p := *req.Params
		p.Cursor = ""
		metaReq.Params = &p
	}
	res, err := next(ctx, method, &metaReq)
	if err != nil {
		return res, err
	}
	out, ok := res.(*mcp.ListToolsResult)
	if !ok || out.NextCursor != "" {
		return res, err // not the one page of meta-tools this package registered
	}
	metas := slices.DeleteFunc(out.Tools, func(t *mcp.Tool) bool { return t.Name <= after })

	// A Sync swaps in a new slice and never changes one it published:
	// the page is made from this one without the lock.
	s.mu.Lock()
	published := s.published
	s.mu.Unlock()
	i, found := find(published, after)
	if found {
		i++
	}
	rest := published[i:]
	tools := make([]*mcp.Tool, 0, min(listPageSize, len(metas)+len(rest)))
	for len(tools) < listPageSize && len(metas)+len(rest) > 0 {
		if len(rest) == 0 || (len(metas) > 0 && metas[0].Name < rest[0].name()) {
			tools, metas = append(tools, metas[0]), metas[1:]
			continue
		}
		tools, rest = append(tools, mcpTool(rest[0].tool, rest[0].signed)), rest[1:]
	}
	out.Tools, out.NextCursor = tools, ""
	if len(metas)+len(rest) > 0 {
		out.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(tools[len(tools)-1].Name))
	}
	// The catalog's tools may be called as tasks (tasks.go); the
	// meta-tools may not.
	page := listToolsResult{ListToolsResult: out, Tools: make([]taskTool, len(tools))}
	for i, t := range tools {
		page.Tools[i] = taskTool{Tool: t}
		if !isMetaName(t.Name) {
			page.Tools[i].Execution = &toolExecution{TaskSupport: "optional"}
		}
	}
	return page, nil
}
