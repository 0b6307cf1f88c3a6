package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/proc/proctest"
	"github.com/toolagent/toolagent/internal/runs"
)

// streamReq opens POST /v1/call (body non-empty) or GET path as a stream
// with the given Accept, as token.
func streamReq(t *testing.T, d *liveDaemon, method, path, body, accept, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, d.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// goOnFlag returns the path of a file, not there yet, that a test tool
// waits for: the test creates it once it saw what the tool did first, so
// ordering is asserted by the test's own steps, never by timing. It is
// outside /tmp, which is the sandbox's own.
func goOnFlag(t *testing.T) string {
	t.Helper()
	dir := proctest.HostDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "go-on")
}

// streamCallCancelable makes a streaming call of tool whose connection
// the returned func drops (the client hangs up).
func streamCallCancelable(t *testing.T, d *liveDaemon, tool string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+"/v1/call", strings.NewReader(`{"tool":"`+tool+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, cancel
}

// nextEvent reads one NDJSON event.
func nextEvent(t *testing.T, sc *bufio.Scanner) runs.Event {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("the stream ended: %v", sc.Err())
	}
	var e runs.Event
	if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
		t.Fatalf("a stream line is not an event: %q: %v", sc.Bytes(), err)
	}
	return e
}

// TestServeStream: a streaming call answers at once and shows the tool's
// output while it runs (the tool waits for a file the test creates only
// after it saw the first line); a second client resumes the run's events
// after the seq it has; the one result event carries the same Result as
// a plain call, and GET /v1/runs/{id} shows the run, running then done.
// Another caller's token does not see the run.
func TestServeStream(t *testing.T) {
	t.Parallel()
	flag := goOnFlag(t)
	tools := t.TempDir()
	putTool(t, tools, "waiter", testTool("waiter", "intent: wait\nmethod: run\nexecutor: shell\nargv: [sh, -c, \"echo first; while [ ! -e "+flag+" ]; do sleep 0.05; done; echo second >&2; exit 3\"]\nparams_schema: {}\nconstraints:\n  timeout_ms: 120000\n"))
	const alice, bob = "alice-0123456789abcdef", "bob-0123456789abcdef00"
	d := startDaemon(t, map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + alice + ",bob:call:" + bob}, "--tools", tools)

	resp := streamReq(t, d, "POST", "/v1/call", `{"tool":"waiter"}`, "application/x-ndjson", alice)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("streaming call: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	first := nextEvent(t, sc)
	id := resp.Header.Get("X-Run-Id")
	if first.Event != "run" || first.Data != id || id == "" {
		t.Fatalf("first event %+v, X-Run-Id %q; want the run event naming the run", first, id)
	}
	out := nextEvent(t, sc)
	if out.Event != runs.EventStdout || out.Data != "first\n" {
		t.Fatalf("second event %+v; want stdout first", out)
	}

	// While the tool waits: the run is running, and bob cannot see it.
	d.token = alice
	code, body := d.request(t, "GET", "/v1/runs/"+id, "")
	var v struct {
		State  string
		Events int64
		Result *dispatch.Result
	}
	if code != 200 || json.Unmarshal(body, &v) != nil || v.State != "running" || v.Result != nil {
		t.Errorf("GET /v1/runs/%s while it runs = %d %s; want running, no result", id, code, body)
	}
	d.token = bob
	if code, body := d.request(t, "GET", "/v1/runs/"+id, ""); code != 404 {
		t.Errorf("another caller's GET /v1/runs/%s = %d %s; want 404", id, code, body)
	}
	d.token = ""

	// A second client resumes after the stdout event.
	resumed := streamReq(t, d, "GET", fmt.Sprintf("/v1/runs/%s/events?after=%d", id, out.Seq), "", "application/x-ndjson", alice)
	rsc := bufio.NewScanner(resumed.Body)

	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*bufio.Scanner{"the call": sc, "the resumed stream": rsc} {
		e := nextEvent(t, s)
		if e.Event != runs.EventStderr || e.Data != "second\n" || e.Seq != out.Seq+1 {
			t.Errorf("%s: %+v; want stderr second with seq %d", name, e, out.Seq+1)
		}
		e = nextEvent(t, s)
		var res dispatch.Result
		if e.Event != runs.EventResult || json.Unmarshal(e.Result, &res) != nil {
			t.Fatalf("%s: %+v; want the result event", name, e)
		}
		if res.RunID != id || res.Status != dispatch.Error || res.ExitCode != 3 || res.Output != "first\n" || res.Stderr != "second\n" {
			t.Errorf("%s: result %+v; want run %s, error, exit 3, the whole output", name, res, id)
		}
		if s.Scan() {
			t.Errorf("%s: an event after the result: %q", name, s.Text())
		}
	}
	d.token = alice
	code, body = d.request(t, "GET", "/v1/runs/"+id, "")
	if code != 200 || json.Unmarshal(body, &v) != nil || v.State != "done" || v.Result == nil || v.Result.ExitCode != 3 {
		t.Errorf("GET /v1/runs/%s after it ended = %d %s; want done with the result", id, code, body)
	}
	// A plain call has a run too.
	c, res := d.call(t, "waiter", nil)
	code, body = d.request(t, "GET", "/v1/runs/"+res.RunID, "")
	if c != 200 || code != 200 || !strings.Contains(string(body), `"state":"done"`) {
		t.Errorf("GET /v1/runs/{id} of a plain call = %d %s", code, body)
	}
	if code, _ := d.request(t, "GET", "/v1/runs/"+id+"/events?after=x", ""); code != 400 {
		t.Errorf("after=x = %d; want 400", code)
	}
}

