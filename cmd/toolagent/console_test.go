package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

const readerToken = "reader-0123456789abcdef00" // role read

// liveText reads the visible text of the first element matching the CSS
// selector sel in one step in the page. chromedp.Text finds the node in
// one DevTools call and reads it in the next; on a page that re-renders
// itself (the approvals inbox reloads its list when the queue changes) the
// node can be replaced in between, and a node no longer in the page has
// no layout: Text then reads "". An element that is not there reads "".
func liveText(sel string) chromedp.Action[string] {
	return chromedp.Evaluate[string](`(function () { const e = document.querySelector(` + strconv.Quote(sel) + `); return e ? e.innerText : ""; })()`)
}

// browser starts headless Chromium (Debian's chromium, or the program in
// TOOLAGENT_TEST_CHROMIUM) for the test, recording every request it
// makes; it skips, saying what to install, when there is none.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path := os.Getenv("TOOLAGENT_TEST_CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		t.Skip("no headless browser: install Debian's chromium (apt-get install chromium) or set TOOLAGENT_TEST_CHROMIUM to a Chrome/Chromium program")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("lang", "en-US"), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute) // a bound, not a timing assertion
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	var mu sync.Mutex
	var reqs []string
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			reqs = append(reqs, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), reqs...) }
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), name+".png"), png, 0o644); err != nil {
		t.Error(err)
	}
}

// consoleDaemon serves the shipped tools with alice (call), bob (approve)
// and a read-only token, with a files root the test can see (an approved
// shell-exec call may write there).
func consoleDaemon(t *testing.T) (*liveDaemon, string) {
	t.Helper()
	env := map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceToken + ",bob:approve:" + bobToken + ",reader:read:" + readerToken}
	root := proctest.HostDir(t)
	if docs := os.Getenv("TOOLAGENT_DOCS_SCREENSHOT"); docs != "" {
		// The README's screenshot names no test directory.
		root = "/var/lib/toolagent/files"
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Skipf("TOOLAGENT_DOCS_SCREENSHOT: %v", err)
		}
	}
	tools := toolsCopy(t)
	writeTool(t, tools, "broken-tool", "method: run\nexecutor: shell\nargv: [echo]\nparams_schema: {}\nbogus_key: 1\n")
	return startDaemon(t, env, "--tools", tools, "--files-root", root), root
}

