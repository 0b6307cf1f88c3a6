package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/scan"
)

// waitFor bounds every wait on a notification; the tests never sleep.
const waitFor = 10 * time.Second

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a
// slog handler and the test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// treeFS copies the tool folders of testdata/<dir> for each dir into one
// fstest.MapFS, the tools tree scan.Build reads.
func treeFS(t *testing.T, dirs ...string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	for _, d := range dirs {
		root := filepath.Join("testdata", d)
		err := fs.WalkDir(os.DirFS(root), ".", func(p string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return err
			}
			b, err := os.ReadFile(filepath.Join(root, p))
			m[p] = &fstest.MapFile{Data: b}
			return err
		})
		if err != nil {
			t.Fatalf("read %s: %v", root, err)
		}
	}
	return m
}

// fixture is a real catalog, a real dispatcher with the real shell
// executor (real child processes), and the Server under test with its Run
// loop going.
type fixture struct {
	store *catalog.Store
	shell *shell.Executor
	srv   *Server
	audit *lockedBuffer
	log   *lockedBuffer
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	f := &fixture{store: new(catalog.Store), shell: shell.New(shell.Options{}), audit: new(lockedBuffer), log: new(lockedBuffer)}
	f.swap(t, "rev1", "tools")
	d := dispatch.New(f.store, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: f.shell},
		dispatch.Options{Audit: slog.New(slog.NewJSONHandler(f.audit, nil))})
	opts.Logger = slog.New(slog.NewTextHandler(f.log, nil))
	f.srv = New(f.store, d, opts)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil after cancel", err)
		}
	})
	return f
}

// swap publishes a snapshot at rev of the tools in the testdata dirs, the
// way a reload does: scan.Build (with the previous snapshot), then Swap.
func (f *fixture) swap(t *testing.T, rev string, dirs ...string) {
	t.Helper()
	f.swapVet(t, rev, nil, dirs...)
}

// swapVet is swap with scan's Vet (the daemon's signature check).
func (f *fixture) swapVet(t *testing.T, rev string, vet func(scan.Tree, []catalog.Entry), dirs ...string) {
	t.Helper()
	check := func(tl *hldp.Tool) (catalog.Status, string) {
		if tl.Executor != hldp.Shell {
			return catalog.Disabled, "executor " + string(tl.Executor) + " is not configured"
		}
		if err := f.shell.Check(tl); err != nil {
			return catalog.Disabled, err.Error()
		}
		return catalog.Enabled, ""
	}
	snap, rep, err := scan.Build(f.store.Load(), scan.FromFS(treeFS(t, dirs...), rev), nil, scan.Options{Check: check, Vet: vet})
	if err != nil {
		t.Fatalf("scan.Build(%s): %v", rev, err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("scan.Build(%s) problems: %v", rev, rep.Problems)
	}
	f.store.Swap(snap)
}

// client is one connected MCP client; listChanged gets a value per
// notifications/tools/list_changed (coalesced, capacity 1).
type client struct {
	cs          *mcp.ClientSession
	listChanged chan struct{}
}

func newClient(listChanged chan struct{}) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "mcpserver-test", Version: "v0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case listChanged <- struct{}{}:
			default:
			}
		},
	})
}

// transports are the two ways the daemon serves MCP: stdio (exercised
// through the SDK's in-memory transport: the same newline-delimited JSON
// over a pipe), once at the SDK's newest protocol (2026-07-28: list changes
// arrive on a subscriptions/listen stream) and once at 2025-06-18 (what
// most desktop clients speak: notifications on the session), and
// streamable HTTP on a real loopback listener, stateful and stateless,
// each once at 2026-07-28 (sessionless requests, which the SDK client
// chooses after server/discover) and once at 2025-11-25 (a session).
var transports = []struct {
	name    string
	connect func(t *testing.T, s *Server) *client
}{
	{"in-memory", func(t *testing.T, s *Server) *client { return connectInMemory(t, s, "") }},
	{"in-memory-2025-06-18", func(t *testing.T, s *Server) *client { return connectInMemory(t, s, "2025-06-18") }},
	{"streamable-http", func(t *testing.T, s *Server) *client { return connectHTTP(t, s, false, "2026-07-28") }},
	{"streamable-http-2025-11-25", func(t *testing.T, s *Server) *client { return connectHTTP(t, s, false, "2025-11-25") }},
	{"streamable-http-stateless", func(t *testing.T, s *Server) *client { return connectHTTP(t, s, true, "2026-07-28") }},
	{"streamable-http-stateless-2025-11-25", func(t *testing.T, s *Server) *client { return connectHTTP(t, s, true, "2025-11-25") }},
}

