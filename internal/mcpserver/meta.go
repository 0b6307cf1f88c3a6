package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/hldp"
)

// The meta-tools' names. A catalog tool with one of these names is not
// listed (the meta-tool wins, and a warning is logged); call_tool still
// reaches it.
const (
	FindToolName = "find_tool"
	CallToolName = "call_tool"
)

func isMetaName(name string) bool { return name == FindToolName || name == CallToolName }

// The meta-tools are described as hldp tools, so their arguments are
// checked by the same CheckParams as a catalog tool's and their problems
// read the same way. Each Server builds its own (no package state).
func newFindTool() *hldp.Tool {
	one, most := 1.0, float64(catalog.MaxCandidates)
	return &hldp.Tool{
		Name:    FindToolName,
		Display: "Find a tool by intent",
		Intent: "Search the tool catalog by describing what you want to do, in English or Chinese; " +
			"returns 1 to 3 candidate tools with their input schemas, or found=false when no registered tool fits.",
		Params: []hldp.Param{
			{Name: "intent", Type: hldp.TypeString, Required: true,
				Description: "what you want to do, in words, e.g. \"run a shell command\" or \"查看最近的提交记录\""},
			{Name: "limit", Type: hldp.TypeInteger, Ext: &hldp.ParamExt{Min: &one, Max: &most, Default: int64(catalog.MaxCandidates)},
				Description: "how many candidates at most (1-3)"},
		},
	}
}

func newCallTool() *hldp.Tool {
	return &hldp.Tool{
		Name:    CallToolName,
		Display: "Call a catalog tool by name",
		Intent: "Call any tool of the catalog by its exact name (find it with find_tool); " +
			"params must match that tool's input schema. Returns the tool's raw result.",
		Params: []hldp.Param{
			{Name: "tool", Type: hldp.TypeString, Required: true, Description: "the exact tool name, as find_tool returned it"},
			{Name: "params", Type: hldp.TypeObject, Description: "the tool's params, an object matching its input schema (default {})"},
		},
	}
}

func (s *Server) addMetaTools() {
	s.find, s.call = newFindTool(), newCallTool()
	s.mcp.AddTool(metaTool(s.find), s.findTool)
	// call_tool in every mode: a client that found a tool with find_tool
	// can call it by name even before its tools/list caught up.
	s.mcp.AddTool(metaTool(s.call), s.callTool)
}

func metaTool(t *hldp.Tool) *mcp.Tool {
	// find_tool only reads the catalog; call_tool can call any tool, so it
	// gets no promise (MCP's defaults: may destroy, open world).
	a := &mcp.ToolAnnotations{Title: t.Display, ReadOnlyHint: t.Name == FindToolName}
	if a.ReadOnlyHint {
		closed := false
		a.OpenWorldHint = &closed
	}
	return &mcp.Tool{Name: t.Name, Title: t.Display, Description: t.Intent, InputSchema: t.InputSchema(), Annotations: a}
}

// findTool answers an intent query from the current snapshot: the
// catalog's MatchResponse as structured content, a short text for people
// and models. found=false is an answer, not an error.
func (s *Server) findTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, problems := checkArgs(s.find, req.Params.Arguments)
	if problems != nil {
		return problems, nil
	}
	intent, _ := args["intent"].(string)
	limit, _ := args["limit"].(int64)
	snap := s.store.Load()
	if snap == nil {
		return errorText("the catalog is not loaded yet; retry in a moment"), nil
	}
	var resp catalog.MatchResponse
	if s.opts.Match != nil {
		resp = s.opts.Match(ctx, snap, intent, int(limit), s.opts.Surface)
	} else {
		resp = snap.MatchIntentOn(intent, int(limit), s.opts.Surface)
	}
	if s.opts.OnMatch != nil {
		s.opts.OnMatch(s.opts.Caller(ctx, req), intent, resp)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: s.matchText(resp)}},
		StructuredContent: resp,
	}, nil
}

