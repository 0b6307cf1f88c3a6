package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// auditLines returns the records of the daemon's audit file
// (STATE/audit/audit.jsonl) about the approval id.
func auditLines(t *testing.T, state, id string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(host.AuditDir(state), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["approval_id"] == id {
			out = append(out, rec)
		}
	}
	return out
}

// TestOperatorConfirmsOwnCallThroughCLI (issue 36 item 4): on the
// embedded default, through the built binary, a call made with the
// operator token is the operator's own; it is held, and `toolagent
// approvals approve ID` (the CLI on the host, sending the operator token)
// confirms it: it runs, and the approval and the audit file say
// "confirmed by operator (own request)". The gone --allow-self-approval
// says what replaced it. From the wrong side: on a daemon with tokens, a
// call token's own held call cannot be approved with that token.
func TestOperatorConfirmsOwnCallThroughCLI(t *testing.T) {
	t.Parallel()
	proctest.SkipWithoutSandbox(t)
	outside := t.TempDir() // no tools tree anywhere above: the embedded copy
	state := filepath.Join(t.TempDir(), "state")
	env := binEnv(t)
	info := startBinDaemon(t, outside, state, env)
	if !info.Open || info.Tools != host.Embedded {
		t.Fatalf("daemon.json = %+v; want an open daemon on the embedded tools", info)
	}
	secret, err := operator.ReadToken(state)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(state, "files", "confirmed-by-operator")
	out, errOut, code := runBin(t, outside, append(env, "TOOLAGENT_TOKEN="+secret), "call", "--state", state, "shell-exec", "cmd=touch "+target)
	var held dispatch.Result
	if err := json.Unmarshal([]byte(out), &held); err != nil || code != exitRefused || held.Status != dispatch.ApprovalRequired || held.ApprovalID == "" {
		t.Fatalf("the operator's call of touch = exit %d %q %s; want 5, approval_required with an id", code, out, errOut)
	}
	if _, errOut, code := runBin(t, outside, env, "approvals", "approve", "--allow-self-approval", "--state", state, held.ApprovalID); code != exitUsage || !strings.Contains(errOut, "approvals approve ID` confirms a call you asked for yourself") {
		t.Errorf("approvals approve --allow-self-approval = exit %d %s; want 2 saying what replaced the flag", code, errOut)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the held call ran before the operator confirmed it")
	}

	out, errOut, code = runBin(t, outside, env, "approvals", "approve", "--state", state, held.ApprovalID)
	var a struct {
		Caller, Decider, Status string
		Reason                  string          `json:"decision_reason"`
		Result                  dispatch.Result `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil || code != 0 || a.Caller != operator.Name || a.Decider != operator.Name || a.Status != "executed" || a.Reason != dispatch.ReasonOperatorOwn || a.Result.ExitCode != 0 {
		t.Fatalf("approvals approve = exit %d %q %s; want 0, asked and decided by the operator, executed, reason %q", code, out, errOut, dispatch.ReasonOperatorOwn)
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("the confirmed call did not run: %v", err)
	}
	var decision, run bool
	for _, rec := range auditLines(t, state, held.ApprovalID) {
		if rec["decision_reason"] != dispatch.ReasonOperatorOwn {
			continue
		}
		decision = decision || rec["event"] == "approved" && rec["decided_by"] == operator.Name && rec["asked_by"] == operator.Name
		run = run || rec["msg"] == "call" && rec["exit_code"] == 0.0 && rec["decided_by"] == operator.Name
	}
	if !decision || !run {
		t.Errorf("audit file: the decision says %q: %v, the run says it: %v\n%v", dispatch.ReasonOperatorOwn, decision, run, auditLines(t, state, held.ApprovalID))
	}

	// The wrong side: a call token never approves its own call.
	const ciToken = "ci-0123456789abcdef0123"
	state2 := filepath.Join(t.TempDir(), "state")
	startBinDaemon(t, outside, state2, append(env, "TOOLAGENT_TOKENS=ci:call:"+ciToken))
	ci := append(env, "TOOLAGENT_TOKEN="+ciToken)
	out, errOut, code = runBin(t, outside, ci, "call", "--state", state2, "shell-exec", "cmd=touch "+target+"-ci")
	if err := json.Unmarshal([]byte(out), &held); err != nil || code != exitRefused || held.ApprovalID == "" {
		t.Fatalf("the call token's call = exit %d %q %s; want it held", code, out, errOut)
	}
	if out, errOut, code := runBin(t, outside, ci, "approvals", "approve", "--state", state2, held.ApprovalID); code != exitRefused || strings.Contains(out, "executed") {
		t.Errorf("the call token approving its own call = exit %d %q %s; want 5, refused", code, out, errOut)
	}
	if _, err := os.Stat(target + "-ci"); err == nil {
		t.Error("the call token's own call ran")
	}
}

var oneTimeLink = regexp.MustCompile(`/ui/login\?once=[A-Za-z0-9_-]+`)

// TestConsoleConfirmAndRun (issue 36 item 4): on the embedded default,
// through the built binary and headless Chromium, the operator signs in
// with the one-time link the daemon logged, runs shell-exec with `touch
// console-file`, which is held; the held result links to its approval,
// whose entry offers "Confirm and run" (no Approve); clicking it runs the
// call and the entry says "confirmed by operator (own request)".
func TestConsoleConfirmAndRun(t *testing.T) {
	t.Parallel()
	proctest.SkipWithoutSandbox(t)
	ctx, _ := browser(t)
	outside := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	info, logs := startBinDaemonLogs(t, outside, state, binEnv(t))
	var link string
	pollUntil(t, "the one-time sign-in link in the daemon's log", func() bool {
		link = oneTimeLink.FindString(logs.String())
		return link != ""
	})
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
	run("sign in with the one-time link", chromedp.Navigate(info.URL+link), chromedp.WaitVisible(`#tools`))
	if u := get("user", chromedp.Text(`#user`)); u != operator.Name {
		t.Fatalf("signed in as %q; want %s", u, operator.Name)
	}
	target := filepath.Join(state, "files", "console-file")
	run("run touch",
		chromedp.Navigate(info.URL+"/ui/tools/shell-exec"),
		chromedp.WaitVisible(`#p-cmd`),
		chromedp.SetValue(`#p-cmd`, "touch "+target),
		chromedp.Click(`#run`),
		chromedp.WaitVisible(`#approval-link`),
	)
	if st := get("status", chromedp.Text(`#result-status`)); st != string(dispatch.ApprovalRequired) {
		t.Fatalf("the run's status = %q; want approval_required", st)
	}
	id := get("approval id", chromedp.Text(`#approval-link`))
	sel := `[id="` + id + `"]`
	run("open the approval", chromedp.Click(`#approval-link`), chromedp.WaitVisible(sel+` .confirm`))
	if html := get("the pending entry", chromedp.OuterHTML(sel)); strings.Contains(html, `class="approve"`) || !strings.Contains(html, "Confirm and run") {
		t.Errorf("the operator's own pending call:\n%s\nwant Confirm and run, no Approve", html)
	}
	screenshot(t, ctx, "confirm-and-run")
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the held call ran before it was confirmed")
	}
	run("confirm and run", chromedp.Click(sel+` .confirm`), chromedp.WaitVisible(sel+` .decision-reason`))
	if reason := get("reason", liveText(sel+` .decision-reason`)); reason != dispatch.ReasonOperatorOwn {
		t.Errorf("the decided entry's reason = %q; want %q", reason, dispatch.ReasonOperatorOwn)
	}
	run("open the decided call", chromedp.Click(sel+` .approval-open`), chromedp.WaitVisible(`#exit-code`))
	if code := get("result", chromedp.Text(`#exit-code`)); code != "0" {
		t.Errorf("the confirmed call's exit code = %q; want 0", code)
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("the confirmed call did not run: %v", err)
	}
}
