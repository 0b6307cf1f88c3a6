package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"
	"github.com/google/go-cmp/cmp"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/executors/forgejo/forgejotest"
)

// TestServeShellExample runs the shell example (method run, fixed argv)
// through the daemon's HTTP API.
func TestServeShellExample(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "uptime", example(t, "shell", "uptime"))
	d := startDaemon(t, nil, "--tools", tools)
	code, res := d.call(t, "uptime", map[string]any{})
	if code != 200 || res.Status != dispatch.Success || !strings.Contains(res.Output, "load average") || res.Executor != "shell" {
		t.Errorf("call uptime = %d %s %q (error %q); want 200 success with the load average from executor shell", code, res.Status, res.Output, res.Error)
	}
}

// TestServeHlpdAPI runs the hlpd-api examples through the daemon's HTTP
// API against an httptest.Server standing for the HLDP API: the route
// from the config file, the token from the environment as a bearer
// header, a 404 kept as an error with the body.
func TestServeHlpdAPI(t *testing.T) {
	t.Parallel()
	const token = "hlpd-test-token-abcdef"
	var mu sync.Mutex
	var got []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path == "/healthz":
			io.WriteString(w, "ok")
		case r.Method == "GET" && r.URL.Path == "/v1/items/42":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"42","name":"answer","fields":%q}`, r.URL.Query()["fields"])
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"no such item"}`)
		}
	}))
	t.Cleanup(api.Close)

	tools := t.TempDir()
	putTool(t, tools, "item-get", example(t, "hlpd-api", "item-get"))
	putTool(t, tools, "item-create", example(t, "hlpd-api", "item-create"))
	cfg := writeConfig(t, "hlpd:\n  routes:\n    items.get: \"GET /v1/items/{id}\"\n  health_path: /healthz\n")
	d := startDaemon(t, map[string]string{"TOOLAGENT_HLPD_URL": api.URL, "TOOLAGENT_HLPD_TOKEN": token}, "--tools", tools, "--config", cfg)

	code, res := d.call(t, "item-get", map[string]any{"id": "42", "fields": []string{"name"}})
	if code != 200 || res.Status != dispatch.Success || res.Output != `{"id":"42","name":"answer","fields":["name"]}` || res.Executor != "hlpd-api" {
		t.Errorf("call item-get 42 = %d %s %q (error %q); want 200 success with the API's body", code, res.Status, res.Output, res.Error)
	}
	code, res = d.call(t, "item-get", map[string]any{"id": "7"})
	if code != 200 || res.Status != dispatch.Error || res.Output != `{"error":"no such item"}` || res.HTTPStatus != 404 {
		t.Errorf("call item-get 7 = %d %s %q http %d; want 200 error with the 404 body kept", code, res.Status, res.Output, res.HTTPStatus)
	}
	// require_confirm: did not run, the API never saw it.
	if code, res := d.call(t, "item-create", map[string]any{"title": "x"}); res.Status != dispatch.ApprovalRequired {
		t.Errorf("call item-create = %d %s %q; want approval_required", code, res.Status, res.Error)
	}
	seen := func(req string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(got, req)
	}
	// The health check runs beside the calls (the monitor's own
	// goroutine), not before ready: it may come after them.
	pollWithin(t, time.Minute, "the daemon's health check of the API (GET /healthz)", func() bool { return seen("GET /healthz") })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(got, "GET /v1/items/42?fields=name") {
		t.Errorf("the API saw %q; want GET /v1/items/42?fields=name", got)
	}
	for _, r := range got {
		if strings.HasPrefix(r, "POST") {
			t.Errorf("the API saw %s; item-create needs an approval first", r)
		}
	}
	if strings.Contains(d.logs.String(), token) {
		t.Errorf("the daemon log holds the hlpd token")
	}
}

