package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/operator"
)

func mcpClient(listChanged chan struct{}) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "cmd-test", Version: "v0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case listChanged <- struct{}{}:
			default:
			}
		},
	})
}

func listNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// checkMCPSession runs the acceptance cases on a connected client: list,
// call success, call failure with the real stderr, invalid params, and a
// tool added to the tree arriving with list_changed.
func checkMCPSession(t *testing.T, cs *mcp.ClientSession, listChanged chan struct{}, tools string) {
	t.Helper()
	// The MCP server adds the catalog's tools as each snapshot is
	// published, so wait for them rather than assume they are there.
	pollUntil(t, "shell-exec in tools/list", func() bool { return slices.Contains(listNames(t, cs), "shell-exec") })
	if names := listNames(t, cs); !slices.Contains(names, "find_tool") {
		t.Errorf("tools/list = %v, want find_tool too", names)
	}
	if text, isErr := callText(t, cs, "shell-exec", map[string]any{"cmd": "echo hello"}); isErr || text != "hello\n" {
		t.Errorf("shell-exec echo hello = %q isError=%v", text, isErr)
	}
	if text, isErr := callText(t, cs, "shell-exec", map[string]any{"cmd": "ls /nonexistent"}); !isErr || !strings.Contains(text, "No such file or directory") {
		t.Errorf("shell-exec ls /nonexistent = %q isError=%v; want isError with the real stderr", text, isErr)
	}
	if text, isErr := callText(t, cs, "shell-exec", map[string]any{"cwd": 5}); !isErr || !strings.Contains(text, "cmd") {
		t.Errorf("invalid params = %q isError=%v; want isError naming cmd", text, isErr)
	}
	putTool(t, tools, "say-hi", testTool("say-hi", `intent: say hi to someone
method: run
executor: shell
argv: [echo, "hi {who}"]
params_schema:
  who: { type: string, required: true, description: "who" }
`))
	select {
	case <-listChanged:
	case <-time.After(15 * time.Second):
		t.Fatal("no notifications/tools/list_changed within 15s of adding a tool")
	}
	pollUntil(t, "say-hi in tools/list", func() bool { return slices.Contains(listNames(t, cs), "say-hi") })
	if text, isErr := callText(t, cs, "say-hi", map[string]any{"who": "bob"}); isErr || text != "hi bob\n" {
		t.Errorf("say-hi = %q isError=%v", text, isErr)
	}
}

// mcpStdio is `toolagent mcp` running in-process on pipes, with an SDK
// client connected to it, as an MCP client that spawns the process would.
type mcpStdio struct {
	cs   *mcp.ClientSession
	in   *io.PipeWriter
	done chan error
	logs *syncBuffer
}

// startMCPStdio runs `toolagent mcp args...` and connects a client whose
// list_changed notifications go to listChanged.
func startMCPStdio(t *testing.T, listChanged chan struct{}, args ...string) *mcpStdio {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	m := &mcpStdio{in: inW, done: make(chan error, 1), logs: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		m.done <- run(ctx, append([]string{"mcp"}, args...), func(string) string { return "" }, inR, outW, m.logs)
		outW.Close()
	}()
	cs, err := mcpClient(listChanged).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, m.logs)
	}
	m.cs = cs
	return m
}

// close closes the client and stdin, as a client that goes away does,
// and returns what mcp returned, failing after 15 s.
func (m *mcpStdio) close(t *testing.T) error {
	t.Helper()
	m.cs.Close()
	m.in.Close()
	select {
	case err := <-m.done:
		return err
	case <-time.After(15 * time.Second):
		t.Fatalf("mcp did not return after stdin closed\n%s", m.logs)
		return nil
	}
}

// TestMCPStdio runs `toolagent mcp` in-process on pipes and drives it with
// the SDK's client, as an MCP client that spawns the process would.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	listChanged := make(chan struct{}, 1)
	m := startMCPStdio(t, listChanged, "--tools", tools, "--state", t.TempDir(), "--reload-debounce", "20ms")
	checkMCPSession(t, m.cs, listChanged, tools)
	if err := m.close(t); err != nil { // the client went away: stdin ends, mcp returns
		t.Errorf("mcp returned %v after stdin closed", err)
	}
}

