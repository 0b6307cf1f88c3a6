package forgejo_test

// Protocol tests: they check the request each method sends and how
// answers map to outcomes, against an httptest.Server serving bodies
// shaped like Gitea 1.24's, fields the SDK does not model included
// (forgejotest). They are NOT a substitute for
// TestRealForgejo (real_test.go), which runs every method against a real
// server when TOOLAGENT_TEST_FORGEJO_URL is set.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/forgejo"
	"github.com/toolagent/toolagent/internal/executors/forgejo/forgejotest"
	"github.com/toolagent/toolagent/internal/hldp"
)

const goodToken = forgejotest.Token

func tool(method string) *hldp.Tool {
	return &hldp.Tool{Name: "t", Method: method, Executor: hldp.GitForgejo,
		Constraints: hldp.Constraints{Timeout: 30 * time.Second, MaxOutputBytes: 1 << 16}}
}

// req builds a request for a literal tool of method.
func req(method string, params map[string]any) executors.Request {
	return executors.Request{Tool: tool(method), Params: params, Rev: "r"}
}

func execute(t *testing.T, ex *forgejo.Executor, tl *hldp.Tool, params map[string]any) (executors.Outcome, error) {
	t.Helper()
	return ex.Execute(t.Context(), executors.Request{Tool: tl, Params: params, Rev: "r"})
}

// last returns the last request the server saw.
func last(f *forgejotest.Server) string {
	reqs := f.Requests()
	if len(reqs) == 0 {
		return ""
	}
	return reqs[len(reqs)-1]
}