// TestServeForgejoProtocol is a PROTOCOL test, not a test against
// Forgejo: the git-forgejo examples run through the daemon's HTTP API
// against the canned Gitea API of forgejotest (the one the executor's own
// protocol tests use). TestServeForgejoReal is the real-server test.
func TestServeForgejoProtocol(t *testing.T) {
	t.Parallel()
	f := forgejotest.NewServer(t)
	tools := t.TempDir()
	for _, name := range []string{"repo-read-file", "repo-list-commits", "repo-create-issue"} {
		putTool(t, tools, name, example(t, "git-forgejo", name))
	}
	d := startDaemon(t, map[string]string{
		"TOOLAGENT_FORGEJO_URL": f.URL, "TOOLAGENT_FORGEJO_TOKEN": forgejotest.Token,
		"TOOLAGENT_FORGEJO_OWNER": forgejotest.Owner, "TOOLAGENT_FORGEJO_REPO": forgejotest.Repo,
	}, "--tools", tools)
	tests := []struct {
		tool     string
		params   map[string]any
		wantCode int
		want     dispatch.ResultStatus
		wantOut  string
	}{
		// The server's body as it is: content base64, as Gitea sends it.
		{"repo-read-file", map[string]any{"path": "README.md"}, 200, dispatch.Success, `"content":"aGVsbG8K"`},
		{"repo-read-file", map[string]any{"path": "README.md", "owner": "other", "repo": "x"}, 200, dispatch.Success, `"content":"b3RoZXIK"`},
		{"repo-read-file", map[string]any{"path": "missing.md"}, 200, dispatch.Error, `GetContentsOrList: object does not exist [id: , rel_path: missing.md]`},
		{"repo-list-commits", map[string]any{"limit": 5}, 200, dispatch.Success, `"sha":"` + forgejotest.HeadSHA + `"`},
		{"repo-create-issue", map[string]any{"title": "bug"}, http.StatusAccepted, dispatch.ApprovalRequired, ""}, // held in the approval queue
	}
	for _, tc := range tests {
		code, res := d.call(t, tc.tool, tc.params)
		if code != tc.wantCode || res.Status != tc.want || !strings.Contains(res.Output+res.Stderr, tc.wantOut) {
			t.Errorf("call %s %v = %d %s output %q stderr %q; want %d %s with %q", tc.tool, tc.params, code, res.Status, res.Output, res.Stderr, tc.wantCode, tc.want, tc.wantOut)
		}
	}
	if !slices.ContainsFunc(f.Requests(), func(r string) bool {
		return strings.HasPrefix(r, "GET /api/v1/repos/o/r/commits?") && strings.Contains(r, "limit=5")
	}) {
		t.Errorf("the API saw %q; want GET /api/v1/repos/o/r/commits with limit=5", f.Requests())
	}
}

