package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/executors/forgejo/forgejotest"
	"github.com/toolagent/toolagent/internal/gatekeeper"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/settings"
	"github.com/toolagent/toolagent/internal/telemetry"
	"github.com/toolagent/toolagent/internal/telemetry/otlptest"
)

// paramSecret is the value every traced call passes as a param: it must
// appear in no exported byte.
const paramSecret = "qz7Kx9ParamValueNeverTraced"

// forgejoToken is the rig's Forgejo token (the only one its fake forge
// takes): no span holds it.
const forgejoToken = forgejotest.Token

// traceRig is a daemon with tracing on, exporting to an OTLP/HTTP
// receiver in the test process, with a gatekeeper server and an HLDP API
// on loopback.
type traceRig struct {
	rcv      *otlptest.Receiver
	d        *Daemon
	url      string
	opToken  string
	hlpdSeen chan string // the request URIs the HLDP API got
}

// traceEnv starts an OTLP receiver and points the process's tracing at
// it (the environment a daemon built next reads), every span sampled.
func traceEnv(t *testing.T) *otlptest.Receiver {
	rcv := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
	t.Setenv("OTEL_SERVICE_NAME", "toolagent-test")
	return rcv
}

func newTraceRig(t *testing.T) *traceRig {
	rcv := traceEnv(t)

	// The gatekeeper's handler is built after tracing is on only in
	// production (Serve); here the daemon turns it on below, and the
	// handler checks at each request.
	gk := httptest.NewServer(gatekeeper.NewHandler(gatekeeper.Options{Tokens: []string{"gk-test-token"}}, nil))
	t.Cleanup(gk.Close)
	seen := make(chan string, 16)
	hlpd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			io.WriteString(w, "ok")
			return
		}
		select {
		case seen <- r.URL.RequestURI() + " traceparent=" + r.Header.Get("Traceparent"):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(hlpd.Close)

	tools, state := t.TempDir(), t.TempDir()
	put := func(name, body string) {
		if err := os.MkdirAll(filepath.Join(tools, name), 0o755); err != nil {
			t.Fatal(err)
		}
		head := "name: " + name + "\ndisplay: " + name + "\nintent: traced test tool " + name + "\nauthor: t\ncreated: 2026-01-01\nwhy: a test\n"
		if err := os.WriteFile(filepath.Join(tools, name, "TOOL.hdlp"), []byte(head+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const msg = "params_schema:\n  msg: { type: string, required: true }\n"
	put("echo", "method: run\nexecutor: shell\nargv: [echo, \"{msg}\"]\n"+msg)
	put("held-echo", "method: run\nexecutor: shell\nargv: [echo, \"{msg}\"]\n"+msg+"constraints:\n  require_confirm: true\n")
	put("gk-echo", "method: run\nexecutor: gatekeeper\ntarget: main\nargv: [echo, \"{msg}\"]\n"+msg)
	put("item-get", "method: items.get\nexecutor: hlpd-api\nparams_schema:\n  id: { type: string, required: true, pattern: \"^[A-Za-z0-9]+$\" }\n  q: { type: string }\n")
	put("fj-read", "method: get_file\nexecutor: git-forgejo\nparams_schema:\n  path: { type: string, required: true }\n")
	fj := forgejotest.NewServer(t)

	var cfg Config
	settings.New(&cfg, settings.Options{})
	cfg.Listen, cfg.Tools, cfg.State, cfg.Sandbox = "127.0.0.1:0", tools, state, host.SandboxOff
	cfg.GatekeeperURL, cfg.GatekeeperToken = gk.URL, "gk-test-token"
	cfg.HlpdURL, cfg.HlpdRoutes = hlpd.URL, map[string]string{"items.get": "GET /v1/items/{id}"}
	cfg.ForgejoURL, cfg.ForgejoToken, cfg.ForgejoOwner, cfg.ForgejoRepo = fj.URL, forgejoToken, "o", "r"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !telemetry.Enabled() {
		t.Fatal("tracing is off with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
		d.Close()
		if telemetry.Enabled() {
			t.Error("tracing is still on after the daemon closed")
		}
	})
	tok, err := os.ReadFile(d.opToken)
	if err != nil {
		t.Fatal(err)
	}
	r := &traceRig{rcv: rcv, d: d, url: d.url, opToken: strings.TrimSpace(string(tok)), hlpdSeen: seen}
	// The first reload publishes the tools.
	deadline := time.Now().Add(30 * time.Second)
	for d.Store().Load() == nil || d.Store().Load().Len() < 4 {
		if time.Now().After(deadline) {
			t.Fatal("the tools were not loaded within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return r
}

// post sends body to path with traceparent tp (none when "") and the
// bearer token tok (none when ""), and decodes the answer into out.
func (r *traceRig) post(t *testing.T, path, body, tp, tok string, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tp != "" {
		req.Header.Set("Traceparent", tp)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("POST %s: %d %s: %v", path, resp.StatusCode, b, err)
	}
}

// waitTree waits until the spans of trace id form want (otlptest.Tree),
// and returns them.
func (r *traceRig) waitTree(t *testing.T, id, want string) []otlptest.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	telemetry.Flush(ctx)
	spans, ok := r.rcv.Wait(ctx, func(s []otlptest.Span) bool { return otlptest.Tree(s, id) == want })
	if !ok {
		t.Fatalf("trace %s:\n%s\nwant:\n%s(receiver problems: %v)", id, otlptest.Tree(spans, id), want, r.rcv.Problems())
	}
	return spans
}

func find(spans []otlptest.Span, id, name string) otlptest.Span {
	for _, s := range spans {
		if s.TraceID == id && s.Name == name {
			return s
		}
	}
	return otlptest.Span{}
}

func traceparent(n int) (tp, id string) {
	id = fmt.Sprintf("%032x", 0x4bf92f3577b34da6+n)
	return "00-" + id + "-00f067aa0ba902b7-01", id
}

// TestTraces: with OTEL_EXPORTER_OTLP_ENDPOINT set, an HTTP call and an
// MCP call with a given traceparent produce the expected span tree under
// that trace id, exported by OTLP/HTTP protobuf to a receiver in the test;
// a gatekeeper call continues the trace on the gatekeeper server and an
// hlpd-api call carries it; an approved call's run links to the span
// that held it; the call-duration histogram carries the trace id as an
// OpenMetrics exemplar; a reload has its span.
func TestTraces(t *testing.T) {
	r := newTraceRig(t)
	call := `{"tool":"%s","params":{"msg":"` + paramSecret + `"}}`

	// One HTTP call.
	tp, id := traceparent(1)
	var res dispatch.Result
	r.post(t, "/v1/call", fmt.Sprintf(call, "echo"), tp, "", &res)
	if res.Status != dispatch.Success {
		t.Fatalf("echo: %s %s", res.Status, res.Error)
	}
	spans := r.waitTree(t, id, "POST /v1/call\n  call echo\n    execute shell\n      sandbox start\n    params\n    policy\n")
	if s := find(spans, id, "POST /v1/call"); s.ParentID != "00f067aa0ba902b7" || s.Service != "toolagent-test" {
		t.Errorf("the HTTP span's parent = %q, service %q; want the caller's span 00f067aa0ba902b7 and OTEL_SERVICE_NAME", s.ParentID, s.Service)
	}
	c := find(spans, id, "call echo")
	for k, v := range map[string]string{"toolagent.tool": "echo", "toolagent.door": "api", "toolagent.caller": dispatch.Anonymous, "toolagent.status": "success",
		"toolagent.exit_code": "0", "toolagent.executor": "shell", "toolagent.method": "run", "toolagent.output_bytes": fmt.Sprint(len(paramSecret) + 1), "toolagent.run_id": res.RunID} {
		if c.Attrs[k] != v {
			t.Errorf("call span %s = %q; want %q", k, c.Attrs[k], v)
		}
	}
	if c.Attrs["toolagent.revision"] == "" {
		t.Error("the call span has no revision")
	}

	// The call-duration histogram's exemplar is that trace.
	req, _ := http.NewRequest(http.MethodGet, r.url+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/openmetrics-text") ||
		!bytes.Contains(metrics, []byte(`toolagent_call_duration_seconds_bucket{tool="echo"`)) || !bytes.Contains(metrics, []byte(`# {trace_id="`+id+`"}`)) {
		t.Errorf("/metrics (%s) has no exemplar with trace_id %s:\n%s", resp.Header.Get("Content-Type"), id, grepLines(metrics, "toolagent_call_duration"))
	}

	// One MCP call, its traceparent in params._meta.
	tp, id = traceparent(2)
	cl := mcp.NewClient(&mcp.Implementation{Name: "trace-test", Version: "1"}, nil)
	sess, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: r.url + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	got, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Meta: mcp.Meta{"traceparent": tp}, Name: "echo", Arguments: map[string]any{"msg": paramSecret}})
	if err != nil || got.IsError {
		t.Fatalf("MCP echo: %v %+v", err, got)
	}
	spans = r.waitTree(t, id, "tools/call echo\n  call echo\n    execute shell\n      sandbox start\n    params\n    policy\n")
	if s := find(spans, id, "call echo"); s.Attrs["toolagent.door"] != "mcp" {
		t.Errorf("MCP call span door = %q", s.Attrs["toolagent.door"])
	}

	// A gatekeeper call: the gatekeeper server continues the trace.
	tp, id = traceparent(3)
	r.post(t, "/v1/call", fmt.Sprintf(call, "gk-echo"), tp, "", &res)
	if res.Status != dispatch.Success {
		t.Fatalf("gk-echo: %s %s", res.Status, res.Error)
	}
	spans = r.waitTree(t, id, "POST /v1/call\n  call gk-echo\n    execute gatekeeper\n      POST\n        POST /exec\n    params\n    policy\n")
	if cs, ss := find(spans, id, "POST"), find(spans, id, "POST /exec"); ss.ParentID != cs.SpanID || ss.Kind.String() != "SPAN_KIND_SERVER" {
		t.Errorf("the gatekeeper's span %+v is not the server side of the client span %+v", ss, cs)
	}

	// An hlpd-api call carries the trace to the API; its span names no
	// part of the URL (the route puts the id in the path).
	tp, id = traceparent(4)
	r.post(t, "/v1/call", `{"tool":"item-get","params":{"id":"`+paramSecret+`","q":"`+paramSecret+`"}}`, tp, "", &res)
	if res.Status != dispatch.Success {
		t.Fatalf("item-get: %s %s", res.Status, res.Error)
	}
	if seen := <-r.hlpdSeen; !strings.Contains(seen, id) {
		t.Errorf("the HLDP API got %q; want a traceparent of trace %s", seen, id)
	}
	r.waitTree(t, id, "POST /v1/call\n  call item-get\n    execute hlpd-api\n      GET\n    params\n    policy\n")

	// A git-forgejo call: the executor's requests to the forge are client
	// spans of the call's trace.
	tp, id = traceparent(12)
	r.post(t, "/v1/call", `{"tool":"fj-read","params":{"path":"README.md"}}`, tp, "", &res)
	if res.Status != dispatch.Success {
		t.Fatalf("fj-read: %s %s", res.Status, res.Error)
	}
	spans = r.waitTree(t, id, "POST /v1/call\n  call fj-read\n    execute git-forgejo\n      GET\n    params\n    policy\n")
	if s := find(spans, id, "call fj-read"); s.Attrs["toolagent.executor"] != "git-forgejo" || s.Attrs["toolagent.method"] != "get_file" {
		t.Errorf("fj-read call span executor %q method %q; want git-forgejo get_file", s.Attrs["toolagent.executor"], s.Attrs["toolagent.method"])
	}

	// A held call, then its approval: the approved run links to the hold.
	tp, id = traceparent(5)
	r.post(t, "/v1/call", fmt.Sprintf(call, "held-echo"), tp, "", &res)
	if res.Status != dispatch.ApprovalRequired || res.ApprovalID == "" {
		t.Fatalf("held-echo: %s %s; want approval_required", res.Status, res.Error)
	}
	spans = r.waitTree(t, id, "POST /v1/call\n  call held-echo\n    approval hold\n    params\n    policy\n")
	hold := find(spans, id, "approval hold")
	if hold.Attrs["toolagent.approval_id"] != res.ApprovalID {
		t.Errorf("hold span approval_id = %q; want %s", hold.Attrs["toolagent.approval_id"], res.ApprovalID)
	}
	// A caller waits for the outcome meanwhile: its span ends with it.
	tp3, id3 := traceparent(8)
	waited := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, r.url+"/v1/approvals/"+res.ApprovalID+"?wait=30s", nil)
		req.Header.Set("Traceparent", tp3)
		req.Header.Set("Authorization", "Bearer "+r.opToken)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		waited <- err
	}()
	tp2, id2 := traceparent(6)
	var decided struct {
		Status string          `json:"status"`
		Result dispatch.Result `json:"result"`
	}
	r.post(t, "/v1/approvals/"+res.ApprovalID, `{"decision":"approve"}`, tp2, r.opToken, &decided)
	if decided.Result.Status != dispatch.Success {
		t.Fatalf("approve: %+v", decided)
	}
	path := "POST /v1/approvals/" + res.ApprovalID
	spans = r.waitTree(t, id2, path+"\n  approved call held-echo\n    execute shell\n      sandbox start\n")
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	spans = r.waitTree(t, id3, "GET /v1/approvals/"+res.ApprovalID+"\n  approval wait\n")
	if s := find(spans, id3, "approval wait"); s.Attrs["toolagent.approval_status"] != "executed" || s.Attrs["toolagent.approval_id"] != res.ApprovalID {
		t.Errorf("approval wait span %v; want approval %s executed", s.Attrs, res.ApprovalID)
	}
	link := id + "/" + hold.SpanID
	for _, name := range []string{"approved call held-echo", "execute shell"} {
		if s := find(spans, id2, name); len(s.Links) != 1 || s.Links[0] != link {
			t.Errorf("%s links %v; want the hold %s", name, s.Links, link)
		}
	}

	// A webhook delivery's span says what became of it (this daemon has
	// no webhook: not_configured).
	tp, id = traceparent(7)
	var answer map[string]any
	r.post(t, "/v1/hooks/forgejo", `{}`, tp, "", &answer)
	spans = r.waitTree(t, id, "POST /v1/hooks/forgejo\n  webhook\n")
	if s := find(spans, id, "webhook"); s.Attrs["toolagent.webhook_result"] != "not_configured" {
		t.Errorf("webhook span result = %q; want not_configured", s.Attrs["toolagent.webhook_result"])
	}

	// The reload loop's work has spans: reload, with sync and build.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, ok := r.rcv.Wait(ctx, func(s []otlptest.Span) bool {
		for _, sp := range s {
			if sp.Name == "reload" && otlptest.Tree(s, sp.TraceID) == "reload\n  build\n  sync\n" {
				return true
			}
		}
		return false
	}); !ok {
		t.Error("no reload span with sync and build children was exported")
	}
}