// TestServeStreamSSE: with Accept text/event-stream the same events come
// as server-sent events, each with its seq as the id.
func TestServeStreamSSE(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "hello", testTool("hello", "intent: greet\nmethod: run\nexecutor: shell\nargv: [echo, hello]\nparams_schema: {}\n"))
	d := startDaemon(t, nil, "--tools", tools)
	resp := streamReq(t, d, "POST", "/v1/call", `{"tool":"hello"}`, "text/event-stream", "")
	b := new(strings.Builder)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	got := b.String()
	id := resp.Header.Get("X-Run-Id")
	for _, want := range []string{
		"id: 0\nevent: run\ndata: {\"seq\":0,\"event\":\"run\",\"data\":\"" + id + "\"}\n\n",
		"id: 1\nevent: stdout\ndata: {\"seq\":1,\"event\":\"stdout\",\"data\":\"hello\\n\"}\n\n",
		"id: 2\nevent: result\ndata: {\"seq\":2,\"event\":\"result\",\"result\":{\"run_id\":\"" + id + "\",\"ok\":true,\"status\":\"success\"",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("SSE stream:\n%s\nwant it to contain:\n%s", got, want)
		}
	}
}

// TestServeStreamClientGone: a streaming client that hangs up cancels the
// call once no client re-attached within the grace, as without streaming;
// its run records why.
func TestServeStreamClientGone(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	marker := "toolagent-stream-gone-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	putTool(t, tools, "forever", testTool("forever", "intent: hang\nmethod: run\nexecutor: shell\nargv: [bash, -c, \"(exec -a "+marker+" sleep 1000) & echo started; wait\"]\nparams_schema: {}\nconstraints:\n  timeout_ms: 600000\n"))
	// No grace for a re-attach: the hang-up cancels at once.
	d := startDaemon(t, nil, "--tools", tools, "--stream-reattach-grace", "1ns")
	resp, cancel := streamCallCancelable(t, d, "forever")
	id := resp.Header.Get("X-Run-Id")
	sc := bufio.NewScanner(resp.Body)
	nextEvent(t, sc) // run
	if e := nextEvent(t, sc); e.Data != "started\n" {
		t.Fatalf("want the tool's first line, got %+v", e)
	}
	cancel() // the client hangs up
	resp.Body.Close()
	var res dispatch.Result
	pollUntil(t, "the run to end", func() bool {
		code, body := d.request(t, "GET", "/v1/runs/"+id, "")
		var v struct{ Result *dispatch.Result }
		if code != 200 || json.Unmarshal(body, &v) != nil || v.Result == nil {
			return false
		}
		res = *v.Result
		return true
	})
	if !strings.Contains(res.Error, "client gone") || res.OK {
		t.Errorf("result of a call whose streaming client hung up: %+v; want it cancelled, client gone", res)
	}
	// Its processes are gone, the background one too.
	pollUntil(t, "no process of the hung-up call", func() bool { return proctest.CountMarked(marker) == 0 })
}