// forgejoReal returns the real Forgejo or Gitea server of the opt-in
// tests and the time one call or one wait may take, or skips the test
// saying what to set: TOOLAGENT_TEST_FORGEJO_URL and
// TOOLAGENT_TEST_FORGEJO_TOKEN (a token allowed to create and delete
// repositories of its user), optionally TOOLAGENT_TEST_FORGEJO_TIMEOUT (a
// Go duration, default 1m: a busy server's writes and webhook deliveries
// take seconds).
func forgejoReal(t *testing.T) (url, token string, timeout time.Duration) {
	t.Helper()
	url, token = os.Getenv("TOOLAGENT_TEST_FORGEJO_URL"), os.Getenv("TOOLAGENT_TEST_FORGEJO_TOKEN")
	if url == "" || token == "" {
		t.Skip("set TOOLAGENT_TEST_FORGEJO_URL and TOOLAGENT_TEST_FORGEJO_TOKEN (a token that may create and delete repositories; optionally TOOLAGENT_TEST_FORGEJO_TIMEOUT, default 1m) to test against a real Forgejo or Gitea; the protocol tests against canned answers still ran")
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

// pollWithin is pollUntil with a deadline of its own.
func pollWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// withToolTimeout returns a TOOL.hdlp with its timeout_ms set to d.
func withToolTimeout(t testing.TB, def string, d time.Duration) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^(\s*timeout_ms:\s*)\d+`)
	if !re.MatchString(def) {
		t.Fatalf("no timeout_ms in %q", def)
	}
	return re.ReplaceAllString(def, "${1}"+strconv.FormatInt(d.Milliseconds(), 10))
}

// showResult prints a call's answer whole, for failure messages.
func showResult(code int, res dispatch.Result) string {
	b, _ := json.Marshal(res)
	return fmt.Sprintf("HTTP %d %.3000s", code, b)
}

// TestServeForgejoReal runs the git-forgejo examples through the daemon
// against a real Forgejo or Gitea (see forgejoReal). It creates a
// temporary repository. A second daemon with a bad token shows the
// executor's tools failed, the reason naming the 401 and the refused
// token.
func TestServeForgejoReal(t *testing.T) {
	t.Parallel()
	url, token, timeout := forgejoReal(t)
	admin, err := gitea.NewClient(url, gitea.SetToken(token))
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	me, _, err := admin.GetMyUserInfo()
	if err != nil {
		t.Fatalf("token user: %v", err)
	}
	name := fmt.Sprintf("toolagent-daemon-test-%d", time.Now().UnixNano())
	if _, _, err := admin.CreateRepo(gitea.CreateRepoOption{Name: name, AutoInit: true, Readme: "Default", DefaultBranch: "main"}); err != nil {
		t.Fatalf("create repo %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := admin.DeleteRepo(me.UserName, name); err != nil {
			t.Logf("delete repo %s: %v", name, err)
		}
	})
	tools := t.TempDir()
	for _, n := range []string{"repo-read-file", "repo-list-commits"} {
		putTool(t, tools, n, withToolTimeout(t, example(t, "git-forgejo", n), timeout))
	}
	env := map[string]string{
		"TOOLAGENT_FORGEJO_URL": url, "TOOLAGENT_FORGEJO_TOKEN": token,
		"TOOLAGENT_FORGEJO_OWNER": me.UserName, "TOOLAGENT_FORGEJO_REPO": name,
		"TOOLAGENT_HEALTH_TIMEOUT": timeout.String(),
	}
	d := startDaemon(t, env, "--tools", tools)
	pollWithin(t, timeout, "repo-read-file to be enabled (the executor's health check)", func() bool {
		return d.tool(t, "repo-read-file").Status == catalog.Enabled
	})
	if code, res := d.call(t, "repo-read-file", map[string]any{"path": "README.md"}); code != 200 || res.Status != dispatch.Success || res.HTTPStatus != 200 ||
		!strings.Contains(res.Output, `"content":"`) || !strings.Contains(res.Output, name) || !json.Valid([]byte(res.Output)) {
		t.Errorf("call repo-read-file README.md = %s; want success with the server's JSON (content base64, URLs naming the repository)", showResult(code, res))
	}
	if code, res := d.call(t, "repo-read-file", map[string]any{"path": "missing.md"}); code != 200 || res.Status != dispatch.Error || res.HTTPStatus != 404 ||
		!strings.HasPrefix(res.Stderr, "HTTP 404") || !json.Valid([]byte(res.Output)) {
		t.Errorf("call repo-read-file missing.md = %s; want error 404 with the server's body and reason", showResult(code, res))
	}
	if code, res := d.call(t, "repo-list-commits", map[string]any{"limit": 5}); code != 200 || res.Status != dispatch.Success || !strings.Contains(res.Output, `"sha"`) {
		t.Errorf("call repo-list-commits = %s; want success with commits", showResult(code, res))
	}

	env["TOOLAGENT_FORGEJO_TOKEN"] = "not-a-valid-token"
	bad := startDaemon(t, env, "--tools", tools)
	var st toolState
	pollWithin(t, timeout, "repo-read-file to fail its health check with a bad token", func() bool {
		st = bad.tool(t, "repo-read-file")
		return st.Status == catalog.Failed
	})
	if !strings.Contains(st.Reason, "HTTP 401") || !strings.Contains(st.Reason, "refused the token") {
		t.Errorf("with a bad token repo-read-file is %s %q; want failed, the reason naming HTTP 401 and the refused token", st.Status, st.Reason)
	}
}

