package forgejo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/toolagent/toolagent/internal/executors/forgejo"
)

// TestRealForgejo runs every method against a real Forgejo or Gitea
// server: TOOLAGENT_TEST_FORGEJO_URL and TOOLAGENT_TEST_FORGEJO_TOKEN (a
// token allowed to create and delete repositories of its user). It creates
// a temporary repository and deletes it afterwards.
func TestRealForgejo(t *testing.T) {
	url, token := os.Getenv("TOOLAGENT_TEST_FORGEJO_URL"), os.Getenv("TOOLAGENT_TEST_FORGEJO_TOKEN")
	if url == "" || token == "" {
		t.Skip("TOOLAGENT_TEST_FORGEJO_URL and TOOLAGENT_TEST_FORGEJO_TOKEN are not set: the real-server test of the git-forgejo executor did not run (protocol tests in protocol_test.go still ran)")
	}
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
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := ex.Health(ctx); err != nil {
		t.Fatalf("Health() = %v", err)
	}

	// Steps run in order: later ones use what earlier ones created.
	steps := []struct {
		method     string
		params     map[string]any
		wantStatus int    // 0: any 2xx
		wantOut    string // substring of the output
		wantStderr string
	}{
		{method: "list_dir", params: map[string]any{}, wantOut: "README.md"},
		{method: "get_file", params: map[string]any{"path": "README.md"}, wantOut: name},
		{method: "create_file", params: map[string]any{"path": "notes/a.txt", "content": "one\n", "message": "add a"}, wantOut: "notes/a.txt"},
		{method: "create_file", params: map[string]any{"path": "notes/a.txt", "content": "again\n"}, wantStatus: 422, wantStderr: "exist"},
		{method: "update_file", params: map[string]any{"path": "notes/a.txt", "content": "two\n"}, wantOut: "notes/a.txt"},
		{method: "get_file", params: map[string]any{"path": "notes/a.txt"}, wantOut: `"content":"two\n"`},
		{method: "list_commits", params: map[string]any{"limit": int64(5)}, wantOut: "add a"},
		{method: "list_branches", params: map[string]any{}, wantOut: "main"},
		{method: "create_branch", params: map[string]any{"name": "feature", "from": "main"}, wantOut: "feature"},
		{method: "create_file", params: map[string]any{"path": "b.txt", "content": "b\n", "branch": "feature"}, wantOut: "b.txt"},
		{method: "create_pull", params: map[string]any{"head": "feature", "base": "main", "title": "add b"}, wantOut: "add b"},
		{method: "list_pulls", params: map[string]any{}, wantOut: "add b"},
		{method: "create_issue", params: map[string]any{"title": "a bug", "body": "details"}, wantOut: "a bug"},
		{method: "list_issues", params: map[string]any{}, wantOut: "a bug"},
		{method: "delete_file", params: map[string]any{"path": "notes/a.txt"}, wantOut: "notes/a.txt"},
		{method: "get_file", params: map[string]any{"path": "notes/a.txt"}, wantStatus: 404},
		{method: "get_commit", params: map[string]any{"sha": "0000000000000000000000000000000000000000"}, wantStatus: 404},
		{method: "list_commits", params: map[string]any{"repo": name + "-missing"}, wantStatus: 404},
	}
	for i, s := range steps {
		out, err := ex.Execute(ctx, req(s.method, s.params))
		if err != nil {
			t.Fatalf("step %d %s: Execute = %v", i, s.method, err)
		}
		okStatus := out.HTTPStatus == s.wantStatus || s.wantStatus == 0 && out.HTTPStatus >= 200 && out.HTTPStatus < 300
		if !okStatus || !strings.Contains(string(out.Output), s.wantOut) || !strings.Contains(string(out.Stderr), s.wantStderr) {
			t.Errorf("step %d %s(%v) = status %d, output %.300s, stderr %q; want status %d, output containing %q, stderr containing %q",
				i, s.method, s.params, out.HTTPStatus, out.Output, out.Stderr, s.wantStatus, s.wantOut, s.wantStderr)
		}
		if s.method == "create_issue" && okStatus {
			var is struct{ Number int64 }
			if json.Unmarshal(out.Output, &is) == nil {
				c, err := ex.Execute(ctx, req("comment_issue", map[string]any{"number": is.Number, "body": "thanks"}))
				if err != nil || c.HTTPStatus != 201 || !strings.Contains(string(c.Output), "thanks") {
					t.Errorf("comment_issue #%d = status %d, %s, %v", is.Number, c.HTTPStatus, c.Output, err)
				}
			}
		}
		if s.method == "list_commits" && s.wantStatus == 0 {
			var cs []struct{ SHA string }
			if json.Unmarshal(out.Output, &cs) == nil && len(cs) > 0 {
				c, err := ex.Execute(ctx, req("get_commit", map[string]any{"sha": cs[0].SHA}))
				if err != nil || c.HTTPStatus != 200 || !strings.Contains(string(c.Output), cs[0].SHA) {
					t.Errorf("get_commit %s = status %d, %v", cs[0].SHA, c.HTTPStatus, err)
				}
			}
		}
	}

	bad := forgejo.New(forgejo.Options{URL: url, Token: "not-a-valid-token", Owner: me.UserName, Repo: name})
	out, err := bad.Execute(ctx, req("list_branches", map[string]any{}))
	if err != nil || out.HTTPStatus != 401 {
		t.Errorf("Execute(bad token) = status %d, stderr %q, %v; want 401", out.HTTPStatus, out.Stderr, err)
	}
}
