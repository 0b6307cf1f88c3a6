package forgejo_test

// Protocol tests: they check the request each method sends and how
// answers map to outcomes, against an httptest.Server serving canned Gitea
// API JSON. They are NOT a substitute for TestRealForgejo (real_test.go),
// which runs every method against a real server when
// TOOLAGENT_TEST_FORGEJO_URL is set.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/forgejo"
	"github.com/toolagent/toolagent/internal/executors/forgejo/forgejotest"
	"github.com/toolagent/toolagent/internal/hldp"
)

const goodToken = forgejotest.Token

// fakeGitea is the canned Gitea API of package forgejotest (shared with
// cmd/toolagent's daemon-level protocol test).
type fakeGitea struct{ *forgejotest.Server }

func newFake(t *testing.T) *fakeGitea { return &fakeGitea{forgejotest.NewServer(t)} }

func (f *fakeGitea) requests() []string     { return f.Requests() }
func (f *fakeGitea) body(key string) string { return f.Body(key) }

func tool(method string) *hldp.Tool {
	return &hldp.Tool{Name: "t", Method: method, Executor: hldp.GitForgejo,
		Constraints: hldp.Constraints{Timeout: 5 * time.Second, MaxOutputBytes: 1 << 16}}
}

// req builds a request for a literal tool of method.
func req(method string, params map[string]any) executors.Request {
	return executors.Request{Tool: tool(method), Params: params, Rev: "r"}
}

func execute(t *testing.T, ex *forgejo.Executor, tl *hldp.Tool, params map[string]any) (executors.Outcome, error) {
	t.Helper()
	return ex.Execute(t.Context(), executors.Request{Tool: tl, Params: params, Rev: "r"})
}

