package gatekeeper

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/grant"
	"github.com/toolagent/toolagent/internal/policy"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/proc/proctest"
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
	noPolicy := NewHandler(Options{Tokens: []string{"plain-token"}, NoPolicy: true}, nil)

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
		{name: "unknown output_keep", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{"cmd":"true","output_keep":"middle"}`, wantStatus: 400, wantCode: CodeBadRequest},
		{name: "relative cwd", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{"cmd":"true","cwd":"tmp"}`, wantStatus: 400, wantCode: CodeBadRequest},
		{name: "body too large", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{"cmd":"` + strings.Repeat("x", 300) + `"}`, wantStatus: 413, wantCode: CodeTooLarge},
		{name: "program not found", h: noPolicy, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{"argv":["no-such-program-xyz"]}`, wantStatus: 422, wantCode: CodeStartFailed},
		{name: "unknown program needs an approval", h: withToken, method: "POST", path: "/exec", remote: local, auth: "Bearer plain-token", body: `{"argv":["no-such-program-xyz"]}`, wantStatus: 403, wantCode: CodeRefused},
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

// TestExecOutputKeep: output_keep tail keeps the last bytes, both the two
// halves with the marker; the byte count is the whole stream's.
func TestExecOutputKeep(t *testing.T) {
	h := NewHandler(Options{Tokens: []string{"t"}, MaxOutput: 10}, nil)
	for keep, want := range map[string]string{
		"head": "0123456789",
		"tail": "6789abcdef",
		"both": "01234" + proc.OmittedMarker(6) + "bcdef",
	} {
		status, m := do(t, h, "POST", "/exec", "127.0.0.1:1", "Bearer t", `{"cmd":"printf 0123456789abcdef","output_keep":"`+keep+`"}`)
		if status != 200 || m["stdout"] != want || m["stdout_bytes"] != 16.0 || m["truncated"] != true {
			t.Errorf("output_keep %s: %d %v; want stdout %q of 16 bytes, truncated", keep, status, m, want)
		}
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

// TestShellPolicy: right before a command would start, the server judges
// it with the shell policy: a command that needs an approval runs only
// with a verified grant, a catastrophic one never, and every refusal is
// 403 refused naming the rule. An argv request is judged as the command
// line of its quoted elements.
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
	argv := func(argv ...string) string {
		b, _ := json.Marshal(ExecRequest{Argv: argv})
		return string(b)
	}
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
		{"a bare approval id is not trusted", def, body("rm -rf "+victim, approvalID), 403, "does not trust a bare approval id", false},
		{"argv is judged", def, argv("rm", "-rf", victim), 403, "needs an approval and has none: shell: command `rm` deletes files", false},
		{"argv catastrophic", def, argv("rm", "-rf", "/"), 403, "refused by policy: shell: command `rm -rf /`", false},
		{"argv elements stay one word", def, argv("echo", "rm -rf /"), 200, "", false},
		{"argv shell -c is judged inside", def, argv("bash", "-c", "rm -rf "+victim), 403, "command `rm`", false},
		{"catastrophic even with approval", def, body("rm -rf /", approvalID), 403, "refused by policy: shell: command `rm -rf /`", false},
		{"unparseable", def, body("echo 'x", ""), 403, "shell: cannot parse", false},
		{"too long approval id", def, body("true", strings.Repeat("a", 200)), 400, "approval id", false},
		{"NUL in argv", def, `{"argv":["echo","a\u0000b"]}`, 400, "NUL", false},
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

const approvalID = "0123456789abcdef0123456789abcdef"

// bootOf returns the boot id h gives a request with token, which the
// grants for h must name.
func bootOf(t *testing.T, h http.Handler, token string) string {
	t.Helper()
	status, m := do(t, h, "GET", "/healthz", "127.0.0.1:1", "Bearer "+token, "")
	boot, _ := m["boot_id"].(string)
	if status != 200 || len(boot) != 32 {
		t.Fatalf("GET /healthz with the token = %d %v; want 200 with a boot_id of 32 hex digits", status, m)
	}
	return boot
}

// newApprovalID returns a fresh approval id: a grant runs once, so every
// grant meant to run names an approval of its own.
func newApprovalID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newGrant returns a grant of a fresh approval for cmd (or argv) on the
// server whose boot id is boot, signed under token, valid for a minute,
// with sandbox sb.
func newGrant(token, boot, cmd string, argv []string, sb grant.Sandbox) *grant.Grant {
	g := &grant.Grant{
		Approval:   newApprovalID(),
		Tool:       "shell-exec",
		Revision:   "rev1",
		ParamsHash: grant.ParamsHash(map[string]any{"cmd": cmd}),
		Command:    grant.CommandDigest(cmd, argv),
		BootID:     boot,
		Sandbox:    sb,
		ExpiresAt:  time.Now().Add(time.Minute).UTC().Format(time.RFC3339),
	}
	if g.Sandbox.Write == nil {
		g.Sandbox.Write = []string{}
	}
	g.Sign(grant.Key(token))
	return g
}

func hmacSHA256(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

func grantBody(cmd string, argv []string, g *grant.Grant) string {
	req := ExecRequest{Cmd: cmd, Argv: argv, Grant: g, Tool: "shell-exec", Revision: "rev1"}
	b, _ := json.Marshal(req)
	return string(b)
}

// TestGrant: a command the policy wants confirmed runs with a grant the
// server verifies (signed under the token of the request, for this
// command, not expired), and is refused, with the reason, for every other
// grant: any field changed after signing, another token, expired, another
// command, or a server without a token to verify it with.
func TestGrant(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "x")
	cmd := "rm -rf " + victim
	rmArgv := []string{"rm", "-rf", victim}
	digest := sha256.Sum256([]byte("hashed-token"))
	withToken := NewHandler(Options{Tokens: []string{"t"}}, nil)
	hashedOnly := NewHandler(Options{TokenSHA256: []string{hex.EncodeToString(digest[:])}}, nil)
	noToken := NewHandler(Options{}, nil)
	boot, hashedBoot := bootOf(t, withToken, "t"), bootOf(t, hashedOnly, "hashed-token")

	tamper := func(f func(*grant.Grant)) *grant.Grant {
		g := newGrant("t", boot, cmd, nil, grant.Sandbox{})
		f(g)
		return g
	}
	expired := &grant.Grant{Approval: approvalID, Tool: "shell-exec", Revision: "rev1", Command: grant.CommandDigest(cmd, nil), BootID: boot,
		Sandbox: grant.Sandbox{Write: []string{}}, ExpiresAt: time.Now().Add(-time.Second).UTC().Format(time.RFC3339)}
	expired.Sign(grant.Key("t"))
	// A grant as the daemon signed it before format 2: no version, the MAC
	// keyed with the token's bare SHA-256.
	v1 := newGrant("t", boot, cmd, nil, grant.Sandbox{})
	v1.Version = 0
	oldKey := sha256.Sum256([]byte("t"))
	v1.MAC = hex.EncodeToString(hmacSHA256(oldKey[:], v1.Message()))

	tests := []struct {
		name    string
		h       http.Handler
		auth    string
		body    string
		status  int
		want    string
		removed bool
	}{
		{name: "valid grant runs", h: withToken, body: grantBody(cmd, nil, newGrant("t", boot, cmd, nil, grant.Sandbox{})), status: 200, removed: true},
		{name: "valid argv grant runs", h: withToken, body: grantBody("", rmArgv, newGrant("t", boot, "", rmArgv, grant.Sandbox{})), status: 200, removed: true},
		{name: "token given as digest", h: hashedOnly, auth: "Bearer hashed-token", body: grantBody(cmd, nil, newGrant("hashed-token", hashedBoot, cmd, nil, grant.Sandbox{})), status: 200, removed: true},
		{name: "tampered approval", h: withToken, body: grantBody(cmd, nil, tamper(func(g *grant.Grant) { g.Approval = "ffffffffffffffffffffffffffffffff" })), status: 403, want: "grant refused: grant signature does not match"},
		{name: "tampered tool", h: withToken, body: grantBody(cmd, nil, tamper(func(g *grant.Grant) { g.Tool = "other" })), status: 403, want: "signature does not match"},
		{name: "tampered revision", h: withToken, body: grantBody(cmd, nil, tamper(func(g *grant.Grant) { g.Revision = "rev2" })), status: 403, want: "signature does not match"},
		{name: "tampered params hash", h: withToken, body: grantBody(cmd, nil, tamper(func(g *grant.Grant) { g.ParamsHash = grant.ParamsHash(nil) })), status: 403, want: "signature does not match"},
		{name: "tampered command", h: withToken, body: grantBody("rm -rf /srv", nil, tamper(func(g *grant.Grant) { g.Command = grant.CommandDigest("rm -rf /srv", nil) })), status: 403, want: "signature does not match"},
		{name: "tampered write", h: withToken, body: grantBody(cmd, nil, tamper(func(g *grant.Grant) { g.Sandbox.Write = []string{"/"} })), status: 403, want: "signature does not match"},
		{name: "tampered network", h: withToken, body: grantBody(cmd, nil, tamper(func(g *grant.Grant) { g.Sandbox.Network = true })), status: 403, want: "signature does not match"},
		{name: "tampered expiry", h: withToken, body: grantBody(cmd, nil, tamper(func(g *grant.Grant) { g.ExpiresAt = time.Now().Add(time.Hour).UTC().Format(time.RFC3339) })), status: 403, want: "signature does not match"},
		{name: "forged mac", h: withToken, body: grantBody(cmd, nil, tamper(func(g *grant.Grant) { g.MAC = strings.Repeat("0", 64) })), status: 403, want: "signature does not match"},
		{name: "mac is not hex", h: withToken, body: grantBody(cmd, nil, tamper(func(g *grant.Grant) { g.MAC = "approved" })), status: 403, want: "malformed grant"},
		{name: "signed with another token", h: withToken, body: grantBody(cmd, nil, newGrant("other-token", boot, cmd, nil, grant.Sandbox{})), status: 403, want: "signature does not match"},
		{name: "expired", h: withToken, body: grantBody(cmd, nil, expired), status: 403, want: "grant refused: grant expired"},
		{name: "grant for another command", h: withToken, body: grantBody(cmd, nil, newGrant("t", boot, "rm -rf /srv/other", nil, grant.Sandbox{})), status: 403, want: "grant refused: grant is for a different command"},
		{name: "cmd grant used for argv", h: withToken, body: grantBody("", rmArgv, newGrant("t", boot, strings.Join(rmArgv, " "), nil, grant.Sandbox{})), status: 403, want: "different command"},
		{name: "grant for another tool than the request names", h: withToken, body: strings.Replace(grantBody(cmd, nil, newGrant("t", boot, cmd, nil, grant.Sandbox{})), `"tool":"shell-exec"`, `"tool":"other"`, 1), status: 403, want: `the grant is for tool "shell-exec", the request names tool "other"`},
		{name: "another boot of the server", h: withToken, body: grantBody(cmd, nil, newGrant("t", hashedBoot, cmd, nil, grant.Sandbox{})), status: 403, want: "grant refused: grant is for another boot of this gatekeeper"},
		{name: "format 1 grant", h: withToken, body: grantBody(cmd, nil, v1), status: 403, want: "grant refused: grant format version mismatch: the grant is format version 1"},
		{name: "format 2 signed with the old key", h: withToken, body: grantBody(cmd, nil, tamper(func(g *grant.Grant) { g.MAC = hex.EncodeToString(hmacSHA256(oldKey[:], g.Message())) })), status: 403, want: "signature does not match"},
		{name: "server without token cannot verify", h: noToken, auth: "-", body: grantBody(cmd, nil, newGrant("", "", cmd, nil, grant.Sandbox{})), status: 403, want: "cannot verify a grant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.MkdirAll(victim, 0o755); err != nil {
				t.Fatal(err)
			}
			auth := tt.auth
			switch auth {
			case "":
				auth = "Bearer t"
			case "-":
				auth = ""
			}
			status, m := do(t, tt.h, "POST", "/exec", "127.0.0.1:1", auth, tt.body)
			if status != tt.status {
				t.Fatalf("exec = %d %v, want %d", status, m, tt.status)
			}
			if msg, _ := m["error"].(string); !strings.Contains(msg, tt.want) || status == 403 && m["code"] != CodeRefused {
				t.Errorf("exec = %v; want code %s and an error saying %q", m, CodeRefused, tt.want)
			}
			_, err := os.Stat(victim)
			if gone := errors.Is(err, os.ErrNotExist); gone != tt.removed {
				t.Errorf("victim removed = %v, want %v", gone, tt.removed)
			}
		})
	}
}

