package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// tsDriver is testdata/mcp-ts-driver.mjs running under node: a client of
// the official TypeScript SDK that the test drives one command at a time.
type tsDriver struct {
	in  io.WriteCloser
	out *bufio.Scanner
	cmd *exec.Cmd
}

// startTSDriver starts the driver, or skips without the SDK.
func startTSDriver(t *testing.T) *tsDriver {
	t.Helper()
	sdk := os.Getenv("TOOLAGENT_TEST_MCP_SDK_DIR")
	node, err := exec.LookPath("node")
	if sdk == "" || err != nil {
		t.Skip("set TOOLAGENT_TEST_MCP_SDK_DIR to a directory where `npm install @modelcontextprotocol/sdk` ran, with node on PATH, to run the TypeScript SDK client (.ci/run does)")
	}
	script, err := filepath.Abs("testdata/mcp-ts-driver.mjs")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, script)
	cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+sdk, runMainEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &tsDriver{in: in, out: bufio.NewScanner(out), cmd: cmd}
	d.out.Buffer(nil, 4<<20)
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return d
}

// do sends one command and decodes its answer into v; an answer with an
// error fails the test.
func (d *tsDriver) do(t *testing.T, cmd map[string]any, v any) {
	t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	if !d.out.Scan() {
		t.Fatalf("the TypeScript client ended during %s: %v", b, d.out.Err())
	}
	var e struct{ Error string }
	if json.Unmarshal(d.out.Bytes(), &e) == nil && e.Error != "" {
		t.Fatalf("the TypeScript client, %s: %s", b, e.Error)
	}
	if v != nil {
		if err := json.Unmarshal(d.out.Bytes(), v); err != nil {
			t.Fatalf("answer %s: %v", d.out.Bytes(), err)
		}
	}
}

// tsCall is the driver's answer to a call.
type tsCall struct {
	IsError    bool
	Text       string
	Structured dispatch.Result
}

func (d *tsDriver) call(t *testing.T, cmd string) tsCall {
	t.Helper()
	var c tsCall
	d.do(t, map[string]any{"op": "call", "name": "guarded", "arguments": map[string]any{"cmd": cmd}}, &c)
	return c
}