// TestServeMCPHTTP drives /mcp of a running daemon over streamable HTTP,
// and checks it sits behind the API tokens.
func TestServeMCPHTTP(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	d := startDaemon(t, nil, "--tools", tools, "--reload-debounce", "20ms")
	listChanged := make(chan struct{}, 1)
	cs, err := mcpClient(listChanged).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	checkMCPSession(t, cs, listChanged, tools)

	secret := "s3cret-token-0123456789"
	d2 := startDaemon(t, map[string]string{"TOOLAGENT_TOKENS": "reader:read:" + secret}, "--tools", tools)
	if _, err := mcpClient(make(chan struct{}, 1)).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: d2.url + "/mcp"}, nil); err == nil {
		t.Error("connect to /mcp without a token succeeded; want it refused")
	}
}

// TestReadyMeansListedOverMCP: once /readyz answers 200 (startDaemon waits
// for it), an MCP client's first tools/list holds every tool of the
// catalog: ready waits for the MCP lists, not only the snapshot (a client
// that lists once at connect would otherwise see none of them).
func TestReadyMeansListedOverMCP(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	const n = 2000 // enough that listing them takes the MCP server a while
	for i := range n {
		name := fmt.Sprintf("tool-%03d", i)
		putTool(t, tools, name, testTool(name, "intent: count "+name+"\nmethod: run\nexecutor: shell\nargv: [echo, \""+name+"\"]\nparams_schema: {}\n"))
	}
	for round := range 3 { // each a start from scratch: the race is at start
		d := startDaemon(t, nil, "--tools", tools)
		cs, err := mcpClient(make(chan struct{}, 1)).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp"}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		got := 0
		for tl, err := range cs.Tools(t.Context(), nil) { // every page
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if strings.HasPrefix(tl.Name, "tool-") {
				got++
			}
		}
		cs.Close()
		if got != n {
			t.Errorf("start %d: the first tools/list after ready holds %d of the %d tools", round+1, got, n)
		}
	}
}

// bearer adds a bearer token to every request of an MCP HTTP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestOneIdentityAtEveryDoor: a caller is one name whatever door its call
// came through: bob's call held over /mcp cannot be approved by bob over
// the API (no self-approval), as his call over the API cannot, and bob
// reads the outcome of his MCP call at /v1/approvals/ID with his token;
// alice's call over /mcp is approved by bob. The approval records the
// door apart (issue 20, items 1 and 2).
func TestOneIdentityAtEveryDoor(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "guarded", guardedTool("run a command after an approval"))
	d := startApprovalDaemon(t, tools)
	bob, alice := d.as(bobToken), d.as(aliceToken)

	heldOverMCP := func(token, cmd string) string {
		t.Helper()
		client := &http.Client{Transport: bearer{token, http.DefaultTransport}}
		cs, err := mcpClient(make(chan struct{}, 1)).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp", HTTPClient: client}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer cs.Close()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "guarded", Arguments: map[string]any{"cmd": cmd}})
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var r dispatch.Result
		if json.Unmarshal(b, &r) != nil || r.Status != dispatch.ApprovalRequired || r.ApprovalID == "" {
			t.Fatalf("tools/call guarded over MCP = %s; want approval_required with an id", b)
		}
		return r.ApprovalID
	}

	// Every pair of doors for bob's own call: refused.
	for _, door := range []string{"api", "mcp"} {
		var id string
		if door == "api" {
			id = bob.hold(t, "echo "+door).ApprovalID
		} else {
			id = heldOverMCP(bobToken, "echo "+door)
		}
		code, a, body := bob.approval(t, "GET", id, "")
		if code != 200 || a.Caller != "bob" || a.Door != door {
			t.Errorf("bob GET his %s-held approval = %d %s; want 200, caller bob, door %s", door, code, body, door)
		}
		if code, _, body := bob.approval(t, "POST", id, `{"decision":"approve"}`); code != 403 {
			t.Errorf("bob approving his own call held over %s = %d %s; want 403", door, code, body)
		}
	}
	// Someone else's call held over MCP: bob approves it.
	id := heldOverMCP(aliceToken, "echo from-alice")
	if code, a, body := bob.approval(t, "POST", id, `{"decision":"approve"}`); code != 200 || a.Caller != "alice" || a.res.Output != "from-alice\n" {
		t.Errorf("bob approving alice's MCP call = %d %s; want 200 and its result", code, body)
	}
	if code, a, _ := alice.approval(t, "GET", id, ""); code != 200 || a.Status != "executed" {
		t.Errorf("alice reading the outcome of her MCP call = %d %s; want 200 executed", code, a.Status)
	}
}

