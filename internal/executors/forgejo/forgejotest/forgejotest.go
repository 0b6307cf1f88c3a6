// Package forgejotest serves a canned subset of the Gitea/Forgejo REST API
// (/api/v1) from an httptest.Server, for protocol tests of the git-forgejo
// executor: what each method sends and how answers map to outcomes. The
// bodies (testdata/gitea-1.24/*.json) are written the way Gitea 1.24
// writes them: the fields of its modules/structs in their order, including
// those code.gitea.io/sdk/gitea does not model ("username",
// "files[].status", "assets", "assignee", "pin_order",
// "verification.signer", …), compact JSON from Go's encoder with "&", "<"
// and ">" escaped and a trailing newline, and its error shapes:
// {"message", "url"}, and for a 404 {"errors": [...], "message", "url"}.
// Ids, shas and dates are made up. It is NOT a substitute for a test
// against a real server (TOOLAGENT_TEST_FORGEJO_URL).
//
// The server holds repository o/r (default branch main, README.md with
// "hello\n" at blob ReadmeSHA, docs/, one commit, issue 1) and other/x
// (README.md). It answers like Gitea 1.24:
//
//   - every request needs "Authorization: token " + Token, except GET
//     /api/v1/version without a token; another token gets 401 "user does
//     not exist [uid: 0, name: ]", none 401 "token is required";
//   - a contents path it does not hold, or a ref other than main, is 404
//     {"errors": ["object does not exist [...]"], "message":
//     "GetContentsOrList"};
//   - POST contents/README.md is 422 (the file exists); PUT and DELETE of
//     README.md with another sha are 422 and 400 "sha does not match
//     [given: …, expected: …]"; DELETE on a branch other than main is 500
//     with an empty message (Gitea hides a 500's reason from tokens that
//     are not an admin's);
//   - POST branches named "main" is 409 "The branch already exists.";
//   - an unknown route is 404 "The target couldn't be found.";
//   - paths under /api/v1/repos/o/slow/ never answer until the client
//     gives up; paths under /api/v1/repos/o/endless/ answer 200 with a body
//     that never ends.
//
// A Server is safe for concurrent use. Imports: the standard library only;
// used by tests only.
package forgejotest