// connectHTTP connects a client at protocol version over streamable HTTP
// to s's handler (stateless or not) on a loopback listener, and checks
// that version was the one agreed.
func connectHTTP(t *testing.T, s *Server, stateless bool, version string) *client {
	t.Helper()
	ts := httptest.NewServer(s.HTTPHandler(&mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(ts.Close)
	c := &client{listChanged: make(chan struct{}, 1)}
	var err error
	c.cs, err = newClient(c.listChanged).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("client Connect: %v", err)
	}
	t.Cleanup(func() { c.cs.Close() }) // before ts.Close: cleanups run last-in first-out
	if got := c.cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated protocol %s, want %s", got, version)
	}
	return c
}

// connectInMemory connects a client at protocol version (empty: the SDK's
// newest) over an in-memory pipe.
func connectInMemory(t *testing.T, s *Server, version string) *client {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatalf("server Connect: %v", err)
	}
	t.Cleanup(func() { ss.Close() })
	c := &client{listChanged: make(chan struct{}, 1)}
	c.cs, err = newClient(c.listChanged).Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("client Connect: %v", err)
	}
	t.Cleanup(func() { c.cs.Close() })
	if got := c.cs.InitializeResult().ProtocolVersion; version != "" && got != version {
		t.Fatalf("negotiated protocol %s, want %s", got, version)
	}
	return c
}

func (c *client) toolNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for tl, err := range c.cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func (c *client) tool(t *testing.T, name string) *mcp.Tool {
	t.Helper()
	for tl, err := range c.cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("tools/list has no %s", name)
	return nil
}

// call runs tools/call and returns the result, its text blocks and, when
// the structured content is a dispatch result, that result.
func (c *client) call(t *testing.T, name string, args any) (*mcp.CallToolResult, []string, dispatch.Result) {
	t.Helper()
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: protocol error %v, want a result", name, err)
	}
	var texts []string
	for _, ct := range res.Content {
		tc, ok := ct.(*mcp.TextContent)
		if !ok {
			t.Fatalf("tools/call %s: content %T, want *mcp.TextContent", name, ct)
		}
		texts = append(texts, tc.Text)
	}
	var r dispatch.Result
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatalf("structured content: %v", err)
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("structured content %s: %v", b, err)
		}
	}
	return res, texts, r
}

func (c *client) waitListChanged(t *testing.T) {
	t.Helper()
	select {
	case <-c.listChanged:
	case <-time.After(waitFor):
		t.Fatalf("no notifications/tools/list_changed within %v", waitFor)
	}
}

func (c *client) drainListChanged() {
	select {
	case <-c.listChanged:
	default:
	}
}

func wantContains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s = %q, want it to contain %q", what, got, w)
		}
	}
}