// TestProtocolMethods runs every method against the canned server: the
// request (path and the exact query), and the output, which is the body
// the server sent byte for byte.
func TestProtocolMethods(t *testing.T) {
	f := forgejotest.NewServer(t)
	routes := forgejotest.Routes()
	ex := forgejo.New(forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "r"})
	tests := []struct {
		name    string
		method  string
		params  map[string]any
		wantReq string // the last request, "METHOD path?query", exactly
		body    string // the route whose canned body is the output
	}{
		{"get_file", "get_file", map[string]any{"path": "README.md", "ref": "main"}, "GET /api/v1/repos/o/r/contents/README.md?ref=main", "GET /api/v1/repos/o/r/contents/README.md"},
		{"get_file of another repository", "get_file", map[string]any{"path": "README.md", "owner": "other", "repo": "x"}, "GET /api/v1/repos/other/x/contents/README.md?", "GET /api/v1/repos/other/x/contents/README.md"},
		{"get_file binary", "get_file", map[string]any{"path": "binary.bin"}, "GET /api/v1/repos/o/r/contents/binary.bin?", "GET /api/v1/repos/o/r/contents/binary.bin"},
		{"list_dir", "list_dir", map[string]any{"path": "docs"}, "GET /api/v1/repos/o/r/contents/docs?", "GET /api/v1/repos/o/r/contents/docs"},
		{"list_dir root", "list_dir", map[string]any{}, "GET /api/v1/repos/o/r/contents?", "GET /api/v1/repos/o/r/contents"},
		// No stat, files or verification in the query: the server's defaults.
		{"list_commits", "list_commits", map[string]any{"ref": "main", "path": "a", "limit": int64(5)}, "GET /api/v1/repos/o/r/commits?limit=5&path=a&sha=main", "GET /api/v1/repos/o/r/commits"},
		{"list_commits without params", "list_commits", map[string]any{}, "GET /api/v1/repos/o/r/commits?", "GET /api/v1/repos/o/r/commits"},
		{"get_commit", "get_commit", map[string]any{"sha": forgejotest.HeadSHA}, "GET /api/v1/repos/o/r/git/commits/" + forgejotest.HeadSHA + "?", "GET /api/v1/repos/o/r/git/commits/" + forgejotest.HeadSHA},
		{"create_file", "create_file", map[string]any{"path": "new.md", "content": "hi\n", "message": "add"}, "POST /api/v1/repos/o/r/contents/new.md?", "POST /api/v1/repos/o/r/contents/new.md"},
		{"update_file", "update_file", map[string]any{"path": "README.md", "content": "new\n"}, "PUT /api/v1/repos/o/r/contents/README.md?", "PUT /api/v1/repos/o/r/contents/README.md"},
		{"delete_file", "delete_file", map[string]any{"path": "README.md"}, "DELETE /api/v1/repos/o/r/contents/README.md?", "DELETE /api/v1/repos/o/r/contents/README.md"},
		{"list_branches", "list_branches", map[string]any{}, "GET /api/v1/repos/o/r/branches?", "GET /api/v1/repos/o/r/branches"},
		{"create_branch", "create_branch", map[string]any{"name": "feature", "from": "main"}, "POST /api/v1/repos/o/r/branches?", "POST /api/v1/repos/o/r/branches"},
		{"list_issues", "list_issues", map[string]any{"state": "all"}, "GET /api/v1/repos/o/r/issues?limit=0&page=1&state=all&type=issues", "GET /api/v1/repos/o/r/issues"},
		{"create_issue", "create_issue", map[string]any{"title": "new bug", "body": "details"}, "POST /api/v1/repos/o/r/issues?", "POST /api/v1/repos/o/r/issues"},
		{"comment_issue", "comment_issue", map[string]any{"number": int64(2), "body": "thanks"}, "POST /api/v1/repos/o/r/issues/2/comments?", "POST /api/v1/repos/o/r/issues/2/comments"},
		{"list_pulls", "list_pulls", map[string]any{}, "GET /api/v1/repos/o/r/pulls?limit=0&page=1&state=open", "GET /api/v1/repos/o/r/pulls"},
		{"create_pull", "create_pull", map[string]any{"head": "feature", "base": "main", "title": "pr"}, "POST /api/v1/repos/o/r/pulls?", "POST /api/v1/repos/o/r/pulls"},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.method] = true
		t.Run(tt.name, func(t *testing.T) {
			if err := ex.Check(tool(tt.method)); err != nil {
				t.Fatalf("Check(%s) = %v", tt.method, err)
			}
			out, err := execute(t, ex, tool(tt.method), tt.params)
			if err != nil {
				t.Fatalf("Execute(%s) = %v", tt.method, err)
			}
			if got := last(f); got != tt.wantReq {
				t.Errorf("Execute(%s) sent %q, want %q", tt.method, got, tt.wantReq)
			}
			want := routes[tt.body]
			if out.HTTPStatus != want.Status || string(out.Output) != want.Body || len(out.Stderr) != 0 || out.ExitCode != 0 || out.Truncated {
				t.Errorf("Execute(%s) = status %d, exit %d, truncated %v, stderr %q, output\n%s\nwant status %d and the server's body byte for byte\n%s",
					tt.method, out.HTTPStatus, out.ExitCode, out.Truncated, out.Stderr, out.Output, want.Status, want.Body)
			}
			if out.OutputBytes != int64(len(want.Body)) {
				t.Errorf("Execute(%s) OutputBytes = %d, want %d", tt.method, out.OutputBytes, len(want.Body))
			}
		})
	}
	for _, m := range forgejo.Methods {
		if !covered[m] {
			t.Errorf("method %s has no protocol test case", m)
		}
	}

	// Bodies: content base64-encoded for the API; update/delete looked the
	// sha up first, on the branch they write to.
	var create struct {
		Content, Message string
	}
	if err := json.Unmarshal([]byte(f.Body("POST /api/v1/repos/o/r/contents/new.md")), &create); err != nil {
		t.Fatal(err)
	}
	if got, _ := base64.StdEncoding.DecodeString(create.Content); string(got) != "hi\n" || create.Message != "add" {
		t.Errorf("create_file body = %+v, want content hi\\n (base64) and message add", create)
	}
	for _, key := range []string{"PUT /api/v1/repos/o/r/contents/README.md", "DELETE /api/v1/repos/o/r/contents/README.md"} {
		if !strings.Contains(f.Body(key), `"sha":"`+forgejotest.ReadmeSHA+`"`) {
			t.Errorf("%s body = %s, want the current sha %s", key, f.Body(key), forgejotest.ReadmeSHA)
		}
	}
	for _, r := range f.Requests() {
		if strings.HasPrefix(r, "GET /api/v1/version") {
			t.Errorf("a call asked for the server version (%s); calls need none", r)
		}
	}
}

