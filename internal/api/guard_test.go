package api

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/scan"
)

// guarded is a real HTTP server on loopback: the API handler (real
// dispatch and shell executor) with a stand-in /mcp and /ui/ beside it,
// all behind one Guard, as the daemon wires them.
type guarded struct {
	url, port string
	marker    string // the touch tool's file: it exists once the tool ran
	client    *http.Client
}

func newGuarded(t *testing.T, tokens *Tokens) *guarded {
	t.Helper()
	g := &guarded{marker: filepath.Join(t.TempDir(), "ran")}
	fsys := fstest.MapFS{"touch/TOOL.hdlp": {Data: []byte(tool("touch", `intent: touch a file
method: run
executor: shell
argv: [touch, "`+g.marker+`"]
params_schema: {}
`))}}
	snap, _, err := scan.Build(nil, scan.FromFS(fsys, "r"), nil, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := new(catalog.Store)
	st.Swap(snap)
	d := dispatch.New(st, execs(), dispatch.Options{})
	apiH := New(Options{Tokens: tokens, Registry: prometheus.NewRegistry(), Webhook: Webhook{Secret: []byte(hookSecret), Branch: "main"}}, st, d, &fakeSyncer{}, nil)
	mux := http.NewServeMux()
	mux.Handle("/", apiH)
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "mcp") })
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		io.WriteString(w, "ui "+r.PostFormValue("csrf"))
	})

	srv := httptest.NewUnstartedServer(nil)
	_, g.port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	h, err := Guard(GuardOptions{
		Listen:         []string{srv.Listener.Addr().String(), "192.0.2.7:" + g.port},
		PublicHosts:    []string{"toolagent.example.com", "10.1.2.3:9000", "[fd00::5]"},
		AllowedOrigins: []string{"https://console.example:8443/"},
		FormPaths:      []string{"/ui/"},
	}, mux)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	g.url, g.client = srv.URL, srv.Client()
	return g
}

func (g *guarded) ran(t *testing.T) bool {
	t.Helper()
	_, err := os.Stat(g.marker)
	if err == nil {
		if err := os.Remove(g.marker); err != nil {
			t.Fatal(err)
		}
	}
	return err == nil
}

