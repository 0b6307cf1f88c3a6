// Package mcpserver is the MCP view of the live catalog: it serves the
// enabled tools of a catalog.Store to any MCP client through the official Go
// SDK (github.com/modelcontextprotocol/go-sdk), and runs every tools/call
// through the same dispatch path as the HTTP API's /v1/call, so params
// validation, limits, approval and the audit line are identical.
//
// What it owns:
//
//   - tools/list: one MCP tool per callable catalog entry, its inputSchema
//     the tool's params_schema as JSON Schema (hldp.(*Tool).InputSchema) and
//     its description the intent, display name and why, served a page at
//     a time by the server's middleware, not registered with the SDK
//     (list.go);
//   - the mapping of a dispatch.Result to an MCP CallToolResult (isError,
//     labelled stderr/error text, the whole Result as structured content),
//     which exists here and nowhere else;
//   - the meta-tools find_tool (intent search, 1-3 candidates) and
//     call_tool (call any catalog tool by name; the only way to call with
//     Options.MetaOnly), for
//     catalogs too large to list;
//   - liveness: Run watches Store.Changed and diffs what clients see;
//     a change replaces find_tool in the SDK, so connected clients get
//     notifications/tools/list_changed after a reload;
//   - held calls finishing inside MCP: every call retries into its held
//     call's result (dispatch.Call.CollectHeld); a held call is a task
//     backed by its approval for clients of 2025-11-25's tasks
//     (tasks.go) and of 2026-07-28's tasks extension (tasksext.go), and
//     an InputRequiredResult with a URL elicitation of the console's page
//     for 2026-07-28 clients without tasks. go-sdk v1.8.0 has no tasks:
//     it drops params.task and refuses the tasks/ methods, so those
//     requests are answered below it (taskwire.go: Transport for stdio,
//     the HTTP handler's wrapper), and the capability and the tools'
//     execution field are added to its answers by the middleware.
//
// Protocol revisions: every version the SDK (go-sdk v1.8.0) serves, the
// sessionless 2026-07-28 (server/discover, the per-request _meta fields,
// the Mcp-Method/Mcp-Name headers, subscriptions/listen, its error codes
// and HTTP statuses) and the initialize-handshake ones from 2025-11-25 back
// to 2024-11-05, the SDK does itself. Where it lags, this package makes up
// for it, and says so here:
//
//   - its stateful streamable HTTP handler refuses 2026-07-28 (-32022)
//     though its server/discover lists it, so HTTPHandler serves both eras
//     on one endpoint: requests of the sessionless revision go to a
//     stateless SDK handler over the same server, sessions to the stateful
//     one (http.go);
//   - what the server declares (tools, prompts, resources, extensions) is
//     made in one place for initialize and server/discover alike, and an
//     extension's methods are refused with -32021 to clients that did not
//     declare it (capabilities.go).
//
// It does not own transports, listeners or authentication: the daemon
// (internal/daemon) runs MCP() over stdio, and mounts HTTPHandler behind
// the API's auth.
//
// Concurrency: a Server is safe for concurrent use. Its one background
// loop, Run, is started and stopped by the caller (it returns when its
// context is done); without Run the tool list is the one of the snapshot at
// New (or at the last Sync).
//
// Imports: catalog, dispatch, hldp, runs (docs/architecture.md). Imported
// only by the daemon (internal/daemon) and its benchmark command.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/hldp"
)

// Invoker runs one call; *dispatch.Dispatcher satisfies it. It is the one
// seam between MCP and the invoke path: every tools/call ends here.
type Invoker interface {
	Invoke(ctx context.Context, c dispatch.Call) dispatch.Result
}

var _ Invoker = (*dispatch.Dispatcher)(nil) // interface guard

// The server's identity when Options leave it empty.
const (
	DefaultName    = "toolagent"
	DefaultVersion = "dev"
)