// TestCallFollow: `toolagent call --follow` prints the tool's stdout and
// stderr as the stream brings them, then the result, and exits by its
// status: through a daemon (--server), and in-process without one.
func TestCallFollow(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "both", testTool("both", "intent: print\nmethod: run\nexecutor: shell\nargv: [sh, -c, \"echo out1; echo err1 >&2; echo out2; exit 3\"]\nparams_schema: {}\n"))
	d := startDaemon(t, nil, "--tools", tools)
	for name, args := range map[string][]string{
		"through the daemon": {"call", "--server", d.url, "--follow", "both"},
		"in-process":         {"call", "--tools", tools, "--state", t.TempDir(), "--follow", "both"},
	} {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, nil, args...)
			if said, rest, ok := strings.Cut(stderr, "\n"); ok && strings.HasPrefix(said, "toolagent: asking the daemon at "+d.url) {
				stderr = rest // which daemon answers, said first
			} else if name == "through the daemon" {
				t.Errorf("call --server: stderr %q does not say first which daemon it asks", stderr)
			}
			out, result, ok := strings.Cut(stdout, "{")
			var res dispatch.Result
			if !ok || json.Unmarshal([]byte("{"+result), &res) != nil {
				t.Fatalf("stdout %q: want the output, then the result", stdout)
			}
			if out != "out1\nout2\n" || stderr != "err1\n" || res.ExitCode != 3 || res.Output != "out1\nout2\n" || code != exitFailed {
				t.Errorf("call --follow: stdout %q stderr %q result exit %d, code %d; want out1 out2, err1, exit 3 and code %d", out, stderr, res.ExitCode, code, exitFailed)
			}
		})
	}
}

// TestMCPProgress: an MCP tools/call with a progress token gets
// notifications/progress while the tool runs, the latest output line as
// the message (the tool waits on a file the test creates only after it
// saw the first notification); without a token, none.
func TestMCPProgress(t *testing.T) {
	t.Parallel()
	flag := goOnFlag(t)
	tools := t.TempDir()
	putTool(t, tools, "stepper", testTool("stepper", "intent: step\nmethod: run\nexecutor: shell\nargv: [sh, -c, \"echo step one; while [ ! -e "+flag+" ]; do sleep 0.05; done; echo step two\"]\nparams_schema: {}\nconstraints:\n  timeout_ms: 120000\n"))
	d := startDaemon(t, nil, "--tools", tools)
	notes := make(chan *mcp.ProgressNotificationParams, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "progress-test", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			notes <- req.Params
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	pollUntil(t, "stepper in tools/list", func() bool { return slices.Contains(listNames(t, cs), "stepper") })
	params := &mcp.CallToolParams{Name: "stepper", Arguments: map[string]any{}}
	params.SetProgressToken("tok-1")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), params)
		if err != nil {
			t.Errorf("tools/call: %v", err)
		}
		done <- res
	}()
	first := <-notes
	if first.ProgressToken != "tok-1" || first.Message != "step one" || first.Progress != 1 {
		t.Errorf("first progress %+v; want token tok-1, message step one, progress 1", first)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res == nil || res.IsError {
		t.Fatalf("tools/call stepper = %+v", res)
	}
	// The last line was sent before the result (the client may hand it
	// to its handler a moment later), with a larger progress.
	select {
	case n := <-notes:
		if n.Message != "step two" || n.Progress <= first.Progress {
			t.Errorf("second progress %+v; want step two, progress above %v", n, first.Progress)
		}
	case <-time.After(30 * time.Second): // a deadline, not a margin
		t.Errorf("no progress for the last line")
	}
	// Its run is kept like an API call's, whatever the door.
	var r struct {
		RunID string `json:"run_id"`
	}
	if b, err := json.Marshal(res.StructuredContent); err != nil || json.Unmarshal(b, &r) != nil || r.RunID == "" {
		t.Fatalf("the MCP result names no run: %v", res.StructuredContent)
	}
	if code, body := d.request(t, "GET", "/v1/runs/"+r.RunID, ""); code != 200 || !strings.Contains(string(body), `"state":"done"`) {
		t.Errorf("GET /v1/runs/%s of an MCP call = %d %s; want the done run", r.RunID, code, body)
	}
	// Without a progress token: no notification.
	if text, isErr := callText(t, cs, "stepper", map[string]any{}); isErr || text != "step one\nstep two\n" {
		t.Errorf("tools/call without a token = %q %v", text, isErr)
	}
	select {
	case n := <-notes:
		t.Errorf("a call without a progress token got progress %+v", n)
	default:
	}
}

