package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// syncBuffer is a goroutine-safe log sink the test reads while the daemon
// writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// inProcess is a long-running subcommand (serve, gatekeeper) running in
// this test process (wtf MustRunMain), logging JSON into logs.
type inProcess struct {
	name   string
	addr   string // host:port from its "listening" log line
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// startInProcess runs args (subcommand first; it must log JSON) with env,
// stops it at cleanup, and waits for its "listening" log line.
func startInProcess(t testing.TB, env map[string]string, args []string) *inProcess {
	t.Helper()
	p := &inProcess{name: args[0], logs: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		p.done <- run(ctx, args, func(k string) string { return env[k] }, strings.NewReader(""), io.Discard, p.logs)
	}()
	t.Cleanup(func() { p.stop(t) })
	pollUntil(t, p.name+"'s listening log line", func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited early: %v\n%s", p.name, err, p.logs)
		default:
		}
		sc := bufio.NewScanner(strings.NewReader(p.logs.String()))
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				p.addr = line.Addr
				return true
			}
		}
		return false
	})
	return p
}

// stop cancels the subcommand's context and returns what run returned;
// its port is closed then.
func (p *inProcess) stop(t testing.TB) error {
	t.Helper()
	p.cancel()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return 30s after cancel\n%s", p.name, p.logs)
		return nil
	}
}

// liveDaemon is a `toolagent serve` running in-process.
type liveDaemon struct {
	*inProcess
	url    string
	client *http.Client
	token  string
}

// pollUntil polls cond until it holds, failing the test after 15s. It never
// sleeps in place of a condition.
func pollUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// startDaemon runs serve on 127.0.0.1:0 with the given extra flags and
// environment, reads the bound address from the "listening" log line, and
// waits for /readyz. The daemon is stopped at cleanup.
func startDaemon(t testing.TB, env map[string]string, args ...string) *liveDaemon {
	t.Helper()
	d := &liveDaemon{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 600}}}
	t.Cleanup(d.client.CloseIdleConnections) // runs after the daemon stopped
	full := append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json", "--state", t.TempDir()}, args...)
	d.inProcess = startInProcess(t, env, full)
	d.url = "http://" + d.addr
	pollUntil(t, "/readyz", func() bool {
		resp, err := d.client.Get(d.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return d
}

func (d *liveDaemon) request(t testing.TB, method, path, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, d.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

func (d *liveDaemon) call(t testing.TB, tool string, params any) (int, dispatch.Result) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"tool": tool, "params": params})
	code, b := d.request(t, "POST", "/v1/call", string(body))
	var res dispatch.Result
	if code != 0 {
		if err := json.Unmarshal(b, &res); err != nil {
			t.Errorf("POST /v1/call %s: %d %q is not a result: %v", body, code, b, err)
		}
	}
	return code, res
}

func testTool(name, body string) string {
	return "name: " + name + "\ndisplay: " + name + "\nauthor: test\ncreated: 2026-05-31\nwhy: a test tool\n" + body
}