// TestServeExecutorsNotConfigured: with only shell configured, the
// example tools of the other executors are left out of /v1/tools, the
// OpenAI list and matching; ?all=1 shows them disabled with the reason,
// and a call answers disabled with the reason.
func TestServeExecutorsNotConfigured(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	entries, err := filepath.Glob(filepath.Join("..", "..", "examples", "*", "tools", "*", "TOOL.hdlp"))
	if err != nil || len(entries) < 4 {
		t.Fatalf("examples: %v %v", entries, err)
	}
	wantReason := map[string]string{}
	for _, p := range entries {
		name := filepath.Base(filepath.Dir(p))
		executor := filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(p))))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		putTool(t, tools, name, string(b))
		if executor != "shell" {
			wantReason[name] = "executor " + executor + " is not configured"
		}
	}
	d := startDaemon(t, nil, "--tools", tools)

	if got := d.listed(t, "/v1/tools"); !cmp.Equal(got, []string{"uptime"}) {
		t.Errorf("GET /v1/tools lists %v; want only [uptime]", got)
	}
	if got := d.listed(t, "/v1/tools?format=openai"); !cmp.Equal(got, []string{"uptime"}) {
		t.Errorf("GET /v1/tools?format=openai lists %v; want only [uptime]", got)
	}
	for _, intent := range []string{"通过 HLDP API 按编号查询一个条目", "从 Forgejo 仓库读取一个文件", "在服务器上执行一条shell命令并返回结果"} {
		_, b := d.request(t, "POST", "/v1/match", fmt.Sprintf(`{"intent":%q}`, intent))
		for name := range wantReason {
			if strings.Contains(string(b), `"name":"`+name+`"`) {
				t.Errorf("POST /v1/match %q offers %s, whose executor is not configured: %s", intent, name, b)
			}
		}
	}
	code, b := d.request(t, "GET", "/v1/tools?all=1", "")
	var all struct {
		Tools []struct {
			Name   string         `json:"name"`
			Status catalog.Status `json:"status"`
			Reason string         `json:"reason"`
		} `json:"tools"`
	}
	if code != 200 || json.Unmarshal(b, &all) != nil {
		t.Fatalf("GET /v1/tools?all=1 = %d %s", code, b)
	}
	for _, tl := range all.Tools {
		want, off := wantReason[tl.Name]
		switch {
		case off && (tl.Status != catalog.Disabled || tl.Reason != want):
			t.Errorf("?all=1: %s is %s %q; want disabled %q", tl.Name, tl.Status, tl.Reason, want)
		case !off && tl.Status != catalog.Enabled:
			t.Errorf("?all=1: %s is %s %q; want enabled", tl.Name, tl.Status, tl.Reason)
		}
	}
	if len(all.Tools) != len(entries) {
		t.Errorf("?all=1 lists %d tools; want %d", len(all.Tools), len(entries))
	}
	for name, want := range wantReason {
		code, res := d.call(t, name, map[string]any{})
		if code != http.StatusConflict || res.Status != dispatch.Disabled || !strings.Contains(res.Error, want) {
			t.Errorf("call %s = %d %s %q; want 409 disabled saying %q", name, code, res.Status, res.Error, want)
		}
	}
}

