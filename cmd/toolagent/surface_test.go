package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// surfaceReq is one request to a daemon under the HTTP surface's checks.
// PORT in host and header values is replaced by the daemon's port.
type surfaceReq struct {
	method, path string
	host         string // "": the daemon's own 127.0.0.1:PORT
	header       map[string]string
	body         string
}

func (d *liveDaemon) send(t *testing.T, c *http.Client, r surfaceReq) (int, string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(d.addr)
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, d.url+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.host != "" {
		req.Host = strings.ReplaceAll(r.host, "PORT", port)
	}
	for k, v := range r.header {
		req.Header.Set(k, strings.ReplaceAll(v, "PORT", port))
	}
	if d.token != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHTTPSurface (issue 34, part 4): a web page cannot drive the daemon,
// open or with tokens. A text/plain POST from another origin (a CORS
// simple request) and a DNS-rebinding page (the attacker's name as Host)
// are refused on /v1/call and the tool does not run (its file is not
// written); so are foreign Hosts on /mcp and /ui; curl-style clients
// without Origin, the daemon's own origin, a public host and an allowed
// origin are served; the webhook and the probes are not checked.
func TestHTTPSurface(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	fw, err := os.ReadFile("../../native-repo/tools/file-write/TOOL.hdlp")
	if err != nil {
		t.Fatal(err)
	}
	putTool(t, tools, "file-write", string(fw))
	write := func(file string) string {
		return `{"tool":"file-write","params":{"path":"` + file + `","content":"x"}}`
	}
	jsonCT := map[string]string{"Content-Type": "application/json"}
	calls := []struct {
		name string
		req  surfaceReq // body: the call writes FILE
		want int
		in   string
		ran  bool
	}{
		{"the attack: text/plain from another origin", surfaceReq{host: "", header: map[string]string{"Origin": "http://attacker.example", "Content-Type": "text/plain"}}, 403, `Origin \"http://attacker.example\" is not this daemon's own`, false},
		{"DNS rebinding: the attacker's name and origin", surfaceReq{host: "attacker.example:PORT", header: map[string]string{"Origin": "http://attacker.example:PORT", "Content-Type": "text/plain"}}, 421, "public_hosts", false},
		{"DNS rebinding with JSON", surfaceReq{host: "attacker.example:PORT", header: jsonCT}, 421, `Host \"attacker.example:PORT\" does not name this daemon`, false},
		{"text/plain without Origin", surfaceReq{header: map[string]string{"Content-Type": "text/plain"}}, 415, "send Content-Type: application/json", false},
		{"curl -d without a Content-Type of JSON", surfaceReq{header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, "application/json", false},
		{"cross-site without Origin", surfaceReq{header: map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}}, 403, "Sec-Fetch-Site", false},
		{"localhost without the port", surfaceReq{host: "localhost", header: jsonCT}, 421, "localhost:PORT", false},
		{"JSON without Origin (curl, SDKs)", surfaceReq{header: jsonCT}, 200, `"ok":true`, true},
		{"the daemon's own origin", surfaceReq{header: map[string]string{"Origin": "http://127.0.0.1:PORT", "Content-Type": "application/json; charset=utf-8"}}, 200, `"ok":true`, true},
		{"localhost with the port", surfaceReq{host: "localhost:PORT", header: map[string]string{"Origin": "http://localhost:PORT", "Content-Type": "application/json"}}, 200, `"ok":true`, true},
		{"[::1] with the port", surfaceReq{host: "[::1]:PORT", header: jsonCT}, 200, `"ok":true`, true},
		{"a public host", surfaceReq{host: "toolagent.test", header: map[string]string{"Origin": "https://toolagent.test", "Content-Type": "application/json"}}, 200, `"ok":true`, true},
		{"an allowed origin", surfaceReq{header: map[string]string{"Origin": "https://console.example:8443", "Content-Type": "application/json"}}, 200, `"ok":true`, true},
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	mcpHdr := func(kv ...string) map[string]string {
		m := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	others := []struct {
		name string
		req  surfaceReq
		want int
		in   string
	}{
		{"/mcp: the attacker's name", surfaceReq{"POST", "/mcp", "attacker.example:PORT", mcpHdr(), initialize}, 421, "public_hosts"},
		{"/mcp: another origin", surfaceReq{"POST", "/mcp", "", mcpHdr("Origin", "http://attacker.example"), initialize}, 403, "allowed_origins"},
		{"/mcp: text/plain", surfaceReq{"POST", "/mcp", "", mcpHdr("Content-Type", "text/plain"), initialize}, 415, "application/json"},
		{"/mcp: the daemon's own origin", surfaceReq{"POST", "/mcp", "", mcpHdr("Origin", "http://127.0.0.1:PORT"), initialize}, 200, `"serverInfo"`},
		{"/mcp: a public host (past the SDK's own loopback check)", surfaceReq{"POST", "/mcp", "toolagent.test:8080", mcpHdr(), initialize}, 200, `"serverInfo"`},
		{"/ui: the attacker's name", surfaceReq{"GET", "/ui/login", "attacker.example:PORT", nil, ""}, 421, "public_hosts"},
		{"/ui: its own", surfaceReq{"GET", "/ui/login", "", nil, ""}, 200, `action="/ui/login"`},
		{"/v1/tools: the attacker's name", surfaceReq{"GET", "/v1/tools", "attacker.example:PORT", nil, ""}, 421, "public_hosts"},
		{"/healthz: any name", surfaceReq{"GET", "/healthz", "10.9.8.7:PORT", nil, ""}, 200, "ok"},
		{"webhook: any name, any origin, its own checks", surfaceReq{"POST", "/v1/hooks/forgejo", "forgejo.internal:3000", map[string]string{"Origin": "http://attacker.example", "Content-Type": "text/plain"}, "{}"}, 404, "no webhook is configured"},
	}
	for _, mode := range []struct {
		name  string
		env   map[string]string
		token string
	}{
		{"open", nil, ""},
		{"tokens", map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceToken}, aliceToken},
	} {
		t.Run(mode.name, func(t *testing.T) {
			root := proctest.HostDir(t)
			d := startDaemon(t, mode.env, "--tools", tools, "--files-root", root, "--public-hosts", "toolagent.test", "--allowed-origins", "https://console.example:8443")
			d.token = mode.token
			for i, tc := range calls {
				t.Run(tc.name, func(t *testing.T) {
					file := "call-" + string(rune('a'+i)) + ".txt"
					r := tc.req
					r.method, r.path, r.body = "POST", "/v1/call", write(file)
					code, body := d.send(t, d.client, r)
					_, port, _ := net.SplitHostPort(d.addr)
					if in := strings.ReplaceAll(tc.in, "PORT", port); code != tc.want || !strings.Contains(body, in) {
						t.Errorf("POST /v1/call = %d %s; want %d with %s", code, body, tc.want, in)
					}
					_, err := os.Stat(filepath.Join(root, file))
					if ran := err == nil; ran != tc.ran {
						t.Errorf("the tool wrote its file: %v (%v); want %v", ran, err, tc.ran)
					}
				})
			}
			for _, tc := range others {
				t.Run(tc.name, func(t *testing.T) {
					if code, body := d.send(t, d.client, tc.req); code != tc.want || !strings.Contains(body, tc.in) {
						t.Errorf("%s %s = %d %s; want %d with %s", tc.req.method, tc.req.path, code, body, tc.want, tc.in)
					}
				})
			}
		})
	}
}

// TestConsoleFormsThroughTheSurface: the console's own forms (form types,
// its own Origin, as a browser sends them) still run calls, the page's
// and its script's (POST .../stream); the same form from another origin
// is refused and writes nothing. On an open daemon and signed in with a
// token.
func TestConsoleFormsThroughTheSurface(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	fw, err := os.ReadFile("../../native-repo/tools/file-write/TOOL.hdlp")
	if err != nil {
		t.Fatal(err)
	}
	putTool(t, tools, "file-write", string(fw))
	form := func(kv map[string]string) map[string]string {
		m := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
		for k, v := range kv {
			m[k] = v
		}
		return m
	}
	for _, mode := range []struct {
		name  string
		env   map[string]string
		token string
	}{
		{"open", nil, ""},
		{"tokens", map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceToken}, aliceToken},
	} {
		t.Run(mode.name, func(t *testing.T) {
			root := proctest.HostDir(t)
			d := startDaemon(t, mode.env, "--tools", tools, "--files-root", root)
			jar, _ := cookiejar.New(nil)
			c := &http.Client{Jar: jar}
			own := map[string]string{"Origin": "http://127.0.0.1:PORT"}
			if mode.token != "" {
				code, body := d.send(t, c, surfaceReq{"POST", "/ui/login", "", form(own), url.Values{"token": {mode.token}}.Encode()})
				if code != http.StatusOK {
					t.Fatalf("sign in with the form = %d %s", code, body)
				}
			}
			code, page := d.send(t, c, surfaceReq{"GET", "/ui/tools/file-write", "", nil, ""})
			m := csrfField.FindStringSubmatch(page)
			if code != http.StatusOK || m == nil {
				t.Fatalf("GET /ui/tools/file-write = %d, CSRF token found: %v", code, m != nil)
			}
			fields := func(file string) string {
				return url.Values{"csrf": {m[1]}, "action": {"run"}, "p.path": {file}, "p.content": {"x"}}.Encode()
			}
			for _, tc := range []struct {
				name, path, origin, file string
				want                     int
				ran                      bool
			}{
				{"the page's form", "/ui/tools/file-write", "http://127.0.0.1:PORT", "page.txt", 200, true},
				{"the page's script", "/ui/tools/file-write/stream", "http://127.0.0.1:PORT", "script.txt", 200, true},
				{"the page's form without Origin", "/ui/tools/file-write", "", "no-origin.txt", 200, true},
				{"the form from another origin", "/ui/tools/file-write", "http://attacker.example", "forged.txt", 403, false},
				{"the script's path from another origin", "/ui/tools/file-write/stream", "http://attacker.example", "forged-stream.txt", 403, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					h := form(nil)
					if tc.origin != "" {
						h["Origin"] = tc.origin
					}
					code, body := d.send(t, c, surfaceReq{"POST", tc.path, "", h, fields(tc.file)})
					if code != tc.want {
						t.Errorf("POST %s = %d %.300s; want %d", tc.path, code, body, tc.want)
					}
					_, err := os.Stat(filepath.Join(root, tc.file))
					if ran := err == nil; ran != tc.ran || (!ran && !errors.Is(err, os.ErrNotExist)) {
						t.Errorf("the tool wrote its file: %v (%v); want %v", ran, err, tc.ran)
					}
				})
			}
		})
	}
}
