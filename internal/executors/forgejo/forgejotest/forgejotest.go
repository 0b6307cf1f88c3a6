// Package forgejotest serves a canned subset of the Gitea/Forgejo API
// (the one code.gitea.io/sdk/gitea speaks) from an httptest.Server, for
// protocol tests of the git-forgejo executor: what each method sends and
// how answers map to outcomes. It is NOT a substitute for a test against a
// real server (TOOLAGENT_TEST_FORGEJO_URL).
//
// The server holds repository o/r (default branch main, README.md with
// "hello\n", one commit c1, issue 1) and other/x (README.md); every request
// but GET /api/v1/version needs "Authorization: token " + Token. A Server
// is safe for concurrent use. Imports: the standard library only; used by
// tests only.
package forgejotest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Token is the access token the server accepts.
const Token = "good-forgejo-token"

// Owner and Repo name the repository the server holds.
const (
	Owner = "o"
	Repo  = "r"
)

// Answer is a canned response.
type Answer struct {
	Status int
	Body   string
}

// Routes returns the canned answers by "METHOD /api/v1/path".
func Routes() map[string]Answer {
	return map[string]Answer{
		"GET /api/v1/version":                          {200, `{"version":"11.0.1+gitea-1.22.0"}`},
		"GET /api/v1/user":                             {200, `{"id":1,"login":"bot"}`},
		"GET /api/v1/repos/o/r":                        {200, `{"id":7,"full_name":"o/r","default_branch":"main"}`},
		"GET /api/v1/repos/o/r/contents/README.md":     {200, `{"name":"README.md","path":"README.md","sha":"abc123","type":"file","size":6,"encoding":"base64","content":"aGVsbG8K"}`},
		"GET /api/v1/repos/o/r/contents/docs":          {200, `[{"name":"a.md","path":"docs/a.md","sha":"1","type":"file","size":1}]`},
		"GET /api/v1/repos/o/r/commits":                {200, `[{"sha":"c1","commit":{"message":"first"}}]`},
		"GET /api/v1/repos/o/r/git/commits/c1":         {200, `{"sha":"c1","commit":{"message":"first"}}`},
		"POST /api/v1/repos/o/r/contents/new.md":       {201, `{"content":{"path":"new.md","sha":"n1"},"commit":{"sha":"c2"}}`},
		"POST /api/v1/repos/o/r/contents/README.md":    {422, `{"message":"repository file already exists [path: README.md]"}`},
		"PUT /api/v1/repos/o/r/contents/README.md":     {200, `{"content":{"path":"README.md","sha":"abc124"},"commit":{"sha":"c3"}}`},
		"DELETE /api/v1/repos/o/r/contents/README.md":  {200, `{"content":null,"commit":{"sha":"c4"}}`},
		"GET /api/v1/repos/o/r/branches":               {200, `[{"name":"main"}]`},
		"POST /api/v1/repos/o/r/branches":              {201, `{"name":"feature"}`},
		"GET /api/v1/repos/o/r/issues":                 {200, `[{"number":1,"title":"bug"}]`},
		"POST /api/v1/repos/o/r/issues":                {201, `{"number":2,"title":"new bug"}`},
		"POST /api/v1/repos/o/r/issues/2/comments":     {201, `{"id":9,"body":"thanks"}`},
		"GET /api/v1/repos/o/r/pulls":                  {200, `[]`},
		"POST /api/v1/repos/o/r/pulls":                 {201, `{"number":3,"title":"pr"}`},
		"GET /api/v1/repos/other/x/contents/README.md": {200, `{"name":"README.md","path":"README.md","sha":"x1","type":"file","encoding":"base64","content":"b3RoZXIK"}`},
		"GET /api/v1/repos/o/r/contents/binary.bin":    {200, `{"name":"binary.bin","path":"binary.bin","sha":"b1","type":"file","encoding":"base64","content":"//4="}`},
	}
}

// Server is the canned API. It records every request.
type Server struct {
	*httptest.Server
	routes map[string]Answer

	mu     sync.Mutex
	log    []string          // "METHOD path?query"
	bodies map[string]string // last body by "METHOD path"
}

// NewServer starts a server answering Routes(); it is closed at the end
// of the test. Unknown routes get 404 with a Gitea-style message; paths
// under /api/v1/repos/o/slow/ never answer until the client gives up.
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	f := &Server{routes: Routes(), bodies: map[string]string{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	tb.Cleanup(f.Close)
	return f
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	key := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.log = append(f.log, key+"?"+r.URL.RawQuery)
	f.bodies[key] = string(b)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path != "/api/v1/version" && r.Header.Get("Authorization") != "token "+Token {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"message":"token is required"}`)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/api/v1/repos/o/slow/") {
		<-r.Context().Done()
		return
	}
	c, ok := f.routes[key]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"The target couldn't be found.","errors":[]}`)
		return
	}
	w.WriteHeader(c.Status)
	io.WriteString(w, c.Body)
}

// Requests returns every request so far as "METHOD path?query".
func (f *Server) Requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// Body returns the last body sent to key ("METHOD /api/v1/path").
func (f *Server) Body(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[key]
}