// TestTransports drives the server with the SDK's own client over every
// transport: list, call success, call failure with the real stderr,
// invalid params, approval, intent search, and a reload that adds and then
// removes a tool, each announced by notifications/tools/list_changed.
func TestTransports(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			c := tr.connect(t, f.srv)
			t.Logf("negotiated protocol version %s", c.cs.InitializeResult().ProtocolVersion)

			t.Run("list", func(t *testing.T) {
				want := []string{"call_tool", "disk-free", "find_tool", "restart-service", "shell-exec"} // remote-exec is disabled
				if got := c.toolNames(t); !slices.Equal(got, want) {
					t.Fatalf("tools/list names = %v, want %v", got, want)
				}
				tl := c.tool(t, "shell-exec")
				wantContains(t, "shell-exec description", tl.Description,
					"在本机用 /bin/sh 执行一条shell命令", "Display name: Shell命令执行", "Why it exists: 铸渊需要在服务器上执行命令")
				if tl.Title != "Shell命令执行" {
					t.Errorf("shell-exec title = %q, want the display name", tl.Title)
				}
				b, _ := json.Marshal(tl.InputSchema)
				var sch struct {
					Type       string                     `json:"type"`
					Properties map[string]json.RawMessage `json:"properties"`
					Required   []string                   `json:"required"`
				}
				if err := json.Unmarshal(b, &sch); err != nil {
					t.Fatalf("inputSchema %s: %v", b, err)
				}
				if sch.Type != "object" || sch.Properties["cmd"] == nil || sch.Properties["cwd"] == nil || !slices.Equal(sch.Required, []string{"cmd"}) {
					t.Errorf("shell-exec inputSchema = %s, want the object schema of cmd (required) and cwd", b)
				}
				wantContains(t, "restart-service description", c.tool(t, "restart-service").Description, "Needs approval")
			})

			t.Run("call success", func(t *testing.T) {
				res, texts, r := c.call(t, "shell-exec", map[string]any{"cmd": "echo hello"})
				if res.IsError || r.Status != dispatch.Success || r.ExitCode != 0 || r.Revision != "rev1" {
					t.Errorf("echo hello: isError %v, status %q, exit %d, revision %q; want false, success, 0, rev1", res.IsError, r.Status, r.ExitCode, r.Revision)
				}
				if len(texts) != 1 || texts[0] != "hello\n" {
					t.Errorf("echo hello: text content = %q, want exactly [\"hello\\n\"]", texts)
				}
				// Same dispatch path as /v1/call: the dispatcher's audit line.
				wantContains(t, "audit log", f.audit.String(), `"caller":"anonymous","door":"mcp"`, `"tool":"shell-exec"`, `"status":"success"`)
			})

			t.Run("call no output", func(t *testing.T) {
				res, texts, r := c.call(t, "shell-exec", map[string]any{"cmd": "true"})
				if res.IsError || r.Status != dispatch.NoData {
					t.Errorf("true: isError %v, status %q; want false, no_data", res.IsError, r.Status)
				}
				wantContains(t, "true: text", strings.Join(texts, "\n"), "no_data", "wrote nothing")
			})

			t.Run("call failure shows real stderr", func(t *testing.T) {
				res, texts, r := c.call(t, "shell-exec", map[string]any{"cmd": "ls /nonexistent"})
				if !res.IsError || r.Status != dispatch.Error || r.ExitCode <= 0 {
					t.Fatalf("ls /nonexistent: isError %v, status %q, exit %d; want true, error, > 0", res.IsError, r.Status, r.ExitCode)
				}
				wantContains(t, "ls /nonexistent: stderr", r.Stderr, "/nonexistent")
				text := strings.Join(texts, "\n")
				wantContains(t, "ls /nonexistent: text", text,
					"shell-exec: error — the tool ran and failed", "stderr:\n"+strings.TrimSuffix(r.Stderr, "\n"), "exit_code: ", "error: exit status")
			})

			t.Run("invalid params", func(t *testing.T) {
				res, texts, r := c.call(t, "shell-exec", map[string]any{"cmnd": "echo hi", "cwd": 42})
				if !res.IsError || r.Status != dispatch.InvalidParams {
					t.Fatalf("bad params: isError %v, status %q; want true, invalid_params", res.IsError, r.Status)
				}
				text := strings.Join(texts, "\n")
				wantContains(t, "bad params: text", text, "problems:\n", "- param cmd: missing required parameter",
					"- param cmnd: unknown parameter", `did you mean "cmd"`, "- param cwd: want string, got 42")
				if len(r.Problems) != 3 {
					t.Errorf("bad params: problems = %q, want 3", r.Problems)
				}
			})

			t.Run("approval required", func(t *testing.T) {
				res, texts, r := c.call(t, "restart-service", map[string]any{"service": "web"})
				if !res.IsError || r.Status != dispatch.ApprovalRequired || r.ExitCode != -1 || r.Output != "" {
					t.Fatalf("restart-service: isError %v, status %q, exit %d, output %q; want true, approval_required, -1 (did not run), empty",
						res.IsError, r.Status, r.ExitCode, r.Output)
				}
				wantContains(t, "restart-service: text", strings.Join(texts, "\n"),
					"needs an approval before it runs", "how to get it approved: "+r.Suggestion, "require_confirm")
			})

			t.Run("find_tool", func(t *testing.T) {
				res, texts, _ := c.call(t, FindToolName, map[string]any{"intent": "run a shell command"})
				var m catalog.MatchResponse
				b, _ := json.Marshal(res.StructuredContent)
				if err := json.Unmarshal(b, &m); err != nil || res.IsError || !m.Found || m.Candidates[0].Name != "shell-exec" {
					t.Fatalf("find_tool(run a shell command) = %s (isError %v), want shell-exec first", b, res.IsError)
				}
				wantContains(t, "find_tool text", strings.Join(texts, "\n"), "1. shell-exec (Shell命令执行)", "Call one by its name")
			})

			t.Run("reload adds and removes a tool", func(t *testing.T) {
				c.drainListChanged()
				f.swap(t, "rev2", "tools", "reload")
				c.waitListChanged(t)
				if names := c.toolNames(t); !slices.Contains(names, "say-hi") {
					t.Fatalf("after a reload adding say-hi: tools/list = %v", names)
				}
				res, texts, r := c.call(t, "say-hi", map[string]any{"name": "alice"})
				if res.IsError || len(texts) == 0 || texts[0] != "hi alice\n" || r.Revision != "rev2" {
					t.Errorf("say-hi alice: isError %v, text %q, revision %q; want false, \"hi alice\\n\", rev2", res.IsError, texts, r.Revision)
				}

				c.drainListChanged()
				f.swap(t, "rev3", "tools")
				c.waitListChanged(t)
				if names := c.toolNames(t); slices.Contains(names, "say-hi") {
					t.Fatalf("after a reload removing say-hi: tools/list = %v", names)
				}
			})
		})
	}
}

