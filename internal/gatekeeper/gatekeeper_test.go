package gatekeeper

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/policy"
)

func TestListenCheck(t *testing.T) {
	tests := []struct {
		addr     string
		hasToken bool
		wantErr  bool
	}{
		{addr: "127.0.0.1:8766"},
		{addr: "[::1]:8766"},
		{addr: "localhost:8766"},
		{addr: "127.0.0.2:0"},
		{addr: ":8766", wantErr: true},
		{addr: "0.0.0.0:8766", wantErr: true},
		{addr: "10.0.0.5:8766", wantErr: true},
		{addr: "example.com:8766", wantErr: true},
		{addr: ":8766", hasToken: true},
		{addr: "10.0.0.5:8766", hasToken: true},
		{addr: "no-port", wantErr: true},
	}
	for _, tt := range tests {
		err := ListenCheck(tt.addr, tt.hasToken)
		if (err != nil) != tt.wantErr {
			t.Errorf("ListenCheck(%q, %v) = %v, want error %v", tt.addr, tt.hasToken, err, tt.wantErr)
		}
	}
}

func TestValidate(t *testing.T) {
	sum := sha256.Sum256([]byte("tok"))
	tests := []struct {
		name    string
		opts    Options
		wantErr bool
	}{
		{name: "zero"},
		{name: "token and hash", opts: Options{Tokens: []string{"tok"}, TokenSHA256: []string{hex.EncodeToString(sum[:])}}},
		{name: "empty token", opts: Options{Tokens: []string{""}}, wantErr: true},
		{name: "short hash", opts: Options{TokenSHA256: []string{"abcd"}}, wantErr: true},
		{name: "negative", opts: Options{MaxTimeout: -1}, wantErr: true},
	}
	for _, tt := range tests {
		if err := tt.opts.Validate(); (err != nil) != tt.wantErr {
			t.Errorf("%s: Validate() = %v, want error %v", tt.name, err, tt.wantErr)
		}
	}
}

// do sends one request to h as if from remote and decodes the answer.
func do(t *testing.T, h http.Handler, method, path, remote, auth, body string) (int, map[string]any) {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	r.RemoteAddr = remote
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s %s: answer is not JSON: %q", method, path, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return w.Code, m
}