// TestConfigExecutors reads the executor settings from a config file
// with sections, and the environment.
func TestConfigExecutors(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, `health_schedule: "@every 5s"
gatekeeper:
  default: backup
  targets:
    backup: { url: "http://10.0.0.2:8766", token_env: BACKUP_TOKEN }
    build:
      url: http://10.0.0.3:8766
      token_file: /etc/toolagent/build.token
hlpd:
  url: https://hlpd.example/api
  routes:
    items.get: "GET /v1/items/{id}"
  health_path: /ping
forgejo:
  owner: ops
`)
	env := map[string]string{"TOOLAGENT_GATEKEEPER_URL": "http://127.0.0.1:8766", "TOOLAGENT_GATEKEEPER_TOKEN": "s3cret", "TOOLAGENT_FORGEJO_URL": "https://forge.example"}
	cfg, err := loadConfig(testEnv(env), "serve", []string{"--config", file}, nil)
	if err != nil {
		t.Fatalf("loadConfig() = %v", err)
	}
	wantTargets := map[string]daemon.GatekeeperTarget{
		"main":   {URL: "http://127.0.0.1:8766"},
		"backup": {URL: "http://10.0.0.2:8766", TokenEnv: "BACKUP_TOKEN"},
		"build":  {URL: "http://10.0.0.3:8766", TokenFile: "/etc/toolagent/build.token"},
	}
	if diff := cmp.Diff(wantTargets, cfg.Targets()); diff != "" {
		t.Errorf("gatekeeperTargets() mismatch (-want +got):\n%s", diff)
	}
	if cfg.DefaultTarget() != "backup" || cfg.HealthSchedule != "@every 5s" || cfg.HlpdHealthPath != "/ping" ||
		cfg.HlpdRoutes["items.get"] != "GET /v1/items/{id}" || cfg.ForgejoOwner != "ops" || cfg.HlpdAuthHeader != "Authorization" {
		t.Errorf("loadConfig() = %+v; want the file's settings", cfg)
	}

	bad := []struct {
		name, file string
		env        map[string]string
		args       []string
		want       string
	}{
		{"unknown key in a section", "gatekeeper:\n  defualt: x\n", nil, nil, `toolagent.yaml:2:3: unknown key "gatekeeper.defualt" (did you mean "gatekeeper.default"?)`},
		{"token in a target", "gatekeeper:\n  targets:\n    a: { url: \"http://h\", token: abc }\n", nil, nil, "a token never goes in the config file"},
		{"unknown target key", "gatekeeper:\n  targets:\n    a: { url: \"http://h\", tokenfile: x }\n", nil, nil, `unknown key "tokenfile"`},
		{"target without url", "gatekeeper:\n  targets:\n    a: { token_env: X }\n", nil, nil, "gatekeeper.targets.a: url is required"},
		{"main twice", "gatekeeper:\n  targets:\n    main: { url: \"http://h\" }\n", map[string]string{"TOOLAGENT_GATEKEEPER_URL": "http://g"}, nil, "target main is already defined"},
		{"unknown default", "", map[string]string{"TOOLAGENT_GATEKEEPER_URL": "http://g"}, []string{"--gatekeeper-default", "nope"}, `gatekeeper.default "nope" is not a configured target (configured: main)`},
		{"token without url", "", map[string]string{"TOOLAGENT_HLPD_TOKEN": "x"}, nil, "hlpd.url (TOOLAGENT_HLPD_URL) is not set"},
		{"two tokens", "", map[string]string{"TOOLAGENT_FORGEJO_URL": "http://f", "TOOLAGENT_FORGEJO_TOKEN": "x", "TOOLAGENT_FORGEJO_TOKEN_FILE": "/f"}, nil, "both a token and a token file"},
		{"bad route", "hlpd:\n  routes:\n    items.get: /v1/items\n", map[string]string{"TOOLAGENT_HLPD_URL": "http://h"}, nil, `want "VERB /path"`},
		{"bad schedule", "", nil, []string{"--health-schedule", "every second"}, `health_schedule "every second"`},
		{"hlpd token in the file", "hlpd:\n  token: abc\n", nil, nil, "never from a config file"},
	}
	for _, tc := range bad {
		args := tc.args
		if tc.file != "" {
			args = append([]string{"--config", writeConfig(t, tc.file)}, args...)
		}
		_, err := loadConfig(testEnv(tc.env), "serve", args, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: loadConfig() error = %v; want one containing %q", tc.name, err, tc.want)
		}
	}
}