// TestTracesCarryNoParamValue: whatever door and executor a call takes,
// no byte exported to the collector holds a param's value (a distinctive
// value passed to every kind of call above, and here to a call that
// fails validation and a dry run).
func TestTracesCarryNoParamValue(t *testing.T) {
	r := newTraceRig(t)
	var res dispatch.Result
	for _, body := range []string{
		`{"tool":"echo","params":{"msg":"` + paramSecret + `"}}`,
		`{"tool":"echo","params":{"msg":"` + paramSecret + `"},"dry_run":true}`,
		`{"tool":"echo","params":{"msg":"` + paramSecret + `","` + paramSecret + `":1}}`,
		`{"tool":"item-get","params":{"id":"` + paramSecret + `","q":"` + paramSecret + `"}}`,
		`{"tool":"item-get","params":{"id":"not/` + paramSecret + `"}}`,
		`{"tool":"gk-echo","params":{"msg":"` + paramSecret + `"}}`,
		`{"tool":"held-echo","params":{"msg":"` + paramSecret + `"}}`,
		`{"tool":"fj-read","params":{"path":"` + paramSecret + `.md"}}`,
	} {
		tp, _ := traceparent(10)
		r.post(t, "/v1/call", body, tp, "", &res)
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "trace-test", Version: "1"}, nil)
	sess, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: r.url + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp, id := traceparent(11)
	if _, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Meta: mcp.Meta{"traceparent": tp}, Name: "gk-echo", Arguments: map[string]any{"msg": paramSecret}}); err != nil {
		t.Fatal(err)
	}
	sess.Close()
	// The last call's gatekeeper span ends after everything before it.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	telemetry.Flush(ctx)
	if _, ok := r.rcv.Wait(ctx, func(s []otlptest.Span) bool { return find(s, id, "POST /exec").Name != "" }); !ok {
		t.Fatalf("the gatekeeper's span of trace %s was not exported", id)
	}
	raw := r.rcv.Raw()
	if len(raw) == 0 {
		t.Fatal("nothing was exported")
	}
	if i := bytes.Index(raw, []byte(paramSecret)); i >= 0 {
		t.Errorf("an exported span holds a param's value: ...%q...", raw[max(0, i-80):min(len(raw), i+80)])
	}
	for _, s := range r.rcv.Spans() {
		if strings.Contains(fmt.Sprint(s), "gk-test-token") || strings.Contains(fmt.Sprint(s), forgejoToken) || strings.Contains(fmt.Sprint(s), r.opToken) {
			t.Errorf("span %s holds a token", s.Name)
		}
	}
}