// Options configure a Server. The zero value serves every enabled tool
// plus find_tool.
type Options struct {
	// Logger receives the server's own lines (tool list changes) and the
	// SDK's; nil discards them.
	Logger *slog.Logger
	// Match, when set, answers find_tool queries in place of the
	// snapshot's lexical matcher (the daemon's embeddings backend).
	Match catalog.MatchFunc
	// OnMatch, when set, sees every find_tool query's caller, request and
	// answer (learning from use: internal/feedback).
	OnMatch func(caller, request string, resp catalog.MatchResponse)
	// MetaOnly exposes only find_tool and call_tool (plus the Pinned
	// tools), for catalogs with hundreds of tools: a client searches by
	// intent, then calls by name through call_tool.
	MetaOnly bool
	// Pinned names catalog tools that are listed directly even when
	// MetaOnly is set (agents tend to ignore a search tool for the few
	// tools they need every time). Names not enabled in the catalog are
	// ignored. Without MetaOnly every enabled tool is listed anyway.
	Pinned []string
	// Caller says who makes a call, for the dispatch audit line. It is
	// given the handler's context and the request: in the streamable HTTP
	// transport req.Extra.TokenInfo holds what RequireToken (the SDK's auth
	// middleware) put in the request context, and req.Extra.Header the
	// request's headers. The handler's context is the session's, not the
	// HTTP request's, so per-request identity must come from req.Extra.
	// Nil: DefaultCaller.
	Caller func(ctx context.Context, req *mcp.CallToolRequest) string
	// Name and Version identify the server to clients (defaults
	// DefaultName, DefaultVersion).
	Name, Version string
	// ApprovalURL, when set, is the web page where an approver decides
	// the approval id (the console's); held calls' results name it. Nil:
	// no page is named (stdio, where approvals are decided with the CLI).
	ApprovalURL func(id string) string
	// DecideHint, when set and ApprovalURL is not, says how the approval
	// id is decided where there is no web page (stdio: the CLI on the
	// host, with its state directory).
	DecideHint func(id string) string
	// Surface is what this server's clients may see and call (a token's
	// scope, a profile): tools off it are not listed, find_tool never
	// offers them, and calling one answers not_found. Nil: every tool.
	// Surfaces builds one Server per surface.
	Surface catalog.Surface
	// Extensions are the MCP extensions the server serves, declared in
	// its capabilities (capabilities.go). New panics on one without an ID
	// or on two of the same ID.
	Extensions []Extension
}

// Server serves one catalog.Store over MCP. Build it with New.
type Server struct {
	store  *catalog.Store
	inv    Invoker
	opts   Options
	log    *slog.Logger
	mcp    *mcp.Server
	pinned map[string]bool
	find   *hldp.Tool // the meta-tools' definitions (meta.go)
	call   *hldp.Tool

	// syncMu serialises Sync, which alone writes published and
	// findDesc; mu guards published and changed. A Sync holds mu only to
	// swap in what it made: at 100,000 tools making the list takes a
	// second, and a tools/list meanwhile pages through the list before.
	syncMu sync.Mutex
	mu     sync.Mutex
	// published is what clients see of the catalog tools, in name order
	// (list.go pages through it, lookups search it): a sorted slice takes
	// a third of a map's room (100,000 tools: 2.4 MB, not 9.5). Sync
	// replaces it whole and never changes it in place.
	published []listed
	// serving is set once a Sync listed a snapshot (not the empty store
	// of a start): see Serving; ready is closed then (see Ready).
	serving  atomic.Bool
	ready    chan struct{}
	findDesc string // find_tool's description as last published
	// syncHook, when set (tests), is called by Sync once it has made the
	// new list, before it swaps it in.
	syncHook func()
	// changed is closed (and replaced) when Sync changes the list: the
	// wake-up of the stateless list_changed streams (stateless.go).
	changed chan struct{}
	// tasks keeps the tasks of task-augmented calls that were not held
	// (tasks.go); those of held calls are their approvals.
	tasks memTasks
}

