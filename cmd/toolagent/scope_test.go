package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/dispatch"
)

const (
	gitBotToken    = "gitbot-0123456789abcdef" // call, tools=git-*
	deployerToken  = "deployer-0123456789abcd" // approve, tools=deploy-*
	readOnlyToken  = "reader-0123456789abcdef" // call, tags=read-only
	fullAliceToken = "falice-0123456789abcdef" // call, no scope
)

// scopedDaemon serves a catalog of git, deploy and shell tools with
// scoped tokens, and a profile.
func scopedDaemon(t *testing.T) *liveDaemon {
	t.Helper()
	tools := t.TempDir()
	putTool(t, tools, "git-log", testTool("git-log", "method: run\nexecutor: shell\nintent: show the last commits of a git repository\nargv: [echo, log]\nparams_schema: {}\ntags: [git, read-only]\n"))
	putTool(t, tools, "git-blame", testTool("git-blame", "method: run\nexecutor: shell\nintent: show who changed each line of a file in git\nargv: [echo, blame]\nparams_schema: {}\ntags: [git, read-only]\n"))
	putTool(t, tools, "deploy-app", testTool("deploy-app", "method: run\nexecutor: shell\nintent: deploy the application to production\nargv: [echo, deployed]\nparams_schema: {}\ntags: [deploy]\n"))
	putTool(t, tools, "disk-free", testTool("disk-free", "method: run\nexecutor: shell\nintent: show free disk space\nargv: [echo, free]\nparams_schema: {}\ntags: [read-only]\n"))
	putTool(t, tools, "shell-exec", shellExec(t))
	config := writeConfig(t, "profiles:\n  ops-readonly: {tags: [read-only]}\n  deployer: {tools: [deploy-*]}\n")
	env := map[string]string{"TOOLAGENT_TOKENS": strings.Join([]string{
		"gitbot:call:" + gitBotToken + ":tools=git-*",
		"deployer:approve:" + deployerToken + ":tools=deploy-*",
		"reader:call:" + readOnlyToken + ":tags=read-only",
		"alice:call:" + fullAliceToken,
		"bob:approve:" + bobToken,
	}, ",")}
	return startDaemon(t, env, "--tools", tools, "--config", config)
}

func toolNames(t *testing.T, d *liveDaemon, path string) []string {
	t.Helper()
	code, body := d.request(t, "GET", path, "")
	if code != 200 {
		t.Fatalf("GET %s = %d %s", path, code, body)
	}
	var list struct {
		Tools []struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name+tl.Function.Name)
	}
	slices.Sort(names)
	return names
}