// TestGuard: every route refuses a Host that does not name the daemon
// (421), a foreign Origin (403) and a state-changing body that is not JSON
// (415), with tokens or without; a refused call does not run its tool.
func TestGuard(t *testing.T) {
	const call = `{"tool":"touch"}`
	push := `{"ref":"refs/heads/main","after":"0123abcd"}`
	type tc struct {
		name         string
		method, path string
		host         string // "": the server's own 127.0.0.1:PORT; PORT is replaced
		header       map[string]string
		body         string
		want         int
		wantIn       string // a part of the answer
		ran          bool   // the touch tool ran
	}
	json := map[string]string{"Content-Type": "application/json"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []tc{
		// Host.
		{"own address", "POST", "/v1/call", "", json, call, 200, `"ok":true`, true},
		{"localhost with the port", "POST", "/v1/call", "localhost:PORT", json, call, 200, `"ok":true`, true},
		{"localhost in capitals", "POST", "/v1/call", "LocalHost:PORT", json, call, 200, `"ok":true`, true},
		{"[::1] with the port", "POST", "/v1/call", "[::1]:PORT", json, call, 200, `"ok":true`, true},
		{"another loopback address", "GET", "/v1/tools", "127.0.0.2:PORT", nil, "", 200, `"touch"`, false},
		{"localhost without a port (port 80)", "POST", "/v1/call", "localhost", json, call, 421, "public_hosts", false},
		{"localhost on another port", "POST", "/v1/call", "localhost:1", json, call, 421, "localhost:PORT", false},
		{"DNS rebinding: the attacker's name", "POST", "/v1/call", "attacker.example:PORT", json, call, 421, `Host \"attacker.example:PORT\" does not name this daemon`, false},
		{"a name that ends in localhost", "POST", "/v1/call", "localhost.attacker.example:PORT", json, call, 421, "public_hosts", false},
		{"the attacker's name on a read", "GET", "/v1/tools", "attacker.example:PORT", nil, "", 421, "public_hosts", false},
		{"the attacker's name on metrics", "GET", "/metrics", "attacker.example:PORT", nil, "", 421, "public_hosts", false},
		{"the attacker's name on /mcp", "POST", "/mcp", "attacker.example:PORT", json, "{}", 421, "public_hosts", false},
		{"the attacker's name on /ui/", "GET", "/ui/", "attacker.example:PORT", nil, "", 421, "public_hosts", false},
		{"the listen address", "POST", "/v1/call", "192.0.2.7:PORT", json, call, 200, `"ok":true`, true},
		{"the listen address on another port", "POST", "/v1/call", "192.0.2.7:1", json, call, 421, "192.0.2.7:PORT", false},
		{"public host, no port: any port", "POST", "/v1/call", "toolagent.example.com:1234", json, call, 200, `"ok":true`, true},
		{"public host without a port", "POST", "/v1/call", "Toolagent.Example.Com", json, call, 200, `"ok":true`, true},
		{"public host with its port", "POST", "/v1/call", "10.1.2.3:9000", json, call, 200, `"ok":true`, true},
		{"public host on another port", "POST", "/v1/call", "10.1.2.3:9001", json, call, 421, "10.1.2.3:9000", false},
		{"public IPv6 host", "GET", "/v1/tools", "[fd00::5]:PORT", nil, "", 200, `"touch"`, false},
		{"probes answer any Host", "GET", "/healthz", "10.9.9.9:PORT", nil, "", 200, `"ok"`, false},
		{"readiness answers any Host", "GET", "/readyz", "10.9.9.9:PORT", nil, "", 200, `"ready"`, false},

		// Origin.
		{"foreign Origin, text/plain: the CORS simple request", "POST", "/v1/call", "", with("Origin", "http://evil.example", "Content-Type", "text/plain"), call, 403, `Origin \"http://evil.example\" is not this daemon's own`, false},
		{"foreign Origin, JSON", "POST", "/v1/call", "", with("Origin", "http://evil.example", "Content-Type", "application/json"), call, 403, "allowed_origins", false},
		{"foreign Origin on a read", "GET", "/v1/tools", "", with("Origin", "http://evil.example"), "", 403, "allowed_origins", false},
		{"another port of localhost", "POST", "/v1/call", "localhost:PORT", with("Origin", "http://localhost:3000", "Content-Type", "application/json"), call, 403, "allowed_origins", false},
		{"Origin null", "POST", "/v1/call", "", with("Origin", "null", "Content-Type", "application/json"), call, 403, "allowed_origins", false},
		{"two Origin headers", "POST", "/v1/call", "", with("Content-Type", "application/json", "Origin", "http://127.0.0.1:PORT", "origin", "http://evil.example"), call, 403, "more than one Origin", false},
		{"own Origin", "POST", "/v1/call", "", with("Origin", "http://127.0.0.1:PORT", "Content-Type", "application/json"), call, 200, `"ok":true`, true},
		{"own Origin by another name", "POST", "/v1/call", "localhost:PORT", with("Origin", "http://localhost:PORT", "Content-Type", "application/json"), call, 200, `"ok":true`, true},
		{"own Origin through a TLS proxy", "POST", "/v1/call", "toolagent.example.com", with("Origin", "https://toolagent.example.com", "Content-Type", "application/json"), call, 200, `"ok":true`, true},
		{"the address's Origin under another Host", "POST", "/v1/call", "localhost:PORT", with("Origin", "http://127.0.0.1:PORT", "Content-Type", "application/json"), call, 403, "allowed_origins", false},
		{"allowed origin", "POST", "/v1/call", "", with("Origin", "https://Console.example:8443", "Content-Type", "application/json"), call, 200, `"ok":true`, true},
		{"allowed origin's host on another port", "POST", "/v1/call", "", with("Origin", "https://console.example", "Content-Type", "application/json"), call, 403, "allowed_origins", false},
		{"foreign Origin on /mcp", "POST", "/mcp", "", with("Origin", "http://evil.example", "Content-Type", "application/json"), "{}", 403, "allowed_origins", false},
		{"foreign Origin on a console form", "POST", "/ui/tools/touch", "", with("Origin", "http://evil.example", "Content-Type", "application/x-www-form-urlencoded"), "csrf=x", 403, "allowed_origins", false},
		{"cross-site without Origin", "POST", "/v1/call", "", with("Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"), call, 403, "Sec-Fetch-Site: cross-site", false},
		{"same-site without Origin", "POST", "/v1/call", "", with("Sec-Fetch-Site", "same-site", "Content-Type", "application/json"), call, 403, "Sec-Fetch-Site: same-site", false},
		{"cross-site read without Origin", "GET", "/v1/tools", "", with("Sec-Fetch-Site", "cross-site"), "", 200, `"touch"`, false},
		{"same-origin without Origin", "POST", "/v1/call", "", with("Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"), call, 200, `"ok":true`, true},

		// Content-Type.
		{"text/plain without Origin", "POST", "/v1/call", "", with("Content-Type", "text/plain"), call, 415, `Content-Type \"text/plain\" is not accepted: POST /v1/call takes a JSON body`, false},
		{"a form without Origin (curl -d)", "POST", "/v1/call", "", with("Content-Type", "application/x-www-form-urlencoded"), call, 415, "application/json", false},
		{"multipart", "POST", "/v1/match", "", with("Content-Type", "multipart/form-data; boundary=x"), "--x--", 415, "application/json", false},
		{"a body without Content-Type", "POST", "/v1/call", "", nil, call, 415, "no Content-Type", false},
		{"JSON with a charset", "POST", "/v1/call", "", with("Content-Type", "application/json; charset=utf-8"), call, 200, `"ok":true`, true},
		{"JSON in capitals", "POST", "/v1/call", "", with("Content-Type", "Application/JSON"), call, 200, `"ok":true`, true},
		{"text/plain to /mcp", "POST", "/mcp", "", with("Content-Type", "text/plain"), "{}", 415, "application/json", false},
		{"a POST without a body", "POST", "/v1/sync", "", nil, "", 202, "queued", false},
		{"a DELETE without a body", "DELETE", "/v1/feedback", "", nil, "", 501, "", false},
		{"a console form from its own page", "POST", "/ui/tools/touch", "", with("Origin", "http://127.0.0.1:PORT", "Content-Type", "application/x-www-form-urlencoded"), "csrf=abc", 200, "ui abc", false},

		// The webhook: git servers, by any name, signed.
		{"webhook by any name", "POST", "/v1/hooks/forgejo", "forgejo.internal:3000", with("X-Forgejo-Signature", sign(hookSecret, push), "Origin", "http://evil.example", "Content-Type", "application/json"), push, 202, "queued", false},
		{"webhook checks its own Content-Type", "POST", "/v1/hooks/forgejo", "forgejo.internal:3000", with("X-Forgejo-Signature", sign(hookSecret, push), "Content-Type", "text/plain"), push, 415, "", false},
	}
	for _, auth := range []struct {
		name   string
		tokens *Tokens
		bearer string
	}{{"open", nil, ""}, {"tokens", mustTokens(t), "0123456789abcdef0123"}} {
		t.Run(auth.name, func(t *testing.T) {
			g := newGuarded(t, auth.tokens)
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					var body io.Reader
					if tc.body != "" {
						body = strings.NewReader(tc.body)
					}
					req, err := http.NewRequest(tc.method, g.url+tc.path, body)
					if err != nil {
						t.Fatal(err)
					}
					if tc.host != "" {
						req.Host = strings.ReplaceAll(tc.host, "PORT", g.port)
					}
					for k, v := range tc.header {
						req.Header.Add(k, strings.ReplaceAll(v, "PORT", g.port))
					}
					if auth.bearer != "" {
						req.Header.Set("Authorization", "Bearer "+auth.bearer)
					}
					resp, err := g.client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					wantIn := strings.ReplaceAll(tc.wantIn, "PORT", g.port)
					if resp.StatusCode != tc.want || !strings.Contains(string(b), wantIn) {
						t.Errorf("%s %s (Host %s, %v) = %d %s; want %d with %s", tc.method, tc.path, req.Host, tc.header, resp.StatusCode, b, tc.want, wantIn)
					}
					if tc.want >= 400 && tc.path != "/v1/hooks/forgejo" && resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
						t.Errorf("refusal Content-Type %q; want JSON", resp.Header.Get("Content-Type"))
					}
					if ran := g.ran(t); ran != tc.ran {
						t.Errorf("the tool ran: %v; want %v", ran, tc.ran)
					}
				})
			}
		})
	}
}