// TestMCPHeldCallFinishesInsideMCP is the acceptance of a held call for
// MCP clients without tasks, with the official TypeScript SDK: the call
// is held; asked again while pending it is the same approval; the daemon
// restarts (the client reconnects); it is approved (over HTTP through
// the API by an approver, over stdio with the CLI on the host); the same
// call again gets the raw result inside MCP, and the command ran once;
// the call after that is a new request. Over stdio the hints name only
// what works there. Files store over HTTP and stdio, PostgreSQL over HTTP.
func TestMCPHeldCallFinishesInsideMCP(t *testing.T) {
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

	check := func(t *testing.T, drv *tsDriver, marker string, connect func(), restart func(), approve func(id string)) {
		cmd := "echo ran >> " + marker + " && echo finished-inside-mcp"
		connect()
		held := drv.call(t, cmd)
		id := held.Structured.ApprovalID
		if !held.IsError || held.Structured.Status != dispatch.ApprovalRequired || id == "" {
			t.Fatalf("held call = %+v; want approval_required with an id", held)
		}
		if !strings.Contains(held.Text, "call this tool again with the same arguments") {
			t.Errorf("held call text does not name the retry:\n%s", held.Text)
		}
		if again := drv.call(t, cmd); again.Structured.ApprovalID != id || again.Structured.Status != dispatch.ApprovalRequired {
			t.Errorf("asked again while pending = %s %s; want the same approval %s", again.Structured.Status, again.Structured.ApprovalID, id)
		}
		drv.do(t, map[string]any{"op": "close"}, nil)
		restart()
		connect()
		approve(id)
		got := drv.call(t, cmd)
		if got.IsError || got.Text != "finished-inside-mcp\n" || !got.Structured.Collected || got.Structured.ApprovalID != id {
			t.Errorf("the call after approval = %+v; want the raw result of approval %s", got, id)
		}
		if b, _ := os.ReadFile(marker); string(b) != "ran\n" {
			t.Errorf("the approved command ran %q; want once", b)
		}
		if next := drv.call(t, cmd); next.Structured.Status != dispatch.ApprovalRequired || next.Structured.ApprovalID == id {
			t.Errorf("the call after the result was collected = %s %s; want a new approval", next.Structured.Status, next.Structured.ApprovalID)
		}
		drv.do(t, map[string]any{"op": "close"}, nil)
	}

	overHTTP := func(t *testing.T, env map[string]string, args ...string) {
		drv := startTSDriver(t)
		state, files := t.TempDir(), proctest.HostDir(t)
		args = append([]string{"--tools", tools, "--state", state, "--files-root", files}, args...)
		d := startDaemon(t, env, args...)
		marker := filepath.Join(files, "ran")
		check(t, drv, marker,
			func() {
				drv.do(t, map[string]any{"op": "connect", "mode": "http", "url": d.url + "/mcp", "token": aliceToken}, nil)
			},
			func() {
				if err := d.stop(t); err != nil {
					t.Fatalf("stop: %v", err)
				}
				d = startDaemon(t, env, args...)
			},
			func(id string) {
				code, a, body := d.as(bobToken).approval(t, "POST", id, `{"decision":"approve"}`)
				if code != 200 || a.res.Output != "finished-inside-mcp\n" {
					t.Fatalf("bob approves %s = %d %s", id, code, body)
				}
			})
	}
	t.Run("http files", func(t *testing.T) { t.Parallel(); overHTTP(t, env) })
	t.Run("http postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.URL(t)
		pg := map[string]string{"TOOLAGENT_STORE_URL": url}
		for k, v := range env {
			pg[k] = v
		}
		overHTTP(t, pg, "--store", "postgres")
	})
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		drv := startTSDriver(t)
		state := t.TempDir()
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		files := proctest.HostDir(t)
		marker := filepath.Join(files, "ran")
		connect := func() {
			drv.do(t, map[string]any{"op": "connect", "mode": "stdio", "command": exe, "args": []string{"mcp", "--tools", tools, "--state", state, "--files-root", files, "--log-level", "warn"}}, nil)
		}
		check(t, drv, marker, connect, func() {}, func(id string) {
			waitControl(t, state)
			out, errOut, code := runCLI(t, nil, "approvals", "approve", id, "--state", state)
			if code != 0 || !strings.Contains(out, "finished-inside-mcp") {
				t.Fatalf("approvals approve %s = exit %d %s %s", id, code, out, errOut)
			}
		})
		// Over stdio the hints name the retry and the CLI, not HTTP.
		connect()
		held := drv.call(t, "echo hint")
		for _, bad := range []string{"GET /v1/approvals", "POST /v1/approvals"} {
			if strings.Contains(held.Text, bad) {
				t.Errorf("over stdio the held call names %q:\n%s", bad, held.Text)
			}
		}
		if !strings.Contains(held.Text, "toolagent approvals approve "+held.Structured.ApprovalID) {
			t.Errorf("over stdio the held call does not name the CLI:\n%s", held.Text)
		}
		drv.do(t, map[string]any{"op": "close"}, nil)
	})
}