// ListChanged returns a channel closed at the next change of the listed
// tools.
func (s *Server) ListChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// New returns a Server over store whose tool calls go to inv, with the
// tools of the store's current snapshot already listed. It panics on a
// nil store or invoker (a wiring bug).
func New(store *catalog.Store, inv Invoker, opts Options) *Server {
	if store == nil || inv == nil {
		panic("mcpserver: nil store or invoker")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Caller == nil {
		opts.Caller = DefaultCaller
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.Version == "" {
		opts.Version = DefaultVersion
	}
	opts.Pinned = slices.Clone(opts.Pinned)
	// The tasks extension is always served (held calls become tasks);
	// append copies the caller's slice.
	opts.Extensions = append([]Extension{tasksExtension}, opts.Extensions...)
	seen := map[string]bool{}
	for _, e := range opts.Extensions {
		if e.ID == "" || seen[e.ID] {
			panic(fmt.Sprintf("mcpserver: extension ID %q empty or given twice", e.ID))
		}
		seen[e.ID] = true
	}
	s := &Server{
		store:  store,
		inv:    inv,
		opts:   opts,
		log:    opts.Logger,
		pinned: make(map[string]bool, len(opts.Pinned)),
		ready:  make(chan struct{}),
	}
	for _, n := range opts.Pinned {
		s.pinned[n] = true
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Title: "toolagent tool catalog", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions(opts.MetaOnly),
		Logger:       opts.Logger,
		// Tools with listChanged, always: clients subscribe to list changes
		// at connect time, and the catalog may be empty then.
		Capabilities: capabilities(opts.Extensions),
		SetCacheable: cacheable,
	})
	s.addMetaTools()
	s.mcp.AddReceivingMiddleware(traceCalls, s.middleware, extensionGate(opts.Extensions))
	s.Sync()
	return s
}

// Serving reports whether the server lists a snapshot's tools: false
// until the first Sync after the store got one (a client listing before
// would see none, and learn of them only by list_changed).
func (s *Server) Serving() bool { return s.serving.Load() }

// Ready is closed once Serving is true.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Listed is how many catalog tools the server lists (meta-tools aside).
func (s *Server) Listed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.published)
}