func TestProtocolMethods(t *testing.T) {
	f := newFake(t)
	ex := forgejo.New(forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "r"})
	tests := []struct {
		method     string
		params     map[string]any
		wantReq    string // the last request, "METHOD path" (query checked by wantQuery)
		wantQuery  string // substring of the query
		wantStatus int
		wantOut    string // substring of the output
	}{
		{method: "get_file", params: map[string]any{"path": "README.md", "ref": "main"}, wantReq: "GET /api/v1/repos/o/r/contents/README.md", wantQuery: "ref=main", wantStatus: 200, wantOut: `"content":"hello\n","target"`},
		{method: "get_file", params: map[string]any{"path": "README.md", "owner": "other", "repo": "x"}, wantReq: "GET /api/v1/repos/other/x/contents/README.md", wantStatus: 200, wantOut: `"content":"other\n"`},
		{method: "get_file", params: map[string]any{"path": "binary.bin"}, wantReq: "GET /api/v1/repos/o/r/contents/binary.bin", wantStatus: 200, wantOut: `"encoding":"base64","content":"//4="`},
		{method: "list_dir", params: map[string]any{"path": "docs"}, wantReq: "GET /api/v1/repos/o/r/contents/docs", wantStatus: 200, wantOut: `"path":"docs/a.md"`},
		{method: "list_commits", params: map[string]any{"ref": "main", "path": "a", "limit": int64(5)}, wantReq: "GET /api/v1/repos/o/r/commits", wantQuery: "limit=5", wantStatus: 200, wantOut: `"sha":"c1"`},
		{method: "get_commit", params: map[string]any{"sha": "c1"}, wantReq: "GET /api/v1/repos/o/r/git/commits/c1", wantStatus: 200, wantOut: `"message":"first"`},
		{method: "create_file", params: map[string]any{"path": "new.md", "content": "hi\n", "message": "add"}, wantReq: "POST /api/v1/repos/o/r/contents/new.md", wantStatus: 201, wantOut: `"sha":"n1"`},
		{method: "update_file", params: map[string]any{"path": "README.md", "content": "new\n"}, wantReq: "PUT /api/v1/repos/o/r/contents/README.md", wantStatus: 200, wantOut: `"sha":"abc124"`},
		{method: "delete_file", params: map[string]any{"path": "README.md"}, wantReq: "DELETE /api/v1/repos/o/r/contents/README.md", wantStatus: 200, wantOut: `"deleted":"README.md"`},
		{method: "list_branches", params: map[string]any{}, wantReq: "GET /api/v1/repos/o/r/branches", wantStatus: 200, wantOut: `"name":"main"`},
		{method: "create_branch", params: map[string]any{"name": "feature", "from": "main"}, wantReq: "POST /api/v1/repos/o/r/branches", wantStatus: 201, wantOut: `"name":"feature"`},
		{method: "list_issues", params: map[string]any{"state": "all"}, wantReq: "GET /api/v1/repos/o/r/issues", wantQuery: "state=all", wantStatus: 200, wantOut: `"title":"bug"`},
		{method: "create_issue", params: map[string]any{"title": "new bug", "body": "details"}, wantReq: "POST /api/v1/repos/o/r/issues", wantStatus: 201, wantOut: `"number":2`},
		{method: "comment_issue", params: map[string]any{"number": int64(2), "body": "thanks"}, wantReq: "POST /api/v1/repos/o/r/issues/2/comments", wantStatus: 201, wantOut: `"body":"thanks"`},
		{method: "list_pulls", params: map[string]any{}, wantReq: "GET /api/v1/repos/o/r/pulls", wantQuery: "state=open", wantStatus: 200, wantOut: `[]`},
		{method: "create_pull", params: map[string]any{"head": "feature", "base": "main", "title": "pr"}, wantReq: "POST /api/v1/repos/o/r/pulls", wantStatus: 201, wantOut: `"number":3`},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.method] = true
		t.Run(tt.method, func(t *testing.T) {
			if err := ex.Check(tool(tt.method)); err != nil {
				t.Fatalf("Check(%s) = %v", tt.method, err)
			}
			out, err := execute(t, ex, tool(tt.method), tt.params)
			if err != nil {
				t.Fatalf("Execute(%s) = %v", tt.method, err)
			}
			reqs := f.requests()
			last := reqs[len(reqs)-1]
			path, query, _ := strings.Cut(last, "?")
			if path != tt.wantReq || !strings.Contains(query, tt.wantQuery) {
				t.Errorf("Execute(%s) sent %q, want %q with query containing %q", tt.method, last, tt.wantReq, tt.wantQuery)
			}
			if out.HTTPStatus != tt.wantStatus || !strings.Contains(string(out.Output), tt.wantOut) || len(out.Stderr) != 0 {
				t.Errorf("Execute(%s) = status %d, output %s, stderr %q; want %d and output containing %s", tt.method, out.HTTPStatus, out.Output, out.Stderr, tt.wantStatus, tt.wantOut)
			}
			if !json.Valid(out.Output) {
				t.Errorf("Execute(%s) output is not JSON: %s", tt.method, out.Output)
			}
		})
	}
	for _, m := range forgejo.Methods {
		if !covered[m] {
			t.Errorf("method %s has no protocol test case", m)
		}
	}

	// Bodies: content base64-encoded for the API; update/delete fetched the sha.
	var create struct {
		Content, Message string
	}
	if err := json.Unmarshal([]byte(f.body("POST /api/v1/repos/o/r/contents/new.md")), &create); err != nil {
		t.Fatal(err)
	}
	if got, _ := base64.StdEncoding.DecodeString(create.Content); string(got) != "hi\n" || create.Message != "add" {
		t.Errorf("create_file body = %+v, want content hi\\n (base64) and message add", create)
	}
	for _, key := range []string{"PUT /api/v1/repos/o/r/contents/README.md", "DELETE /api/v1/repos/o/r/contents/README.md"} {
		if !strings.Contains(f.body(key), `"sha":"abc123"`) {
			t.Errorf("%s body = %s, want the current sha abc123", key, f.body(key))
		}
	}
	if n := strings.Count(strings.Join(f.requests(), "\n"), "GET /api/v1/version"); n != 1 {
		t.Errorf("the server version was asked %d times, want once (cached)", n)
	}
}