// TestScopedTokens (issue 15, item 3): a token scoped to git-* sees and
// calls only git tools, through every listing and the matcher; a tool
// outside the scope answers exactly what a tool that does not exist
// answers, and the audit line records the refusal; an approver scoped to
// deploy-* neither sees nor approves a shell-exec call.
func TestScopedTokens(t *testing.T) {
	t.Parallel()
	d := scopedDaemon(t)
	git := d.as(gitBotToken)
	wantGit := []string{"git-blame", "git-log"}
	for _, path := range []string{"/v1/tools", "/v1/tools?all=1", "/v1/tools?format=openai", "/v1/tools?tag=read-only"} {
		if got := toolNames(t, git, path); !slices.Equal(got, wantGit) {
			t.Errorf("git-* token: GET %s = %v; want %v", path, got, wantGit)
		}
	}
	if got := toolNames(t, d.as(readOnlyToken), "/v1/tools"); !slices.Equal(got, []string{"disk-free", "git-blame", "git-log"}) {
		t.Errorf("tags=read-only token lists %v", got)
	}

	// Outside the scope is the same as not there.
	_, outside := git.call(t, "shell-exec", map[string]any{"cmd": "echo x"})
	_, absent := git.call(t, "no-such-tool", map[string]any{"cmd": "echo x"})
	if outside.Status != dispatch.NotFound || strings.ReplaceAll(outside.Error, "shell-exec", "X") != strings.ReplaceAll(absent.Error, "no-such-tool", "X") ||
		strings.ReplaceAll(outside.Suggestion, "shell-exec", "X") != strings.ReplaceAll(absent.Suggestion, "no-such-tool", "X") {
		t.Errorf("call outside the scope = %+v\nwant what a missing tool answers: %+v", outside, absent)
	}
	if code, body := git.request(t, "GET", "/v1/tools/shell-exec", ""); code != 404 {
		t.Errorf("GET /v1/tools/shell-exec with the git-* token = %d %s; want 404", code, body)
	}
	if _, res := git.call(t, "git-log", map[string]any{}); res.Status != dispatch.Success {
		t.Errorf("git-log with the git-* token = %+v; want success", res)
	}
	if _, near := git.call(t, "shell-exe", map[string]any{}); strings.Contains(near.Suggestion, "shell-exec") {
		t.Errorf("a near miss names a tool outside the scope: %q", near.Suggestion)
	}
	pollUntil(t, "the audit line of the refused call", func() bool {
		return strings.Contains(d.logs.String(), `"refused":"the tool is outside the caller's scope"`)
	})

	// The matcher offers only the scope's tools.
	for _, intent := range []string{"run a shell command", "deploy the application", "show free disk space", "show the last commits"} {
		code, body := git.request(t, "POST", "/v1/match", `{"intent":"`+intent+`"}`)
		var m struct {
			Candidates []struct{ Name string } `json:"candidates"`
		}
		json.Unmarshal(body, &m)
		for _, c := range m.Candidates {
			if !strings.HasPrefix(c.Name, "git-") {
				t.Errorf("match %q with the git-* token = %d: offers %s", intent, code, c.Name)
			}
		}
	}

	// Approvals: deployer (approve, deploy-*) cannot see or decide alice's
	// held shell-exec call; bob (approve, no scope) can.
	alice := d.as(fullAliceToken)
	code, held := alice.call(t, "shell-exec", map[string]any{"cmd": "touch " + t.TempDir() + "/x"})
	if code != 202 || held.ApprovalID == "" {
		t.Fatalf("alice's shell-exec touch = %d %+v; want held", code, held)
	}
	deployer := d.as(deployerToken)
	if code, body := deployer.request(t, "GET", "/v1/approvals", ""); code != 200 || strings.Contains(string(body), held.ApprovalID) {
		t.Errorf("deployer lists %d %s; want no shell-exec approval", code, body)
	}
	if code, _, body := deployer.approval(t, "GET", held.ApprovalID, ""); code != 404 {
		t.Errorf("deployer GET the approval = %d %s; want 404", code, body)
	}
	if code, _, body := deployer.approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`); code != 404 {
		t.Errorf("deployer approving shell-exec = %d %s; want 404", code, body)
	}
	if code, a, body := d.as(bobToken).approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`); code != 200 || a.Decider != "bob" {
		t.Errorf("bob approving = %d %s; want 200", code, body)
	}
}