func TestHandlerProtocol(t *testing.T) {
	const local, remote = "127.0.0.1:5555", "192.0.2.7:5555"
	sum := sha256.Sum256([]byte("hashed-token"))
	withToken := NewHandler(Options{Tokens: []string{"plain-token"}, TokenSHA256: []string{hex.EncodeToString(sum[:])}, MaxBodyBytes: 200}, nil)
	noToken := NewHandler(Options{}, nil)

	tests := []struct {
		name       string
		h          http.Handler
		method     string
		path       string
		remote     string
		auth       string
		body       string
		wantStatus int
		wantCode   string
	}{
		{name: "exec with plain token", h: withToken, method: "POST", path: "/exec", remote: remote, auth: "Bearer plain-token", body: `{"cmd":"echo hi"}`, wantStatus: 200},
		{name: "exec with hashed token", h: withToken, method: "POST", path: "/exec", remote: remote, auth: "Bearer hashed-token", body: `{"argv":["echo","hi"]}`, wantStatus: 200},
		{name: "bearer is case-insensitive", h: withToken, method: "POST", path: "/exec", remote: remote, auth: "bearer plain-token", body: `{"cmd":"true"}`, wantStatus: 200},
		{name: "missing token", h: withToken, method: "POST", path: "/exec", remote: local, body: `{"cmd":"true"}`, wantStatus: 401, wantCode: CodeUnauthorized},
		{name: "wrong token", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer nope", body: `{"cmd":"true"}`, wantStatus: 401, wantCode: CodeUnauthorized},
		{name: "basic auth", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Basic cGxhaW4tdG9rZW4=", body: `{"cmd":"true"}`, wantStatus: 401, wantCode: CodeUnauthorized},
		{name: "no token: loopback ok", h: noToken, method: "POST", path: "/exec", remote: local, body: `{"cmd":"true"}`, wantStatus: 200},
		{name: "no token: remote refused", h: noToken, method: "POST", path: "/exec", remote: remote, body: `{"cmd":"true"}`, wantStatus: 403, wantCode: CodeForbidden},
		{name: "bad json", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{"cmd":`, wantStatus: 400, wantCode: CodeBadRequest},
		{name: "unknown field", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{"command":"true"}`, wantStatus: 400, wantCode: CodeBadRequest},
		{name: "cmd and argv", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{"cmd":"true","argv":["true"]}`, wantStatus: 400, wantCode: CodeBadRequest},
		{name: "neither", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{}`, wantStatus: 400, wantCode: CodeBadRequest},
		{name: "relative cwd", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{"cmd":"true","cwd":"tmp"}`, wantStatus: 400, wantCode: CodeBadRequest},
		{name: "body too large", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{"cmd":"` + strings.Repeat("x", 300) + `"}`, wantStatus: 413, wantCode: CodeTooLarge},
		{name: "program not found", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{"argv":["no-such-program-xyz"]}`, wantStatus: 422, wantCode: CodeStartFailed},
		{name: "GET exec", h: withToken, method: "GET", path: "/exec", remote: local, auth: "Bearer plain-token", wantStatus: 405, wantCode: CodeMethodNotAllowed},
		{name: "unknown path", h: withToken, method: "GET", path: "/run", remote: local, wantStatus: 404, wantCode: CodeNotFound},
		{name: "healthz without auth", h: withToken, method: "GET", path: "/healthz", remote: remote, wantStatus: 200},
		{name: "healthz with good token", h: withToken, method: "GET", path: "/healthz", remote: remote, auth: "Bearer plain-token", wantStatus: 200},
		{name: "healthz with bad token", h: withToken, method: "GET", path: "/healthz", remote: remote, auth: "Bearer nope", wantStatus: 401, wantCode: CodeUnauthorized},
		{name: "healthz no token remote", h: noToken, method: "GET", path: "/healthz", remote: remote, wantStatus: 403, wantCode: CodeForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, m := do(t, tt.h, tt.method, tt.path, tt.remote, tt.auth, tt.body)
			if status != tt.wantStatus {
				t.Errorf("%s %s = %d %v, want %d", tt.method, tt.path, status, m, tt.wantStatus)
			}
			if tt.wantCode != "" && (m["code"] != tt.wantCode || m["error"] == "") {
				t.Errorf("%s %s = %v, want code %q and an error message", tt.method, tt.path, m, tt.wantCode)
			}
		})
	}
}

func TestExecResponseFields(t *testing.T) {
	h := NewHandler(Options{Tokens: []string{"t"}, MaxTimeout: time.Second, MaxOutput: 10}, nil)
	status, m := do(t, h, "POST", "/exec", "127.0.0.1:1", "Bearer t",
		`{"cmd":"printf 0123456789abcdef; exit 3","timeout_ms":999999,"max_output_bytes":999999,"tool":"x","revision":"r"}`)
	if status != 200 {
		t.Fatalf("exec = %d %v", status, m)
	}
	want := map[string]any{
		"stdout": "0123456789", "stderr": "", "exit_code": 3.0, "truncated": true, "timed_out": false,
		"stdout_bytes": 16.0, "stderr_bytes": 0.0, "timeout_ms": 1000.0, "max_output_bytes": 10.0,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("exec answer %s = %v, want %v (answer %v)", k, m[k], v, m)
		}
	}
	if _, ok := m["duration_ms"]; !ok {
		t.Errorf("exec answer has no duration_ms: %v", m)
	}
}

func TestBusy(t *testing.T) {
	h := NewHandler(Options{MaxConcurrent: 1}, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Retry while busy: a probe below may hold the slot for a moment
		// when this request arrives.
		for range 100 {
			resp, err := http.Post(srv.URL+"/exec", "application/json", strings.NewReader(`{"cmd":"echo up; sleep 2","timeout_ms":5000}`))
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				return
			}
		}
	}()
	// Wait until the first command holds the slot: poll with a deadline.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Post(srv.URL+"/exec", "application/json", strings.NewReader(`{"cmd":"true"}`))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			if m["code"] != CodeBusy || resp.Header.Get("Retry-After") == "" {
				t.Errorf("busy answer = %v, Retry-After %q", m, resp.Header.Get("Retry-After"))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never saw 503 busy while a command held the only slot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	<-done
}

// TestShellPolicy: right before a cmd would start, the server judges it
// with the shell policy: a command that needs an approval runs only with
// one, a catastrophic one never, and every refusal is 403 refused naming
// the rule. argv requests are not parsed as shell.
func TestShellPolicy(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "x")
	mk := func() {
		if err := os.MkdirAll(filepath.Join(victim, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk()
	body := func(cmd, approval string) string {
		b, _ := json.Marshal(ExecRequest{Cmd: cmd, Approval: approval})
		return string(b)
	}
	const id = "0123456789abcdef0123456789abcdef"
	lax := policy.DefaultShellPolicy()
	lax.Commands["rm"] = policy.Allow
	def := NewHandler(Options{Tokens: []string{"t"}}, nil)
	tests := []struct {
		name    string
		h       http.Handler
		body    string
		status  int
		want    string // substring of the error
		removed bool   // the victim is gone afterwards
	}{
		{"rm -rf without approval", def, body("rm -rf "+victim, ""), 403, "needs an approval and has none: shell: command `rm` deletes files", false},
		{"hidden behind a read", def, body("ls / && rm -rf "+victim, ""), 403, "command `rm`", false},
		{"argv is not parsed as shell", def, `{"argv":["echo","rm -rf /"]}`, 200, "", false},
		{"catastrophic even with approval", def, body("rm -rf /", id), 403, "refused by policy: shell: command `rm -rf /`", false},
		{"unparseable", def, body("echo 'x", ""), 403, "shell: cannot parse", false},
		{"too long approval id", def, body("true", strings.Repeat("a", 200)), 400, "approval id", false},
		{"approved rm runs", def, body("rm -rf "+victim, id), 200, "", true},
		{"operator override", NewHandler(Options{Tokens: []string{"t"}, Policy: lax}, nil), body("rm -rf "+victim, ""), 200, "", true},
		{"policy off", NewHandler(Options{Tokens: []string{"t"}, NoPolicy: true}, nil), body("rm -rf "+victim, ""), 200, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mk()
			status, m := do(t, tt.h, "POST", "/exec", "127.0.0.1:1", "Bearer t", tt.body)
			if status != tt.status {
				t.Fatalf("exec %s = %d %v, want %d", tt.body, status, m, tt.status)
			}
			if tt.want != "" {
				msg, _ := m["error"].(string)
				if !strings.Contains(msg, tt.want) {
					t.Errorf("error %q does not say %q", msg, tt.want)
				}
				if status == 403 && m["code"] != CodeRefused {
					t.Errorf("code %v, want %s", m["code"], CodeRefused)
				}
			}
			_, err := os.Stat(victim)
			if gone := errors.Is(err, os.ErrNotExist); gone != tt.removed {
				t.Errorf("victim removed = %v, want %v", gone, tt.removed)
			}
		})
	}
}