// TestAllowlist: the allowlist judges the program that will run, so
// assignments, paths outside PATH, lists, wrappers, expansions and
// anything else that could start another program are refused; an allowed
// program runs by its resolved path and is audited by it.
func TestAllowlist(t *testing.T) {
	evil := filepath.Join(t.TempDir(), "evil")
	if err := os.MkdirAll(evil, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(evil, "ls")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho pwned\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	h := NewHandler(Options{Tokens: []string{"t"}, Allow: []string{"ls", "/bin/echo", "cat"}}, slog.New(slog.NewJSONHandler(&logs, nil)))
	cmd := func(c string) string { b, _ := json.Marshal(ExecRequest{Cmd: c}); return string(b) }
	argv := func(a ...string) string { b, _ := json.Marshal(ExecRequest{Argv: a}); return string(b) }
	tests := []struct {
		name string
		body string
		want string // "" = runs; else a substring of the refusal
	}{
		{"plain", cmd("ls /"), ""},
		{"absolute in PATH", cmd("/usr/bin/ls /"), ""},
		{"argv", argv("ls", "/"), ""},
		{"absolute entry, by name", cmd("echo hi"), ""},
		{"assignment prefix", cmd("X=/ls cat /etc/passwd"), "assignment X="},
		{"PATH prefix", cmd("PATH=" + evil + " ls"), "assignment PATH="},
		{"program outside PATH", cmd(fake + " /"), "lies outside PATH"},
		{"argv outside PATH", argv(fake, "/"), "lies outside PATH"},
		{"dot-dot to outside PATH", cmd("/usr/bin/../.." + fake + " /"), "lies outside PATH"},
		{"relative path", cmd("./ls"), "relative path"},
		{"list", cmd("ls; id"), "holds 2 commands"},
		{"and list", cmd("ls && id"), "not one simple command"},
		{"pipeline", cmd("ls | sh"), "not one simple command"},
		{"background", cmd("ls & id"), "holds 2 commands"},
		{"newline", cmd("ls\nid"), "holds 2 commands"},
		{"wrapper", cmd("env ls"), "program /usr/bin/env is not in this gatekeeper's allowlist"},
		{"argv wrapper", argv("env", "ls"), "program /usr/bin/env is not in this gatekeeper's allowlist"},
		{"command substitution as name", cmd("$(echo ls)"), "command substitution"},
		{"command substitution in an argument", cmd("ls $(id)"), "command substitution"},
		{"backquotes", cmd("ls `id`"), "command substitution"},
		{"variable as name", cmd("$SHELL"), "parameter expansion"},
		{"process substitution", cmd("cat <(id)"), "process substitution"},
		{"redirection", cmd("ls > /tmp/out"), "redirection"},
		{"here-string", cmd("cat <<< hi"), "redirection"},
		{"quoted name", cmd("'l's /"), "not a plain word"},
		{"escaped name", cmd("l\\s /"), "not a plain word"},
		{"brace name", cmd("{ls,id}"), "not a plain word"},
		{"subshell", cmd("(ls)"), "not one simple command"},
		{"function", cmd("ls() { id; }; ls"), "holds 2 commands"},
		{"keyword", cmd("time id"), "not one simple command"},
		{"not listed", cmd("id"), "program /usr/bin/id is not in this gatekeeper's allowlist"},
		{"not found", cmd("no-such-program-xyz"), `program "no-such-program-xyz" is not in this gatekeeper's allowlist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, m := do(t, h, "POST", "/exec", "127.0.0.1:1", "Bearer t", tt.body)
			if tt.want == "" {
				if status != 200 || strings.Contains(m["stdout"].(string), "pwned") {
					t.Errorf("exec %s = %d %v, want it to run", tt.body, status, m)
				}
				return
			}
			msg, _ := m["error"].(string)
			if status != 403 || m["code"] != CodeRefused || !strings.Contains(msg, tt.want) {
				t.Errorf("exec %s = %d %v, want 403 refused saying %q", tt.body, status, m, tt.want)
			}
		})
	}

	// The allowed program runs by its path: no builtin stands in for it.
	// The shell's builtin echo prints --version; /bin/echo does not.
	status, m := do(t, h, "POST", "/exec", "127.0.0.1:1", "Bearer t", cmd("echo --version"))
	if status != 200 || m["stdout"] == "--version\n" {
		t.Errorf("exec echo --version = %d %v; want /bin/echo's answer, not the builtin's", status, m)
	}
	if !strings.Contains(logs.String(), `"program":"/usr/bin/ls"`) && !strings.Contains(logs.String(), `"program":"/bin/ls"`) {
		t.Errorf("audit log does not name the resolved program of ls:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), `"program":"ls"`) {
		t.Errorf("audit log names a bare program:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the handler's concurrent writes.
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

// TestSandboxWrites: a sandboxed command changes nothing without a grant,
// and with a verified grant only the grant's write paths.
func TestSandboxWrites(t *testing.T) {
	sb := proctest.NewSandbox(t, proc.SandboxOptions{})
	granted, other := proctest.GrantDir(t, sb), proctest.GrantDir(t, sb)
	h := NewHandler(Options{Tokens: []string{"t"}, NoPolicy: true, Sandbox: sb}, nil)
	strict := NewHandler(Options{Tokens: []string{"t"}, Sandbox: sb}, nil)
	boot, strictBoot := bootOf(t, h, "t"), bootOf(t, strict, "t")
	write := grant.Sandbox{Write: []string{granted}}
	tests := []struct {
		name    string
		h       http.Handler
		cmd     string
		grant   *grant.Grant
		file    string
		created bool
	}{
		{name: "no grant: read-only", h: h, cmd: "touch " + granted + "/a", file: granted + "/a"},
		{name: "granted path", h: h, cmd: "touch " + granted + "/b", grant: newGrant("t", boot, "touch "+granted+"/b", nil, write), file: granted + "/b", created: true},
		{name: "outside the grant", h: h, cmd: "touch " + other + "/c", grant: newGrant("t", boot, "touch "+other+"/c", nil, write), file: other + "/c"},
		{name: "policy confirm with grant", h: strict, cmd: "touch " + granted + "/d", grant: newGrant("t", strictBoot, "touch "+granted+"/d", nil, write), file: granted + "/d", created: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, m := do(t, tt.h, "POST", "/exec", "127.0.0.1:1", "Bearer t", grantBody(tt.cmd, nil, tt.grant))
			if status != 200 {
				t.Fatalf("exec %q = %d %v, want 200", tt.cmd, status, m)
			}
			_, err := os.Stat(tt.file)
			if created := err == nil; created != tt.created {
				t.Errorf("exec %q (exit %v, stderr %q): %s created = %v, want %v", tt.cmd, m["exit_code"], m["stderr"], tt.file, created, tt.created)
			}
			if !tt.created && m["exit_code"] == 0.0 {
				t.Errorf("exec %q exited 0; want touch to fail on a read-only file system", tt.cmd)
			}
		})
	}
}

// TestSandboxHidesTheServer: a sandboxed command sees no secret of the
// server's environment: not in its own environment, not through
// /proc/$PPID/environ, and no process of the host at all (a process of
// the server's user that holds the secret in its environment, which an
// unsandboxed command can read, is not there).
func TestSandboxHidesTheServer(t *testing.T) {
	sb := proctest.NewSandbox(t, proc.SandboxOptions{})
	secret := "gatekeeper-test-secret-" + strconv.Itoa(os.Getpid())
	t.Setenv("TOOLAGENT_TEST_GATEKEEPER_SECRET", secret)
	holder := exec.Command("/bin/sleep", "300")
	holder.Env = []string{"TOOLAGENT_TEST_GATEKEEPER_SECRET=" + secret}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	script := fmt.Sprintf("env; cat /proc/$PPID/environ /proc/1/environ /proc/%d/environ /proc/%d/environ", holder.Process.Pid, os.Getpid())
	body, _ := json.Marshal(ExecRequest{Cmd: script})

	open := NewHandler(Options{Tokens: []string{"t"}, NoPolicy: true}, nil)
	if status, m := do(t, open, "POST", "/exec", "127.0.0.1:1", "Bearer t", string(body)); status != 200 || !strings.Contains(m["stdout"].(string), secret) {
		t.Fatalf("unsandboxed control: exec = %d %v; want the secret readable through /proc, or this test proves nothing", status, m)
	}
	h := NewHandler(Options{Tokens: []string{"t"}, NoPolicy: true, Sandbox: sb}, nil)
	status, m := do(t, h, "POST", "/exec", "127.0.0.1:1", "Bearer t", string(body))
	if status != 200 {
		t.Fatalf("exec = %d %v", status, m)
	}
	if out := m["stdout"].(string); strings.Contains(out, secret) {
		t.Errorf("a sandboxed command read the server's secret:\n%s", out)
	}
	if !strings.Contains(m["stdout"].(string), "PATH="+proc.MinimalPath) {
		t.Errorf("exec env = %q; want the minimal environment", m["stdout"])
	}
}

// TestSandboxLimitHit: the server's answer names the sandbox limit a
// command hit (limit_hit), where its sandboxes get control groups, and
// has none for a command within its limits.
func TestSandboxLimitHit(t *testing.T) {
	sb := proctest.NewSandbox(t, proc.SandboxOptions{Limits: proc.Limits{MaxProcs: 16}})
	if _, err := sb.Cgroups(); err != nil {
		t.Skipf("no control group per sandbox here (%v): run as root where the pids and memory controllers are mounted", err)
	}
	h := NewHandler(Options{Tokens: []string{"t"}, NoPolicy: true, Sandbox: sb}, nil)
	for _, c := range []struct{ cmd, want string }{
		// dash: it reports a refused fork at once (bash retries for 15 s).
		{`exec /bin/sh -c 'i=0; while [ $i -lt 64 ]; do sleep 30 & i=$((i+1)); done'`, "process limit"},
		{`echo fine`, ""},
	} {
		body, _ := json.Marshal(ExecRequest{Cmd: c.cmd})
		status, m := do(t, h, "POST", "/exec", "127.0.0.1:1", "Bearer t", string(body))
		got, _ := m["limit_hit"].(string)
		if status != 200 || (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("exec %q = %d, limit_hit %q; want %q", c.cmd, status, got, c.want)
		}
	}
}
