package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the server declares it serves is made here and nowhere else:
// capabilities answers initialize (2025-11-25 and before) and
// server/discover (2026-07-28) alike, since the SDK answers both from
// ServerOptions.Capabilities. A feature or an extension added to the
// server is added to capabilities too, or clients are not told of it
// (the conformance suite checks that what discover declares is what the
// server honours).

// Extension is an MCP extension the server serves (2026-07-28's
// "extensions" capability): declared under capabilities.extensions, and
// its methods answered only for clients that declare it too. The methods'
// handlers are the extension's to register on the SDK server
// (mcp.AddReceivingCustomMethod on Server.MCP()); a method of no
// registered handler is "method not found" (HTTP 404, -32601) whatever
// this says.
type Extension struct {
	// ID names the extension, e.g. "io.modelcontextprotocol/tasks".
	ID string
	// Settings is the extension's settings object as declared (nil: {}).
	Settings map[string]any
	// Methods are the JSON-RPC methods the extension adds (e.g.
	// "tasks/get"). A request of one from a client whose capabilities do
	// not declare the extension is refused with
	// MissingRequiredClientCapabilityError (-32021, HTTP 400), naming the
	// extension in data.requiredCapabilities.
	Methods []string
}

// capabilities is what the server declares: tools, whose list changes
// with the catalog (list_changed on the session for the handshake era, on
// subscriptions/listen for the sessionless one); prompts and resources,
// of which it has none to offer (both lists are empty, never changing):
// the SDK answers prompts/list and resources/list whatever is declared, and
// a server that answers them must declare them; no logging (the server
// sends no log messages) and no completions (it has no prompt or resource
// template arguments to complete); and the extensions of exts.
func capabilities(exts []Extension) *mcp.ServerCapabilities {
	c := &mcp.ServerCapabilities{
		Tools:     &mcp.ToolCapabilities{ListChanged: true},
		Prompts:   &mcp.PromptCapabilities{},
		Resources: &mcp.ResourceCapabilities{},
	}
	for _, e := range exts {
		c.AddExtension(e.ID, e.Settings)
	}
	return c
}

// cacheable sets the cache fields of the results that carry them
// (server/discover and the list methods): private, since what a client
// sees depends on its token (its scope) and its profile, so no shared
// cache may hand one client's list to another; stale at once (ttlMs 0),
// since the catalog changes when its repository does, which clients
// learn from list_changed.
func cacheable(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
	c.TTLMs = 0
	c.CacheScope = "private"
}

// capabilityReader is what every *mcp.ServerRequest[P] has: the client's
// capabilities, from the request's _meta (2026-07-28) or the session's
// initialize (before).
type capabilityReader interface {
	ClientCapabilities() *mcp.ClientCapabilities
}

// extensionGate refuses a method of an extension the client did not
// declare, before its handler runs.
func extensionGate(exts []Extension) mcp.Middleware {
	owner := map[string]string{} // method -> extension ID
	for _, e := range exts {
		for _, m := range e.Methods {
			owner[m] = e.ID
		}
	}
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		if len(owner) == 0 {
			return next
		}
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			id, ok := owner[method]
			if !ok {
				return next(ctx, method, req)
			}
			var declared *mcp.ClientCapabilities
			if r, ok := req.(capabilityReader); ok {
				declared = r.ClientCapabilities()
			}
			if declared == nil || declared.Extensions[id] == nil {
				return nil, missingCapability(method, id)
			}
			return next(ctx, method, req)
		}
	}
}

// missingCapability is MissingRequiredClientCapabilityError for a method
// of the extension id.
func missingCapability(method, id string) error {
	need := &mcp.ClientCapabilities{}
	need.AddExtension(id, nil)
	data, err := json.Marshal(mcp.MissingRequiredClientCapabilityData{RequiredCapabilities: need})
	if err != nil { // cannot happen: plain maps and strings
		data = nil
	}
	return &jsonrpc.Error{
		Code:    mcp.CodeMissingRequiredClientCapabilities,
		Message: fmt.Sprintf("%s needs the %s extension: declare it in the client's capabilities.extensions", method, id),
		Data:    data,
	}
}
