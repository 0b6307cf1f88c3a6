package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// rpc2026 posts one JSON-RPC request of protocol 2026-07-28 to url as a
// client that declares the tasks extension (when ext) would, and returns
// the JSON-RPC response's result or error (an SSE answer's one message).
func rpc2026(t *testing.T, url, token, method, name string, params map[string]any, ext bool) (result, rpcErr map[string]any) {
	t.Helper()
	caps := map[string]any{}
	if ext {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-2026", "version": "0"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(b), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				b = []byte(d)
			}
		}
	}
	var m struct {
		Result map[string]any
		Error  map[string]any
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %d %s: %v", method, resp.StatusCode, b, err)
	}
	return m.Result, m.Error
}

// TestMCPTasksExtension: a client of 2026-07-28 that declares the tasks
// extension (io.modelcontextprotocol/tasks) gets a held call as a task
// (resultType "task"), which tasks/get shows input_required with a
// URL-mode elicitation of the console's page, then completed with the
// raw result inline, after a restart between hold and approval (files
// and PostgreSQL); tasks/cancel withdraws a pending one; a client that
// does not declare it gets the tool result (and -32021 for the extension's
// methods); an unknown task, or another caller's, is -32602.
func TestMCPTasksExtension(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "guarded", testTool("guarded", `intent: run a command after an approval, writing under the files root
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true, description: "the command" }
sandbox:
  write: ["${files_root}"]
constraints:
  require_confirm: true
  shell_policy: none
`))
	env := map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceToken + ",bob:approve:" + bobToken}
	run := func(t *testing.T, env map[string]string, extra ...string) {
		state, files := t.TempDir(), proctest.HostDir(t)
		args := append([]string{"--tools", tools, "--state", state, "--files-root", files}, extra...)
		d := startDaemon(t, env, args...)
		// Ready means the MCP list holds the catalog; a reload after
		// that reaches it a moment later.
		listed := func() {
			pollUntil(t, "guarded listed over MCP", func() bool {
				res, _ := rpc2026(t, d.url+"/mcp", aliceToken, "tools/list", "", map[string]any{}, true)
				b, _ := json.Marshal(res)
				return strings.Contains(string(b), `"name":"guarded"`)
			})
		}
		listed()
		disc, e := rpc2026(t, d.url+"/mcp", aliceToken, "server/discover", "", map[string]any{}, true)
		if ext, _ := disc["capabilities"].(map[string]any)["extensions"].(map[string]any); e != nil || ext["io.modelcontextprotocol/tasks"] == nil {
			t.Errorf("server/discover = %v %v; want the tasks extension in capabilities.extensions", disc, e)
		}
		call := func(cmd string, ext bool) (map[string]any, map[string]any) {
			return rpc2026(t, d.url+"/mcp", aliceToken, "tools/call", "guarded", map[string]any{"name": "guarded", "arguments": map[string]any{"cmd": cmd}}, ext)
		}
		get := func(id string) map[string]any {
			res, e := rpc2026(t, d.url+"/mcp", aliceToken, "tasks/get", "", map[string]any{"taskId": id}, true)
			if e != nil {
				t.Fatalf("tasks/get %s: %v", id, e)
			}
			return res
		}
		marker := filepath.Join(files, "ran")
		created, e := call("echo ext >> "+marker+" && echo ext-done", true)
		id, _ := created["taskId"].(string)
		if e != nil || created["resultType"] != "task" || created["status"] != "input_required" || id == "" {
			t.Fatalf("a held call with the extension = %v %v; want a task, input_required", created, e)
		}
		if err := d.stop(t); err != nil {
			t.Fatalf("stop: %v", err)
		}
		d = startDaemon(t, env, args...)
		listed()
		w := get(id)
		ir, _ := w["inputRequests"].(map[string]any)["approval-"+id].(map[string]any)
		p, _ := ir["params"].(map[string]any)
		if w["status"] != "input_required" || w["resultType"] != "complete" || p["mode"] != "url" || !strings.HasSuffix(p["url"].(string), "/ui/approvals#"+id) {
			t.Fatalf("tasks/get after a restart = %v; want input_required with a URL elicitation of the console page", w)
		}
		if code, _, body := d.as(bobToken).approval(t, "POST", id, `{"decision":"approve"}`); code != 200 {
			t.Fatalf("approve: %d %s", code, body)
		}
		done := get(id)
		res, _ := done["result"].(map[string]any)
		content, _ := res["content"].([]any)
		if done["status"] != "completed" || len(content) == 0 || content[0].(map[string]any)["text"] != "ext-done\n" {
			t.Errorf("tasks/get after approval = %v; want completed with the raw result", done)
		}

		// tasks/cancel withdraws a pending request.
		created, _ = call("echo never >> "+marker, true)
		cid := created["taskId"].(string)
		if ack, e := rpc2026(t, d.url+"/mcp", aliceToken, "tasks/cancel", "", map[string]any{"taskId": cid}, true); e != nil || ack["resultType"] != "complete" {
			t.Errorf("tasks/cancel = %v %v; want an acknowledgement", ack, e)
		}
		if c := get(cid); c["status"] != "cancelled" {
			t.Errorf("tasks/get after cancel = %v; want cancelled", c)
		}

		// Without the extension: the tool result, and -32021 for its methods.
		plain, _ := call("echo plain", false)
		if plain["resultType"] == "task" || plain["isError"] != true {
			t.Errorf("a held call without the extension = %v; want the tool result", plain)
		}
		for _, m := range []string{"tasks/update", "tasks/get", "tasks/cancel"} {
			if _, e := rpc2026(t, d.url+"/mcp", aliceToken, m, "", map[string]any{"taskId": cid, "inputResponses": map[string]any{}}, false); e == nil || e["code"] != float64(-32021) {
				t.Errorf("%s without the extension: %v; want -32021", m, e)
			}
		}
		if _, e := rpc2026(t, d.url+"/mcp", aliceToken, "tasks/get", "", map[string]any{"taskId": "no-such-task"}, true); e == nil || e["code"] != float64(-32602) {
			t.Errorf("tasks/get of an unknown task: %v; want -32602", e)
		}
		if _, e := rpc2026(t, d.url+"/mcp", bobToken, "tasks/get", "", map[string]any{"taskId": cid}, true); e == nil || e["code"] != float64(-32602) {
			t.Errorf("tasks/get of alice's task by bob: %v; want -32602 (not found)", e)
		}
	}
	// Files on the stateful endpoint (2026-07-28 requests routed to the
	// sessionless handler), PostgreSQL on --mcp-stateless.
	t.Run("files", func(t *testing.T) { run(t, env) })
	t.Run("postgres", func(t *testing.T) {
		pg := map[string]string{"TOOLAGENT_STORE_URL": pgtest.URL(t)}
		for k, v := range env {
			pg[k] = v
		}
		run(t, pg, "--store", "postgres", "--mcp-stateless")
	})
}