// TestMetaOnly: with MetaOnly only find_tool, call_tool and the pinned
// tools are listed, and call_tool reaches any catalog tool through the
// same dispatch.
func TestMetaOnly(t *testing.T) {
	f := newFixture(t, Options{MetaOnly: true, Pinned: []string{"disk-free", "no-such-tool"}})
	c := transports[0].connect(t, f.srv)

	if got, want := c.toolNames(t), []string{CallToolName, "disk-free", FindToolName}; !slices.Equal(got, want) {
		t.Fatalf("tools/list = %v, want %v", got, want)
	}
	tests := []struct {
		name      string
		args      map[string]any
		isError   bool
		status    dispatch.ResultStatus
		wantTexts []string
	}{
		{"echo", map[string]any{"tool": "shell-exec", "params": map[string]any{"cmd": "echo hello"}}, false, dispatch.Success, []string{"hello\n"}},
		{"failure", map[string]any{"tool": "shell-exec", "params": map[string]any{"cmd": "ls /nonexistent"}}, true, dispatch.Error, []string{"stderr:", "/nonexistent"}},
		{"tool params invalid", map[string]any{"tool": "shell-exec", "params": map[string]any{}}, true, dispatch.InvalidParams, []string{"param cmd: missing required parameter"}},
		{"not found", map[string]any{"tool": "deploy-app"}, true, dispatch.NotFound, []string{"not_found", "has to be written", "tools/deploy-app/TOOL.hdlp"}},
		{"disabled", map[string]any{"tool": "remote-exec", "params": map[string]any{"cmd": "true"}}, true, dispatch.Disabled, []string{"gatekeeper is not configured"}},
		{"no tool", map[string]any{"params": map[string]any{}}, true, "", []string{"call_tool did not run", "- param tool: missing required parameter"}},
		{"params not an object", map[string]any{"tool": "shell-exec", "params": "echo hi"}, true, "", []string{"- param params: want object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, texts, r := c.call(t, CallToolName, tt.args)
			if res.IsError != tt.isError || r.Status != tt.status {
				t.Errorf("call_tool(%v): isError %v, status %q; want %v, %q (text %q)", tt.args, res.IsError, r.Status, tt.isError, tt.status, texts)
			}
			wantContains(t, "call_tool text", strings.Join(texts, "\n"), tt.wantTexts...)
		})
	}
	res, texts, _ := c.call(t, FindToolName, map[string]any{"intent": "执行命令"})
	if res.IsError {
		t.Fatalf("find_tool: %q", texts)
	}
	wantContains(t, "find_tool text (meta only)", strings.Join(texts, "\n"), "shell-exec", "call_tool")
}

// TestFindTool ranks the catalog for intents in English and Chinese and
// says found false for nonsense; its arguments are checked like a tool's.
func TestFindTool(t *testing.T) {
	f := newFixture(t, Options{})
	c := transports[0].connect(t, f.srv)
	tests := []struct {
		args      map[string]any
		isError   bool
		found     bool
		first     string
		most      int
		wantTexts []string
	}{
		{args: map[string]any{"intent": "run a shell command"}, found: true, first: "shell-exec", most: 3},
		{args: map[string]any{"intent": "执行命令"}, found: true, first: "shell-exec", most: 3},
		{args: map[string]any{"intent": "how much disk space is free"}, found: true, first: "disk-free", most: 3},
		{args: map[string]any{"intent": "run a shell command", "limit": 1}, found: true, first: "shell-exec", most: 1},
		{args: map[string]any{"intent": "xyzzy plugh frobnicate"}, found: false, wantTexts: []string{"found: false", "has to be written"}},
		{args: map[string]any{}, isError: true, wantTexts: []string{"- param intent: missing required parameter"}},
		{args: map[string]any{"intent": "run", "limit": 7}, isError: true, wantTexts: []string{"- param limit: want integer >= 1 and <= 3, got 7"}},
	}
	for _, tt := range tests {
		res, texts, _ := c.call(t, FindToolName, tt.args)
		text := strings.Join(texts, "\n")
		if res.IsError != tt.isError {
			t.Errorf("find_tool(%v): isError %v, want %v (text %q)", tt.args, res.IsError, tt.isError, text)
			continue
		}
		wantContains(t, "find_tool text", text, tt.wantTexts...)
		if tt.isError {
			continue
		}
		var m catalog.MatchResponse
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("find_tool(%v) structured content %s: %v", tt.args, b, err)
		}
		if m.Found != tt.found || m.Found && (len(m.Candidates) == 0 || len(m.Candidates) > tt.most || m.Candidates[0].Name != tt.first) {
			t.Errorf("find_tool(%v) = %s, want found %v, first %q, at most %d", tt.args, b, tt.found, tt.first, tt.most)
		}
		for _, cand := range m.Candidates {
			if cand.Name == "remote-exec" {
				t.Errorf("find_tool(%v) offered the disabled remote-exec", tt.args)
			}
		}
	}
}