// TestMCPOrigin: /mcp refuses a browser request from a foreign origin
// (403, against DNS rebinding), serves its own origin, a configured one,
// and clients that send no Origin (issue 20, item 5).
func TestMCPOrigin(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	d := startDaemon(t, nil, "--tools", tools, "--mcp-allowed-origins", "https://console.example:8443")
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"http://evil.example", 403},
		{"null", 403},
		{"http://" + d.addr + ".evil.example", 403},
		{"http://" + d.addr, 200},
		{"https://console.example:8443", 200},
		{"", 200},
	} {
		req, _ := http.NewRequest("POST", d.url+"/mcp", strings.NewReader(initBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("POST /mcp initialize with Origin %q = %d; want %d", tc.origin, resp.StatusCode, tc.want)
		}
	}
}

// TestMCPAnnotationsAndVersion: the shipped tools carry hints derived
// from their sandbox grants, call_tool is offered over HTTP too, and
// serverInfo names the build, not "dev" (issue 20, items 6 and 7).
func TestMCPAnnotationsAndVersion(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, nil, "--tools", nativeTools(t))
	cs, err := mcpClient(make(chan struct{}, 1)).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ServerInfo.Version; v == "" || v == "dev" {
		t.Errorf("serverInfo.version = %q; want the build's version", v)
	}
	// Ready means the MCP lists hold the catalog: no wait.
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type hints struct{ readOnly, destructive, openWorld bool }
	want := map[string]hints{
		"git-ops":      {readOnly: true},
		"file-read":    {readOnly: true},
		"file-write":   {destructive: true},
		"shell-exec":   {destructive: true, openWorld: true},
		"http-request": {destructive: true, openWorld: true},
	}
	got := map[string]hints{}
	for _, tl := range res.Tools {
		a := tl.Annotations
		if a == nil {
			continue
		}
		got[tl.Name] = hints{a.ReadOnlyHint, a.DestructiveHint != nil && *a.DestructiveHint, a.OpenWorldHint == nil || *a.OpenWorldHint}
		if w, ok := want[tl.Name]; ok && a.Title != tl.Title {
			t.Errorf("%s: annotations title %q, want the display name %q (%v)", tl.Name, a.Title, tl.Title, w)
		}
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: hints %+v; want %+v", name, got[name], w)
		}
	}
	if _, ok := got["call_tool"]; !ok {
		t.Errorf("call_tool is not offered over HTTP: %v", got)
	}
}

// TestShutdownEndsIdleMCPStreams: an open GET /mcp stream (a client's
// notification stream, nothing running) and an open subscriptions/listen
// stream (the same of the sessionless revision) do not hold shutdown for
// the grace period: the daemon stops without the "grace period over"
// warning, and the streams end (issue 20, item 4).
func TestShutdownEndsIdleMCPStreams(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	d := startDaemon(t, nil, "--tools", tools, "--shutdown-grace", "20s")
	post := func(session, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", d.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || session == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, session)
	}
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	req, _ := http.NewRequest("GET", d.url+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("GET /mcp: %v %v", stream, err)
	}
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, stream.Body); close(ended) }()

	// A subscriptions/listen stream of the sessionless revision, open
	// once the server acknowledged it.
	req, _ = http.NewRequest("POST", d.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	listen, err := http.DefaultClient.Do(req)
	if err != nil || listen.StatusCode != 200 {
		t.Fatalf("subscriptions/listen: %v %v", listen, err)
	}
	acked, listenEnded := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(listenEnded)
		sc := bufio.NewScanner(listen.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "notifications/subscriptions/acknowledged") {
				close(acked)
			}
		}
	}()
	select {
	case <-acked:
	case <-time.After(time.Minute):
		t.Fatal("subscriptions/listen was not acknowledged")
	}

	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.logs.String(), "grace period over") {
		t.Errorf("an idle MCP stream held the shutdown for the grace period:\n%s", d.logs)
	}
	<-ended // the streams were closed, not left hanging
	<-listenEnded
}