// TestMCPHeldCallAsElicitation: a client of 2026-07-28 without tasks
// that takes URL-mode elicitations (the official Go SDK's client, whose
// multi-round-trip middleware fulfils input requests and retries) gets a
// held call as an InputRequiredResult: one URL elicitation of the
// console's page of the approval; the user approves there (here: the
// approver through the API, from the elicitation handler) and accepts;
// the retried call returns the raw result, and the command ran once.
func TestMCPHeldCallAsElicitation(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "guarded", testTool("guarded", `intent: run a command after an approval, writing under the files root
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true, description: "the command" }
sandbox:
  write: ["${files_root}"]
constraints:
  require_confirm: true
  shell_policy: none
`))
	files := proctest.HostDir(t)
	d := startDaemon(t, map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceToken + ",bob:approve:" + bobToken}, "--tools", tools, "--files-root", files, "--mcp-stateless")
	var asked []string
	client := mcp.NewClient(&mcp.Implementation{Name: "elicit-test", Version: "0"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, req.Params.Mode+" "+req.Params.URL)
			id := req.Params.ElicitationID
			if code, _, body := d.as(bobToken).approval(t, "POST", id, `{"decision":"approve"}`); code != 200 {
				t.Errorf("bob approves %s = %d %s", id, code, body)
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token: aliceToken, next: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Skipf("the client negotiated %s, not 2026-07-28", v)
	}
	pollUntil(t, "guarded in tools/list", func() bool { return slices.Contains(listNames(t, cs), "guarded") })
	marker := filepath.Join(files, "ran")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "guarded", Arguments: map[string]any{"cmd": "echo ran >> " + marker + " && echo elicited"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || !strings.HasPrefix(asked[0], "url "+d.url+"/ui/approvals#") {
		t.Errorf("elicitations = %q; want one URL elicitation of the console page", asked)
	}
	if res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "elicited\n" {
		t.Errorf("the call = %+v; want the raw result after the approval", res)
	}
	if b, _ := os.ReadFile(marker); string(b) != "ran\n" {
		t.Errorf("the command ran %q; want once", b)
	}
}
