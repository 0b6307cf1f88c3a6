package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The protocol layer of the 2026-07-28 revision on the streamable HTTP
// endpoint, spoken as raw HTTP the way a client of another implementation
// speaks it: what server/discover declares, the spec's errors and their
// HTTP statuses, and subscriptions/listen. Each case runs against the
// stateful handler (which serves both eras) and the stateless one.

// modernMeta is the per-request _meta of a 2026-07-28 request.
func modernMeta(caps map[string]any) map[string]any {
	if caps == nil {
		caps = map[string]any{}
	}
	return map[string]any{
		mcp.MetaKeyProtocolVersion:    "2026-07-28",
		mcp.MetaKeyClientInfo:         map[string]any{"name": "raw-http-test", "version": "v0"},
		mcp.MetaKeyClientCapabilities: caps,
	}
}

// rpcResponse is a JSON-RPC response as it came back.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// post sends one JSON-RPC request (id 7) as a client of the 2026-07-28
// revision does: the standard headers set from the body (Mcp-Method,
// Mcp-Name, MCP-Protocol-Version), then header's entries on top (an
// empty value deletes one). It returns the HTTP status, the headers and
// the response to the request, read from JSON or from an SSE stream.
func post(t *testing.T, url, method string, params map[string]any, header map[string]string) (int, http.Header, rpcResponse) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the response: %v", method, err)
	}
	var out rpcResponse
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.Lines(string(raw)) {
			if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data:"); ok {
				var m rpcResponse
				if json.Unmarshal([]byte(strings.TrimSpace(data)), &m) == nil && string(m.ID) == "7" {
					out = m
				}
			}
		}
	} else if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil && resp.Header.Get("Content-Type") == "application/json" {
			t.Fatalf("POST %s: response %q: %v", method, raw, err)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// eras are the two handlers every case runs against.
var eras = []struct {
	name      string
	stateless bool
}{{"stateful", false}, {"stateless", true}}

// TestDiscover: server/discover, without a session, declares the versions
// the endpoint serves (the sessionless revision and the handshake-era
// ones), tools with listChanged, prompts and resources (empty lists,
// answered), no logging and no completions, the server's identity in the
// result's _meta, and private cache fields. It opens no session.
func TestDiscover(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			f := newFixture(t, Options{Name: "toolagent-test", Version: "v9"})
			ts := httptest.NewServer(f.srv.HTTPHandler(&mcp.StreamableHTTPOptions{Stateless: era.stateless}))
			defer ts.Close()

			status, h, resp := post(t, ts.URL, "server/discover", map[string]any{"_meta": modernMeta(nil)}, nil)
			if status != http.StatusOK || resp.Error != nil {
				t.Fatalf("server/discover: HTTP %d, error %+v; want 200 and a result", status, resp.Error)
			}
			if id := h.Get("Mcp-Session-Id"); id != "" {
				t.Errorf("server/discover opened session %q; the sessionless revision has none", id)
			}
			var res struct {
				SupportedVersions []string                   `json:"supportedVersions"`
				Capabilities      map[string]json.RawMessage `json:"capabilities"`
				ResultType        string                     `json:"resultType"`
				TTLMs             *int                       `json:"ttlMs"`
				CacheScope        string                     `json:"cacheScope"`
				Meta              map[string]json.RawMessage `json:"_meta"`
			}
			if err := json.Unmarshal(resp.Result, &res); err != nil {
				t.Fatalf("server/discover result %s: %v", resp.Result, err)
			}
			for _, v := range []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"} {
				if !slices.Contains(res.SupportedVersions, v) {
					t.Errorf("supportedVersions = %v, want %s among them", res.SupportedVersions, v)
				}
			}
			var caps []string
			for k := range res.Capabilities {
				caps = append(caps, k)
			}
			slices.Sort(caps)
			if want := []string{"extensions", "prompts", "resources", "tools"}; !slices.Equal(caps, want) {
				t.Errorf("capabilities %v, want exactly %v", caps, want)
			}
			if got := string(res.Capabilities["extensions"]); got != `{"`+TasksExtension+`":{}}` {
				t.Errorf("capabilities.extensions = %s, want the tasks extension alone", got)
			}
			if got := string(res.Capabilities["tools"]); got != `{"listChanged":true}` {
				t.Errorf("capabilities.tools = %s, want {\"listChanged\":true}", got)
			}
			if res.ResultType != "complete" || res.TTLMs == nil || *res.TTLMs != 0 || res.CacheScope != "private" {
				t.Errorf("resultType %q, ttlMs %v, cacheScope %q; want complete, 0, private", res.ResultType, res.TTLMs, res.CacheScope)
			}
			if got := string(res.Meta[mcp.MetaKeyServerInfo]); !strings.Contains(got, `"name":"toolagent-test"`) || !strings.Contains(got, `"version":"v9"`) {
				t.Errorf("_meta serverInfo = %s, want the server's name and version", got)
			}

			// What is declared is answered.
			for _, m := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
				status, _, resp := post(t, ts.URL, m, map[string]any{"_meta": modernMeta(nil)}, nil)
				if status != http.StatusOK || resp.Error != nil || !strings.Contains(string(resp.Result), `"cacheScope":"private"`) {
					t.Errorf("%s: HTTP %d, error %+v, result %.200s; want 200 and a private result", m, status, resp.Error, resp.Result)
				}
			}
		})
	}
}