// TestMCPStdioApprovalsWhileRunning: a call held over stdio is decided
// while `toolagent mcp` runs: the hint names `toolagent approvals`, which
// finds the queue locked by the running server and decides through its
// control socket, as the user the kernel says it is (issue 20, item 3).
func TestMCPStdioApprovalsWhileRunning(t *testing.T) {
	t.Parallel()
	tools, state := t.TempDir(), t.TempDir()
	putTool(t, tools, "guarded", guardedTool("run a command after an approval"))
	m := startMCPStdio(t, make(chan struct{}, 1), "--tools", tools, "--state", state)
	cs, ctx := m.cs, t.Context()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "guarded", Arguments: map[string]any{"cmd": "echo decided-while-running"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var held dispatch.Result
	if json.Unmarshal(b, &held) != nil || held.ApprovalID == "" || !strings.Contains(held.Suggestion, "toolagent approvals approve "+held.ApprovalID) {
		t.Fatalf("held call = %s; want an approval id and a hint naming toolagent approvals", b)
	}
	waitControl(t, state)

	out, errOut, code := runCLI(t, nil, "approvals", "list", "--state", state)
	if code != 0 || !strings.Contains(out, held.ApprovalID) {
		t.Fatalf("approvals list while mcp runs = exit %d %s %s; want the held call", code, out, errOut)
	}
	out, errOut, code = runCLI(t, nil, "approvals", "approve", held.ApprovalID, "--state", state)
	if code != 0 || !strings.Contains(out, `"status": "executed"`) || !strings.Contains(out, "decided-while-running") {
		t.Fatalf("approvals approve while mcp runs = exit %d %s %s; want executed with the output", code, out, errOut)
	}
	me, _ := user.Current()
	if !strings.Contains(out, `"decider": "`+me.Username+`"`) {
		t.Errorf("the decider is not the peer's user %s: %s", me.Username, out)
	}
	if _, _, code := runCLI(t, nil, "approvals", "approve", held.ApprovalID, "--state", state); code != exitRefused {
		t.Errorf("approving again = exit %d; want %d", code, exitRefused)
	}
	if err := m.close(t); err != nil {
		t.Errorf("mcp returned %v", err)
	}
	if _, ok := operator.DialControl(host.ApprovalsDir(state)); ok {
		t.Errorf("the control socket outlives the server")
	}
}

// waitControl waits until the approvals control socket of state answers
// a request: its file appears at bind, a moment before it listens, and a
// connect in between is refused.
func waitControl(t *testing.T, state string) {
	t.Helper()
	pollUntil(t, "the control socket", func() bool {
		c, ok := operator.DialControl(host.ApprovalsDir(state))
		if !ok {
			return false
		}
		_, _, err := c.Do(t.Context(), "GET", "/approvals", nil)
		return err == nil
	})
}

// TestMCPWithTheTypeScriptSDK drives `toolagent mcp` (stdio) and /mcp
// (streamable HTTP) with a client written against another implementation,
// the official TypeScript SDK (testdata/mcp-ts-client.mjs under Debian's
// nodejs): initialize, tools/list, a call with Chinese text, invalid
// params as a tool error, find_tool. It needs the SDK installed: set
// TOOLAGENT_TEST_MCP_SDK_DIR to a directory where `npm install
// @modelcontextprotocol/sdk` ran (.ci/run does).
func TestMCPWithTheTypeScriptSDK(t *testing.T) {
	t.Parallel()
	sdk := os.Getenv("TOOLAGENT_TEST_MCP_SDK_DIR")
	node, err := exec.LookPath("node")
	if sdk == "" || err != nil {
		t.Skip("set TOOLAGENT_TEST_MCP_SDK_DIR to a directory where `npm install @modelcontextprotocol/sdk` ran, with node on PATH, to run the TypeScript SDK client (.ci/run does)")
	}
	script, err := filepath.Abs("testdata/mcp-ts-client.mjs")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, nil, "--tools", nativeTools(t))
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"stdio", []string{"stdio", exe, "mcp", "--tools", nativeTools(t), "--state", t.TempDir(), "--log-level", "warn"}},
		{"http", []string{"http", d.url + "/mcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), node, append([]string{script}, tc.args...)...)
			cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+sdk, runMainEnv+"=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node client: %v\n%s", err, stderr.String())
			}
			var got struct {
				Server struct{ Name, Version string }
				Tools  []struct {
					Name, Title, SchemaType string
					Annotations             map[string]any
				}
				Call struct {
					IsError bool
					Text    string
				}
				Bad  struct{ IsError bool }
				Find struct {
					Found      bool
					Candidates []struct{ Name string }
				}
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("client output %q: %v", out, err)
			}
			if got.Server.Name != "toolagent" || got.Server.Version == "" || got.Server.Version == "dev" {
				t.Errorf("serverInfo = %+v; want toolagent and the build's version", got.Server)
			}
			names := map[string]bool{}
			for _, tl := range got.Tools {
				names[tl.Name] = true
				if tl.SchemaType != "object" || tl.Annotations == nil {
					t.Errorf("tool %s: inputSchema type %q, annotations %v; want an object schema and annotations", tl.Name, tl.SchemaType, tl.Annotations)
				}
			}
			for _, want := range []string{"shell-exec", "git-ops", "file-read", "file-write", "http-request", "find_tool", "call_tool"} {
				if !names[want] {
					t.Errorf("tools/list lacks %s: %v", want, names)
				}
			}
			if got.Call.IsError || got.Call.Text != "你好\n" {
				t.Errorf("call shell-exec echo 你好 = %+v; want the raw output", got.Call)
			}
			if !got.Bad.IsError {
				t.Errorf("a call with unknown params was not a tool error")
			}
			if !got.Find.Found || len(got.Find.Candidates) == 0 || got.Find.Candidates[0].Name != "git-ops" {
				t.Errorf("find_tool 查看最近的提交记录 = %+v; want git-ops first", got.Find)
			}
		})
	}
}