// TestSync tests one step of the loop directly: a new revision that
// changes nothing clients see changes nothing; an added tool is added; a
// catalog tool named like a meta-tool is not listed; MetaOnly ignores
// unpinned tools.
func TestSync(t *testing.T) {
	f := newFixture(t, Options{})
	published := func() []string {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		var names []string
		for _, l := range f.srv.published {
			names = append(names, l.name())
		}
		if !slices.IsSorted(names) {
			t.Errorf("published out of name order: %q", names)
		}
		return names
	}
	start := published()
	before := strings.Count(f.log.String(), "mcp tool list changed")

	f.swap(t, "rev2", "tools") // same tools, new revision
	f.srv.Sync()
	if got := published(); !slices.Equal(got, start) {
		t.Errorf("after a revision-only reload: published %v, want %v", got, start)
	}
	if n := strings.Count(f.log.String(), "mcp tool list changed"); n != before {
		t.Errorf("a revision-only reload logged a tool list change:\n%s", f.log.String())
	}

	f.swap(t, "rev3", "tools", "reload")
	f.srv.Sync()
	if got, want := published(), slices.Sorted(slices.Values(append(slices.Clone(start), "say-hi"))); !slices.Equal(got, want) {
		t.Errorf("after adding say-hi: published %v, want %v", got, want)
	}
	wantContains(t, "log", f.log.String(), "added=[say-hi]")

	f.swap(t, "rev3b", "tools") // say-hi, between two others in name order, goes
	f.srv.Sync()
	if got := published(); !slices.Equal(got, start) {
		t.Errorf("after removing say-hi: published %v, want %v", got, start)
	}
	wantContains(t, "log", f.log.String(), "removed=[say-hi]")

	// A catalog tool named find_tool stays hidden behind the meta-tool.
	clash := shellTool(t, "find_tool", "clash", "a tool that clashes with the meta-tool", `["true"]`)
	f.store.Swap(catalog.New("rev4", []catalog.Entry{{Name: "find_tool", Tool: clash, Status: catalog.Enabled}}, catalog.Options{}))
	f.srv.Sync()
	if got := published(); len(got) != 0 {
		t.Errorf("with only a clashing find_tool in the catalog: published %v, want none", got)
	}
	wantContains(t, "log", f.log.String(), "catalog tool hidden by meta-tool")
	wantContains(t, "log", f.log.String(), "removed=\"["+strings.Join(start, " ")+"]\"")

	meta := newFixture(t, Options{MetaOnly: true})
	meta.swap(t, "rev2", "tools", "reload")
	meta.srv.Sync()
	meta.srv.mu.Lock()
	n := len(meta.srv.published)
	meta.srv.mu.Unlock()
	if n != 0 {
		t.Errorf("MetaOnly without pins: %d catalog tools published, want 0", n)
	}
}