// TestScopedMCP (issue 15, items 3-5): over /mcp (the go-sdk client) the
// git-* token lists only git tools and the meta-tools, find_tool never
// offers a tool outside its scope and says what it searches, and calling
// one answers not_found; /mcp/{profile} serves the profile's subset,
// intersected with the token's scope; an unknown profile is 404.
func TestScopedMCP(t *testing.T) {
	t.Parallel()
	d := scopedDaemon(t)
	connect := func(token, path string) *mcp.ClientSession {
		t.Helper()
		client := &http.Client{Transport: bearer{token, http.DefaultTransport}}
		cs, err := mcpClient(make(chan struct{}, 1)).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: d.url + path, HTTPClient: client}, nil)
		if err != nil {
			t.Fatalf("connect %s: %v", path, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	sorted := func(s []string) []string { slices.Sort(s); return s }

	git := connect(gitBotToken, "/mcp")
	// Ready means the MCP lists hold the catalog (a profile's is made at
	// its first request): no wait.
	if got := sorted(listNames(t, git)); !slices.Equal(got, []string{"call_tool", "find_tool", "git-blame", "git-log"}) {
		t.Errorf("git-* token tools/list = %v", got)
	}
	res, err := git.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == "find_tool" && (!strings.Contains(tl.Description, "the 2 tool(s) this client may use") || !strings.Contains(tl.Description, "git (2)")) {
			t.Errorf("find_tool's description does not describe the caller's surface: %q", tl.Description)
		}
	}
	for _, intent := range []string{"run a shell command", "deploy the application to production", "show free disk space"} {
		text, _ := callText(t, git, "find_tool", map[string]any{"intent": intent})
		for _, other := range []string{"shell-exec", "deploy-app", "disk-free"} {
			if strings.Contains(text, other) {
				t.Errorf("find_tool %q with the git-* token offers %s:\n%s", intent, other, text)
			}
		}
	}
	text, isErr := callText(t, git, "call_tool", map[string]any{"tool": "shell-exec", "params": map[string]any{"cmd": "echo x"}})
	if !isErr || !strings.Contains(text, "not_found") {
		t.Errorf("call_tool shell-exec with the git-* token = %v %q; want not_found", isErr, text)
	}
	if _, err := git.CallTool(t.Context(), &mcp.CallToolParams{Name: "shell-exec", Arguments: map[string]any{"cmd": "echo x"}}); err == nil {
		t.Errorf("tools/call shell-exec with the git-* token succeeded; want an unknown tool")
	}

	// Profiles: the subset, narrowed again by the token's scope.
	if got := sorted(listNames(t, connect(fullAliceToken, "/mcp/ops-readonly"))); !slices.Equal(got, []string{"call_tool", "disk-free", "find_tool", "git-blame", "git-log"}) {
		t.Errorf("/mcp/ops-readonly tools/list = %v", got)
	}
	if got := sorted(listNames(t, connect(gitBotToken, "/mcp/deployer"))); !slices.Equal(got, []string{"call_tool", "find_tool"}) {
		t.Errorf("/mcp/deployer with the git-* token = %v; want the meta-tools alone (the intersection is empty)", got)
	}
	prof := connect(fullAliceToken, "/mcp/deployer")
	if text, isErr := callText(t, prof, "call_tool", map[string]any{"tool": "git-log"}); !isErr || !strings.Contains(text, "not_found") {
		t.Errorf("call_tool git-log over /mcp/deployer = %v %q; want not_found", isErr, text)
	}
	req, _ := http.NewRequest("POST", d.url+"/mcp/nope", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+fullAliceToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 404 {
		t.Errorf("POST /mcp/nope = %v %v; want 404", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestScopeSyntax: a token's scope is read strictly, with the entry's
// place named, and a mistyped scope key is not taken into the secret; a
// profile names its tools or tags. Checked with validate --config, which
// reads a config and its tokens as serve does.
func TestScopeSyntax(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"a:call:0123456789abcdef:tools=",
		"a:call:0123456789abcdef:tags=Git",
		"a:call:0123456789abcdef:tools=[",
		"a:call:0123456789abcdef:team=x",
	} {
		errOut, _, code := runCLI(t, []string{"TOOLAGENT_TOKENS=" + bad}, "validate", "--config", writeConfig(t, "{}\n"))
		if code == 0 || !strings.Contains(errOut, "TOOLAGENT_TOKENS:1") || !strings.Contains(errOut, "token a") {
			t.Errorf("token %q: exit %d %q; want a refusal naming the entry and the token", bad, code, errOut)
		}
		if strings.Contains(errOut, "0123456789abcdef") {
			t.Errorf("the error shows the secret: %q", errOut)
		}
	}
	for _, bad := range []string{"profiles:\n  x: {}\n", "profiles:\n  Bad_Name: {tags: [git]}\n", "profiles:\n  x: {tags: [Git]}\n", "profiles:\n  x: {teams: [a]}\n"} {
		if errOut, _, code := runCLI(t, nil, "validate", "--config", writeConfig(t, bad)); code != exitFailed || !strings.Contains(errOut, "profile") {
			t.Errorf("config %q: exit %d %q; want a refusal naming the profile", bad, code, errOut)
		}
	}
}