// TestProtocolErrors: the spec's error codes and HTTP statuses for a
// request of the sessionless revision: an unknown version, a header that
// disagrees with the body, a missing _meta field, a method the revision
// removed or nobody defined, and a tool that does not exist.
func TestProtocolErrors(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			ts := httptest.NewServer(f.srv.HTTPHandler(&mcp.StreamableHTTPOptions{Stateless: era.stateless}))
			defer ts.Close()
			_, _, disc := post(t, ts.URL, "server/discover", map[string]any{"_meta": modernMeta(nil)}, nil)
			var discovered struct {
				SupportedVersions []string `json:"supportedVersions"`
			}
			if err := json.Unmarshal(disc.Result, &discovered); err != nil || len(discovered.SupportedVersions) == 0 {
				t.Fatalf("server/discover: %s (%v)", disc.Result, err)
			}

			future := modernMeta(nil)
			future[mcp.MetaKeyProtocolVersion] = "2099-01-01"
			past := modernMeta(nil)
			past[mcp.MetaKeyProtocolVersion] = "1900-01-01"
			noCaps := modernMeta(nil)
			delete(noCaps, mcp.MetaKeyClientCapabilities)
			cases := []struct {
				name   string
				method string
				params map[string]any
				header map[string]string
				status int
				code   int
			}{
				{"unknown version", "tools/list", map[string]any{"_meta": future}, map[string]string{"Mcp-Protocol-Version": "2099-01-01"}, 400, mcp.CodeUnsupportedProtocolVersion},
				{"old unknown version", "tools/list", map[string]any{"_meta": past}, map[string]string{"Mcp-Protocol-Version": "1900-01-01"}, 400, mcp.CodeUnsupportedProtocolVersion},
				{"header and _meta disagree", "tools/list", map[string]any{"_meta": future}, nil, 400, mcp.CodeHeaderMismatch},
				{"no version header", "tools/list", map[string]any{"_meta": modernMeta(nil)}, map[string]string{"Mcp-Protocol-Version": ""}, 400, mcp.CodeHeaderMismatch},
				{"Mcp-Method disagrees", "tools/list", map[string]any{"_meta": modernMeta(nil)}, map[string]string{"Mcp-Method": "prompts/list"}, 400, mcp.CodeHeaderMismatch},
				{"Mcp-Name disagrees", "tools/call", map[string]any{"name": "shell-exec", "arguments": map[string]any{"cmd": "true"}, "_meta": modernMeta(nil)}, map[string]string{"Mcp-Name": "disk-free"}, 400, mcp.CodeHeaderMismatch},
				{"no clientCapabilities", "tools/list", map[string]any{"_meta": noCaps}, nil, 400, -32602},
				{"no _meta", "server/discover", map[string]any{}, nil, 400, -32602},
				{"removed initialize", "initialize", map[string]any{"_meta": modernMeta(nil)}, nil, 404, -32601},
				{"removed ping", "ping", map[string]any{"_meta": modernMeta(nil)}, nil, 404, -32601},
				{"removed logging/setLevel", "logging/setLevel", map[string]any{"level": "info", "_meta": modernMeta(nil)}, nil, 404, -32601},
				{"removed resources/subscribe", "resources/subscribe", map[string]any{"uri": "x:y", "_meta": modernMeta(nil)}, nil, 404, -32601},
				{"removed resources/unsubscribe", "resources/unsubscribe", map[string]any{"uri": "x:y", "_meta": modernMeta(nil)}, nil, 404, -32601},
				{"unknown method", "unknown/method", map[string]any{"_meta": modernMeta(nil)}, nil, 404, -32601},
				{"tasks/get without the extension declared", "tasks/get", map[string]any{"taskId": "t1", "_meta": modernMeta(nil)}, nil, 400, mcp.CodeMissingRequiredClientCapabilities},
				{"tasks/update without the extension declared", "tasks/update", map[string]any{"taskId": "t1", "inputResponses": map[string]any{}, "_meta": modernMeta(nil)}, nil, 400, mcp.CodeMissingRequiredClientCapabilities},
				{"tasks/cancel without the extension declared", "tasks/cancel", map[string]any{"taskId": "t1", "_meta": modernMeta(nil)}, nil, 400, mcp.CodeMissingRequiredClientCapabilities},
				{"tasks/get of an unknown task", "tasks/get", map[string]any{"taskId": "t1", "_meta": modernMeta(map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}})}, nil, 400, -32602},
				{"tasks/result is not the extension's", "tasks/result", map[string]any{"taskId": "t1", "_meta": modernMeta(map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}})}, nil, 404, -32601},
				{"extension not served", "unknown-ext/do", map[string]any{"_meta": modernMeta(nil)}, nil, 404, -32601},
				{"unknown tool", "tools/call", map[string]any{"name": "no-such-tool", "arguments": map[string]any{}, "_meta": modernMeta(nil)}, nil, 400, -32602},
			}
			for _, tc := range cases {
				status, _, resp := post(t, ts.URL, tc.method, tc.params, tc.header)
				if status != tc.status || resp.Error == nil || resp.Error.Code != tc.code {
					t.Errorf("%s: HTTP %d, error %+v; want HTTP %d and code %d", tc.name, status, resp.Error, tc.status, tc.code)
					continue
				}
				if string(resp.ID) != "7" {
					t.Errorf("%s: error id %s, want the request's 7", tc.name, resp.ID)
				}
				if tc.code == mcp.CodeUnsupportedProtocolVersion {
					var data mcp.UnsupportedProtocolVersionData
					requested := tc.header["Mcp-Protocol-Version"]
					if err := json.Unmarshal(resp.Error.Data, &data); err != nil || !slices.Equal(data.Supported, discovered.SupportedVersions) || data.Requested != requested {
						t.Errorf("%s: data %s, want supported %v (as server/discover lists) and requested %s", tc.name, resp.Error.Data, discovered.SupportedVersions, requested)
					}
				}
			}
		})
	}
}

