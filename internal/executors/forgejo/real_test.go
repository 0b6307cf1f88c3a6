package forgejo_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/forgejo"
	"github.com/toolagent/toolagent/internal/hldp"
)

// realServer returns the real Forgejo or Gitea server of the opt-in tests
// and the timeout of one call, or skips the test saying what to set:
// TOOLAGENT_TEST_FORGEJO_URL, TOOLAGENT_TEST_FORGEJO_TOKEN (a token allowed
// to create and delete repositories of its user) and optionally
// TOOLAGENT_TEST_FORGEJO_TIMEOUT (a Go duration, default 1m: a busy
// server's writes take seconds).
func realServer(t *testing.T) (url, token string, timeout time.Duration) {
	t.Helper()
	url, token = os.Getenv("TOOLAGENT_TEST_FORGEJO_URL"), os.Getenv("TOOLAGENT_TEST_FORGEJO_TOKEN")
	if url == "" || token == "" {
		t.Skip("set TOOLAGENT_TEST_FORGEJO_URL and TOOLAGENT_TEST_FORGEJO_TOKEN (a token that may create and delete repositories; optionally TOOLAGENT_TEST_FORGEJO_TIMEOUT, default 1m) to run the git-forgejo executor against a real Forgejo or Gitea; the protocol tests in protocol_test.go still ran")
	}
	timeout = time.Minute
	if s := os.Getenv("TOOLAGENT_TEST_FORGEJO_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("TOOLAGENT_TEST_FORGEJO_TIMEOUT=%q: want a positive Go duration such as 90s", s)
		}
		timeout = d
	}
	return url, token, timeout
}

// show prints an outcome whole, for failure messages.
func show(out executors.Outcome, err error) string {
	return fmt.Sprintf("http_status %d, exit %d, timed_out %v, truncated %v, %d bytes, err %v\nstderr: %q\noutput: %.2000s",
		out.HTTPStatus, out.ExitCode, out.TimedOut, out.Truncated, out.OutputBytes, err, out.Stderr, out.Output)
}