func grepLines(b []byte, sub string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestTracesStdio: over MCP on a stream (`toolagent mcp`, the stdio
// role), a tools/call whose params._meta carries a traceparent continues
// that trace as over HTTP, with the param's value in no span.
func TestTracesStdio(t *testing.T) {
	rcv := traceEnv(t)
	tools := t.TempDir()
	writeTestTool(t, tools, "echo", testTool("echo", "intent: traced test tool echo\nmethod: run\nexecutor: shell\nargv: [echo, \"{msg}\"]\nparams_schema:\n  msg: { type: string, required: true }\n"))
	var cfg Config
	settings.New(&cfg, settings.Options{})
	cfg.Tools, cfg.State, cfg.Sandbox, cfg.Role = tools, t.TempDir(), host.SandboxOff, Stdio
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !telemetry.Enabled() {
		t.Fatal("tracing is off with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	// The client's end of stdin and stdout.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- d.ServeStdio(ctx, inR, outW, StdioOptions{})
		outW.Close()
	}()
	defer func() {
		inW.Close()
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("ServeStdio = %v", err)
		}
	}()
	cl := mcp.NewClient(&mcp.Implementation{Name: "trace-stdio-test", Version: "1"}, nil)
	sess, err := cl.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	tp, id := traceparent(40)
	got, err := sess.CallTool(ctx, &mcp.CallToolParams{Meta: mcp.Meta{"traceparent": tp}, Name: "echo", Arguments: map[string]any{"msg": paramSecret}})
	if err != nil || got.IsError {
		t.Fatalf("MCP echo over stdio: %v %+v", err, got)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	telemetry.Flush(wctx)
	want := "tools/call echo\n  call echo\n    execute shell\n      sandbox start\n    params\n    policy\n"
	spans, ok := rcv.Wait(wctx, func(s []otlptest.Span) bool { return otlptest.Tree(s, id) == want })
	if !ok {
		t.Fatalf("trace %s:\n%s\nwant:\n%s(receiver problems: %v)", id, otlptest.Tree(spans, id), want, rcv.Problems())
	}
	if s := find(spans, id, "call echo"); s.Attrs["toolagent.door"] != "mcp" {
		t.Errorf("the call's span: door %q, want mcp", s.Attrs["toolagent.door"])
	}
	for _, s := range spans {
		for k, v := range s.Attrs {
			if strings.Contains(v, paramSecret) {
				t.Errorf("span %q attribute %s holds the param's value", s.Name, k)
			}
		}
	}
}