// TestServeStreamGatekeeper: a streaming call of a gatekeeper tool shows
// the remote command's output as it runs (the gatekeeper protocol's
// streamed /exec answer), then the result.
func TestServeStreamGatekeeper(t *testing.T) {
	t.Parallel()
	flag := goOnFlag(t)
	env := map[string]string{"TOOLAGENT_GATEKEEPER_TOKEN": gatekeeperTestToken}
	gk := startGatekeeper(t, env, "--listen", "127.0.0.1:0")
	tools := t.TempDir()
	putTool(t, tools, "remote-waiter", testTool("remote-waiter", "intent: wait remotely\nmethod: run\nexecutor: gatekeeper\nargv: [sh, -c, \"echo first; while [ ! -e "+flag+" ]; do sleep 0.05; done; echo second >&2\"]\nparams_schema: {}\nconstraints:\n  timeout_ms: 120000\n"))
	d := startDaemon(t, map[string]string{"TOOLAGENT_GATEKEEPER_URL": gk.url, "TOOLAGENT_GATEKEEPER_TOKEN": gatekeeperTestToken}, "--tools", tools)
	pollUntil(t, "remote-waiter enabled", func() bool { return d.tool(t, "remote-waiter").Status == catalog.Enabled })

	resp := streamReq(t, d, "POST", "/v1/call", `{"tool":"remote-waiter"}`, "application/x-ndjson", "")
	sc := bufio.NewScanner(resp.Body)
	nextEvent(t, sc) // run
	if e := nextEvent(t, sc); e.Event != runs.EventStdout || e.Data != "first\n" {
		t.Fatalf("first event after run: %+v; want the remote command's first line while it runs", e)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if e := nextEvent(t, sc); e.Event != runs.EventStderr || e.Data != "second\n" {
		t.Errorf("next event: %+v; want stderr second", e)
	}
	e := nextEvent(t, sc)
	var res dispatch.Result
	if e.Event != runs.EventResult || json.Unmarshal(e.Result, &res) != nil || res.Status != dispatch.Success || res.Output != "first\n" || res.Stderr != "second\n" {
		t.Errorf("result event %+v (%+v); want success with the whole output", e, res)
	}
}

// TestServeStreamResume: a streaming client whose connection drops
// re-attaches with after=SEQ: the call went on, and the resumed stream
// starts at the next event (no chunk lost, none repeated) and ends with
// the result.
func TestServeStreamResume(t *testing.T) {
	t.Parallel()
	flag := goOnFlag(t)
	tools := t.TempDir()
	putTool(t, tools, "waiter", testTool("waiter", "intent: wait\nmethod: run\nexecutor: shell\nargv: [sh, -c, \"echo first; while [ ! -e "+flag+" ]; do sleep 0.05; done; echo second; echo third >&2\"]\nparams_schema: {}\nconstraints:\n  timeout_ms: 120000\n"))
	d := startDaemon(t, nil, "--tools", tools, "--stream-reattach-grace", "10m")
	resp, drop := streamCallCancelable(t, d, "waiter")
	id := resp.Header.Get("X-Run-Id")
	sc := bufio.NewScanner(resp.Body)
	nextEvent(t, sc)
	got := nextEvent(t, sc)
	if got.Data != "first\n" {
		t.Fatalf("want the first line, got %+v", got)
	}
	drop() // the connection drops
	resp.Body.Close()
	pollUntil(t, "the dropped stream to be gone", func() bool {
		code, body := d.request(t, "GET", "/v1/runs/"+id, "")
		return code == 200 && strings.Contains(string(body), `"state":"running"`) // and the call goes on
	})
	resumed := streamReq(t, d, "GET", fmt.Sprintf("/v1/runs/%s/events?after=%d", id, got.Seq), "", "application/x-ndjson", "")
	rsc := bufio.NewScanner(resumed.Body)
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut string
	next := got.Seq + 1
	for {
		e := nextEvent(t, rsc)
		if e.Seq != next {
			t.Fatalf("resumed event %+v; want seq %d: no event lost or repeated", e, next)
		}
		next++
		switch e.Event {
		case runs.EventStdout:
			out += e.Data
		case runs.EventStderr:
			errOut += e.Data
		case runs.EventResult:
			var res dispatch.Result
			if json.Unmarshal(e.Result, &res) != nil || res.Status != dispatch.Success || res.Output != "first\nsecond\n" || res.Stderr != "third\n" {
				t.Errorf("result after the resume: %s; want success with the whole output", e.Result)
			}
			if got.Data+out != res.Output || errOut != res.Stderr {
				t.Errorf("chunks %q + %q, stderr %q; want them to make the result's output %q and stderr %q", got.Data, out, errOut, res.Output, res.Stderr)
			}
			return
		}
	}
}

// TestServeStreamSameResult: the stream's result event is the Result the
// plain call answers for the same command (only the run's own id, times
// differ), here with a capped output that keeps both ends.
func TestServeStreamSameResult(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "count", testTool("count", "intent: count\nmethod: run\nexecutor: shell\nargv: [seq, \"1\", \"100000\"]\nparams_schema: {}\nconstraints:\n  max_output_bytes: 1000\n  output: { keep: both }\n"))
	d := startDaemon(t, nil, "--tools", tools)
	_, plain := d.call(t, "count", nil)
	resp := streamReq(t, d, "POST", "/v1/call", `{"tool":"count"}`, "application/x-ndjson", "")
	dec := json.NewDecoder(resp.Body)
	var streamed dispatch.Result
	var chunks strings.Builder
	for {
		var e runs.Event
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("the stream ended without a result: %v", err)
		}
		if e.Event == runs.EventStdout {
			chunks.WriteString(e.Data)
		}
		if e.Event == runs.EventResult {
			if err := json.Unmarshal(e.Result, &streamed); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	for _, r := range []*dispatch.Result{&plain, &streamed} {
		r.RunID, r.DurationMS, r.QueuedMS = "", 0, 0
	}
	a, _ := json.Marshal(plain)
	b, _ := json.Marshal(streamed)
	if string(a) != string(b) {
		t.Errorf("streamed result:\n%s\nplain result:\n%s", b, a)
	}
	if int64(chunks.Len()) != plain.OutputBytes {
		t.Errorf("the stream's chunks hold %d bytes; want all %d the tool wrote", chunks.Len(), plain.OutputBytes)
	}
}

// BenchmarkServeEchoStream: `echo hello` through POST /v1/call, plain and
// streamed (Accept NDJSON), in one run; compare the two lines' ns/op:
//
//	go test -run '^$' -bench ServeEchoStream -benchtime 2000x ./cmd/toolagent/
func BenchmarkServeEchoStream(b *testing.B) {
	tools := b.TempDir()
	putTool(b, tools, "shell-exec", shellExec(b))
	d := startDaemon(b, map[string]string{}, "--tools", tools)
	body := `{"tool":"shell-exec","params":{"cmd":"echo hello"}}`
	call := func(stream bool) bool {
		req, _ := http.NewRequest("POST", d.url+"/v1/call", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if stream {
			req.Header.Set("Accept", "application/x-ndjson")
		}
		resp, err := d.client.Do(req)
		if err != nil {
			b.Error(err)
			return false
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(raw), `"output":"hello\n"`) {
			b.Errorf("answer %s", raw)
			return false
		}
		return true
	}
	for range 200 { // warm up: the binary, the tools and the page cache
		call(false)
	}
	for _, mode := range []string{"plain", "stream"} {
		b.Run(mode, func(b *testing.B) {
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !call(mode == "stream") {
						return
					}
				}
			})
		})
	}
}