// TestProtocolUpdateLooksUpOnItsBranch: the sha lookup of update_file
// reads the file on the branch the update writes to, then the PUT
// follows.
func TestProtocolUpdateLooksUpOnItsBranch(t *testing.T) {
	f := forgejotest.NewServer(t)
	ex := forgejo.New(forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "r"})
	if _, err := execute(t, ex, tool("update_file"), map[string]any{"path": "README.md", "content": "x", "branch": "main"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"GET /api/v1/repos/o/r/contents/README.md?ref=main", "PUT /api/v1/repos/o/r/contents/README.md?"}
	if got := f.Requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("update_file on main sent %q, want %q", got, want)
	}
}

// TestProtocolRawFields: the output keeps what Gitea sends and the SDK's
// structs drop (so a decode and re-encode through them would lose it),
// and Gitea's own escaping of "&", "<" and ">".
func TestProtocolRawFields(t *testing.T) {
	f := forgejotest.NewServer(t)
	ex := forgejo.New(forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "r"})
	tests := []struct {
		method string
		params map[string]any
		sdk    any      // the SDK's type of the answer
		want   []string // in the output, absent after a round trip through sdk
	}{
		{"list_issues", map[string]any{}, &[]*gitea.Issue{}, []string{`"username":"bot"`, `"assets":[{"id":3`, `"assignee":null`, `"pin_order":0`, `"time_estimate":0`}},
		{"list_commits", map[string]any{}, &[]*gitea.Commit{}, []string{`{"filename":"README.md","status":"added"}`, `"signer":null`, `"username":"bot"`}},
		{"create_issue", map[string]any{"title": "new bug"}, &gitea.Issue{}, []string{`"pin_order":0`, `"assets":[]`}},
		{"comment_issue", map[string]any{"number": 2, "body": "thanks"}, &gitea.Comment{}, []string{`"username":"bot"`}},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			out, err := execute(t, ex, tool(tt.method), tt.params)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out.Output, tt.sdk); err != nil {
				t.Fatalf("the output of %s does not decode into %T: %v", tt.method, tt.sdk, err)
			}
			again, err := json.Marshal(tt.sdk)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out.Output), w) {
					t.Errorf("output of %s lacks %s:\n%s", tt.method, w, out.Output)
				}
				if strings.Contains(string(again), w) {
					t.Errorf("%s survives a round trip through %T, so this case proves nothing; pick a field the SDK does not model", w, tt.sdk)
				}
			}
		})
	}
	out, err := execute(t, ex, tool("list_issues"), map[string]any{})
	if err != nil || !strings.Contains(string(out.Output), `"body":"crash when \u003cpath\u003e has \u0026 in it"`) {
		t.Errorf("list_issues output = %s, %v; want Gitea's escaped body text kept", out.Output, err)
	}
}