// TestCallResult is the status -> MCP mapping for every status, including
// those the transport tests cannot reach with a real process cheaply.
func TestCallResult(t *testing.T) {
	tests := []struct {
		name    string
		r       dispatch.Result
		isError bool
		texts   []string // exact blocks when exact, else substrings of the joined text
		exact   bool
	}{
		{"success with stderr", dispatch.Result{Status: dispatch.Success, Output: "ok\n", Stderr: "warning: x\n"}, false,
			[]string{"ok\n", "stderr:\nwarning: x"}, true},
		{"success truncated", dispatch.Result{Status: dispatch.Success, Output: "yyyy", Truncated: true, OutputBytes: 9000}, false,
			[]string{"yyyy", "truncated: output was cut at the tool's max_output_bytes (9000 bytes written to stdout)"}, true},
		{"binary output", dispatch.Result{Status: dispatch.Success, Output: "//4A", OutputEncoding: "base64"}, false,
			[]string{"output (base64; the raw bytes are not valid UTF-8):\n//4A"}, true},
		{"no data", dispatch.Result{Status: dispatch.NoData}, false, []string{"no_data", "wrote nothing"}, false},
		{"timeout", dispatch.Result{Tool: "t", Status: dispatch.Timeout, Output: "partial", ExitCode: 143, Error: "timed out after 1s"}, true,
			[]string{"t: timeout — the tool was killed at its timeout", "error: timed out after 1s", "exit_code: 143", "output:\npartial"}, false},
		{"busy", dispatch.Result{Tool: "t", Status: dispatch.Busy, ExitCode: -1, Error: "busy: 64 calls"}, true,
			[]string{"retry later", "error: busy: 64 calls"}, false},
		{"disabled", dispatch.Result{Tool: "t", Status: dispatch.Disabled, ExitCode: -1, Error: "executor gatekeeper is not configured"}, true,
			[]string{"cannot run here", "gatekeeper is not configured"}, false},
		{"approval", dispatch.Result{Tool: "t", Status: dispatch.ApprovalRequired, ExitCode: -1, Suggestion: "ask an approver"}, true,
			[]string{"needs an approval", "how to get it approved: ask an approver"}, false},
		{"approval held", dispatch.Result{Tool: "t", Status: dispatch.ApprovalRequired, ExitCode: -1, Decision: "confirm", Rule: "constraints.require_confirm: true",
			Reason: "every call needs an approval", ApprovalID: "0123abcd", ExpiresAt: time.Date(2026, 6, 1, 12, 15, 0, 0, time.UTC)}, true,
			[]string{"rule: constraints.require_confirm: true", "reason: every call needs an approval", "approval_id: 0123abcd",
				"call this tool again with the same arguments to get its result", "2026-06-01T12:15:00Z"}, false},
		{"denied", dispatch.Result{Tool: "t", Status: dispatch.Denied, ExitCode: -1, Decision: "deny", Rule: "param cmd: deny pattern `rm\\s+-rf`",
			Reason: "the value matches a deny pattern", Error: "refused by policy"}, true,
			[]string{"t: denied — the call did not run: a policy rule refuses it", "rule: param cmd: deny pattern `rm\\s+-rf`", "reason: the value matches a deny pattern"}, false},
		{"http error", dispatch.Result{Tool: "t", Status: dispatch.Error, HTTPStatus: 502, Output: "bad gateway"}, true,
			[]string{"http_status: 502", "output:\nbad gateway"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := callResult(tt.r, nil)
			if res.IsError != tt.isError {
				t.Errorf("callResult(%s).IsError = %v, want %v", tt.r.Status, res.IsError, tt.isError)
			}
			if sc, ok := res.StructuredContent.(dispatch.Result); !ok || !cmp.Equal(sc, tt.r) {
				t.Errorf("callResult(%s).StructuredContent = %#v, want the Result", tt.r.Status, res.StructuredContent)
			}
			var texts []string
			for _, c := range res.Content {
				texts = append(texts, c.(*mcp.TextContent).Text)
			}
			if tt.exact {
				if diff := cmp.Diff(tt.texts, texts); diff != "" {
					t.Errorf("callResult(%s) text blocks (-want +got):\n%s", tt.r.Status, diff)
				}
				return
			}
			if len(texts) != 1 {
				t.Errorf("callResult(%s): %d text blocks, want 1", tt.r.Status, len(texts))
			}
			wantContains(t, "text", strings.Join(texts, "\n"), tt.texts...)
		})
	}
}