// MCP returns the SDK server, for mcp.Server.Run over a transport (stdio)
// or mcp.NewStreamableHTTPHandler. Its tool list must only be changed
// through this package.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run keeps the tool list in step with the store until ctx is done, then
// returns nil. Each Store.Swap wakes it once; swaps that arrive while it
// syncs are coalesced into the next sync, which reads the latest snapshot.
// The SDK debounces the resulting notifications/tools/list_changed (one per
// burst of changes, 10 ms after the last). Call Run once per Server.
func (s *Server) Run(ctx context.Context) error {
	for {
		ch := s.store.Changed() // before Sync's Load: never miss a swap
		s.Sync()
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}

// Sync makes the listed tools those of the store's current snapshot now:
// tools that appeared are added, tools whose client-visible definition
// (description, title, input schema) changed are replaced, and tools that
// are no longer callable are removed. A new revision that changes nothing a
// client sees changes nothing, so it sends no notification.
func (s *Server) Sync() {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	snap := s.store.Load()
	var surface []catalog.Entry
	var want []listed
	if snap != nil {
		surface = s.opts.Surface.Filter(snap.Enabled())
		want = make([]listed, 0, len(surface))
		for _, e := range surface {
			if s.opts.MetaOnly && !s.pinned[e.Name] {
				continue
			}
			if isMetaName(e.Name) {
				s.log.Warn("catalog tool hidden by meta-tool of the same name", "tool", e.Name, "file", e.File)
				continue
			}
			want = append(want, listed{tool: e.Tool, signed: e.Signed})
		}
	}
	// A snapshot's entries come in name order; sorting costs nothing then.
	slices.SortFunc(want, func(a, b listed) int { return strings.Compare(a.name(), b.name()) })
	want = slices.CompactFunc(want, func(a, b listed) bool { return a.name() == b.name() })
	// Walk the two sorted lists together: what is only in the old one was
	// removed, what is only in want was added, what is in both may have
	// changed.
	var added, updated, removed []string
	old := s.published // only Sync writes it
	for i := range want {
		w := &want[i]
		for len(old) > 0 && old[0].name() < w.name() {
			removed, old = append(removed, old[0].name()), old[1:]
		}
		var prev *listed
		if len(old) > 0 && old[0].name() == w.name() {
			prev, old = &old[0], old[1:]
		}
		switch {
		case prev == nil:
			added = append(added, w.name())
		case !prev.same(*w):
			updated = append(updated, w.name())
		}
	}
	for _, l := range old {
		removed = append(removed, l.name())
	}
	if s.syncHook != nil {
		s.syncHook()
	}
	changed := len(added)+len(updated)+len(removed) > 0
	s.mu.Lock()
	s.published = want
	if snap != nil && !s.serving.Load() {
		s.serving.Store(true)
		close(s.ready)
	}
	if changed && s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.mu.Unlock()
	if d := findDescription(surface); d != s.findDesc || changed {
		// Replaced, as the catalog's tools are not the SDK's (list.go):
		// the SDK sends its sessions list_changed.
		s.findDesc = d
		t := metaTool(s.find)
		t.Description = d
		s.mcp.AddTool(t, s.findTool)
	}
	if changed {
		rev := ""
		if snap != nil {
			rev = snap.Rev()
		}
		s.log.Info("mcp tool list changed", "revision", rev,
			"added", logNames(added), "updated", logNames(updated), "removed", logNames(removed), "listed", len(want))
	}
}

// callCatalog calls the catalog tool name through the dispatcher. The
// tool is looked up by the dispatcher in the snapshot current at call
// time, so a call never runs a definition older than the catalog's. A
// held call of a client with the tasks extension answers a task, one of
// a client that takes multi-round-trip results an elicitation of the
// approval's page (tasksext.go).
func (s *Server) callCatalog(ctx context.Context, name string, req *mcp.CallToolRequest) (mcp.Result, error) {
	out, stop := startProgress(ctx, req)
	r := s.inv.Invoke(ctx, dispatch.Call{Tool: name, Params: req.Params.Arguments, Caller: s.opts.Caller(ctx, req), Door: dispatch.DoorMCP, Surface: s.opts.Surface, Output: out, CollectHeld: true})
	stop()
	if t := s.heldAsTask(req.Params.Meta, r); t != nil {
		return t, nil
	}
	if ir := s.heldAsInput(req, r); ir != nil {
		return ir, nil
	}
	return s.callResult(r), nil
}

// DefaultCaller names the caller: the token's name when the HTTP auth
// middleware recorded one (auth.TokenInfo.UserID), else dispatch.Anonymous
// (stdio, or a daemon without tokens) -- the same name the caller has at
// the API's door, so approvals see one identity; the door is recorded
// apart (dispatch.DoorMCP). The client's self-declared name is not an
// identity and is not used.
func DefaultCaller(_ context.Context, req *mcp.CallToolRequest) string {
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		return req.Extra.TokenInfo.UserID
	}
	return dispatch.Anonymous
}

// sameSigned reports whether two provenances say the same.
func sameSigned(a, b *catalog.Signature) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// SignedMeta is the key of a tool's _meta that names, with
// trusted_signers set, the commit that last changed its definition and
// the allowed key that signed it (catalog.Signature).
const SignedMeta = "toolagent/signed"

// mcpTool is what clients see of t in tools/list; signed, when not nil,
// goes in its _meta under SignedMeta.
func mcpTool(t *hldp.Tool, signed *catalog.Signature) *mcp.Tool {
	var meta mcp.Meta
	if signed != nil {
		meta = mcp.Meta{SignedMeta: signed}
	}
	return &mcp.Tool{
		Meta:        meta,
		Name:        t.Name,
		Title:       t.Display,
		Description: description(t),
		// Always {"type":"object",...} (hldp guarantees it, STYLE.md 7
		// "MCP schema guard"): MCP requires it.
		InputSchema: t.BuildInputSchema(), // not kept by the tool: made per page
		Annotations: annotations(t),
	}
}