// TestConsoleInABrowser (issue 16): in headless Chromium, sign in; the
// catalog lists shell-exec; searching 查看最近的提交记录 shows git-ops
// first; try-a-call of `echo hello` shows hello; a call another client
// holds appears in the queue without a reload; approving runs it and
// shows the result; deny; an edit the schema refuses is refused on the
// page. Every page is under 100 KB and no request leaves the daemon.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	d, root := consoleDaemon(t)
	ctx, reqs := browser(t)
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			screenshot(t, ctx, "failed")
			t.Fatalf("%s: %v", what, err)
		}
	}
	get := func(what string, a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(ctx, a)
		if err != nil {
			screenshot(t, ctx, "failed")
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	run("sign in",
		chromedp.Navigate(d.url+"/ui/"),
		chromedp.WaitVisible(`#token`),
		chromedp.SendKeys(`#token`, bobToken),
		chromedp.Submit(`#login`),
		chromedp.WaitVisible(`#tools`),
	)
	if u := get("user", chromedp.Text(`#user`)); u != "bob" {
		t.Errorf("signed in as %q; want bob", u)
	}
	if text := get("catalog", chromedp.Text(`#tools`)); !strings.Contains(text, "shell-exec") || !strings.Contains(text, "read-only") {
		t.Errorf("catalog lacks shell-exec:\n%s", text)
	}
	screenshot(t, ctx, "catalog")
	run("search", chromedp.SetValue(`#q`, "查看最近的提交记录"), chromedp.Submit(`#search`), chromedp.WaitVisible(`#candidates`))
	if first := get("first candidate", chromedp.Text(`#candidates li:first-child a`)); first != "git-ops" {
		t.Errorf("first candidate for 查看最近的提交记录 = %q; want git-ops", first)
	}
	run("try a call",
		chromedp.Navigate(d.url+"/ui/tools/shell-exec"),
		chromedp.WaitVisible(`#p-cmd`),
		chromedp.SetValue(`#p-cmd`, "echo hello"),
		chromedp.Click(`#run`),
		chromedp.WaitVisible(`#output`),
	)
	if out := get("output", chromedp.Text(`#output`)); strings.TrimSpace(out) != "hello" {
		t.Errorf("try-a-call output = %q; want hello", out)
	}
	if st, code := get("status", chromedp.Text(`#result-status`)), get("exit code", chromedp.Text(`#exit-code`)); st != "success" || code != "0" {
		t.Errorf("try-a-call status %q exit %q; want success 0", st, code)
	}
	screenshot(t, ctx, "try-a-call")
	if note := get("history note", chromedp.Text(`#log-note`)); !strings.Contains(note, "local directory") {
		t.Errorf("the tool page of a local tools directory says %q; want that a local directory has no history", note)
	}
	run("the raw file", chromedp.Click(`#raw-link`), chromedp.WaitVisible(`body pre`))
	if file := get("the file as committed", chromedp.Text(`body pre`)); !strings.Contains(file, "name: shell-exec") || !strings.Contains(file, "method: exec") {
		t.Errorf("tool page's raw file:\n%s\nwant shell-exec's TOOL.hdlp as in the tree", file)
	}

	// Live queue: alice's held call appears without a reload.
	run("open the queue", chromedp.Navigate(d.url+"/ui/approvals"), chromedp.WaitVisible(`#pending`))
	alice := d.as(aliceToken)
	marker := filepath.Join(root, "approved")
	_, held := alice.call(t, "shell-exec", map[string]any{"cmd": "touch " + marker + " && echo made"})
	if held.Status != dispatch.ApprovalRequired {
		t.Fatalf("alice's call = %+v; want it held", held)
	}
	sel := `[id="` + held.ApprovalID + `"]`
	run("the held call appears live", chromedp.WaitVisible(sel+` .approve`))
	screenshot(t, ctx, "approvals")
	if docs := os.Getenv("TOOLAGENT_DOCS_SCREENSHOT"); docs != "" {
		// go test -run TestConsoleInABrowser ./cmd/toolagent/ with
		// TOOLAGENT_DOCS_SCREENSHOT=$PWD/docs/console-approvals.png makes
		// the README's picture.
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.WriteFile(docs, png, 0o644)
		}
		if err != nil {
			t.Error(err)
		}
	}
	run("approve", chromedp.Click(sel+` .approve`), chromedp.WaitVisible(sel+` .approval-open`), chromedp.Click(sel+` .approval-open`), chromedp.WaitVisible(`#output`))
	if text := get("result", chromedp.Text(`#output`)); !strings.Contains(text, "made") {
		t.Errorf("approved call's output on its approval's page:\n%s\nwant its output", text)
	}
	run("back to the queue", chromedp.Navigate(d.url+"/ui/approvals"), chromedp.WaitVisible(`#pending`))
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the approved call did not run: %v", err)
	}

	// Deny.
	_, held2 := alice.call(t, "shell-exec", map[string]any{"cmd": "touch " + marker + "2"})
	sel2 := `[id="` + held2.ApprovalID + `"]`
	run("deny", chromedp.WaitVisible(sel2+` .deny`), chromedp.Click(sel2+` .deny`), chromedp.WaitVisible(sel2+` .approval-status`))
	if text := get("denied", liveText(sel2+` .approval-status`)); text != "denied" {
		t.Errorf("denied approval shows %q", text)
	}

	// An edit the schema refuses is refused on the page; the call waits.
	_, held3 := alice.call(t, "shell-exec", map[string]any{"cmd": "touch " + marker + "3"})
	sel3 := `[id="` + held3.ApprovalID + `"]`
	run("refused edit",
		chromedp.WaitVisible(sel3+` .edit-box summary`),
		chromedp.Click(sel3+` .edit-box summary`),
		chromedp.WaitVisible(sel3+` .edit`),
		chromedp.SetValue(sel3+` .edit`, `{"cmd": 5}`),
		chromedp.Click(sel3+` .approve`),
		chromedp.WaitVisible(`#error`),
	)
	if text := get("error", chromedp.Text(`#error`)); !strings.Contains(text, "edited params") {
		t.Errorf("a refused edit says %q; want the schema's refusal", text)
	}
	if _, a, _ := d.as(bobToken).approval(t, "GET", held3.ApprovalID, ""); a.Status != "pending" {
		t.Errorf("after a refused edit the approval is %q; want still pending", a.Status)
	}

	// History: the calls and decisions above, newest first, filterable.
	run("history", chromedp.Navigate(d.url+"/ui/history?caller=alice"), chromedp.WaitVisible(`#history`))
	if text := get("history", chromedp.Text(`#history`)); !strings.Contains(text, "shell-exec") || !strings.Contains(text, "approval_required") || strings.Contains(text, "bob console") {
		t.Errorf("history filtered by caller=alice:\n%s\nwant alice's held shell-exec calls only", text)
	}
	run("history of decisions", chromedp.Navigate(d.url+"/ui/history?status=denied"), chromedp.WaitVisible(`#history`))
	if text := get("denied", chromedp.Text(`#history`)); !strings.Contains(text, "denied") || strings.Contains(text, "approved") {
		t.Errorf("history filtered by status=denied:\n%s", text)
	}
	screenshot(t, ctx, "history")
	run("open a call's result from the history",
		chromedp.Navigate(d.url+"/ui/history?tool=shell-exec&status=success"), chromedp.WaitVisible(`#history`),
		chromedp.Click(`.run-link`), chromedp.WaitVisible(`#output`))
	// The newest: alice's approved run, which has a run of its own.
	if out := get("kept result", chromedp.Text(`#output`)); strings.TrimSpace(out) != "made" {
		t.Errorf("the history's result of the approved call = %q; want made", out)
	}

	// Status: executor health and the files that do not load, file:line.
	run("status", chromedp.Navigate(d.url+"/ui/status"), chromedp.WaitVisible(`#executors`))
	if text := get("executors", chromedp.Text(`#executors`)); !strings.Contains(text, "shell") || !strings.Contains(text, "ok") {
		t.Errorf("status page executors:\n%s", text)
	}
	if text := get("webhook", chromedp.Text(`#webhook`)); text != "—" {
		t.Errorf("last webhook with none delivered = %q; want —", text)
	}
	if text := get("problems", chromedp.Text(`#problems`)); !strings.Contains(text, "broken-tool/TOOL.hdlp:") || !strings.Contains(text, "bogus_key") {
		t.Errorf("status page problems:\n%s\nwant the broken tool's file:line and field", text)
	}

	// Sizes and hosts.
	for _, path := range []string{"/ui/", "/ui/tools/shell-exec", "/ui/approvals", "/ui/history", "/ui/status", "/ui/login"} {
		run("open "+path, chromedp.Navigate(d.url+path))
		if html := get("size of "+path, chromedp.OuterHTML(`html`)); len(html) > 100<<10 {
			t.Errorf("%s renders %d bytes; want under 100 KB", path, len(html))
		}
	}
	for _, u := range reqs() {
		if !strings.HasPrefix(u, d.url+"/") && !strings.HasPrefix(u, "data:") && u != "about:blank" {
			t.Errorf("the browser requested %s, outside the daemon", u)
		}
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestConsoleRefusesForgedPosts: a POST without the CSRF token is refused,
// and a read-role session's approve (with a valid CSRF token) is refused
// by the server whatever the page shows.
func TestConsoleRefusesForgedPosts(t *testing.T) {
	t.Parallel()
	d, _ := consoleDaemon(t)
	_, held := d.as(aliceToken).call(t, "shell-exec", map[string]any{"cmd": "touch /tmp/forged"})
	if held.ApprovalID == "" {
		t.Fatalf("alice's call = %+v; want it held", held)
	}
	signIn := func(token string) (*http.Client, string) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.PostForm(d.url+"/ui/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		resp, err = c.Get(d.url + "/ui/approvals")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := new(strings.Builder)
		_, _ = io.Copy(b, resp.Body)
		m := csrfField.FindStringSubmatch(b.String())
		if m == nil {
			t.Fatalf("no CSRF token on the approvals page of %s", token[:6])
		}
		return c, m[1]
	}
	bob, _ := signIn(bobToken)
	resp, err := bob.PostForm(d.url+"/ui/approvals/"+held.ApprovalID, url.Values{"decision": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("approve without the CSRF token = %d; want 403", resp.StatusCode)
	}
	reader, csrf := signIn(readerToken)
	resp, err = reader.PostForm(d.url+"/ui/approvals/"+held.ApprovalID, url.Values{"decision": {"approve"}, "csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a read-role session's approve = %d; want 403", resp.StatusCode)
	}
	if _, a, _ := d.as(bobToken).approval(t, "GET", held.ApprovalID, ""); a.Status != "pending" {
		t.Errorf("after forged posts the approval is %q; want pending", a.Status)
	}
	// A kept result opens for its caller and approvers only.
	_, mine := d.as(bobToken).call(t, "shell-exec", map[string]any{"cmd": "echo bobs"})
	if mine.RunID == "" {
		t.Fatalf("a result without run_id: %+v", mine)
	}
	aliceC, _ := signIn(aliceToken)
	for who, c := range map[string]*http.Client{"alice": aliceC, "bob": bob} {
		resp, err := c.Get(d.url + "/ui/runs/" + mine.RunID)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := map[string]int{"alice": http.StatusNotFound, "bob": http.StatusOK}[who]
		if resp.StatusCode != want || (want == 200) != strings.Contains(string(b), "bobs") {
			t.Errorf("%s opening bob's result = %d; want %d", who, resp.StatusCode, want)
		}
	}
	// A wrong token does not sign in.
	resp, err = http.PostForm(d.url+"/ui/login", url.Values{"token": {"wrong-0123456789abcdef"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("sign in with a wrong token = %d; want 401", resp.StatusCode)
	}
}

// TestConsoleLiveCall (issue 18): try-a-call's Run shows the tool's output
// as it comes: the first line is on the page while the tool still waits
// on a file the test creates only afterwards; then the result section.
func TestConsoleLiveCall(t *testing.T) {
	t.Parallel()
	flag := goOnFlag(t)
	tools := t.TempDir()
	putTool(t, tools, "waiter", testTool("waiter", "intent: wait\nmethod: run\nexecutor: shell\nargv: [sh, -c, \"echo first; while [ ! -e "+flag+" ]; do sleep 0.05; done; echo second\"]\nparams_schema: {}\nconstraints:\n  timeout_ms: 120000\n"))
	d := startDaemon(t, map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceToken}, "--tools", tools)
	ctx, _ := browser(t)
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			screenshot(t, ctx, "failed")
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	run("sign in", chromedp.Navigate(d.url+"/ui/"), chromedp.WaitVisible(`#token`), chromedp.SendKeys(`#token`, aliceToken), chromedp.Submit(`#login`), chromedp.WaitVisible(`#tools`))
	run("run the waiter", chromedp.Navigate(d.url+"/ui/tools/waiter"), chromedp.WaitVisible(`#run`), chromedp.Click(`#run`), chromedp.WaitVisible(`#live`))
	pollUntil(t, "the first line on the page while the tool runs", func() bool { return strings.Contains(text(`#live`), "first") })
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run("the result", chromedp.WaitVisible(`#exit-code`))
	if out, st := text(`#output`), text(`#result-status`); out != "first\nsecond\n" && strings.TrimSpace(out) != "first\nsecond" || st != "success" {
		t.Errorf("result section: output %q status %q; want first, second, success", out, st)
	}
}