// consoleApprove signs in to the web console with token and approves id
// there, as the approver's browser would (the form's CSRF token, the
// console's own Origin).
func consoleApprove(t *testing.T, base, token, id string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(base+"/ui/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(base + "/ui/approvals")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(page)
	if m == nil || !bytes.Contains(page, []byte(id)) {
		t.Fatalf("the console's approvals page does not show %s with a CSRF token", id)
	}
	req, _ := http.NewRequest("POST", base+"/ui/approvals/"+id, strings.NewReader(url.Values{"decision": {"approve"}, "csrf": {string(m[1])}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("approving %s in the console = %d", id, resp.StatusCode)
	}
}

// tsTask is a Task as the TypeScript client gives it.
type tsTask struct {
	TaskID, Status, StatusMessage string
}

// TestMCPHeldCallAsTask is the acceptance of a held call for MCP clients
// with tasks (2025-11-25), with the official TypeScript SDK's
// experimental task API over HTTP (files, PostgreSQL) and stdio: the
// server declares tasks and the catalog's tools take them; a held call
// is a task in input_required naming its approval and where to decide
// it; approved, the client's stream ends with the raw result; a task
// survives a daemon restart between hold and approval; tasks/cancel
// withdraws a pending request, which never runs.
func TestMCPHeldCallAsTask(t *testing.T) {
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

	type server struct {
		connect map[string]any // the driver's connect command
		restart func()         // nil: nothing to restart (stdio: a new process per connect)
		approve func(id string)
		where   func(id string) string // what the waiting message names
	}
	check := func(t *testing.T, drv *tsDriver, marker string, srv *server) {
		connect := func() {
			t.Helper()
			var conn struct {
				Capabilities struct {
					Tasks struct {
						Cancel   map[string]any
						Requests struct{ Tools struct{ Call map[string]any } }
					}
				}
				Tools []struct {
					Name      string
					Execution struct{ TaskSupport string }
				}
			}
			drv.do(t, srv.connect, &conn)
			if conn.Capabilities.Tasks.Requests.Tools.Call == nil || conn.Capabilities.Tasks.Cancel == nil {
				t.Errorf("capabilities = %+v; want tasks with requests.tools.call and cancel", conn.Capabilities)
			}
			for _, tl := range conn.Tools {
				want := "optional"
				if tl.Name == "find_tool" || tl.Name == "call_tool" {
					want = ""
				}
				if tl.Execution.TaskSupport != want {
					t.Errorf("tool %s: execution.taskSupport %q; want %q", tl.Name, tl.Execution.TaskSupport, want)
				}
			}
		}
		call := func(cmd string) tsTask {
			t.Helper()
			var first struct {
				Type string
				Task tsTask
			}
			drv.do(t, map[string]any{"op": "callTask", "name": "guarded", "arguments": map[string]any{"cmd": cmd}}, &first)
			if first.Type != "taskCreated" || first.Task.Status != "input_required" || first.Task.TaskID == "" {
				t.Fatalf("a held call as a task = %+v; want taskCreated, input_required", first)
			}
			return first.Task
		}
		get := func(id string) tsTask {
			t.Helper()
			var tk tsTask
			drv.do(t, map[string]any{"op": "getTask", "taskId": id}, &tk)
			return tk
		}
		connect()
		cmd := func(word string) string { return "echo " + word + " >> " + marker + " && echo " + word }

		// Approved while the client's stream waits: the stream ends with
		// the raw result.
		tk := call(cmd("one"))
		if w := get(tk.TaskID); w.Status != "input_required" || !strings.Contains(w.StatusMessage, tk.TaskID) || !strings.Contains(w.StatusMessage, srv.where(tk.TaskID)) {
			t.Errorf("tasks/get of a held call = %+v; want input_required naming approval %s and %q", w, tk.TaskID, srv.where(tk.TaskID))
		}
		srv.approve(tk.TaskID)
		var end struct {
			Messages []struct {
				Type, Text, Error string
				IsError           bool
				Task              tsTask
				Meta              map[string]any
			}
		}
		drv.do(t, map[string]any{"op": "awaitTask"}, &end)
		last := end.Messages[len(end.Messages)-1]
		if last.Type != "result" || last.IsError || last.Text != "one\n" {
			t.Errorf("the task's stream ended with %+v; want the raw result", end.Messages)
		}
		if done := get(tk.TaskID); done.Status != "completed" {
			t.Errorf("tasks/get after the run = %+v; want completed", done)
		}

		// A restart between hold and approval loses nothing.
		tk = call(cmd("two"))
		drv.do(t, map[string]any{"op": "close"}, nil)
		if srv.restart != nil {
			srv.restart()
		}
		connect()
		if w := get(tk.TaskID); w.Status != "input_required" {
			t.Errorf("tasks/get after a restart = %+v; want input_required", w)
		}
		srv.approve(tk.TaskID)
		var res tsCall
		drv.do(t, map[string]any{"op": "taskResult", "taskId": tk.TaskID}, &res)
		if res.IsError || res.Text != "two\n" || res.Structured.ApprovalID != tk.TaskID {
			t.Errorf("tasks/result after a restart = %+v; want the raw result", res)
		}

		// tasks/cancel withdraws a pending request; it never runs.
		tk = call(cmd("three"))
		var cancel struct {
			OK       tsTask
			RPCError *struct{ Code int }
		}
		drv.do(t, map[string]any{"op": "cancelTask", "taskId": tk.TaskID}, &cancel)
		if cancel.OK.Status != "cancelled" || !strings.Contains(cancel.OK.StatusMessage, "withdrawn") {
			t.Errorf("tasks/cancel = %+v; want cancelled, withdrawn", cancel)
		}
		end.Messages = nil
		drv.do(t, map[string]any{"op": "awaitTask"}, &end)
		// The stream saw the task cancelled (the client says so as an
		// error), or it was waiting in tasks/result and gets what the
		// call would have returned: a tool error saying it was withdrawn.
		last = end.Messages[len(end.Messages)-1]
		sawCancelled := last.Type == "error" && strings.Contains(last.Error, "was cancelled")
		gotWithdrawn := last.Type == "result" && last.IsError && strings.Contains(last.Text, "withdrawn by its caller")
		if !sawCancelled && !gotWithdrawn {
			t.Errorf("the cancelled task's stream ended with %+v; want it cancelled or a tool error saying it was withdrawn", end.Messages)
		}
		drv.do(t, map[string]any{"op": "cancelTask", "taskId": tk.TaskID}, &cancel)
		if cancel.RPCError == nil || cancel.RPCError.Code != -32602 {
			t.Errorf("cancelling a cancelled task = %+v; want -32602", cancel)
		}
		if b, _ := os.ReadFile(marker); string(b) != "one\ntwo\n" {
			t.Errorf("the commands that ran: %q; want one and two, once each", b)
		}
		drv.do(t, map[string]any{"op": "close"}, nil)
	}
	overHTTP := func(t *testing.T, env map[string]string, args ...string) {
		drv := startTSDriver(t)
		state, files := t.TempDir(), proctest.HostDir(t)
		args = append([]string{"--tools", tools, "--state", state, "--files-root", files}, args...)
		d := startDaemon(t, env, args...)
		approvals := 0
		srv := &server{
			where: func(id string) string { return "/ui/approvals#" + id },
			approve: func(id string) {
				// The first through the web console, the next through the API.
				if approvals++; approvals == 1 {
					consoleApprove(t, d.url, bobToken, id)
					return
				}
				if code, _, body := d.as(bobToken).approval(t, "POST", id, `{"decision":"approve"}`); code != 200 {
					t.Fatalf("bob approves %s = %d %s", id, code, body)
				}
			},
		}
		srv.connect = map[string]any{"op": "connect", "mode": "http", "url": d.url + "/mcp", "token": aliceToken}
		srv.restart = func() {
			if err := d.stop(t); err != nil {
				t.Fatalf("stop: %v", err)
			}
			d = startDaemon(t, env, args...)
			srv.connect["url"] = d.url + "/mcp"
		}
		check(t, drv, filepath.Join(files, "ran"), srv)
	}
	t.Run("http files", func(t *testing.T) { t.Parallel(); overHTTP(t, env) })
	t.Run("http postgres", func(t *testing.T) {
		t.Parallel()
		pg := map[string]string{"TOOLAGENT_STORE_URL": pgtest.URL(t)}
		for k, v := range env {
			pg[k] = v
		}
		overHTTP(t, pg, "--store", "postgres")
	})
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		drv := startTSDriver(t)
		state, files := t.TempDir(), proctest.HostDir(t)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		check(t, drv, filepath.Join(files, "ran"), &server{
			connect: map[string]any{"op": "connect", "mode": "stdio", "command": exe, "args": []string{"mcp", "--tools", tools, "--state", state, "--files-root", files, "--log-level", "warn"}},
			where:   func(id string) string { return "toolagent approvals approve " + id + " --state " + state },
			approve: func(id string) {
				waitControl(t, state)
				if out, errOut, code := runCLI(t, nil, "approvals", "approve", id, "--state", state); code != 0 {
					t.Fatalf("approvals approve %s = exit %d %s %s", id, code, out, errOut)
				}
			},
		})
	})
}