// TestRequireToken mounts the handler behind RequireToken the way the
// daemon does with its API tokens: no or an unknown token is refused, a
// read-only token is refused, and with a call token the dispatcher's audit
// line names the token.
func TestRequireToken(t *testing.T) {
	f := newFixture(t, Options{})
	tokens := map[string]struct {
		name  string
		roles []string
	}{
		"s3cret-call-token": {"alice", []string{"read", "call"}},
		"s3cret-read-token": {"bob", []string{"read"}},
	}
	check := func(secret string) (string, []string, bool) {
		tok, ok := tokens[secret]
		return tok.name, tok.roles, ok
	}
	ts := httptest.NewServer(RequireToken(check, "call", f.srv.HTTPHandler(nil)))
	t.Cleanup(ts.Close)

	connect := func(token string) (*mcp.ClientSession, error) {
		hc := &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}
		return newClient(make(chan struct{}, 1)).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: hc}, nil)
	}
	for _, token := range []string{"", "wrong", "s3cret-read-token"} {
		if cs, err := connect(token); err == nil {
			cs.Close()
			t.Errorf("Connect with token %q succeeded, want it refused", token)
		}
	}
	for token, want := range map[string]int{"": http.StatusUnauthorized, "wrong": http.StatusUnauthorized, "s3cret-read-token": http.StatusForbidden} {
		req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(`{}`))
		resp, err := bearer{token: token, base: http.DefaultTransport}.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("POST with token %q: HTTP %d, want %d", token, resp.StatusCode, want)
		}
	}
	cs, err := connect("s3cret-call-token")
	if err != nil {
		t.Fatalf("Connect with the call token: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	c := &client{cs: cs}
	if res, texts, _ := c.call(t, "shell-exec", map[string]any{"cmd": "echo hello"}); res.IsError {
		t.Fatalf("echo hello: %q", texts)
	}
	wantContains(t, "audit log", f.audit.String(), `"caller":"alice","door":"mcp"`)
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden files")

// TestToolsListGolden freezes what a client sees in tools/list, in both
// modes: names, titles, descriptions and input schemas. Regenerate with
// go test ./internal/mcpserver -run TestToolsListGolden -update.
func TestToolsListGolden(t *testing.T) {
	for _, mode := range []struct {
		file string
		opts Options
	}{
		{"testdata/tools_list.golden.json", Options{}},
		{"testdata/tools_list_meta_only.golden.json", Options{MetaOnly: true}},
	} {
		f := newFixture(t, mode.opts)
		c := transports[0].connect(t, f.srv)
		res, err := c.cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		got, err := json.MarshalIndent(res.Tools, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		if *update {
			if err := os.WriteFile(mode.file, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(mode.file)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("tools/list differs from %s (-want +got):\n%s", mode.file, diff)
		}
	}
}

// shellTool parses a shell tool without params running argv (a YAML
// flow list).
func shellTool(t *testing.T, name, display, intent, argv string) *hldp.Tool {
	t.Helper()
	tl, err := hldp.Parse("tools/"+name+"/TOOL.hdlp", []byte(`name: `+name+`
display: `+display+`
intent: `+intent+`
method: run
executor: shell
params_schema: {}
argv: `+argv+`
author: test
created: 2026-06-01
why: test
`))
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// TestSyncBigAndUnseenChanges: the first load of a big catalog logs the
// first names it added and how many more, not all of them; a definition
// parsed anew that changes nothing a client sees (its argv) is not
// republished, and the server then holds the new definition, not the old;
// a change of what clients see is an update.
func TestSyncBigAndUnseenChanges(t *testing.T) {
	def := func(name, intent, arg string) *hldp.Tool {
		return shellTool(t, name, name, intent, `["echo", "`+arg+`"]`)
	}
	const n = logMaxNames + 5
	entries := func(change func(i int) *hldp.Tool) []catalog.Entry {
		es := make([]catalog.Entry, n)
		for i := range es {
			name := fmt.Sprintf("tool-%02d", i)
			tl := change(i)
			if tl == nil {
				tl = def(name, "intent of "+name, "a")
			}
			es[i] = catalog.Entry{Name: name, Tool: tl, Status: catalog.Enabled}
		}
		return es
	}
	store := new(catalog.Store)
	store.Swap(catalog.New("rev1", entries(func(int) *hldp.Tool { return nil }), catalog.Options{}))
	log := new(lockedBuffer)
	srv := New(store, dispatch.New(store, nil, dispatch.Options{}), Options{Logger: slog.New(slog.NewTextHandler(log, nil))})
	first := log.String()
	wantContains(t, "log", first, fmt.Sprintf("listed=%d", n))
	wantContains(t, "log", first, fmt.Sprintf("(and %d more)", n-logMaxNames))
	if last := fmt.Sprintf("tool-%02d", logMaxNames); strings.Contains(first, last) {
		t.Errorf("the first load's log names %s, past the first %d:\n%s", last, logMaxNames, first)
	}

	argv := def("tool-00", "intent of tool-00", "b") // what a client sees is unchanged
	store.Swap(catalog.New("rev2", entries(func(i int) *hldp.Tool {
		if i == 0 {
			return argv
		}
		return store.Load().Enabled()[i].Tool
	}), catalog.Options{}))
	srv.Sync()
	if got := log.String(); got != first {
		t.Errorf("a change clients do not see logged:\n%s", strings.TrimPrefix(got, first))
	}
	srv.mu.Lock()
	var held *hldp.Tool
	if i, ok := find(srv.published, "tool-00"); ok {
		held = srv.published[i].tool
	}
	srv.mu.Unlock()
	if held != argv {
		t.Error("after a change clients do not see, the server holds the old definition")
	}

	store.Swap(catalog.New("rev3", entries(func(i int) *hldp.Tool {
		if i == 1 {
			return def("tool-01", "a new intent", "a")
		}
		return store.Load().Enabled()[i].Tool
	}), catalog.Options{}))
	srv.Sync()
	wantContains(t, "log", strings.TrimPrefix(log.String(), first), "updated=[tool-01]")
}

// TestToolsListPages: a catalog bigger than a page is listed in pages of
// listPageSize, the meta-tools among the catalog's tools in name order,
// each tool once; a cursor no page gave is Invalid params; a tool of the
// last page is called as any other; a name not listed stays the SDK's
// unknown tool.
func TestToolsListPages(t *testing.T) {
	const n = listPageSize + 5
	entries := make([]catalog.Entry, n)
	want := []string{CallToolName, FindToolName}
	for i := range entries {
		// Names before, between and after the meta-tools'.
		name := fmt.Sprintf("%c-%04d", "adz"[i%3], i)
		entries[i] = catalog.Entry{Name: name, Tool: shellTool(t, name, name, "say "+name, `["echo", "`+name+`"]`), Status: catalog.Enabled}
		want = append(want, name)
	}
	slices.Sort(want)
	store := new(catalog.Store)
	store.Swap(catalog.New("rev1", entries, catalog.Options{}))
	d := dispatch.New(store, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: shell.New(shell.Options{})}, dispatch.Options{})
	c := connectInMemory(t, New(store, d, Options{}), "")
	ctx := context.Background()

	var got []string
	var sizes []int
	cursor := ""
	for range 3 {
		res, err := c.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("tools/list cursor %q: %v", cursor, err)
		}
		sizes = append(sizes, len(res.Tools))
		for _, tl := range res.Tools {
			got = append(got, tl.Name)
			if tl.Name == "z-1004" && (!strings.Contains(tl.Description, "say z-1004") || !strings.Contains(string(mustJSON(t, tl.InputSchema)), `"type":"object"`)) {
				t.Errorf("z-1004 listed as %+v; want its intent and object schema", tl)
			}
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(sizes, []int{listPageSize, len(want) - listPageSize}) {
		t.Errorf("page sizes %v, want %d then %d", sizes, listPageSize, len(want)-listPageSize)
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %d tools (first %q), want the %d in name order, each once", len(got), got[:min(3, len(got))], len(want))
	}
	if _, err := c.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: "not a cursor!"}); err == nil || !strings.Contains(err.Error(), "invalid cursor") {
		t.Errorf("tools/list with a bad cursor: %v, want invalid cursor", err)
	}
	if _, texts, r := c.call(t, "z-1004", map[string]any{}); r.Status != dispatch.Success || r.Output != "z-1004\n" {
		t.Errorf("tools/call z-1004 = %+v %q; want its output", r, texts)
	}
	if _, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "not-listed"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("tools/call of a name not listed: %v, want the SDK's unknown tool", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestListDuringSync: while a Sync makes the new list, the server answers
// from the list before (Sync holds the lock only to swap); once it ends,
// from the new one.
func TestListDuringSync(t *testing.T) {
	f := newFixture(t, Options{})
	srv := New(f.store, f.srv.inv, Options{}) // no Run: this test alone syncs it
	srv.Sync()
	before := srv.Listed()
	entered, release := make(chan struct{}), make(chan struct{})
	srv.syncHook = func() {
		close(entered)
		<-release
	}
	f.swap(t, "rev2", "tools", "reload")
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Sync()
	}()
	deadline := time.After(10 * time.Second)
	select {
	case <-entered:
	case <-deadline:
		t.Fatal("Sync never reached its hook")
	}
	listed := make(chan int, 1)
	go func() { listed <- srv.Listed() }()
	select {
	case n := <-listed:
		if n != before {
			t.Errorf("during a Sync: %d tools listed, want the %d before it", n, before)
		}
		if srv.lists("say-hi") {
			t.Error("during a Sync the tool it adds is listed already")
		}
	case <-deadline:
		t.Fatal("Listed waited for the Sync in progress")
	}
	close(release)
	<-done
	if n := srv.Listed(); n != before+1 || !srv.lists("say-hi") {
		t.Errorf("after the Sync: %d tools listed (say-hi: %v), want %d with say-hi", n, srv.lists("say-hi"), before+1)
	}
}

// TestServingOnceListed: a server serves (the daemon's /readyz waits for
// it) once a Sync listed a snapshot's tools, not when the store got the
// snapshot: a client listing between the two would see no tool. An empty
// store is not served; a later snapshot with no tools keeps it serving.
// Ready is closed exactly when Serving turns true, and stays closed.
func TestServingOnceListed(t *testing.T) {
	store := new(catalog.Store)
	srv := New(store, dispatch.New(store, nil, dispatch.Options{}), Options{})
	ready := func() bool {
		select {
		case <-srv.Ready():
			return true
		default:
			return false
		}
	}
	if srv.Serving() || ready() {
		t.Errorf("before the store has a snapshot: Serving() = %v, Ready closed %v; want false, false", srv.Serving(), ready())
	}
	tl := shellTool(t, "a", "a", "intent of a", `["echo", "a"]`)
	store.Swap(catalog.New("rev1", []catalog.Entry{{Name: "a", Tool: tl, Status: catalog.Enabled}}, catalog.Options{}))
	if srv.Serving() || ready() {
		t.Error("Serving() or Ready closed once the store has a snapshot, before a Sync listed it; want neither")
	}
	srv.Sync()
	if !srv.Serving() || srv.Listed() != 1 || !ready() {
		t.Errorf("after the Sync: Serving() = %v, Listed() = %d, Ready closed %v; want true, 1, true", srv.Serving(), srv.Listed(), ready())
	}
	store.Swap(catalog.New("rev2", nil, catalog.Options{}))
	srv.Sync() // closes nothing twice
	if !srv.Serving() || srv.Listed() != 0 || !ready() {
		t.Errorf("after a snapshot with no tools: Serving() = %v, Listed() = %d, Ready closed %v; want true, 0, true", srv.Serving(), srv.Listed(), ready())
	}
}