// annotations derives the MCP hints of t from what the runtime lets its
// calls do, not from what the author says: a shell tool whose sandbox
// grants no write path cannot change anything, even when an approver
// confirms a call (read-only); one that may write can overwrite
// (destructive); a grant of the network, or an executor that is a remote
// server, reaches an open world. Tools of other executors get only the
// title: their effects are the server's.
func annotations(t *hldp.Tool) *mcp.ToolAnnotations {
	a := &mcp.ToolAnnotations{Title: t.Display}
	yes, no := true, false
	switch t.Executor {
	case hldp.Shell:
		// The network is a write too: a request can change the far side.
		sb := t.Sandbox()
		writes := sb.None || len(sb.Write) > 0 || sb.Network || t.Method == "write"
		a.ReadOnlyHint = !writes
		if writes {
			a.DestructiveHint = &yes
		}
		if sb.None || sb.Network {
			a.OpenWorldHint = &yes
		} else {
			a.OpenWorldHint = &no
		}
	case hldp.HlpdAPI, hldp.GitForgejo:
		a.OpenWorldHint = &yes
	}
	return a
}

// description is the tool's intent, then its display name and why it
// exists, and whether calls need an approval, so a model can choose
// between tools from the list alone.
func description(t *hldp.Tool) string {
	var b strings.Builder
	b.WriteString(t.Intent)
	if t.Display != "" && t.Display != t.Intent {
		b.WriteString("\n\nDisplay name: ")
		b.WriteString(t.Display)
	}
	if t.Why != "" {
		b.WriteString("\nWhy it exists: ")
		b.WriteString(t.Why)
	}
	if t.Constraints.RequireConfirm {
		b.WriteString("\nNeeds approval: every call must be approved before it runs (require_confirm).")
	}
	return b.String()
}

// listed is what Sync last published of a tool: the definition it was
// made from. What a client sees of it is made for each page that lists
// it (list.go), not kept (100,000 tools: 66 MB of JSON).
type listed struct {
	tool   *hldp.Tool
	signed *catalog.Signature // the entry's provenance (trusted_signers), or nil
}

// same reports whether a client sees l and m alike: the same parsed
// definition (a Tool is immutable) with the same provenance, or
// definitions whose listings are the same JSON. The JSON is made only
// for a tool whose definition was parsed anew: a Sync that adds a whole
// catalog (the first) or carries its definitions over (a reload that
// changed few files) marshals none, and keeps no fingerprints.
func (l listed) same(m listed) bool {
	if l.tool == m.tool && sameSigned(l.signed, m.signed) {
		return true
	}
	a, errA := json.Marshal(mcpTool(l.tool, l.signed))
	b, errB := json.Marshal(mcpTool(m.tool, m.signed))
	return errA == nil && errB == nil && bytes.Equal(a, b) // cannot fail: every field marshals
}

// name is the tool's name, which is its catalog entry's (a definition
// must be named after its folder).
func (l listed) name() string { return l.tool.Name }

// find returns the index of the tool named name in published, or of the
// first after it, and whether it is there.
func find(published []listed, name string) (int, bool) {
	return slices.BinarySearchFunc(published, name, func(l listed, name string) int { return strings.Compare(l.name(), name) })
}

// logMaxNames is how many tool names a log line of Sync lists; the
// first load of a big catalog adds every tool.
const logMaxNames = 20

// logNames is names for a log line: all of them, or the first
// logMaxNames and how many more.
func logNames(names []string) []string {
	if len(names) <= logMaxNames {
		return names
	}
	return append(slices.Clip(names[:logMaxNames]), fmt.Sprintf("(and %d more)", len(names)-logMaxNames))
}

func instructions(metaOnly bool) string {
	if metaOnly {
		return "toolagent serves tools registered in a git repository. The catalog is large, so only meta-tools are listed: " +
			"call find_tool with what you want to do (English or Chinese) to get 1-3 candidate tools with their input schemas, " +
			"then call_tool with the tool's name and params. Results are raw: output, the real stderr and exit code."
	}
	return "toolagent serves tools registered in a git repository; the list changes when the repository does. " +
		"If no listed tool fits, find_tool searches the catalog by intent (English or Chinese). " +
		"Results are raw: output, the real stderr and exit code."
}