// TestConcurrentPostStreams: requests of the sessionless revision on
// concurrent POSTs are each answered on their own stream (the
// conformance suite's server-accepts-multiple-post-streams).
func TestConcurrentPostStreams(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			ts := httptest.NewServer(f.srv.HTTPHandler(&mcp.StreamableHTTPOptions{Stateless: era.stateless}))
			defer ts.Close()
			var wg sync.WaitGroup
			errs := make(chan string, 3)
			for i := range 3 {
				wg.Go(func() {
					args := map[string]any{"cmd": fmt.Sprintf("echo stream-%d", i)}
					status, _, resp := post(t, ts.URL, "tools/call", map[string]any{"name": "shell-exec", "arguments": args, "_meta": modernMeta(nil)}, nil)
					if status != http.StatusOK || resp.Error != nil || !strings.Contains(string(resp.Result), fmt.Sprintf("stream-%d", i)) {
						errs <- fmt.Sprintf("call %d: HTTP %d, error %+v, result %.200s", i, status, resp.Error, resp.Result)
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}

// TestSubscriptionsListen: a subscriptions/listen stream is acknowledged
// first, then carries notifications/tools/list_changed, tagged with the
// listen request's id, when a reload changes the tools; a stream that
// asked for prompt changes only gets none.
func TestSubscriptionsListen(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			ts := httptest.NewServer(f.srv.HTTPHandler(&mcp.StreamableHTTPOptions{Stateless: era.stateless}))
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()

			listen := func(id int, notifications map[string]any) *bufio.Scanner {
				body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
					"params": map[string]any{"notifications": notifications, "_meta": modernMeta(nil)}})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "subscriptions/listen")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("subscriptions/listen: %v", err)
				}
				t.Cleanup(func() { resp.Body.Close() })
				if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
					b, _ := io.ReadAll(resp.Body)
					t.Fatalf("subscriptions/listen: HTTP %d %s %q, want 200 and an SSE stream", resp.StatusCode, resp.Header.Get("Content-Type"), b)
				}
				return bufio.NewScanner(resp.Body)
			}
			// next returns the method and params of the stream's next
			// message (the test's deadline ends a stream that carries none).
			next := func(sc *bufio.Scanner) (string, map[string]any) {
				t.Helper()
				for sc.Scan() {
					data, ok := strings.CutPrefix(sc.Text(), "data:")
					if !ok {
						continue
					}
					var m struct {
						Method string         `json:"method"`
						Params map[string]any `json:"params"`
					}
					if err := json.Unmarshal([]byte(strings.TrimSpace(data)), &m); err != nil {
						t.Fatalf("stream message %q: %v", data, err)
					}
					return m.Method, m.Params
				}
				t.Fatalf("the stream ended without a message: %v", sc.Err())
				return "", nil
			}

			tools := listen(41, map[string]any{"toolsListChanged": true})
			if m, _ := next(tools); m != "notifications/subscriptions/acknowledged" {
				t.Fatalf("first message %q, want notifications/subscriptions/acknowledged", m)
			}
			prompts := listen(42, map[string]any{"promptsListChanged": true})
			if m, _ := next(prompts); m != "notifications/subscriptions/acknowledged" {
				t.Fatalf("prompts stream: first message %q, want the acknowledgement", m)
			}

			f.swap(t, "rev2", "tools", "reload") // adds say-hi
			m, params := next(tools)
			if m != "notifications/tools/list_changed" {
				t.Fatalf("after a reload: message %q, want notifications/tools/list_changed", m)
			}
			meta, _ := params["_meta"].(map[string]any)
			if id, _ := meta[mcp.MetaKeySubscriptionID].(float64); id != 41 {
				t.Errorf("list_changed _meta = %v, want %s 41 (the listen request's id)", meta, mcp.MetaKeySubscriptionID)
			}

			// The prompts-only stream got nothing: a later notification
			// would be the next thing on it, so end both and read what
			// it had.
			cancel()
			for prompts.Scan() {
				if strings.Contains(prompts.Text(), "list_changed") {
					t.Errorf("a stream that asked for prompt changes got %q", prompts.Text())
				}
			}
		})
	}
}

