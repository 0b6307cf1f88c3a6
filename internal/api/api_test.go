package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/reload"
	"github.com/toolagent/toolagent/internal/runs"
	"github.com/toolagent/toolagent/internal/scan"
)

func tool(name, body string) string {
	return "name: " + name + "\ndisplay: " + name + "\nauthor: test\ncreated: 2026-05-31\nwhy: a test tool\n" + body
}

// testTools is the catalog the API tests serve: the real shell executor
// runs echo, fail and true; gk needs an executor this build lacks.
var testTools = fstest.MapFS{
	"echo/TOOL.hdlp": {Data: []byte(tool("echo", `intent: print a message back
method: run
executor: shell
argv: [echo, "{msg}"]
params_schema:
  msg: { type: string, required: true, description: "the message" }
tags: [text, read-only]
`))},
	"fail/TOOL.hdlp": {Data: []byte(tool("fail", `intent: always fails with exit code 3
method: run
executor: shell
argv: [sh, -c, "echo boom >&2; exit 3"]
params_schema: {}
tags: [text]
`))},
	"nop/TOOL.hdlp": {Data: []byte(tool("nop", `intent: do nothing successfully
method: run
executor: shell
argv: ["true"]
params_schema: {}
tags: [read-only]
`))},
	"confirm/TOOL.hdlp": {Data: []byte(tool("confirm", `intent: deletes everything after confirmation
method: run
executor: shell
argv: ["true"]
params_schema: {}
constraints:
  require_confirm: true
`))},
	"gk/TOOL.hdlp": {Data: []byte(tool("gk", `intent: run a command on a remote host
method: exec
executor: gatekeeper
params_schema:
  cmd: { type: string, required: true, description: "command" }
tags: [remote, read-only]
`))},
	"broken/TOOL.hdlp": {Data: []byte("name: broken\nnot yaml: [\n")},
}

// stale has a good definition first and a broken one after, so the
// second snapshot serves it stale.
var staleGood = tool("stale", `intent: print the date
method: run
executor: shell
argv: [date]
params_schema: {}
`)

type fixture struct {
	store *catalog.Store
	reg   *prometheus.Registry
	h     http.Handler
	sync  *fakeSyncer
}

type fakeSyncer struct {
	pokes int
}

func (f *fakeSyncer) Status() reload.Status { return reload.Status{Rev: "rev-x", Reloads: 2} }
func (f *fakeSyncer) Poke()                 { f.pokes++ }

func execs() map[hldp.ExecutorKind]executors.Executor {
	return map[hldp.ExecutorKind]executors.Executor{hldp.Shell: shell.New(shell.Options{})}
}

func check(t *hldp.Tool) (catalog.Status, string) {
	if t.Executor != hldp.Shell {
		return catalog.Disabled, "executor " + string(t.Executor) + " is not configured"
	}
	return catalog.Enabled, ""
}