// TestServeKeepMillion (issue 18's acceptance): keep tail and keep both on
// `seq 1 1000000` return exactly the bytes expected.
func TestServeKeepMillion(t *testing.T) {
	t.Parallel()
	var full strings.Builder
	for i := 1; i <= 1000000; i++ {
		full.WriteString(strconv.Itoa(i))
		full.WriteByte('\n')
	}
	all := full.String()
	n := len(all)
	tools := t.TempDir()
	for _, keep := range []string{"tail", "both"} {
		putTool(t, tools, "seq-"+keep, testTool("seq-"+keep, "intent: count\nmethod: run\nexecutor: shell\nargv: [seq, \"1\", \"1000000\"]\nparams_schema: {}\nconstraints:\n  max_output_bytes: 4096\n  output: { keep: "+keep+" }\n"))
	}
	d := startDaemon(t, nil, "--tools", tools)
	for keep, want := range map[string]string{
		"tail": all[n-4096:],
		"both": all[:2048] + proc.OmittedMarker(int64(n-4096)) + all[n-2048:],
	} {
		_, res := d.call(t, "seq-"+keep, nil)
		if res.Output != want || res.OutputBytes != int64(n) || !res.Truncated || res.ExitCode != 0 {
			t.Errorf("keep %s: %d bytes (of %d) exit %d truncated %v; want exactly the %d expected bytes", keep, len(res.Output), res.OutputBytes, res.ExitCode, res.Truncated, len(want))
		}
	}
}