// TestProtocolErrors: every error answer is an outcome whose output is the
// server's body byte for byte and whose stderr carries the server's own
// reason: its message, or the entries of its errors array.
func TestProtocolErrors(t *testing.T) {
	f := forgejotest.NewServer(t)
	ex := forgejo.New(forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "r"})
	const swagger = `"url":"` + forgejotest.SwaggerURL + `"}` + "\n"
	zero := strings.Repeat("0", 40)
	mismatch := `{"message":"sha does not match [given: ` + zero + `, expected: ` + forgejotest.ReadmeSHA + `]",` + swagger
	tests := []struct {
		name       string
		ex         *forgejo.Executor
		method     string
		params     map[string]any
		wantStatus int
		wantStderr string // exactly
		wantOut    string // exactly
		wantNoReq  string // a request that must not have been sent ("" none)
	}{
		{name: "404 missing file: the reason is in errors", method: "get_file", params: map[string]any{"path": "missing.md"}, wantStatus: 404,
			wantStderr: "HTTP 404 Not Found: GetContentsOrList: object does not exist [id: , rel_path: missing.md]\n",
			wantOut:    `{"errors":["object does not exist [id: , rel_path: missing.md]"],"message":"GetContentsOrList",` + swagger},
		{name: "404 missing ref", method: "list_dir", params: map[string]any{"ref": "nope"}, wantStatus: 404,
			wantStderr: "HTTP 404 Not Found: GetContentsOrList: object does not exist [id: nope, rel_path: ]\n",
			wantOut:    `{"errors":["object does not exist [id: nope, rel_path: ]"],"message":"GetContentsOrList",` + swagger},
		{name: "404 unknown repo", method: "list_commits", params: map[string]any{"owner": "nobody", "repo": "none"}, wantStatus: 404,
			wantStderr: "HTTP 404 Not Found: The target couldn't be found.\n",
			wantOut:    `{"errors":null,"message":"The target couldn't be found.",` + swagger},
		{name: "422 create existing file", method: "create_file", params: map[string]any{"path": "README.md", "content": "x"}, wantStatus: 422,
			wantStderr: "HTTP 422 Unprocessable Entity: repository file already exists [path: README.md]\n",
			wantOut:    `{"message":"repository file already exists [path: README.md]",` + swagger},
		{name: "422 update with a wrong sha", method: "update_file", params: map[string]any{"path": "README.md", "content": "x", "sha": zero}, wantStatus: 422,
			wantStderr: "HTTP 422 Unprocessable Entity: sha does not match [given: " + zero + ", expected: " + forgejotest.ReadmeSHA + "]\n",
			wantOut:    mismatch},
		{name: "400 delete with a wrong sha", method: "delete_file", params: map[string]any{"path": "README.md", "sha": zero}, wantStatus: 400,
			wantStderr: "HTTP 400 Bad Request: sha does not match [given: " + zero + ", expected: " + forgejotest.ReadmeSHA + "]\n",
			wantOut:    mismatch},
		{name: "500 without a message", method: "delete_file", params: map[string]any{"path": "README.md", "sha": forgejotest.ReadmeSHA, "branch": "gone"}, wantStatus: 500,
			wantStderr: "HTTP 500 Internal Server Error: the server sent no message (Gitea and Forgejo hide the reason of a 500 from tokens that are not an admin's; the server's log has it)\n",
			wantOut:    `{"message":"",` + swagger},
		{name: "404 of the sha lookup on a missing branch", method: "update_file", params: map[string]any{"path": "README.md", "content": "x", "branch": "gone"}, wantStatus: 404,
			wantStderr: "HTTP 404 Not Found: look up the current sha of README.md: GetContentsOrList: object does not exist [id: gone, rel_path: ]\n",
			wantOut:    `{"errors":["object does not exist [id: gone, rel_path: ]"],"message":"GetContentsOrList",` + swagger,
			wantNoReq:  "PUT /api/v1/repos/o/r/contents/README.md?"},
		{name: "409 existing branch", method: "create_branch", params: map[string]any{"name": "main"}, wantStatus: 409,
			wantStderr: "HTTP 409 Conflict: The branch already exists.\n",
			wantOut:    `{"message":"The branch already exists.",` + swagger},
		{name: "401 bad token", ex: forgejo.New(forgejo.Options{URL: f.URL, Token: "bad", Owner: "o", Repo: "r"}), method: "list_branches", params: map[string]any{}, wantStatus: 401,
			wantStderr: "HTTP 401 Unauthorized: user does not exist [uid: 0, name: ]\n",
			wantOut:    `{"message":"user does not exist [uid: 0, name: ]",` + swagger},
		{name: "401 no token", ex: forgejo.New(forgejo.Options{URL: f.URL, Owner: "o", Repo: "r"}), method: "list_branches", params: map[string]any{}, wantStatus: 401,
			wantStderr: "HTTP 401 Unauthorized: token is required\n",
			wantOut:    `{"message":"token is required",` + swagger},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := tt.ex
			if x == nil {
				x = ex
			}
			before := len(f.Requests())
			out, err := execute(t, x, tool(tt.method), tt.params)
			if err != nil {
				t.Fatalf("Execute() = %v, want an outcome", err)
			}
			if out.HTTPStatus != tt.wantStatus || string(out.Stderr) != tt.wantStderr || string(out.Output) != tt.wantOut {
				t.Errorf("Execute() = status %d, stderr %q, output %q;\nwant %d, %q, %q", out.HTTPStatus, out.Stderr, out.Output, tt.wantStatus, tt.wantStderr, tt.wantOut)
			}
			if out.ExitCode != 0 || out.TimedOut || out.Truncated {
				t.Errorf("Execute() = exit %d, timed out %v, truncated %v; want 0, false, false", out.ExitCode, out.TimedOut, out.Truncated)
			}
			if strings.Contains(string(out.Stderr), goodToken) || strings.Contains(string(out.Stderr), "token bad") {
				t.Errorf("stderr holds the token: %q", out.Stderr)
			}
			if tt.wantNoReq != "" {
				for _, r := range f.Requests()[before:] {
					if r == tt.wantNoReq {
						t.Errorf("sent %s after the lookup failed", r)
					}
				}
			}
		})
	}

	t.Run("params", func(t *testing.T) {
		noDefaults := forgejo.New(forgejo.Options{URL: f.URL, Token: goodToken})
		for _, c := range []struct {
			ex     *forgejo.Executor
			method string
			params map[string]any
			want   string
		}{
			{ex, "get_file", map[string]any{}, `"path" is missing`},
			{ex, "comment_issue", map[string]any{"number": "2", "body": "x"}, `"number" must be an integer`},
			{ex, "list_issues", map[string]any{"state": "weird"}, `"state" must be open, closed or all`},
			{ex, "create_issue", map[string]any{"title": "  "}, `title is empty`},
			{noDefaults, "list_branches", map[string]any{}, `"owner"`},
		} {
			before := len(f.Requests())
			if _, err := execute(t, c.ex, tool(c.method), c.params); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Execute(%s, %v) = %v, want an error containing %s", c.method, c.params, err, c.want)
			}
			if n := len(f.Requests()) - before; n != 0 {
				t.Errorf("Execute(%s, %v) sent %d requests; bad params send none", c.method, c.params, n)
			}
		}
	})

	t.Run("lookup of a directory", func(t *testing.T) {
		_, err := execute(t, ex, tool("delete_file"), map[string]any{"path": "docs"})
		if err == nil || !strings.Contains(err.Error(), "docs is a directory") && !strings.Contains(err.Error(), "it is a directory") {
			t.Errorf("delete_file(docs) = %v, want an error saying docs is a directory", err)
		}
	})
}