func TestProtocolErrors(t *testing.T) {
	f := newFake(t)
	ex := forgejo.New(forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "r"})
	tests := []struct {
		name       string
		ex         *forgejo.Executor
		method     string
		params     map[string]any
		wantStatus int
		wantStderr string
	}{
		{name: "404 missing file", ex: ex, method: "get_file", params: map[string]any{"path": "missing.md"}, wantStatus: 404, wantStderr: "The target couldn't be found."},
		{name: "404 unknown repo", ex: ex, method: "list_commits", params: map[string]any{"owner": "nobody", "repo": "none"}, wantStatus: 404, wantStderr: "couldn't be found"},
		{name: "422 create existing file", ex: ex, method: "create_file", params: map[string]any{"path": "README.md", "content": "x"}, wantStatus: 422, wantStderr: "repository file already exists"},
		{name: "401 bad token", ex: forgejo.New(forgejo.Options{URL: f.URL, Token: "bad", Owner: "o", Repo: "r"}), method: "list_branches", params: map[string]any{}, wantStatus: 401, wantStderr: "token is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := execute(t, tt.ex, tool(tt.method), tt.params)
			if err != nil {
				t.Fatalf("Execute() = %v, want an outcome", err)
			}
			if out.HTTPStatus != tt.wantStatus || !strings.Contains(string(out.Stderr), tt.wantStderr) {
				t.Errorf("Execute() = status %d, stderr %q; want %d, %q", out.HTTPStatus, out.Stderr, tt.wantStatus, tt.wantStderr)
			}
			if strings.Contains(string(out.Stderr), goodToken) || strings.Contains(string(out.Stderr), "token bad") {
				t.Errorf("stderr holds the token: %q", out.Stderr)
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
			{noDefaults, "list_branches", map[string]any{}, `"owner"`},
		} {
			if _, err := execute(t, c.ex, tool(c.method), c.params); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Execute(%s, %v) = %v, want an error containing %s", c.method, c.params, err, c.want)
			}
		}
	})

	t.Run("timeout", func(t *testing.T) {
		tl := tool("list_branches")
		tl.Constraints.Timeout = 200 * time.Millisecond
		out, err := execute(t, ex, tl, map[string]any{"repo": "slow"})
		if err != nil || !out.TimedOut {
			t.Errorf("Execute(slow) = TimedOut %v, %v; want true, nil", out.TimedOut, err)
		}
	})

	t.Run("cap", func(t *testing.T) {
		tl := tool("get_file")
		tl.Constraints.MaxOutputBytes = 20
		out, err := execute(t, ex, tl, map[string]any{"path": "README.md"})
		if err != nil || len(out.Output) != 20 || !out.Truncated || out.OutputBytes <= 20 {
			t.Errorf("Execute(cap 20) = %d bytes, Truncated %v, OutputBytes %d, %v", len(out.Output), out.Truncated, out.OutputBytes, err)
		}
	})

	t.Run("check", func(t *testing.T) {
		if err := ex.Check(tool("push_force")); err == nil || !strings.Contains(err.Error(), "get_file") {
			t.Errorf("Check(unknown method) = %v, want an error listing the methods", err)
		}
		if err := forgejo.New(forgejo.Options{}).Check(tool("get_file")); !errors.Is(err, executors.ErrNotConfigured) {
			t.Errorf("Check(no URL) = %v, want ErrNotConfigured", err)
		}
	})
}

func TestProtocolHealth(t *testing.T) {
	f := newFake(t)
	tests := []struct {
		name    string
		opts    forgejo.Options
		wantErr string // "" = healthy
		wantIs  error
	}{
		{name: "healthy", opts: forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "r"}},
		{name: "bad token", opts: forgejo.Options{URL: f.URL, Token: "bad"}, wantErr: "HTTP 401"},
		{name: "missing repo", opts: forgejo.Options{URL: f.URL, Token: goodToken, Owner: "o", Repo: "gone"}, wantErr: "o/gone"},
		{name: "not configured", opts: forgejo.Options{}, wantIs: executors.ErrNotConfigured},
		{name: "bad scheme", opts: forgejo.Options{URL: "ftp://x"}, wantErr: "http://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := forgejo.New(tt.opts).Health(t.Context())
			switch {
			case tt.wantIs != nil:
				if !errors.Is(err, tt.wantIs) {
					t.Errorf("Health() = %v, want %v", err, tt.wantIs)
				}
			case tt.wantErr == "":
				if err != nil {
					t.Errorf("Health() = %v, want nil", err)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Health() = %v, want an error containing %q", err, tt.wantErr)
				}
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