func newFixture(t testing.TB, tokens *Tokens) *fixture {
	t.Helper()
	fsys := fstest.MapFS{}
	for k, v := range testTools {
		fsys[k] = v
	}
	fsys["stale/TOOL.hdlp"] = &fstest.MapFile{Data: []byte(staleGood)}
	opts := scan.Options{Check: check}
	first, _, err := scan.Build(nil, scan.FromFS(fsys, "rev1"), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	fsys["stale/TOOL.hdlp"] = &fstest.MapFile{Data: []byte("name: stale\nintent: [\n")}
	second, _, err := scan.Build(first, scan.FromFS(fsys, "rev2"), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	st := new(catalog.Store)
	st.Swap(second)
	d := dispatch.New(st, execs(), dispatch.Options{})
	f := &fixture{store: st, reg: prometheus.NewRegistry(), sync: &fakeSyncer{}}
	f.h = New(Options{Tokens: tokens, Registry: f.reg}, st, d, f.sync, nil)
	return f
}

// do sends one request to the handler and returns the status and body.
func (f *fixture) do(t testing.TB, method, path, token, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

func TestCall(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name       string
		body       string
		wantCode   int
		wantStatus dispatch.ResultStatus
		wantOutput string
		wantExit   int
	}{
		{"success", `{"tool":"echo","params":{"msg":"hello"}}`, 200, dispatch.Success, "hello\n", 0},
		{"no data", `{"tool":"nop"}`, 200, dispatch.NoData, "", 0},
		{"ran and failed is 200", `{"tool":"fail","params":{}}`, 200, dispatch.Error, "", 3},
		{"dry run", `{"tool":"echo","params":{"msg":"x"},"dry_run":true}`, 200, dispatch.DryRun, "", -1},
		{"invalid params", `{"tool":"echo","params":{"msg":1}}`, 400, dispatch.InvalidParams, "", -1},
		{"missing param", `{"tool":"echo"}`, 400, dispatch.InvalidParams, "", -1},
		{"not found", `{"tool":"deploy-app"}`, 404, dispatch.NotFound, "", -1},
		{"disabled", `{"tool":"gk","params":{"cmd":"id"}}`, 409, dispatch.Disabled, "", -1},
		{"failed definition", `{"tool":"broken"}`, 409, dispatch.Disabled, "", -1},
		{"approval required", `{"tool":"confirm"}`, 409, dispatch.ApprovalRequired, "", -1},
		{"stale still serves", `{"tool":"stale"}`, 200, dispatch.Success, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := f.do(t, "POST", "/v1/call", "", tc.body)
			var res dispatch.Result
			if err := json.Unmarshal([]byte(body), &res); err != nil {
				t.Fatalf("POST /v1/call %s: body %q is not a Result: %v", tc.body, body, err)
			}
			if code != tc.wantCode || res.Status != tc.wantStatus || res.ExitCode != tc.wantExit {
				t.Errorf("POST /v1/call %s = %d %s exit %d; want %d %s exit %d\n%s", tc.body, code, res.Status, res.ExitCode, tc.wantCode, tc.wantStatus, tc.wantExit, body)
			}
			if tc.wantOutput != "" && res.Output != tc.wantOutput {
				t.Errorf("POST /v1/call %s: output %q; want %q", tc.body, res.Output, tc.wantOutput)
			}
		})
	}
}

func TestBusyIs429(t *testing.T) {
	// The tool touches a marker once it runs, so the test knows the first
	// call holds the tool's only slot (the in-flight gauge rises earlier,
	// before dispatch takes the slot).
	marker := filepath.Join(t.TempDir(), "running")
	fsys := fstest.MapFS{"slow/TOOL.hdlp": {Data: []byte(tool("slow", `intent: wait
method: run
executor: shell
argv: [sh, -c, "touch '`+marker+`' && exec sleep 5"]
params_schema: {}
constraints:
  max_concurrency: 1
`))}}
	snap, _, err := scan.Build(nil, scan.FromFS(fsys, "r"), nil, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := new(catalog.Store)
	st.Swap(snap)
	d := dispatch.New(st, execs(), dispatch.Options{})
	reg := prometheus.NewRegistry()
	h := New(Options{Registry: reg}, st, d, nil, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/call", strings.NewReader(`{"tool":"slow"}`))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	waitFor(t, "the first call to be running", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	resp, err := http.Post(srv.URL+"/v1/call", "application/json", strings.NewReader(`{"tool":"slow"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), `"status":"busy"`) {
		t.Errorf("second call = %d, headers %v, body %s; want 429 with Retry-After and status busy", resp.StatusCode, resp.Header, b)
	}
	cancel() // the client goes away: the first call's process group is killed
	<-first
	waitFor(t, "the first call to end", func() bool { return gauge(t, reg, "toolagent_calls_in_flight") == 0 })
}

// gauge returns the value of the unlabelled gauge name in reg.
func gauge(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestDecodeErrors(t *testing.T) {
	f := newFixture(t, nil)
	big := `{"tool":"echo","params":{"msg":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}}`
	tests := []struct {
		name, body string
		wantCode   int
		wantErr    string
	}{
		{"empty", "", 400, "empty; want a JSON object"},
		{"syntax", `{"tool":`, 400, "not valid JSON"},
		{"not json", `<call tool="echo"/>`, 400, "not valid JSON at byte 1"},
		{"array", `[1]`, 400, "want a JSON object, found a JSON array"},
		{"wrong type", `{"tool":5}`, 400, `field "tool": want a string, found a JSON number`},
		{"unknown field", `{"tool":"echo","parms":{}}`, 400, `unknown field "parms"`},
		{"trailing", `{"tool":"echo"} {}`, 400, "found more data after it"},
		// encoding/json matches names without regard to case; the API does not.
		{"key in upper case", `{"TOOL":"echo"}`, 400, `unknown field "TOOL" (field names are exact: dry_run, params, tool)`},
		{"key in mixed case", `{"tool":"echo","Dry_Run":true}`, 400, `unknown field "Dry_Run"`},
		// encoding/json keeps the last of two equal keys; the API refuses.
		{"duplicate key", `{"tool":"rm-all","tool":"echo"}`, 400, `key "tool" appears twice in the request`},
		{"duplicate param", `{"tool":"echo","params":{"msg":"a","msg":"b"}}`, 400, `key "msg" appears twice in params`},
		{"duplicate nested key", `{"tool":"echo","params":{"msg":"a","o":{"k":1,"l":[{"x":1,"x":2}]}}}`, 400, `key "x" appears twice in params.o.l[]`},
		{"no tool", `{"params":{}}`, 400, "tool is required"},
		{"too large", big, 413, "larger than the limit of 1048576 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := f.do(t, "POST", "/v1/call", "", tc.body)
			var eb errorBody
			if err := json.Unmarshal([]byte(body), &eb); err != nil {
				t.Fatalf("body %q is not an error JSON: %v", body, err)
			}
			if code != tc.wantCode || !strings.Contains(eb.Error, tc.wantErr) {
				t.Errorf("POST /v1/call %.40q = %d %q; want %d containing %q", tc.body, code, eb.Error, tc.wantCode, tc.wantErr)
			}
		})
	}
}

func TestTools(t *testing.T) {
	f := newFixture(t, nil)
	names := func(body string) []string {
		var l struct {
			Revision string `json:"revision"`
			Tools    []struct {
				Name     string `json:"name"`
				Status   string `json:"status"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			t.Fatalf("body %q: %v", body, err)
		}
		var out []string
		for _, tl := range l.Tools {
			n := tl.Name + tl.Function.Name
			if tl.Status != "" && tl.Status != "enabled" {
				n += ":" + tl.Status
			}
			out = append(out, n)
		}
		return out
	}
	tests := []struct {
		path string
		want []string
	}{
		{"/v1/tools", []string{"confirm", "echo", "fail", "nop", "stale:stale"}},
		{"/v1/tools?all=1", []string{"broken:failed", "confirm", "echo", "fail", "gk:disabled", "nop", "stale:stale"}},
		{"/v1/tools?format=openai", []string{"confirm", "echo", "fail", "nop", "stale"}},
	}
	for _, tc := range tests {
		code, body := f.do(t, "GET", tc.path, "", "")
		if code != 200 {
			t.Fatalf("GET %s = %d %s; want 200", tc.path, code, body)
		}
		if diff := cmp.Diff(tc.want, names(body)); diff != "" {
			t.Errorf("GET %s tools (-want +got):\n%s", tc.path, diff)
		}
	}
	for _, bad := range []string{"/v1/tools?all=maybe", "/v1/tools?format=xml", "/v1/tools?format=openai&all=1"} {
		if code, body := f.do(t, "GET", bad, "", ""); code != 400 {
			t.Errorf("GET %s = %d %s; want 400", bad, code, body)
		}
	}

	code, body := f.do(t, "GET", "/v1/tools/stale", "", "")
	var v catalog.ToolView
	if err := json.Unmarshal([]byte(body), &v); err != nil || code != 200 {
		t.Fatalf("GET /v1/tools/stale = %d %s (%v)", code, body, err)
	}
	if v.Status != catalog.Stale || v.Revision != "rev1" || v.Intent != "print the date" || !strings.Contains(v.LoadError, "stale/TOOL.hdlp") || v.ParamsSchema == nil {
		t.Errorf("GET /v1/tools/stale = %+v; want stale, revision rev1, the old intent, the load error and the schema", v)
	}
	if code, body := f.do(t, "GET", "/v1/tools/nope", "", ""); code != 404 || !strings.Contains(body, `no tool named \"nope\"`) {
		t.Errorf("GET /v1/tools/nope = %d %s; want 404 naming it", code, body)
	}
}

// TestToolsTagFilter: ?tag= narrows every form of the listing to the
// tools carrying all the tags asked for, whether the tags come as
// repeated parameters or as a comma list; the summary view shows them.
func TestToolsTagFilter(t *testing.T) {
	f := newFixture(t, nil)
	type listed struct {
		Name     string   `json:"name"`
		Tags     []string `json:"tags"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	list := func(path string) []listed {
		t.Helper()
		code, body := f.do(t, "GET", path, "", "")
		var l struct {
			Tools []listed `json:"tools"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &l) != nil {
			t.Fatalf("GET %s = %d %s; want 200 and a tool list", path, code, body)
		}
		return l.Tools
	}
	tests := []struct {
		path string
		want []string
	}{
		{"/v1/tools?tag=read-only", []string{"echo", "nop"}},
		{"/v1/tools?tag=read-only&tag=text", []string{"echo"}},
		{"/v1/tools?tag=text,read-only", []string{"echo"}},
		{"/v1/tools?tag=text", []string{"echo", "fail"}},
		{"/v1/tools?tag=remote", nil},
		{"/v1/tools?tag=remote&all=1", []string{"gk"}},
		{"/v1/tools?tag=read-only&format=openai", []string{"echo", "nop"}},
		{"/v1/tools?tag=nothing-has-this", nil},
		{"/v1/tools?tag=", []string{"confirm", "echo", "fail", "nop", "stale"}},
	}
	for _, tc := range tests {
		var got []string
		for _, tl := range list(tc.path) {
			got = append(got, tl.Name+tl.Function.Name)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("GET %s tools (-want +got):\n%s", tc.path, diff)
		}
	}
	if got := list("/v1/tools?tag=text")[0].Tags; !slices.Equal(got, []string{"text", "read-only"}) {
		t.Errorf("GET /v1/tools?tag=text: echo's tags = %q; want [text read-only] as the definition has them", got)
	}
	for _, bad := range []string{"/v1/tools?tag=Git", "/v1/tools?tag=read_only", "/v1/tools?tag=a,b%20c"} {
		if code, body := f.do(t, "GET", bad, "", ""); code != 400 || !strings.Contains(body, "query tag:") {
			t.Errorf("GET %s = %d %s; want 400 naming the tag query", bad, code, body)
		}
	}
}

func TestMatch(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		body      string
		wantCode  int
		wantFound bool
		wantFirst string
	}{
		{`{"intent":"print a message back"}`, 200, true, "echo"},
		{`{"intent":"print a message back","limit":1}`, 200, true, "echo"},
		{`{"intent":"发射火箭到月球"}`, 200, false, ""},
		{`{"intent":""}`, 400, false, ""},
		{`{"intent":"x","limit":4}`, 400, false, ""},
		{`{"intent":"x","limit":-1}`, 400, false, ""},
	}
	for _, tc := range tests {
		code, body := f.do(t, "POST", "/v1/match", "", tc.body)
		var m catalog.MatchResponse
		json.Unmarshal([]byte(body), &m)
		first := ""
		if len(m.Candidates) > 0 {
			first = m.Candidates[0].Name
		}
		if code != tc.wantCode || m.Found != tc.wantFound || first != tc.wantFirst {
			t.Errorf("POST /v1/match %s = %d found %v first %q; want %d %v %q\n%s", tc.body, code, m.Found, first, tc.wantCode, tc.wantFound, tc.wantFirst, body)
		}
	}
}

func TestReadyAndStatus(t *testing.T) {
	st := new(catalog.Store)
	d := dispatch.New(st, execs(), dispatch.Options{})
	sync := &fakeSyncer{}
	h := New(Options{}, st, d, sync, nil)
	get := func(method, path string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		return w.Code, w.Body.String()
	}
	for _, p := range []string{"/readyz", "/v1/tools", "/v1/tools/echo"} {
		if code, body := get("GET", p); code != 503 {
			t.Errorf("before the first snapshot GET %s = %d %s; want 503", p, code, body)
		}
	}
	if code, _ := get("GET", "/healthz"); code != 200 {
		t.Errorf("GET /healthz = %d; want 200", code)
	}
	st.Swap(catalog.New("r1", nil, catalog.Options{}))
	if code, body := get("GET", "/readyz"); code != 200 {
		t.Errorf("after the first snapshot GET /readyz = %d %s; want 200", code, body)
	}
	if code, body := get("GET", "/v1/status"); code != 200 || !strings.Contains(body, `"revision":"rev-x"`) || !strings.Contains(body, `"reloads":2`) {
		t.Errorf("GET /v1/status = %d %s; want the syncer's status", code, body)
	}
	if code, body := get("POST", "/v1/sync"); code != 202 || sync.pokes != 1 {
		t.Errorf("POST /v1/sync = %d %s, %d pokes; want 202 and one poke", code, body, sync.pokes)
	}
}

func TestMetrics(t *testing.T) {
	f := newFixture(t, nil)
	f.do(t, "POST", "/v1/call", "", `{"tool":"echo","params":{"msg":"hi"}}`)
	f.do(t, "POST", "/v1/call", "", `{"tool":"no-such-tool-1"}`)
	f.do(t, "POST", "/v1/call", "", `{"tool":"no-such-tool-2"}`)
	code, body := f.do(t, "GET", "/metrics", "", "")
	if code != 200 {
		t.Fatalf("GET /metrics = %d", code)
	}
	for _, want := range []string{
		`toolagent_calls_total{status="success",tool="echo"} 1`,
		`toolagent_calls_total{status="not_found",tool="_unknown"} 2`,
		`toolagent_call_duration_seconds_count{tool="echo"} 1`,
		`toolagent_calls_in_flight 0`,
		`toolagent_tools{status="enabled"} 4`,
		`toolagent_tools{status="stale"} 1`,
		`toolagent_tools{status="disabled"} 1`,
		`toolagent_tools{status="failed"} 1`,
		`toolagent_reloads_total 2`,
		`toolagent_reload_failures_total 0`,
		`toolagent_snapshot_age_seconds `,
		`toolagent_snapshot_generation 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "no-such-tool") {
		t.Errorf("GET /metrics has a caller-chosen tool name as a label")
	}
}

const (
	readTok  = "read-secret-0123456789"
	callTok  = "call-secret-0123456789"
	adminTok = "admin-secret-0123456789"
)

func TestAuth(t *testing.T) {
	var toks Tokens
	if err := toks.Parse("test", "reader:read:"+readTok+"\ncaller:call:"+callTok+", boss:admin:"+adminTok); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, &toks)
	call := `{"tool":"echo","params":{"msg":"hi"}}`
	tests := []struct {
		method, path, token, body string
		want                      int
	}{
		{"GET", "/healthz", "", "", 200},
		{"GET", "/readyz", "", "", 200},
		{"GET", "/v1/tools", "", "", 401},
		{"GET", "/v1/tools", "wrong-secret-0123456789", "", 401},
		{"GET", "/v1/tools", readTok + "x", "", 401},
		{"GET", "/v1/tools", readTok, "", 200},
		{"GET", "/v1/tools/echo", readTok, "", 200},
		{"GET", "/metrics", "", "", 401},
		{"GET", "/metrics", readTok, "", 200},
		{"POST", "/v1/match", readTok, `{"intent":"echo"}`, 200},
		{"POST", "/v1/call", "", call, 401},
		{"POST", "/v1/call", readTok, call, 403},
		{"POST", "/v1/call", callTok, call, 200},
		{"POST", "/v1/call", adminTok, call, 200},
		{"POST", "/v1/sync", callTok, "", 403},
		{"POST", "/v1/sync", adminTok, "", 202},
		{"GET", "/v1/status", readTok, "", 200},
	}
	for _, tc := range tests {
		code, body := f.do(t, tc.method, tc.path, tc.token, tc.body)
		if code != tc.want {
			t.Errorf("%s %s with token %.6q = %d %s; want %d", tc.method, tc.path, tc.token, code, body, tc.want)
		}
	}

	// A refusal is the same whatever is asked for, and names nothing.
	refusals := map[int]map[string]bool{401: {}, 403: {}}
	for _, req := range []struct{ method, path, token, body string }{
		{"GET", "/v1/tools/echo", "", ""},
		{"GET", "/v1/tools/does-not-exist", "", ""},
		{"GET", "/v1/tools/echo", "bad-secret-0123456789", ""},
		{"POST", "/v1/call", "", `{"tool":"echo"}`},
		{"POST", "/v1/call", "", `{"tool":"does-not-exist"}`},
		{"POST", "/v1/call", readTok, `{"tool":"echo"}`},
		{"POST", "/v1/call", readTok, `{"tool":"does-not-exist"}`},
		{"POST", "/v1/sync", readTok, ""},
	} {
		code, body := f.do(t, req.method, req.path, req.token, req.body)
		if refusals[code] == nil {
			t.Fatalf("%s %s = %d; want a refusal", req.method, req.path, code)
		}
		refusals[code][body] = true
		for _, leak := range []string{"echo", "does-not-exist", "reader", "caller", "boss", "secret"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s %s refusal %s names %q", req.method, req.path, body, leak)
			}
		}
	}
	for code, bodies := range refusals {
		if len(bodies) != 1 {
			t.Errorf("%d refusals differ: %v; want one body", code, bodies)
		}
	}
}

func TestCallerIsTokenName(t *testing.T) {
	var toks Tokens
	if err := toks.Parse("test", "ci-bot:call:"+callTok); err != nil {
		t.Fatal(err)
	}
	var got string
	inv := invokerFunc(func(ctx context.Context, c dispatch.Call) dispatch.Result {
		got = c.Caller
		return dispatch.Result{Status: dispatch.Success}
	})
	st := new(catalog.Store)
	st.Swap(catalog.New("r", nil, catalog.Options{}))
	for _, tc := range []struct {
		toks *Tokens
		tok  string
		want string
	}{{&toks, callTok, "ci-bot"}, {nil, "", Anonymous}} {
		h := New(Options{Tokens: tc.toks}, st, inv, nil, nil)
		req := httptest.NewRequest("POST", "/v1/call", strings.NewReader(`{"tool":"x"}`))
		if tc.tok != "" {
			req.Header.Set("Authorization", "Bearer "+tc.tok)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if got != tc.want {
			t.Errorf("caller = %q; want %q", got, tc.want)
		}
	}
}

type invokerFunc func(ctx context.Context, c dispatch.Call) dispatch.Result

func (f invokerFunc) Invoke(ctx context.Context, c dispatch.Call) dispatch.Result { return f(ctx, c) }

func TestParseTokens(t *testing.T) {
	const secret = "s3cret-s3cret-s3cret"
	tests := []struct {
		name, text string
		wantLen    int
		wantErr    string
	}{
		{"one", "a:call:" + secret, 1, ""},
		{"comments and blanks", "# who\n\na:read:" + secret + "\n  \nb:admin:x" + secret + "\n", 2, ""},
		{"commas", "a:read:" + secret + ",b:call:y" + secret, 2, ""},
		{"colon in secret", "a:call:" + secret + ":more", 1, ""},
		{"missing role", "a:" + secret, 0, "test:1: want name:role:secret"},
		{"bad role", "a:root:" + secret, 0, `unknown role "root"`},
		{"short", "a:call:short", 0, "shorter than 16"},
		{"bad name", "a b:call:" + secret, 0, "token name"},
		{"dup name", "a:call:" + secret + "\na:read:x" + secret, 0, "test:2: token a: the name is used twice"},
		{"dup secret", "a:call:" + secret + "\nb:read:" + secret, 0, "the same secret as token a"},
	}
	for _, tc := range tests {
		var toks Tokens
		err := toks.Parse("test", tc.text)
		if tc.wantErr == "" {
			if err != nil || toks.Len() != tc.wantLen {
				t.Errorf("%s: Parse() = %v, %d tokens; want nil, %d", tc.name, err, toks.Len(), tc.wantLen)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: Parse() = %v; want an error containing %q", tc.name, err, tc.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: Parse() error %q shows the secret", tc.name, err)
		}
	}
}

// TestOpenAPI checks api/openapi.yaml against routes.go both ways: every
// route is documented with its method and role, and nothing else is.
func TestOpenAPI(t *testing.T) {
	data, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if method == "parameters" {
				continue
			}
			fields, _ := op.(map[string]any)
			role, _ := fields["x-toolagent-role"].(string)
			documented = append(documented, strings.ToUpper(method)+" "+path+" "+role)
		}
	}
	var served []string
	s := &server{}
	for _, rt := range s.routes() {
		served = append(served, rt.method+" "+rt.path+" "+rt.role.String())
	}
	slices.Sort(documented)
	slices.Sort(served)
	if diff := cmp.Diff(served, documented); diff != "" {
		t.Errorf("routes.go (-) and api/openapi.yaml (+) disagree on method, path or x-toolagent-role:\n%s", diff)
	}
}

// BenchmarkAPICallTrue measures a call of a tool running `true` through
// the real handler and dispatcher over loopback HTTP; compare it with
// BenchmarkExecTrue, a bare exec of the same program.
func BenchmarkAPICallTrue(b *testing.B) {
	f := newFixture(b, nil)
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	body := []byte(`{"tool":"nop"}`)
	client := srv.Client()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Post(srv.URL+"/v1/call", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkExecTrue is the floor BenchmarkAPICallTrue is measured against.
func BenchmarkExecTrue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestErrorsAreJSON: the mux's own answers are JSON too: another method
// on a route is 405 naming the allowed ones, an unknown path 404 with the
// routes, and GET / the index (issue 14, trap 4).
func TestErrorsAreJSON(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		method, path string
		code         int
		want         string
	}{
		{"GET", "/v1/call", 405, "method GET not allowed on /v1/call; use POST"},
		{"DELETE", "/v1/approvals/x", 405, "use GET, POST"},
		{"GET", "/nope", 404, "no route GET /nope"},
		{"GET", "/", 200, `"POST /v1/call"`},
	} {
		code, body := f.do(t, tc.method, tc.path, "", "")
		if code != tc.code || !strings.Contains(body, tc.want) || !json.Valid([]byte(body)) {
			t.Errorf("%s %s = %d %s; want %d JSON containing %q", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
}

// TestStreamCallFollowedAsItStarts: a streaming call's run has its reader
// (the stream) before the call starts, so an executor that asks once, as
// it starts, whether anyone follows (the gatekeeper's) hears yes; a plain
// call's run has none.
func TestStreamCallFollowedAsItStarts(t *testing.T) {
	reg := runs.New(runs.Options{})
	followed := make(chan bool, 1)
	inv := invokerFunc(func(ctx context.Context, c dispatch.Call) dispatch.Result {
		run, ok := reg.Get(c.RunID)
		followed <- ok && run.Followed()
		return dispatch.Result{Status: dispatch.Success}
	})
	st := new(catalog.Store)
	st.Swap(catalog.New("r", nil, catalog.Options{}))
	srv := httptest.NewServer(New(Options{Runs: reg}, st, inv, nil, nil))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		accept string
		want   bool
	}{{"application/x-ndjson", true}, {"application/json", false}} {
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/v1/call", strings.NewReader(`{"tool":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", tc.accept)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		select {
		case got := <-followed:
			if got != tc.want {
				t.Errorf("Accept %s: the run followed as the call started: %v; want %v", tc.accept, got, tc.want)
			}
		default:
			t.Errorf("Accept %s: %s; the call was not made", tc.accept, resp.Status)
		}
	}
}

// TestReadyzWaitsForServing: /readyz is 503 until the store has a snapshot
// and Options.Serving (the MCP lists) says the other doors serve it too.
func TestReadyzWaitsForServing(t *testing.T) {
	var serving atomic.Bool
	st := new(catalog.Store)
	inv := invokerFunc(func(context.Context, dispatch.Call) dispatch.Result { return dispatch.Result{} })
	h := New(Options{Serving: serving.Load}, st, inv, nil, nil)
	ready := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code
	}
	if got := ready(); got != 503 {
		t.Errorf("/readyz with no snapshot = %d; want 503", got)
	}
	st.Swap(catalog.New("r", nil, catalog.Options{}))
	if got := ready(); got != 503 {
		t.Errorf("/readyz with a snapshot the MCP lists do not hold yet = %d; want 503", got)
	}
	serving.Store(true)
	if got := ready(); got != 200 {
		t.Errorf("/readyz once both serve = %d; want 200", got)
	}
}