// alternate sends each request to the next of urls' hosts in turn: a load
// balancer without sticky sessions.
type alternate struct {
	hosts []string
	n     atomic.Int64
}

func (a *alternate) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host = a.hosts[int(a.n.Add(1))%len(a.hosts)]
	r.Host = r.URL.Host
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPStatelessAcrossReplicas: an MCP client whose requests go to two
// replicas in turn (no sticky sessions) lists the tools, calls one and
// hears of a change of the catalog when it speaks the sessionless revision
// (2026-07-28), on either endpoint, or 2025-11-25 with --mcp-stateless;
// a 2025-11-25 client of the stateful endpoint does not get that far,
// since the second replica does not know the first one's session.
func TestMCPStatelessAcrossReplicas(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	for i, tc := range []struct {
		stateless bool
		version   string
		works     bool
	}{
		{true, "2026-07-28", true},
		{true, "2025-11-25", true},
		{false, "2026-07-28", true},
		{false, "2025-11-25", false},
	} {
		t.Run(fmt.Sprintf("stateless=%t,%s", tc.stateless, tc.version), func(t *testing.T) {
			args := []string{"--tools", tools}
			if tc.stateless {
				args = append(args, "--mcp-stateless")
			}
			one, two := startDaemon(t, nil, args...), startDaemon(t, nil, args...)
			lb := &alternate{hosts: []string{strings.TrimPrefix(one.url, "http://"), strings.TrimPrefix(two.url, "http://")}}
			listChanged := make(chan struct{}, 1)
			cs, err := mcpClient(listChanged).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: one.url + "/mcp", HTTPClient: &http.Client{Transport: lb}, DisableStandaloneSSE: !tc.works},
				&mcp.ClientSessionOptions{ProtocolVersion: tc.version})
			if err == nil {
				defer cs.Close()
				if got := cs.InitializeResult().ProtocolVersion; got != tc.version {
					t.Fatalf("negotiated %s, want %s", got, tc.version)
				}
				var res *mcp.CallToolResult
				pollUntil(t, "shell-exec in tools/list", func() bool { return slices.Contains(listNames(t, cs), "shell-exec") })
				res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "shell-exec", Arguments: map[string]any{"cmd": "echo across"}})
				if err == nil && (res.IsError || !strings.Contains(fmt.Sprint(res.Content[0]), "across")) {
					err = fmt.Errorf("call result %+v", res.Content)
				}
			}
			if tc.works && err == nil {
				// list_changed still reaches a client that holds the
				// stream (GET before 2026-07-28, subscriptions/listen
				// since), from whichever replica it reached.
				for len(listChanged) > 0 {
					<-listChanged
				}
				putTool(t, tools, fmt.Sprintf("added-%d", i), versionTool(fmt.Sprintf("added-%d", i), "v1"))
				select {
				case <-listChanged:
				case <-time.After(2 * time.Minute):
					t.Error("a tool added to the catalog sent no list_changed on the stream")
				}
			}
			if tc.works && err != nil {
				t.Errorf("requests alternating between two replicas: %v; want it to work", err)
			}
			if !tc.works && err == nil {
				t.Errorf("with sessions, requests alternating between two replicas worked; the test proves nothing")
			}
		})
	}
}