// TestCancelOnDisconnect: closing the response stream of a 2026-07-28
// tools/call cancels the call (the revision: "Closing the SSE response
// stream MUST be treated by the server as cancellation of that request"),
// so its process does not run on for nobody: the dispatcher ends it as
// cancelled, long before the tool's sleep would have.
func TestCancelOnDisconnect(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			ts := httptest.NewServer(f.srv.HTTPHandler(&mcp.StreamableHTTPOptions{Stateless: era.stateless}))
			defer ts.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			meta := modernMeta(nil)
			meta["progressToken"] = "p1"
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call",
				"params": map[string]any{"name": "shell-exec", "arguments": map[string]any{"cmd": "echo started; sleep 25"}, "_meta": meta}})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "shell-exec")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			// The tool runs once its first line came as progress.
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() && !strings.Contains(sc.Text(), "notifications/progress") {
			}
			if sc.Err() != nil {
				t.Fatalf("reading the call's stream: %v", sc.Err())
			}
			cancel()

			deadline := time.Now().Add(waitFor)
			for !strings.Contains(f.audit.String(), `"status":"cancelled"`) {
				if time.Now().After(deadline) {
					t.Fatalf("the call was not cancelled within %v of its client going away; audit:\n%s", waitFor, f.audit)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestListenKeepalive: a quiet subscriptions/listen stream carries an SSE
// comment at the keepalive interval after its acknowledgement, so idle
// timeouts of proxies do not close it.
func TestListenKeepalive(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			h := newHTTPHandlerKeepalive(f.srv.log, &mcp.StreamableHTTPOptions{Stateless: era.stateless}, func(*http.Request) (*Server, bool) { return f.srv, true }, 20*time.Millisecond)
			ts := httptest.NewServer(h)
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen",
				"params": map[string]any{"notifications": map[string]any{"toolsListChanged": true}, "_meta": modernMeta(nil)}})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "subscriptions/listen")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			acked := false
			for sc.Scan() {
				line := sc.Text()
				if strings.Contains(line, "notifications/subscriptions/acknowledged") {
					acked = true
				}
				if line == ": keepalive" {
					if !acked {
						t.Fatal("a keepalive came before the acknowledgement, which must be the stream's first message")
					}
					return
				}
			}
			t.Fatalf("no keepalive on the listen stream within %v: %v", waitFor, sc.Err())
		})
	}
}