func (s *Server) matchText(resp catalog.MatchResponse) string {
	var b strings.Builder
	if !resp.Found {
		fmt.Fprintf(&b, "found: false — no registered tool fits %q.\n%s", resp.Query, resp.Suggestion)
		return b.String()
	}
	fmt.Fprintf(&b, "found: %d candidate(s) for %q (revision %s):\n", len(resp.Candidates), resp.Query, resp.Revision)
	for i, c := range resp.Candidates {
		fmt.Fprintf(&b, "%d. %s (%s), score %.2f: %s\n   input schema: %s\n", i+1, c.Name, c.Display, c.Score, c.Intent, c.ParamsSchema)
	}
	if s.opts.MetaOnly {
		b.WriteString("Call one with call_tool {\"tool\": <name>, \"params\": {...}}.")
	} else {
		b.WriteString("Call one by its name (it is in tools/list).")
	}
	return b.String()
}

// callTool runs any catalog tool by name through the dispatcher, exactly
// as a direct tools/call of that tool does.
func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if _, problems := checkArgs(s.call, req.Params.Arguments); problems != nil {
		return problems, nil
	}
	// Pass the params through as the client sent them; the dispatcher
	// validates them against the called tool's schema.
	var in struct {
		Tool   string          `json:"tool"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil { // checked above; cannot fail
		return errorText("call_tool: " + err.Error()), nil
	}
	out, stop := startProgress(ctx, req)
	r := s.inv.Invoke(ctx, dispatch.Call{Tool: in.Tool, Params: in.Params, Caller: s.opts.Caller(ctx, req), Door: dispatch.DoorMCP, Surface: s.opts.Surface, Output: out, CollectHeld: true})
	stop()
	return s.callResult(r), nil
}

// findDescription is find_tool's description, generated from the tools a
// client may use (its surface): how many there are, their most common
// tags and two or three of their intents, so a model knows what it can
// search for.
func findDescription(entries []catalog.Entry) string {
	var b strings.Builder
	b.WriteString(newFindTool().Intent)
	if len(entries) == 0 {
		b.WriteString("\nNo tool is available to this client right now: every search answers found=false.")
		return b.String()
	}
	fmt.Fprintf(&b, "\nIt searches the %d tool(s) this client may use.", len(entries))
	count := map[string]int{}
	for _, e := range entries {
		if e.Tool != nil {
			for _, t := range e.Tool.Tags() {
				count[t]++
			}
		}
	}
	tags := slices.Collect(maps.Keys(count))
	slices.SortFunc(tags, func(a, b string) int {
		if count[a] != count[b] {
			return count[b] - count[a]
		}
		return strings.Compare(a, b)
	})
	if len(tags) > 0 {
		b.WriteString(" Tags:")
		for i, t := range tags[:min(len(tags), 8)] {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " %s (%d)", t, count[t])
		}
		b.WriteByte('.')
	}
	b.WriteString(" For example:")
	n := 0
	for _, e := range entries {
		if e.Tool == nil || e.Tool.Intent == "" || n == 3 {
			continue
		}
		intent := e.Tool.Intent
		if r := []rune(intent); len(r) > 80 {
			intent = string(r[:79]) + "…"
		}
		fmt.Fprintf(&b, " %q (%s);", intent, e.Name)
		n++
	}
	return strings.TrimSuffix(b.String(), ";") + "."
}

// checkArgs validates a meta-tool's arguments; on failure it returns the
// isError result listing every problem.
func checkArgs(t *hldp.Tool, raw json.RawMessage) (map[string]any, *mcp.CallToolResult) {
	m := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil || m == nil {
			return nil, errorText(fmt.Sprintf("%s: the arguments must be a JSON object: %v", t.Name, err))
		}
	}
	out, err := t.CheckParams(m)
	if err != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "%s did not run: the arguments do not match its input schema.\nproblems:\n", t.Name)
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(&b, "- %s\n", line)
		}
		return nil, errorText(strings.TrimSuffix(b.String(), "\n"))
	}
	return out, nil
}

func errorText(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