// TestRealForgejo runs every method against a real Forgejo or Gitea server
// (see realServer). It creates a temporary repository and deletes it
// afterwards.
func TestRealForgejo(t *testing.T) {
	url, token, timeout := realServer(t)
	admin, err := gitea.NewClient(url, gitea.SetToken(token))
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	me, _, err := admin.GetMyUserInfo()
	if err != nil {
		t.Fatalf("token user: %v", err)
	}
	name := fmt.Sprintf("toolagent-test-%d", time.Now().UnixNano())
	repo, _, err := admin.CreateRepo(gitea.CreateRepoOption{Name: name, AutoInit: true, Readme: "Default", DefaultBranch: "main"})
	if err != nil {
		t.Fatalf("create repo %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := admin.DeleteRepo(me.UserName, name); err != nil {
			t.Logf("delete repo %s: %v", name, err)
		}
	})
	ex := forgejo.New(forgejo.Options{URL: url, Token: token, Owner: me.UserName, Repo: repo.Name})
	ctx, cancel := context.WithTimeout(t.Context(), 30*timeout)
	defer cancel()
	if err := ex.Health(ctx); err != nil {
		t.Fatalf("Health() = %v", err)
	}
	call := func(method string, params map[string]any) (executors.Outcome, error) {
		tl := &hldp.Tool{Name: "t", Method: method, Executor: hldp.GitForgejo,
			Constraints: hldp.Constraints{Timeout: timeout, MaxOutputBytes: 1 << 20}}
		return ex.Execute(ctx, executors.Request{Tool: tl, Params: params, Rev: "r"})
	}
	zero := strings.Repeat("0", 40)

	// Steps run in order: later ones use what earlier ones created.
	steps := []struct {
		method     string
		params     map[string]any
		wantStatus []int  // nil: any 2xx
		wantOut    string // substring of the output
		wantStderr string // substring of stderr
	}{
		{method: "list_dir", params: map[string]any{}, wantOut: "README.md"},
		{method: "get_file", params: map[string]any{"path": "README.md"}, wantOut: name},
		{method: "create_file", params: map[string]any{"path": "notes/a.txt", "content": "one\n", "message": "add a"}, wantOut: "notes/a.txt"},
		// Gitea and Forgejo: 422 for a file that exists.
		{method: "create_file", params: map[string]any{"path": "notes/a.txt", "content": "again\n"}, wantStatus: []int{422}, wantStderr: "already exists"},
		// A wrong sha: 422 on Gitea, 409 on Forgejo (METHODS.md).
		{method: "update_file", params: map[string]any{"path": "notes/a.txt", "content": "x\n", "sha": zero}, wantStatus: []int{409, 422}, wantStderr: "sha does not match"},
		{method: "update_file", params: map[string]any{"path": "notes/a.txt", "content": "two\n"}, wantOut: "notes/a.txt"},
		{method: "get_file", params: map[string]any{"path": "notes/a.txt"}, wantOut: `"content":"` + base64.StdEncoding.EncodeToString([]byte("two\n")) + `"`},
		// No stat=false in the query: the server's default commit objects, with stats.
		{method: "list_commits", params: map[string]any{"limit": int64(5)}, wantOut: `"stats":{`},
		{method: "list_branches", params: map[string]any{}, wantOut: "main"},
		{method: "create_branch", params: map[string]any{"name": "feature", "from": "main"}, wantOut: "feature"},
		{method: "create_branch", params: map[string]any{"name": "feature", "from": "main"}, wantStatus: []int{409}, wantStderr: "HTTP 409"},
		{method: "create_file", params: map[string]any{"path": "b.txt", "content": "b\n", "branch": "feature"}, wantOut: "b.txt"},
		{method: "create_pull", params: map[string]any{"head": "feature", "base": "main", "title": "add b"}, wantOut: "add b"},
		{method: "list_pulls", params: map[string]any{}, wantOut: "add b"},
		{method: "create_issue", params: map[string]any{"title": "a bug", "body": "details"}, wantOut: `"username":`},
		{method: "list_issues", params: map[string]any{}, wantOut: "a bug"},
		// A wrong sha on delete: 400 on Gitea up to 1.24 and on Forgejo, 422 on later Gitea.
		{method: "delete_file", params: map[string]any{"path": "notes/a.txt", "sha": zero}, wantStatus: []int{400, 422}, wantStderr: "sha does not match"},
		{method: "delete_file", params: map[string]any{"path": "notes/a.txt"}, wantOut: `"content":null`},
		{method: "get_file", params: map[string]any{"path": "notes/a.txt"}, wantStatus: []int{404}, wantStderr: "HTTP 404"},
		{method: "update_file", params: map[string]any{"path": "README.md", "content": "x\n", "branch": "no-such-branch"}, wantStatus: []int{404}, wantStderr: "look up the current sha of README.md"},
		{method: "get_commit", params: map[string]any{"sha": zero}, wantStatus: []int{404}},
		{method: "list_commits", params: map[string]any{"repo": name + "-missing"}, wantStatus: []int{404}},
	}
	for i, s := range steps {
		out, err := call(s.method, s.params)
		if err != nil {
			t.Fatalf("step %d %s(%v): %s", i, s.method, s.params, show(out, err))
		}
		okStatus := slices.Contains(s.wantStatus, out.HTTPStatus) || s.wantStatus == nil && out.HTTPStatus >= 200 && out.HTTPStatus < 300
		if !okStatus || !strings.Contains(string(out.Output), s.wantOut) || !strings.Contains(string(out.Stderr), s.wantStderr) {
			t.Errorf("step %d %s(%v) = %s\nwant status %v (nil: 2xx), output containing %q, stderr containing %q",
				i, s.method, s.params, show(out, err), s.wantStatus, s.wantOut, s.wantStderr)
		}
		if !json.Valid(out.Output) {
			t.Errorf("step %d %s: the output is not the server's JSON: %s", i, s.method, show(out, err))
		}
		if out.HTTPStatus >= 400 {
			// The server's own reason follows the status, not a placeholder.
			_, reason, _ := strings.Cut(strings.TrimSpace(string(out.Stderr)), ": ")
			if reason == "" || out.HTTPStatus < 500 && strings.HasPrefix(reason, "the server sent no message") {
				t.Errorf("step %d %s: stderr %q carries no reason from the server", i, s.method, out.Stderr)
			}
		}
		if s.method == "create_issue" && okStatus {
			var is struct{ Number int64 }
			if json.Unmarshal(out.Output, &is) == nil {
				c, err := call("comment_issue", map[string]any{"number": is.Number, "body": "thanks"})
				if err != nil || c.HTTPStatus != 201 || !strings.Contains(string(c.Output), "thanks") {
					t.Errorf("comment_issue #%d = %s", is.Number, show(c, err))
				}
			}
		}
		if s.method == "list_commits" && s.wantStatus == nil {
			var cs []struct{ SHA string }
			if json.Unmarshal(out.Output, &cs) == nil && len(cs) > 0 {
				c, err := call("get_commit", map[string]any{"sha": cs[0].SHA})
				if err != nil || c.HTTPStatus != 200 || !strings.Contains(string(c.Output), cs[0].SHA) {
					t.Errorf("get_commit %s = %s", cs[0].SHA, show(c, err))
				}
			}
		}
	}

	bad := forgejo.New(forgejo.Options{URL: url, Token: "not-a-valid-token", Owner: me.UserName, Repo: name})
	out, err := bad.Execute(ctx, req("list_branches", map[string]any{}))
	if err != nil || out.HTTPStatus != 401 || !strings.HasPrefix(string(out.Stderr), "HTTP 401") {
		t.Errorf("Execute(bad token) = %s; want 401 with the server's reason", show(out, err))
	}
	if err := bad.Health(ctx); !errors.Is(err, forgejo.ErrTokenRefused) || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("Health(bad token) = %v; want an error naming HTTP 401 and wrapping ErrTokenRefused", err)
	}
}