// TestServeStreamProgress: a tool's progress line on stderr is a progress
// event in the stream (and stays in stderr).
func TestServeStreamProgress(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "copier", testTool("copier", "intent: copy\nmethod: run\nexecutor: shell\nargv: [sh, -c, \"echo 'TOOLAGENT_PROGRESS 1/2 first half' >&2; echo 'TOOLAGENT_PROGRESS 2/2 done' >&2\"]\nparams_schema: {}\n"))
	d := startDaemon(t, nil, "--tools", tools)
	resp := streamReq(t, d, "POST", "/v1/call", `{"tool":"copier"}`, "application/x-ndjson", "")
	dec := json.NewDecoder(resp.Body)
	var progress []string
	for {
		var e runs.Event
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("the stream ended without a result: %v", err)
		}
		if e.Event == runs.EventProgress {
			progress = append(progress, fmt.Sprintf("%v/%v %s", e.Progress, e.Total, e.Message))
		}
		if e.Event == runs.EventResult {
			var res dispatch.Result
			json.Unmarshal(e.Result, &res)
			if !strings.Contains(res.Stderr, "TOOLAGENT_PROGRESS 2/2 done") {
				t.Errorf("stderr %q; want the progress lines kept", res.Stderr)
			}
			break
		}
	}
	if want := []string{"1/2 first half", "2/2 done"}; !slices.Equal(progress, want) {
		t.Errorf("progress events %q; want %q", progress, want)
	}
}