// TestGuardOptions: a public host or an allowed origin that is not one is
// refused at start, naming its setting.
func TestGuardOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    GuardOptions
		wantErr string // "" for none
	}{
		{"loopback only", GuardOptions{Listen: []string{"127.0.0.1:8765"}}, ""},
		{"every address", GuardOptions{Listen: []string{"0.0.0.0:8765", "[::]:8765"}}, ""},
		{"hosts and origins", GuardOptions{Listen: []string{"127.0.0.1:8765"}, PublicHosts: []string{"a.example", "a.example:443", "10.0.0.5", "[fd00::1]:80", "fd00::2"},
			AllowedOrigins: []string{"https://a.example", "http://localhost:6274", "chrome-extension://abcdef"}}, ""},
		{"listen without a port", GuardOptions{Listen: []string{"127.0.0.1"}}, `listen "127.0.0.1": want host:port`},
		{"a URL as a public host", GuardOptions{PublicHosts: []string{"https://a.example"}}, `public_hosts: "https://a.example" is not a host`},
		{"a path in a public host", GuardOptions{PublicHosts: []string{"a.example/x"}}, `public_hosts: "a.example/x" is not a host`},
		{"a wildcard public host", GuardOptions{PublicHosts: []string{"*.example"}}, "public_hosts"},
		{"a bad port", GuardOptions{PublicHosts: []string{"a.example:http"}}, "public_hosts"},
		{"a host as an origin", GuardOptions{AllowedOrigins: []string{"a.example"}}, `allowed_origins: "a.example" is not an origin`},
		{"null as an origin", GuardOptions{AllowedOrigins: []string{"null"}}, "allowed_origins"},
		{"a wildcard origin", GuardOptions{AllowedOrigins: []string{"https://*.example"}}, "allowed_origins"},
		{"an origin with a path", GuardOptions{AllowedOrigins: []string{"https://a.example/app"}}, "allowed_origins"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Check()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Check() = %v; want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Check() = %v; want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// TestGuardNamesAcceptedHosts: the 421 says which Host values the daemon
// accepts, and the setting that adds one.
func TestGuardNamesAcceptedHosts(t *testing.T) {
	h, err := Guard(GuardOptions{Listen: []string{"0.0.0.0:8765"}}, http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/v1/tools", nil)
	req.Host = "10.0.0.5:8765"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	want := `it accepts 127.0.0.1:8765, localhost:8765, [::1]:8765, 0.0.0.0:8765, the names in public_hosts (none set)`
	if w.Code != http.StatusMisdirectedRequest || !strings.Contains(w.Body.String(), want) {
		t.Errorf("GET with Host 10.0.0.5:8765 = %d %s; want 421 saying %q", w.Code, w.Body, want)
	}
}