import (
	"embed"
	"encoding/json"
	"fmt"
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

// ReadmeSHA is the blob sha of o/r's README.md ("hello\n").
const ReadmeSHA = "ce013625030ba8dba906f756967f9e9ca394464a"

// HeadSHA is the one commit of o/r (its main branch).
const HeadSHA = "65a457425a679cbe9adf0d2741785d3ceabb44a7"

// SwaggerURL is the "url" of the server's error bodies.
const SwaggerURL = "http://localhost:3000/api/swagger"

// ContentType is the Content-Type of every answer, as Gitea sends it.
const ContentType = "application/json;charset=utf-8"

//go:embed testdata/gitea-1.24/*.json
var bodies embed.FS

// Answer is a canned response, sent as it is.
type Answer struct {
	Status int
	Body   string
}

// routes names the body file of each static route.
var routes = []struct {
	key    string // "METHOD /api/v1/path"
	status int
	file   string
}{
	{"GET /api/v1/version", 200, "version.json"},
	{"GET /api/v1/user", 200, "user.json"},
	{"GET /api/v1/repos/o/r", 200, "repo.json"},
	{"GET /api/v1/repos/o/r/contents", 200, "contents-root.json"},
	{"GET /api/v1/repos/o/r/contents/README.md", 200, "contents-readme.json"},
	{"GET /api/v1/repos/o/r/contents/binary.bin", 200, "contents-binary.json"},
	{"GET /api/v1/repos/o/r/contents/docs", 200, "contents-docs.json"},
	{"GET /api/v1/repos/other/x/contents/README.md", 200, "contents-other-readme.json"},
	{"GET /api/v1/repos/o/r/commits", 200, "commits.json"},
	{"GET /api/v1/repos/o/r/git/commits/" + HeadSHA, 200, "commit.json"},
	{"POST /api/v1/repos/o/r/contents/new.md", 201, "file-created.json"},
	{"POST /api/v1/repos/o/r/contents/README.md", 422, "file-exists.json"},
	{"PUT /api/v1/repos/o/r/contents/README.md", 200, "file-updated.json"},
	{"DELETE /api/v1/repos/o/r/contents/README.md", 200, "file-deleted.json"},
	{"GET /api/v1/repos/o/r/branches", 200, "branches.json"},
	{"POST /api/v1/repos/o/r/branches", 201, "branch-created.json"},
	{"GET /api/v1/repos/o/r/issues", 200, "issues.json"},
	{"POST /api/v1/repos/o/r/issues", 201, "issue-created.json"},
	{"POST /api/v1/repos/o/r/issues/2/comments", 201, "comment-created.json"},
	{"GET /api/v1/repos/o/r/pulls", 200, "pulls.json"},
	{"POST /api/v1/repos/o/r/pulls", 201, "pull-created.json"},
}

// file returns a body of testdata/gitea-1.24.
func file(name string) string {
	b, err := bodies.ReadFile("testdata/gitea-1.24/" + name)
	if err != nil {
		panic("forgejotest: " + err.Error()) // the embedded files are fixed at build time
	}
	return string(b)
}

// Routes returns the canned answers of the static routes by "METHOD
// /api/v1/path" (the answers that depend on the request, such as a
// conflict or a missing path, are made by the server).
func Routes() map[string]Answer {
	m := make(map[string]Answer, len(routes))
	for _, r := range routes {
		m[r.key] = Answer{Status: r.status, Body: file(r.file)}
	}
	return m
}

// errorBody is Gitea's {"message", "url"} error body.
func errorBody(msg string) string {
	b, _ := json.Marshal(struct {
		Message string `json:"message"`
		URL     string `json:"url"`
	}{msg, SwaggerURL})
	return string(b) + "\n"
}

// notFoundBody is Gitea's 404 body with errors (its map encodes sorted).
func notFoundBody(message string, errs ...string) string {
	b, _ := json.Marshal(map[string]any{"errors": errs, "message": message, "url": SwaggerURL})
	return string(b) + "\n"
}

// Server is the canned API. It records every request.
type Server struct {
	*httptest.Server
	routes map[string]Answer

	mu     sync.Mutex
	log    []string          // "METHOD path?query"
	bodies map[string]string // last body by "METHOD path"
}

// NewServer starts a server answering like Gitea 1.24 (see the package
// doc); it is closed at the end of the test.
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
	w.Header().Set("Content-Type", ContentType)
	answer := func(status int, body string) {
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
	switch auth := r.Header.Get("Authorization"); {
	case auth == "token "+Token:
	case auth != "":
		answer(http.StatusUnauthorized, file("bad-token.json"))
		return
	case r.URL.Path != "/api/v1/version":
		answer(http.StatusUnauthorized, file("token-required.json"))
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/v1/repos/o/slow/"):
		<-r.Context().Done()
		return
	case strings.HasPrefix(r.URL.Path, "/api/v1/repos/o/endless/"):
		endless(w, r)
		return
	}
	if status, body, ok := f.dynamic(r, b); ok {
		answer(status, body)
		return
	}
	if c, ok := f.routes[key]; ok {
		answer(c.Status, c.Body)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/repos/o/r/contents/"); ok && r.Method == http.MethodGet {
		answer(http.StatusNotFound, notFoundBody("GetContentsOrList", fmt.Sprintf("object does not exist [id: , rel_path: %s]", rest)))
		return
	}
	answer(http.StatusNotFound, file("not-found.json"))
}

// dynamic answers the requests whose answer depends on the ref, the
// branch or the sha they carry.
func (f *Server) dynamic(r *http.Request, body []byte) (int, string, bool) {
	var in struct {
		SHA    string `json:"sha"`
		Branch string `json:"branch"`
		New    string `json:"new_branch_name"`
	}
	json.Unmarshal(body, &in)
	readme := r.URL.Path == "/api/v1/repos/o/r/contents/README.md"
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/repos/o/r/contents") && !onMain(r.URL.Query().Get("ref")):
		ref := r.URL.Query().Get("ref")
		return http.StatusNotFound, notFoundBody("GetContentsOrList", fmt.Sprintf("object does not exist [id: %s, rel_path: ]", ref)), true
	case readme && r.Method == http.MethodDelete && !onMain(in.Branch):
		return http.StatusInternalServerError, file("internal-error.json"), true
	case readme && r.Method == http.MethodPut && in.SHA != ReadmeSHA:
		return http.StatusUnprocessableEntity, errorBody(fmt.Sprintf("sha does not match [given: %s, expected: %s]", in.SHA, ReadmeSHA)), true
	case readme && r.Method == http.MethodDelete && in.SHA != ReadmeSHA:
		return http.StatusBadRequest, errorBody(fmt.Sprintf("sha does not match [given: %s, expected: %s]", in.SHA, ReadmeSHA)), true
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/repos/o/r/branches" && in.New == "main":
		return http.StatusConflict, file("branch-exists.json"), true
	}
	return 0, "", false
}

func onMain(ref string) bool { return ref == "" || ref == "main" }

// endless writes a JSON array of commits that never closes, until the
// client hangs up.
func endless(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	item := strings.TrimSuffix(strings.TrimPrefix(file("commits.json"), "["), "]\n")
	if _, err := io.WriteString(w, "["+item); err != nil {
		return
	}
	for r.Context().Err() == nil {
		if _, err := io.WriteString(w, ","+item); err != nil {
			return
		}
	}
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