// TestProtocolTimeout: the tool's timeout ends the call as an outcome with
// TimedOut and exit code -1 (no process ran), and says so without talking
// of processes.
func TestProtocolTimeout(t *testing.T) {
	f := forgejotest.NewServer(t)
	ex := forgejo.New(forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "slow"})
	tl := tool("list_branches")
	tl.Constraints.Timeout = 50 * time.Millisecond
	out, err := execute(t, ex, tl, map[string]any{})
	if err != nil || !out.TimedOut || out.ExitCode != -1 {
		t.Fatalf("Execute(slow) = TimedOut %v, exit %d, %v; want true, -1, nil", out.TimedOut, out.ExitCode, err)
	}
	if s := string(out.Stderr); !strings.Contains(s, "no complete answer") || !strings.Contains(s, "50ms") || strings.Contains(s, "process") {
		t.Errorf("Execute(slow) stderr = %q; want it to say no complete answer came within 50ms, and nothing of processes", s)
	}
}

// TestProtocolCap: the cap applies while reading. A body past the cap is
// cut at it (Truncated, OutputBytes the size); a body that never ends is
// read to the cap plus the 1 MiB counted past it, then dropped: the call
// returns with the prefix, it does not wait for the end.
func TestProtocolCap(t *testing.T) {
	f := forgejotest.NewServer(t)
	ex := forgejo.New(forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "r"})

	body := forgejotest.Routes()["GET /api/v1/repos/o/r/contents/README.md"].Body
	tl := tool("get_file")
	tl.Constraints.MaxOutputBytes = 20
	out, err := execute(t, ex, tl, map[string]any{"path": "README.md"})
	if err != nil || string(out.Output) != body[:20] || !out.Truncated || out.OutputBytes != int64(len(body)) {
		t.Errorf("Execute(cap 20) = %q, Truncated %v, OutputBytes %d, %v; want %q, true, %d", out.Output, out.Truncated, out.OutputBytes, err, body[:20], len(body))
	}

	tl = tool("list_commits")
	tl.Constraints.MaxOutputBytes = 4096
	out, err = execute(t, ex, tl, map[string]any{"repo": "endless"})
	if err != nil || out.TimedOut || len(out.Output) != 4096 || !out.Truncated || !strings.HasPrefix(string(out.Output), `[{"url":`) {
		t.Fatalf("Execute(endless) = %d bytes %.40q, Truncated %v, TimedOut %v, %v; want the first 4096 bytes, truncated", len(out.Output), out.Output, out.Truncated, out.TimedOut, err)
	}
	if want := int64(4096 + 1<<20); out.OutputBytes != want {
		t.Errorf("Execute(endless) OutputBytes = %d, want %d (the cap and the 1 MiB counted past it, no more)", out.OutputBytes, want)
	}
}