// shellExec is the seed's generic shell tool, as native-repo ships it.
func shellExec(t testing.TB) string {
	b, err := os.ReadFile("../../native-repo/tools/shell-exec/TOOL.hdlp")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func putTool(t testing.TB, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	// Write beside and rename over, as editors and git do.
	tmp := filepath.Join(dir, name, ".TOOL.hdlp.tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name, "TOOL.hdlp")); err != nil {
		t.Fatal(err)
	}
}

func TestServeCall(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	d := startDaemon(t, nil, "--tools", tools)
	code, res := d.call(t, "shell-exec", map[string]any{"cmd": "echo hello"})
	if code != 200 || res.Status != dispatch.Success || res.Output != "hello\n" {
		t.Errorf("call shell-exec echo hello = %d %s %q; want 200 success %q", code, res.Status, res.Output, "hello\n")
	}
	if err := d.stop(t); err != nil {
		t.Errorf("run() = %v after cancel; want nil", err)
	}
	found := false
	for _, line := range strings.Split(d.logs.String(), "\n") {
		var l struct{ Msg, Log, Caller, Door, Tool, RunID string }
		var raw map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && json.Unmarshal([]byte(line), &raw) == nil {
			l.RunID, _ = raw["run_id"].(string)
			found = found || (l.Msg == "call" && l.Log == "audit" && l.Caller == "anonymous" && l.Door == "api" && l.Tool == "shell-exec" && l.RunID == res.RunID && l.RunID != "")
		}
	}
	if !found {
		t.Errorf("no audit line of the call (caller anonymous, door api, run_id %q) in the logs:\n%s", res.RunID, d.logs)
	}
}

// TestServeHotReload edits the tools tree under a running daemon: add,
// break, fix, delete, and checks each is seen without a restart.
func TestServeHotReload(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	d := startDaemon(t, nil, "--tools", tools, "--reload-debounce", "20ms", "--reload-max-wait", "200ms")
	greet := func(word string) string {
		return testTool("greet", `intent: say a word
method: run
executor: shell
argv: [echo, "`+word+`", "{name}"]
params_schema:
  name: { type: string, required: true, description: "who" }
`)
	}
	greetOutput := func() (dispatch.ResultStatus, string) {
		_, res := d.call(t, "greet", map[string]any{"name": "bob"})
		return res.Status, res.Output
	}

	start := time.Now()
	putTool(t, tools, "greet", greet("hello"))
	pollUntil(t, "the added tool to answer", func() bool { s, _ := greetOutput(); return s == dispatch.Success })
	t.Logf("add -> callable latency: %v (debounce 20ms)", time.Since(start))
	if _, out := greetOutput(); out != "hello bob\n" {
		t.Errorf("greet = %q; want %q", out, "hello bob\n")
	}

	putTool(t, tools, "greet", "name: greet\nintent: [unclosed\n")
	var view catalog.ToolView
	pollUntil(t, "the broken file's error in /v1/tools/greet", func() bool {
		_, b := d.request(t, "GET", "/v1/tools/greet", "")
		view = catalog.ToolView{}
		json.Unmarshal(b, &view)
		return view.LoadError != ""
	})
	if view.Status != catalog.Stale || !strings.Contains(view.LoadError, "greet/TOOL.hdlp") {
		t.Errorf("GET /v1/tools/greet = status %s, load error %q; want stale with the file named", view.Status, view.LoadError)
	}
	if s, out := greetOutput(); s != dispatch.Success || out != "hello bob\n" {
		t.Errorf("greet while broken = %s %q; want the last good definition: success %q", s, out, "hello bob\n")
	}

	putTool(t, tools, "greet", greet("howdy"))
	pollUntil(t, "the fixed definition to answer", func() bool { _, out := greetOutput(); return out == "howdy bob\n" })

	if err := os.RemoveAll(filepath.Join(tools, "greet")); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the deleted tool to be not_found", func() bool { s, _ := greetOutput(); return s == dispatch.NotFound })
	if code, _ := d.call(t, "greet", map[string]any{"name": "bob"}); code != 404 {
		t.Errorf("call of a deleted tool = HTTP %d; want 404", code)
	}
}

const (
	testReadToken = "reader-0123456789abcdef"
	testCallToken = "caller-0123456789abcdef"
)

func TestServeAuth(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	tokensFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokensFile, []byte("# test tokens\nreader:read:"+testReadToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TOOLAGENT_TOKENS": "ci-bot:call:" + testCallToken}
	d := startDaemon(t, env, "--tools", tools, "--tokens-file", tokensFile)
	hello := map[string]any{"cmd": "echo hello"}
	for _, tc := range []struct {
		token string
		want  int
	}{{"", 401}, {"nope-0123456789abcdef", 401}, {testReadToken, 403}, {testCallToken, 200}} {
		d.token = tc.token
		code, _ := d.call(t, "shell-exec", hello)
		if code != tc.want {
			t.Errorf("call with token %.6q = %d; want %d", tc.token, code, tc.want)
		}
	}
	d.token = ""
	code, body := d.request(t, "GET", "/v1/tools/shell-exec", "")
	if code != 401 || strings.Contains(string(body), "shell") || strings.Contains(string(body), "reader") {
		t.Errorf("GET /v1/tools/shell-exec without a token = %d %s; want 401 naming nothing", code, body)
	}
	d.stop(t)
	logs := d.logs.String()
	for _, secret := range []string{testReadToken, testCallToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("a token secret appears in the logs")
		}
	}
	if !strings.Contains(logs, `"caller":"ci-bot"`) {
		t.Errorf("the audit line does not name the token ci-bot as caller:\n%s", logs)
	}
}

func TestServeRefusesOpenNonLoopback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		listen string
		env    map[string]string
		want   string // "" = starts
	}{
		{"0.0.0.0:0", nil, "refusing to listen on 0.0.0.0:0 without API tokens"},
		{":0", nil, "refusing to listen on :0 without API tokens"},
		{"example.com:0", nil, "without API tokens"},
		{"[::1]:0", nil, ""},
		{"localhost:0", nil, ""},
	}
	for _, tc := range tests {
		ctx, cancel := context.WithCancel(context.Background())
		var logs syncBuffer
		done := make(chan error, 1)
		args := []string{"serve", "--listen", tc.listen, "--tools", host.Embedded, "--state", t.TempDir()}
		go func() { done <- run(ctx, args, func(k string) string { return tc.env[k] }, nil, io.Discard, &logs) }()
		if tc.want != "" {
			err := <-done
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("serve --listen %s = %v; want an error containing %q", tc.listen, err, tc.want)
			}
			cancel()
			continue
		}
		pollUntil(t, "serve on "+tc.listen+" to listen", func() bool {
			select {
			case err := <-done:
				done <- err
				return true
			default:
			}
			return strings.Contains(logs.String(), "listening")
		})
		cancel()
		if err := <-done; err != nil && !strings.Contains(err.Error(), "cannot assign") && !strings.Contains(err.Error(), "address family") {
			t.Errorf("serve --listen %s = %v; want it to start", tc.listen, err)
		}
	}
}

