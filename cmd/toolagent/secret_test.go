package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
)

// secretTool passes its secret param to the tool as an argument; the
// tool prints its SHA-256 (never the value itself).
func secretTool(name, extra string) string {
	return testTool(name, `intent: log in with a token `+name+`
method: run
executor: shell
argv: [sh, -c, 'printf %s "$1" | sha256sum', x, "{token}"]
params_schema:
  user: { type: string, required: true }
  token: { type: string, required: true, secret: true, pattern: "^[A-Za-z0-9-]+$" }
`+extra)
}

// recorder keeps every byte something sent it.
type recorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *recorder) add(p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf.Write(p)
	r.buf.WriteByte('\n')
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.buf.Bytes())
}

func (r *recorder) server(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.add(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestSecretParamNeverLeaves (#40 item 4): a secret param's value reaches
// the tool (its output proves it) and no other byte the daemon writes or
// sends: its state directory (approvals, audit trail, parse cache,
// cursors), its log and its stdout, the HTTP answers (results, approvals,
// a dry run's plan, an invalid call's problems), the approval
// notifications, the audit export to syslog and OTLP, and `audit export`.
// A held call keeps the value in memory alone: approved after a restart,
// it does not run and says to ask again; an approver cannot edit it.
func TestSecretParamNeverLeaves(t *testing.T) {
	t.Parallel()
	t.Run("files", func(t *testing.T) { testSecretNeverLeaves(t, "") })
	t.Run("postgres", func(t *testing.T) { testSecretNeverLeaves(t, pgtest.URL(t)) })
}

func testSecretNeverLeaves(t *testing.T, dbURL string) {
	const secret = "s3cr3t-VALUE-7f1c9e2a"
	sum := sha256.Sum256([]byte(secret))
	wantOut := hex.EncodeToString(sum[:]) + "  -\n"
	var sent, answers recorder
	hookURL := sent.server(t)
	otlpURL := sent.server(t)
	rcv := newSyslogServer(t)
	tools, state := t.TempDir(), t.TempDir()
	putTool(t, tools, "login", secretTool("login", ""))
	putTool(t, tools, "login-held", secretTool("login-held", "constraints:\n  require_confirm: true\n"))
	env := map[string]string{
		"TOOLAGENT_TOKENS":          "alice:call:" + aliceCallToken + ",bob:approve:" + bobToken,
		"TOOLAGENT_APPROVAL_NOTIFY": fmt.Sprintf(`{ops: {url: %q, format: json}}`, hookURL),
		"TOOLAGENT_AUDIT_EXPORT":    fmt.Sprintf(`{syslog: {address: %q}, otlp: {endpoint: %q}, poll: 20ms}`, rcv.addr, otlpURL+"/v1/logs"),
	}
	store := "files"
	if dbURL != "" {
		env["TOOLAGENT_STORE_URL"], store = dbURL, "postgres"
	}
	var stdout, logs syncBuffer
	start := func() (*liveDaemon, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		p := &inProcess{name: "serve", logs: &syncBuffer{}, done: make(chan error, 1), cancel: cancel}
		go func() {
			p.done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json", "--tools", tools, "--state", state, "--store", store},
				func(k string) string { return env[k] }, strings.NewReader(""), &stdout, io.MultiWriter(p.logs, &logs))
		}()
		pollUntil(t, "the listening line", func() bool {
			select {
			case err := <-p.done:
				t.Fatalf("serve exited: %v\n%s", err, p.logs)
			default:
			}
			for _, l := range strings.Split(p.logs.String(), "\n") {
				var line struct{ Msg, Addr string }
				if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "listening" {
					p.addr = line.Addr
					return true
				}
			}
			return false
		})
		d := &liveDaemon{inProcess: p, url: "http://" + p.addr, client: &http.Client{}}
		pollUntil(t, "/readyz", func() bool {
			resp, err := d.client.Get(d.url + "/readyz")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == 200
		})
		return d, func() { p.stop(t) }
	}
	d, stop := start()
	req := func(token, method, path, body string) (int, []byte) {
		t.Helper()
		code, b := d.as(token).request(t, method, path, body)
		answers.add(b)
		return code, b
	}
	call := func(token, tool, body string) dispatch.Result {
		t.Helper()
		_, b := req(token, "POST", "/v1/call", `{"tool":"`+tool+`","params":`+body+`}`)
		return decodeResult(t, b)
	}
	params := `{"user":"alice","token":"` + secret + `"}`

	// A direct call: the tool gets the value.
	if r := call(aliceCallToken, "login", params); r.Status != dispatch.Success || r.Output != wantOut {
		t.Fatalf("direct call: %+v; want the SHA-256 of the secret", r)
	}
	// A dry run's plan, a value the pattern refuses.
	if r := call(aliceCallToken, "login", strings.Replace(params, `"user"`, `"dry_run_is_a_field":1,"user"`, 1)); r.Status != dispatch.InvalidParams {
		t.Fatalf("an unknown param: %+v", r)
	}
	_, b := req(aliceCallToken, "POST", "/v1/call", `{"tool":"login","dry_run":true,"params":`+params+`}`)
	if r := decodeResult(t, b); r.Status != dispatch.DryRun || r.Plan == nil || !strings.Contains(strings.Join(r.Plan.Argv, " "), "[redacted]") {
		t.Fatalf("dry run: %s; want the plan with the secret [redacted]", b)
	}
	if r := call(aliceCallToken, "login", `{"user":"a","token":"`+secret+`!"}`); r.Status != dispatch.InvalidParams || !strings.Contains(r.Error, "[redacted]") {
		t.Fatalf("a refused secret: %+v; want invalid_params naming it [redacted]", r)
	}

	// A held call: stored and shown [redacted]; an approver cannot edit it.
	held := call(aliceCallToken, "login-held", params)
	if held.ApprovalID == "" || held.Params["token"] != "[redacted]" {
		t.Fatalf("held call: %+v; want an approval showing the token [redacted]", held)
	}
	if code, b := req(bobToken, "POST", "/v1/approvals/"+held.ApprovalID, `{"decision":"approve","params":{"user":"alice","token":"other-value"}}`); code < 400 || !strings.Contains(string(b), "secret") {
		t.Fatalf("an approver's edit of the secret: %d %s; want it refused", code, b)
	}
	_, b = req(bobToken, "POST", "/v1/approvals/"+held.ApprovalID, `{"decision":"approve","params":{"user":"bob","token":"[redacted]"}}`)
	if !strings.Contains(string(b), wantOut[:64]) {
		t.Fatalf("approved with the user edited: %s; want the tool run with the held secret", b)
	}
	req(bobToken, "GET", "/v1/approvals/"+held.ApprovalID, "")
	req(bobToken, "GET", "/v1/approvals", "")

	// Held, then the daemon restarts: the value is gone, and the
	// approval says to ask again; asking again runs it.
	lost := call(aliceCallToken, "login-held", params)
	stop()
	d, stop = start()
	defer stop()
	if _, b := req(bobToken, "POST", "/v1/approvals/"+lost.ApprovalID, `{"decision":"approve"}`); !strings.Contains(string(b), "asked again") {
		t.Fatalf("approved after a restart: %s; want it not run, saying to ask again", b)
	}
	again := call(aliceCallToken, "login-held", params)
	if _, b := req(bobToken, "POST", "/v1/approvals/"+again.ApprovalID, `{"decision":"approve"}`); !strings.Contains(string(b), wantOut[:64]) {
		t.Fatalf("asked again and approved: %s; want the tool run with the secret", b)
	}
	req(bobToken, "GET", "/metrics", "")

	// Through MCP, and what the console shows.
	cs, err := mcpClient(make(chan struct{}, 1)).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{aliceCallToken, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := callText(t, cs, "login", map[string]any{"user": "alice", "token": secret})
	answers.add([]byte(text))
	if !strings.Contains(text, wantOut[:64]) {
		t.Errorf("MCP call: %s; want the tool run with the secret", text)
	}
	text, _ = callText(t, cs, "login-held", map[string]any{"user": "mcp", "token": secret})
	answers.add([]byte(text))
	cs.Close()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if resp, err := browser.PostForm(d.url+"/ui/login", url.Values{"token": {bobToken}}); err == nil {
		resp.Body.Close()
	}
	for _, page := range []string{"/ui/approvals", "/ui/history", "/ui/runs/" + held.RunID} {
		resp, err := browser.Get(d.url + page)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answers.add(b)
		if page == "/ui/approvals" && (resp.StatusCode != 200 || !bytes.Contains(b, []byte("[redacted]"))) {
			t.Errorf("the console's approvals page: %d; want the held calls, their token [redacted]", resp.StatusCode)
		}
	}

	// Everything the export sends arrived (its last record is the last
	// audit line), then `audit export` reads the trail too.
	pollUntil(t, "the export to catch up", func() bool {
		var tr []int64
		if dbURL != "" {
			tr = dbSeqs(t, dbURL)
		} else {
			tr = trailSeqs(t, state)
		}
		s := rcv.seqs(t)
		return len(s) > 0 && s[len(s)-1] == tr[len(tr)-1] && bytes.Contains(sent.bytes(), fmt.Appendf(nil, `{"seq":%d,`, tr[len(tr)-1]))
	})
	var exported bytes.Buffer
	if err := run(t.Context(), []string{"audit", "export", "--follow=false", "--cursor-file", filepath.Join(t.TempDir(), "c"), "--state", state, "--store", store}, func(k string) string { return env[k] }, strings.NewReader(""), &exported, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(exported.Bytes(), []byte(`"tool":"login-held"`)) {
		t.Fatalf("audit export wrote no call of login-held:\n%s", exported.Bytes())
	}
	stop()

	where := map[string][]byte{
		"the log": []byte(logs.String()), "stdout": []byte(stdout.String()), "an HTTP answer": answers.bytes(),
		"a notification or the OTLP export": sent.bytes(), "the syslog export": rcv.all(), "audit export": exported.Bytes(),
	}
	filepath.WalkDir(state, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			b, _ := os.ReadFile(p)
			where["STATE/"+strings.TrimPrefix(p, state)] = b
		}
		return nil
	})
	if dbURL != "" {
		db, err := pgstore.Open(t.Context(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range []string{`SELECT doc FROM toolagent_approvals`, `SELECT record FROM toolagent_audit`, `SELECT sink || seq FROM toolagent_audit_export`} {
			rows, err := db.Pool.Query(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || len(got) == 0 {
				t.Fatalf("%s: %d rows, %v", q, len(got), err)
			}
			where["the database: "+q] = []byte(strings.Join(got, "\n"))
		}
	}
	for name, b := range where {
		if i := bytes.Index(b, []byte(secret)); i >= 0 {
			t.Errorf("the secret is in %s: …%s…", name, b[max(0, i-200):min(len(b), i+100)])
		}
	}
	if len(where) < 10 || !bytes.Contains(sent.bytes(), []byte(`"event":"pending"`)) {
		t.Fatalf("too little looked at (%d places; notifications: %.200s)", len(where), sent.bytes())
	}
}

func decodeResult(t *testing.T, b []byte) dispatch.Result {
	t.Helper()
	var r dispatch.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("not a result: %s", b)
	}
	return r
}
