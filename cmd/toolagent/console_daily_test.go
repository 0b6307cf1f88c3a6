package main

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/operator"
)

// gitLogTool is a tool with a Chinese intent, in two versions.
func gitLogTool(intent string) string {
	return "name: git-log\ndisplay: 提交记录\nintent: " + intent + "\nmethod: run\nexecutor: shell\nargv: [echo, log]\nparams_schema: {}\n" +
		"tags: [git, read-only]\nauthor: 李雷\ncreated: 2026-12-01\nwhy: 谁写的、为什么写\n"
}

const deployToolDaily = `name: deploy
display: deploy
intent: deploy an app
method: run
executor: shell
argv: [printf, "deployed %s\n", "{app}"]
params_schema:
  app: { type: string, required: true }
constraints: { require_confirm: true }
tags: [ops]
author: a
created: 2026-12-01
why: tests
`

// TestConsoleDailyUse (issue 39) drives the console an operator lives in,
// in headless Chromium, over a daemon serving a git repository whose
// commits alice signs: the catalog filtered by tag and searched in
// Chinese; a tool page with its Chinese intent, its git history (two
// commits, their author, message and signer) and the diff between them;
// the raw file; approving alice's held call from a 390×844 phone; the
// history with local times and a link to the result; "Sync now" on the
// status page picking up a new commit. Screenshots at 1280×900 and 390
// wide go to the test's artifact directory (its path is logged). DOM
// content is asserted, not pixels.
func TestConsoleDailyUse(t *testing.T) {
	t.Parallel()
	r := newGitRepo(t)
	alice := newSSHSigner(t, "alice@example.com", "", "")
	signers := filepath.Join(t.TempDir(), "allowed_signers")
	if err := os.WriteFile(signers, []byte(alice.line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.write("tools/git-log/TOOL.hdlp", gitLogTool("show the recent commits"))
	r.write("tools/deploy/TOOL.hdlp", deployToolDaily)
	c1 := r.commitSigned(nil, alice.args(), "add git-log and deploy")
	r.write("tools/git-log/TOOL.hdlp", gitLogTool("查看最近的提交记录"))
	c2 := r.commitSigned(nil, alice.args(), "git-log: 中文意图\n\nthe seed asks for Chinese")
	r.pushTo("main")

	state := t.TempDir()
	env := map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceToken + ",bob:approve:" + bobToken + ",reader:read:" + readerToken}
	d := startDaemon(t, env, "--repo", r.url(), "--schedule", "off", "--state", state, "--trusted-signers", signers)
	d.as(bobToken).waitRev(t, c2)
	opToken, err := os.ReadFile(operator.TokenPath(state))
	if err != nil {
		t.Fatal(err)
	}

	// Without a browser: the operator's session, the tool's history and a
	// diff, as plain HTTP.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	if resp, err := hc.PostForm(d.url+"/ui/login", url.Values{"token": {strings.TrimSpace(string(opToken))}}); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	page := func(path string) string {
		t.Helper()
		resp, err := hc.Get(d.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d\n%s", path, resp.StatusCode, b)
		}
		return html.UnescapeString(string(b))
	}
	if p := page("/ui/tools/git-log"); !strings.Contains(p, "git-log: 中文意图") || !strings.Contains(p, "alice@example.com (ssh)") || !strings.Contains(p, c1) {
		t.Errorf("the tool page over HTTP lacks its history:\n%s", p)
	}
	if p := page("/ui/tools/git-log/diff?from=" + c1 + "&to=" + c2); !strings.Contains(p, "+intent: 查看最近的提交记录") {
		t.Errorf("the diff page over HTTP:\n%s", p)
	}

	ctx, _ := browser(t)
	t.Logf("screenshots: %s", t.ArtifactDir())
	// The inbox and the history update themselves: a node found a moment
	// ago can be replaced before it is read or clicked, and the DevTools
	// protocol then says so before anything happened to it. Such a step is
	// tried again, a bounded number of times.
	replaced := func(err error) bool {
		return err != nil && (strings.Contains(err.Error(), "No node with given id") || strings.Contains(err.Error(), "Could not find node with given id"))
	}
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		err := chromedp.Do(ctx, steps...)
		for i := 0; i < 20 && replaced(err); i++ {
			err = chromedp.Do(ctx, steps...)
		}
		if err != nil {
			screenshot(t, ctx, "failed")
			t.Fatalf("%s: %v", what, err)
		}
	}
	get := func(what string, a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(ctx, a)
		for i := 0; i < 20 && replaced(err); i++ {
			v, err = chromedp.Run(ctx, a)
		}
		if err != nil {
			screenshot(t, ctx, "failed")
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	wide := chromedp.EmulateViewport(1280, 900)
	phone := chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)

	run("sign in as the operator", wide,
		chromedp.Navigate(d.url+"/ui/login"), chromedp.WaitVisible(`#token`),
		chromedp.SendKeys(`#token`, strings.TrimSpace(string(opToken))), chromedp.Submit(`#login`), chromedp.WaitVisible(`#tools`))
	if text := get("catalog", chromedp.Text(`#tools`)); !strings.Contains(text, "git-log") || !strings.Contains(text, "alice@example.com") || !strings.Contains(text, "提交记录") {
		t.Errorf("catalog:\n%s\nwant git-log, its signer and its tags", text)
	}
	screenshot(t, ctx, "catalog-1280")
	run("filter by tag", chromedp.Navigate(d.url+"/ui/?tag=ops"), chromedp.WaitVisible(`#tools`))
	if text := get("filtered", chromedp.Text(`#tools`)); !strings.Contains(text, "deploy") || strings.Contains(text, "git-log") {
		t.Errorf("catalog ?tag=ops:\n%s\nwant deploy alone", text)
	}
	run("search in Chinese", chromedp.Navigate(d.url+"/ui/?q="+"查看最近的提交记录"), chromedp.WaitVisible(`#match`))
	if m := get("match", chromedp.Text(`#match`)); !strings.Contains(m, "git-log") {
		t.Errorf("search 查看最近的提交记录:\n%s\nwant git-log", m)
	}

	// The tool page: the Chinese intent, two commits, a diff.
	run("tool page", chromedp.Navigate(d.url+"/ui/tools/git-log"), chromedp.WaitVisible(`#log`))
	if intent := get("intent", chromedp.Text(`#intent`)); intent != "查看最近的提交记录" {
		t.Errorf("intent = %q", intent)
	}
	log := get("history", chromedp.Text(`#log`))
	for _, want := range []string{c1[:12], c2[:12], "git-log: 中文意图", "add git-log and deploy", "Test", "alice@example.com (ssh)"} {
		if !strings.Contains(log, want) {
			t.Errorf("the tool's history lacks %q:\n%s", want, log)
		}
	}
	screenshot(t, ctx, "tool-1280")
	run("compare", chromedp.Click(`#compare-button`), chromedp.WaitVisible(`#diff`))
	if diff := get("diff", chromedp.Text(`#diff`)); !strings.Contains(diff, "-intent: show the recent commits") || !strings.Contains(diff, "+intent: 查看最近的提交记录") {
		t.Errorf("diff:\n%s", diff)
	}
	screenshot(t, ctx, "diff-1280")
	run("raw file", chromedp.Navigate(d.url+"/ui/tools/git-log/raw"), chromedp.WaitVisible(`body pre`))
	if raw := get("raw", chromedp.Text(`body pre`)); !strings.Contains(raw, "intent: 查看最近的提交记录") {
		t.Errorf("raw file:\n%s", raw)
	}

	// Approving from a phone.
	_, held := d.as(aliceToken).call(t, "deploy", map[string]any{"app": "web"})
	if held.Status != dispatch.ApprovalRequired {
		t.Fatalf("alice's deploy = %+v; want held", held)
	}
	sel := `[id="` + held.ApprovalID + `"]`
	run("the inbox on a phone", phone, chromedp.Navigate(d.url+"/ui/approvals"), chromedp.WaitVisible(sel+` .approve`))
	card := get("the held call", liveText(sel))
	for _, want := range []string{"deploy", "alice", "app: web", c2[:12], "Expires"} {
		if !strings.Contains(card, want) {
			t.Errorf("the held call's card lacks %q:\n%s", want, card)
		}
	}
	if width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); err != nil || width > 390 {
		t.Errorf("the inbox is %d px wide on a 390 px screen (%v); want no sideways scrolling", width, err)
	}
	screenshot(t, ctx, "approvals-390")
	run("approve on the phone", chromedp.Click(sel+` .approve`), chromedp.WaitVisible(sel+` .approval-status`))
	if st := get("decided", liveText(sel+` .approval-status`)); st != "executed" {
		t.Errorf("after approving: %q; want executed", st)
	}
	for _, p := range []struct{ name, path, sel string }{
		{"history-390", "/ui/history?tool=deploy", "#history"},
		{"catalog-390", "/ui/", "#tools"},
		{"tool-390", "/ui/tools/git-log", "#log"},
		{"diff-390", "/ui/tools/git-log/diff?from=" + c1 + "&to=" + c2, "#diff"},
	} {
		run(p.name, chromedp.Navigate(d.url+p.path), chromedp.WaitVisible(p.sel))
		if width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); err != nil || width > 390 {
			t.Errorf("%s is %d px wide on a 390 px screen (%v); want no sideways scrolling", p.path, width, err)
		}
		screenshot(t, ctx, p.name)
	}

	// History: local times, a link to the approval and the result.
	run("history", wide, chromedp.Navigate(d.url+"/ui/history?tool=deploy"), chromedp.WaitVisible(`#history`))
	hist := get("history", chromedp.Text(`#history`))
	if !strings.Contains(hist, "approval_required") || !strings.Contains(hist, "approved") || strings.Contains(hist, "T1") && strings.Contains(hist, "Z") {
		t.Errorf("history:\n%s\nwant the held call and its approval with local times", hist)
	}
	screenshot(t, ctx, "history-1280")
	run("open the approval from the history", chromedp.Click(`#history .approval-link`), chromedp.WaitVisible(`#output`))
	if out := get("output", chromedp.Text(`#output`)); strings.TrimSpace(out) != "deployed web" {
		t.Errorf("the approved call's output = %q", out)
	}

	// Status and Sync now: a new commit is served after the click.
	r.write("tools/git-log/TOOL.hdlp", gitLogTool("列出最近的提交"))
	c3 := r.commitSigned(nil, alice.args(), "git-log: shorter intent")
	r.pushTo("main")
	run("status", chromedp.Navigate(d.url+"/ui/status"), chromedp.WaitVisible(`#sync-now`))
	if rev := get("revision", chromedp.Text(`#revision`)); rev != c2[:12] {
		t.Errorf("status revision %q before the sync; want %s", rev, c2[:12])
	}
	screenshot(t, ctx, "status-1280")
	run("sync now", chromedp.Click(`#sync-now`), chromedp.WaitVisible(`#synced`))
	if rev := get("revision", chromedp.Text(`#revision`)); rev != c3[:12] {
		t.Errorf("status revision %q after Sync now; want %s", rev, c3[:12])
	}
	facts := get("facts", chromedp.Text(`#facts`))
	for _, want := range []string{"listen", "store", "files"} {
		if !strings.Contains(facts, want) {
			t.Errorf("status facts lack %q:\n%s", want, facts)
		}
	}
	noSideways := func(what string) {
		t.Helper()
		if width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); err != nil || width > 390 {
			t.Errorf("%s is %d px wide on a 390 px screen (%v); want no sideways scrolling", what, width, err)
		}
	}
	run("status on a phone", phone, chromedp.Navigate(d.url+"/ui/status"), chromedp.WaitVisible(`#facts`))
	noSideways("the status page")
	screenshot(t, ctx, "status-390")
	run("the tool in Chinese on a phone", chromedp.Navigate(d.url+"/ui/tools/git-log?lang=zh"), chromedp.WaitVisible(`#log`))
	if nav, intent := get("nav", chromedp.Text(`#nav-catalog`)), get("intent", chromedp.Text(`#intent`)); nav != "工具目录" || intent != "列出最近的提交" {
		t.Errorf("in Chinese: nav %q, intent %q; want 工具目录 and the synced intent 列出最近的提交", nav, intent)
	}
	screenshot(t, ctx, "tool-zh-390")
}