// TestServeShutdown: a call running at SIGTERM finishes within the grace
// period; past a short grace, a long call is killed and run returns
// promptly.
// Not parallel: it finds the call's process among every process below
// the test binary and wants none left (descendants).
func TestServeShutdown(t *testing.T) {
	tests := []struct {
		name       string
		grace      string
		cmd        string
		wantStatus dispatch.ResultStatus
		wantOutput string
		maxWait    time.Duration // from cancel to run returning
	}{
		{"finishes within grace", "10s", "sleep 2; echo done", dispatch.Success, "done\n", 9 * time.Second},
		{"killed after grace", "100ms", "sleep 30; echo never", dispatch.Cancelled, "", 4 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tools := t.TempDir()
			putTool(t, tools, "shell-exec", shellExec(t))
			d := startDaemon(t, nil, "--tools", tools, "--shutdown-grace", tc.grace)
			type answer struct {
				code int
				res  dispatch.Result
			}
			got := make(chan answer, 1)
			go func() {
				code, res := d.call(t, "shell-exec", map[string]any{"cmd": tc.cmd})
				got <- answer{code, res}
			}()
			// In flight counts from the dispatch, before the process starts
			// (a sandbox start is slow on a busy machine): wait for the
			// tool's own sleep, so shutdown meets a running process.
			pollUntil(t, "the call's process to be running", func() bool {
				_, b := d.request(t, "GET", "/metrics", "")
				if !bytes.Contains(b, []byte("toolagent_calls_in_flight 1")) {
					return false
				}
				for _, pid := range proctest.Descendants(t) {
					if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
						return true
					}
				}
				return false
			})
			start := time.Now()
			if err := d.stop(t); err != nil {
				t.Errorf("run() = %v; want nil", err)
			}
			if took := time.Since(start); took > tc.maxWait {
				t.Errorf("run() returned %v after cancel; want under %v", took, tc.maxWait)
			}
			a := <-got
			if a.res.Status != tc.wantStatus || a.res.Output != tc.wantOutput {
				t.Errorf("the running call = HTTP %d %s %q; want %s %q", a.code, a.res.Status, a.res.Output, tc.wantStatus, tc.wantOutput)
			}
			if tc.wantStatus == dispatch.Cancelled && (!strings.HasPrefix(a.res.Error, "cancelled: shutdown") || a.res.ExitCode <= 128) {
				t.Errorf("the call killed at shutdown: error %q, exit %d; want cancelled: shutdown and the real signal exit code", a.res.Error, a.res.ExitCode)
			}
			pollUntil(t, "no child processes", func() bool { return len(proctest.Descendants(t)) == 0 })
		})
	}
}

// TestServeOutputKeep: constraints.output.keep through the daemon: tail
// keeps a log's end, both keeps the two halves with the marker between;
// output_bytes counts everything and truncated is set. An HTTP executor,
// which keeps the head of a body, disables a tool that asks for another
// end, saying why.
func TestServeOutputKeep(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	seq := func(keep string) string {
		return testTool("seq-"+keep, "intent: count\nmethod: run\nexecutor: shell\nargv: [seq, \"1\", \"200\"]\nparams_schema: {}\nconstraints:\n  max_output_bytes: 64\n  output: { keep: "+keep+" }\n")
	}
	putTool(t, tools, "seq-tail", seq("tail"))
	putTool(t, tools, "seq-both", seq("both"))
	putTool(t, tools, "api-tail", testTool("api-tail", "intent: ping\nmethod: ping\nexecutor: hlpd-api\nparams_schema: {}\nconstraints:\n  output: { keep: tail }\n"))
	d := startDaemon(t, nil, "--tools", tools, "--hlpd-url", "http://127.0.0.1:9")
	full := ""
	for i := 1; i <= 200; i++ {
		full += strconv.Itoa(i) + "\n"
	}
	n := len(full)
	for name, want := range map[string]string{
		"seq-tail": full[n-64:],
		"seq-both": full[:32] + proc.OmittedMarker(int64(n-64)) + full[n-32:],
	} {
		code, res := d.call(t, name, nil)
		if code != 200 || res.Status != dispatch.Success || res.Output != want || res.OutputBytes != int64(n) || !res.Truncated {
			t.Errorf("call %s = %d %s output %q bytes %d truncated %v; want %q of %d bytes, truncated", name, code, res.Status, res.Output, res.OutputBytes, res.Truncated, want, n)
		}
	}
	code, res := d.call(t, "api-tail", nil)
	if code != http.StatusConflict || res.Status != dispatch.Disabled || !strings.Contains(res.Error, "constraints.output.keep") {
		t.Errorf("call api-tail = %d %s %q; want 409 disabled naming constraints.output.keep", code, res.Status, res.Error)
	}
}