// TestProtocolPlan: a plan names the HTTP request (and the lookup an
// update without a sha makes first), never the token.
func TestProtocolPlan(t *testing.T) {
	ex := forgejo.New(forgejo.Options{URL: "http://user:pw@forgejo.test", Token: goodToken, Owner: "o", Repo: "r"})
	p, err := ex.Plan(req("update_file", map[string]any{"path": "docs/a b.md", "content": "x", "branch": "dev"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Extra["http"], "PUT /api/v1/repos/o/r/contents/docs/a%20b.md"; got != want {
		t.Errorf("Plan http = %q, want %q", got, want)
	}
	if got, want := p.Extra["lookup"], "GET /api/v1/repos/o/r/contents/docs/a%20b.md?ref=dev (the file's current sha)"; got != want {
		t.Errorf("Plan lookup = %q, want %q", got, want)
	}
	b, _ := json.Marshal(p)
	if strings.Contains(string(b), goodToken) || strings.Contains(string(b), "pw@") {
		t.Errorf("plan %s holds a secret", b)
	}
}

func TestProtocolHealth(t *testing.T) {
	f := forgejotest.NewServer(t)
	tests := []struct {
		name    string
		opts    forgejo.Options
		wantErr []string // substrings; none = healthy
		wantIs  error
	}{
		{name: "healthy", opts: forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "r"}},
		{name: "bad token", opts: forgejo.Options{URL: f.URL, Token: "bad", Owner: "o", Repo: "r"}, wantIs: forgejo.ErrTokenRefused,
			wantErr: []string{"forgejo version at " + f.URL + ": HTTP 401 Unauthorized: the server refused the token: user does not exist [uid: 0, name: ]"}},
		{name: "no token, a repository", opts: forgejo.Options{URL: f.URL, Owner: "o", Repo: "r"},
			wantErr: []string{"repository o/r", "HTTP 401 Unauthorized: the server wants a token and none is configured: token is required"}},
		{name: "missing repo", opts: forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "gone"},
			wantErr: []string{"forgejo repository o/gone at " + f.URL + ": HTTP 404 Not Found: The target couldn't be found."}},
		{name: "not configured", opts: forgejo.Options{}, wantIs: executors.ErrNotConfigured},
		{name: "bad scheme", opts: forgejo.Options{URL: "ftp://x"}, wantErr: []string{"http://"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := forgejo.New(tt.opts).Health(t.Context())
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Health() = %v, want %v", err, tt.wantIs)
			}
			if tt.wantIs == nil && len(tt.wantErr) == 0 && err != nil {
				t.Errorf("Health() = %v, want nil", err)
			}
			for _, w := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Health() = %v, want an error containing %q", err, w)
				}
			}
			if err != nil && strings.Contains(err.Error(), goodToken) {
				t.Errorf("Health() = %v holds the token", err)
			}
		})
	}

	url := f.URL
	f.Close()
	ex := forgejo.New(forgejo.Options{URL: url, Token: goodToken, Owner: "o", Repo: "r"})
	if err := ex.Health(context.Background()); !errors.Is(err, forgejo.ErrUnreachable) {
		t.Errorf("Health(closed server) = %v, want ErrUnreachable", err)
	}
	if _, err := execute(t, ex, tool("list_branches"), map[string]any{}); !errors.Is(err, forgejo.ErrUnreachable) {
		t.Errorf("Execute(closed server) = %v, want ErrUnreachable", err)
	}
}

func TestCheck(t *testing.T) {
	ex := forgejo.New(forgejo.Options{URL: "http://forgejo.test"})
	if err := ex.Check(tool("push_force")); err == nil || !strings.Contains(err.Error(), "get_file") {
		t.Errorf("Check(unknown method) = %v, want an error listing the methods", err)
	}
	if err := forgejo.New(forgejo.Options{}).Check(tool("get_file")); !errors.Is(err, executors.ErrNotConfigured) {
		t.Errorf("Check(no URL) = %v, want ErrNotConfigured", err)
	}
}
