package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

const (
	aliceToken = "alice-0123456789abcdef" // role call
	bobToken   = "bob-0123456789abcdef00" // role approve
)

// guardedTool needs an approval for every call; a cmd matching rm -rf is
// denied outright (so no approval, and no approver's edit, can run it).
func guardedTool(intent string) string {
	return testTool("guarded", `intent: `+intent+`
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true, description: "the command" }
constraints:
  require_confirm: true
  shell_policy: none
  rules:
    cmd: { deny: ['rm\s+-rf'] }
`)
}

// as returns a view of d that sends token.
func (d *liveDaemon) as(token string) *liveDaemon {
	c := *d
	c.token = token
	return &c
}

// approval is GET/POST /v1/approvals/{id} decoded, with its result.
type approvalAnswer struct {
	dispatch.Approval
	res dispatch.Result
}

func (d *liveDaemon) approval(t *testing.T, method, id, body string) (int, approvalAnswer, string) {
	t.Helper()
	code, b := d.request(t, method, "/v1/approvals/"+id, body)
	var a approvalAnswer
	if code == 200 {
		if err := json.Unmarshal(b, &a.Approval); err != nil {
			t.Fatalf("%s /v1/approvals/%s: %s is not an approval: %v", method, id, b, err)
		}
		if len(a.Result) > 0 {
			if err := json.Unmarshal(a.Result, &a.res); err != nil {
				t.Fatalf("approval result %s: %v", a.Result, err)
			}
		}
	}
	return code, a, string(b)
}

// hold makes a call that the policy holds and returns its result.
func (d *liveDaemon) hold(t *testing.T, cmd string) dispatch.Result {
	t.Helper()
	code, res := d.call(t, "guarded", map[string]any{"cmd": cmd})
	if code != 202 || res.Status != dispatch.ApprovalRequired || res.ApprovalID == "" || res.ParamsHash == "" || res.ExpiresAt.IsZero() {
		t.Fatalf("call guarded %q = %d %+v; want 202 approval_required with an approval id, params hash and expiry", cmd, code, res)
	}
	return res
}

func startApprovalDaemon(t *testing.T, tools string, args ...string) *liveDaemon {
	env := map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceToken + ",bob:approve:" + bobToken}
	return startDaemon(t, env, append([]string{"--tools", tools}, args...)...)
}

// TestApprovalsHTTP drives the approval flow end to end through the HTTP
// API: alice (role call) asks, bob (role approve) decides.
func TestApprovalsHTTP(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "guarded", guardedTool("run a command after an approval"))
	d := startApprovalDaemon(t, tools)
	alice, bob := d.as(aliceToken), d.as(bobToken)
	marker := filepath.Join(t.TempDir(), "marker")

	t.Run("approve", func(t *testing.T) {
		held := alice.hold(t, "echo approved")
		if held.Rule == "" || held.Reason == "" || held.Params["cmd"] != "echo approved" || !strings.Contains(held.Suggestion, "POST /v1/approvals/"+held.ApprovalID) {
			t.Errorf("held result = %+v; want rule, reason, params and how to approve", held)
		}
		if code, _ := alice.request(t, "GET", "/v1/approvals", ""); code != 403 {
			t.Errorf("alice GET /v1/approvals = %d; want 403 (a call token lists no approvals)", code)
		}
		if code, list := bob.request(t, "GET", "/v1/approvals", ""); code != 200 || !strings.Contains(string(list), held.ApprovalID) {
			t.Fatalf("bob GET /v1/approvals = %d %s; want the pending approval listed", code, list)
		}
		if code, a, _ := alice.approval(t, "GET", held.ApprovalID, ""); code != 200 || a.Status != "pending" || a.Caller != "alice" {
			t.Errorf("alice GET her approval = %d %s by %q; want 200 pending by alice", code, a.Status, a.Caller)
		}
		if code, _, body := alice.approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`); code != 403 {
			t.Errorf("alice (role call) approving = %d %s; want 403", code, body)
		}
		code, a, body := bob.approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`)
		if code != 200 || a.Status != "executed" || a.Decider != "bob" || a.res.Status != dispatch.Success || a.res.Output != "approved\n" || a.res.ApprovalID != held.ApprovalID {
			t.Fatalf("bob approves = %d %s; want 200 executed with the result of the run", code, body)
		}
		code, a, body = alice.approval(t, "GET", held.ApprovalID, "")
		if code != 200 || a.Status != "executed" || a.res.Output != "approved\n" || a.Caller != "alice" || a.Decider != "bob" {
			t.Errorf("alice fetches the outcome = %d %s; want executed with the output", code, body)
		}

		t.Run("reuse", func(t *testing.T) {
			if code, _, body := bob.approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`); code != 409 {
				t.Errorf("approving again = %d %s; want 409 (used once)", code, body)
			}
		})
		t.Run("audit", func(t *testing.T) {
			var decided, ran bool
			sc := bufio.NewScanner(strings.NewReader(d.logs.String()))
			for sc.Scan() {
				var l map[string]any
				if json.Unmarshal(sc.Bytes(), &l) != nil || l["approval_id"] != held.ApprovalID {
					continue
				}
				who := l["asked_by"] == "alice" && l["decided_by"] == "bob" && l["params_sha256"] == held.ParamsHash
				switch l["msg"] {
				case "approval":
					decided = who && l["event"] == "approved" && l["decided_at"] != nil
				case "call":
					ran = who && l["status"] == "success" && l["caller"] == "alice"
				}
			}
			if !decided || !ran {
				t.Errorf("audit: decision line %v, run line %v; want both naming asker alice, decider bob and the params hash\n%s", decided, ran, d.logs)
			}
			if strings.Contains(d.logs.String(), "echo approved") {
				t.Error("a param value appears in the log")
			}
		})
	})

	t.Run("deny", func(t *testing.T) {
		held := alice.hold(t, "touch "+marker)
		code, a, body := bob.approval(t, "POST", held.ApprovalID, `{"decision":"deny"}`)
		if code != 200 || a.Status != "denied" || a.Decider != "bob" || len(a.Result) != 0 {
			t.Fatalf("bob denies = %d %s; want 200 denied, no result", code, body)
		}
		if code, _, body := bob.approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`); code != 409 {
			t.Errorf("approving a denied call = %d %s; want 409", code, body)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the denied call ran")
		}
	})

	t.Run("denied by policy", func(t *testing.T) {
		code, res := alice.call(t, "guarded", map[string]any{"cmd": "rm -rf /tmp/nothing"})
		if code != 403 || res.Status != dispatch.Denied || !strings.Contains(res.Rule, "deny pattern") || res.Reason == "" || res.ApprovalID != "" {
			t.Errorf("call with a denied cmd = %d %+v; want 403 denied naming the rule and reason, no approval", code, res)
		}
	})

	t.Run("self-approval", func(t *testing.T) {
		code, res := bob.call(t, "guarded", map[string]any{"cmd": "echo mine"})
		if code != 202 {
			t.Fatalf("bob calls = %d %+v; want 202", code, res)
		}
		if code, _, body := bob.approval(t, "POST", res.ApprovalID, `{"decision":"approve"}`); code != 403 || !strings.Contains(body, "cannot approve its own call") {
			t.Errorf("bob approving his own call = %d %s; want 403 self-approval", code, body)
		}
		if code, a, body := bob.approval(t, "POST", res.ApprovalID, `{"decision":"deny"}`); code != 200 || a.Status != "denied" {
			t.Errorf("bob withdrawing his own call = %d %s; want 200 denied", code, body)
		}
	})

	t.Run("caller sends approval state back", func(t *testing.T) {
		held := alice.hold(t, "touch "+marker)
		body := `{"tool":"guarded","params":{"cmd":"touch ` + marker + `"},"approval_id":"` + held.ApprovalID + `"}`
		if code, b := alice.request(t, "POST", "/v1/call", body); code != 400 || !strings.Contains(string(b), "approval_id") {
			t.Errorf("a call carrying an approval id = %d %s; want 400 (approval state lives on the server)", code, b)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the call ran")
		}
	})

	t.Run("edits", func(t *testing.T) {
		held := alice.hold(t, "echo original")
		for _, tc := range []struct{ name, params, want string }{
			{"policy denies the edit", `{"cmd":"rm -rf /tmp/x"}`, "refused by policy"},
			{"wrong type", `{"cmd":5}`, "do not fit tool guarded"},
			{"unknown param", `{"cmd":"echo x","sneaky":"y"}`, "sneaky"},
		} {
			code, _, body := bob.approval(t, "POST", held.ApprovalID, `{"decision":"approve","params":`+tc.params+`}`)
			if code != 422 || !strings.Contains(body, tc.want) {
				t.Errorf("%s: approve with %s = %d %s; want 422 naming %q", tc.name, tc.params, code, body, tc.want)
			}
		}
		if _, a, _ := bob.approval(t, "GET", held.ApprovalID, ""); a.Status != "pending" {
			t.Errorf("after refused edits the request is %s; want pending", a.Status)
		}
		code, a, body := bob.approval(t, "POST", held.ApprovalID, `{"decision":"approve","params":{"cmd":"echo edited"}}`)
		if code != 200 || a.res.Status != dispatch.Success || a.res.Output != "edited\n" || a.EditedParams["cmd"] != "echo edited" || a.Params["cmd"] != "echo original" {
			t.Fatalf("approve with a good edit = %d %s; want the edited params to run", code, body)
		}
		if a.ParamsHash == held.ParamsHash || a.ParamsHash != dispatch.ParamsHash(map[string]any{"cmd": "echo edited"}) {
			t.Errorf("bound hash = %s (asked %s); want the hash of the edited params", a.ParamsHash, held.ParamsHash)
		}
	})

	// Last: it changes the tool.
	t.Run("definition changed", func(t *testing.T) {
		held := alice.hold(t, "touch "+marker)
		putTool(t, tools, "guarded", guardedTool("run a command after an approval, changed"))
		pollUntil(t, "the new revision of guarded", func() bool {
			_, b := bob.request(t, "GET", "/v1/tools/guarded", "")
			var v struct{ Revision string }
			return json.Unmarshal(b, &v) == nil && v.Revision != "" && v.Revision != held.Revision
		})
		code, _, body := bob.approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`)
		if code != 409 || !strings.Contains(body, "definition revision") || !strings.Contains(body, held.Revision) {
			t.Errorf("approve after the definition changed = %d %s; want 409 naming the revision change", code, body)
		}
		if _, a, _ := alice.approval(t, "GET", held.ApprovalID, ""); a.Status != "invalid" || !strings.Contains(a.Note, "definition revision") {
			t.Errorf("the voided approval = %s %q; want invalid with a note", a.Status, a.Note)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the call ran under a changed definition")
		}
	})
}

// TestApprovalsHTTPExpiry: an undecided request expires after
// approval_ttl and can no longer be approved.
func TestApprovalsHTTPExpiry(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "guarded", guardedTool("run a command after an approval"))
	d := startApprovalDaemon(t, tools, "--approval-ttl", "300ms")
	alice, bob := d.as(aliceToken), d.as(bobToken)
	held := alice.hold(t, "echo late")
	pollUntil(t, "the approval to expire", func() bool {
		_, a, _ := alice.approval(t, "GET", held.ApprovalID, "")
		return a.Status == "expired"
	})
	if code, _, body := bob.approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`); code != 410 || !strings.Contains(body, "expired") {
		t.Errorf("approving an expired request = %d %s; want 410", code, body)
	}
	if _, body := bob.request(t, "GET", "/v1/approvals", ""); strings.Contains(string(body), held.ApprovalID) {
		t.Errorf("GET /v1/approvals lists the expired request: %s", body)
	}
	if _, body := bob.request(t, "GET", "/v1/approvals?all=1", ""); !strings.Contains(string(body), held.ApprovalID) {
		t.Errorf("GET /v1/approvals?all=1 does not list the expired request: %s", body)
	}
}

// TestApprovalsSurviveRestart: the pending record is on disk under the
// state directory; a new daemon on it lists and approves it. On an open
// loopback daemon every caller is anonymous, so approving needs
// allow_self_approval.
// Not parallel: it counts every process below the test binary
// (descendants), which other tests would change.
func TestApprovalsSurviveRestart(t *testing.T) {
	tools := t.TempDir()
	putTool(t, tools, "guarded", guardedTool("run a command after an approval"))
	state := t.TempDir()
	d1 := startDaemon(t, nil, "--tools", tools, "--state", state)
	held := d1.hold(t, "echo survived")
	code, _, body := d1.approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`)
	if code != 403 || !strings.Contains(body, "operator token") {
		t.Errorf("anonymous approving on an open daemon = %d %s; want 403 naming the operator token", code, body)
	}
	// One process owns a state directory's approval queue. The refused
	// one leaves nothing running: its sandbox's warm worker ends with it.
	before := len(proctest.Descendants(t))
	if _, stderr, code := runCLI(t, nil, "serve", "--listen", "127.0.0.1:0", "--tools", tools, "--state", state); code == 0 || !strings.Contains(stderr, "a toolagent daemon already listens on "+strings.TrimPrefix(d1.url, "http://")) {
		t.Errorf("a second serve on the state dir = exit %d %q; want a refusal naming the daemon that runs there", code, stderr)
	}
	pollUntil(t, fmt.Sprintf("the refused serve's processes gone (back to %d)", before), func() bool { return len(proctest.Descendants(t)) <= before })
	if err := d1.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}

	d2 := startDaemon(t, nil, "--tools", tools, "--state", state, "--allow-self-approval")
	if code, body := d2.request(t, "GET", "/v1/approvals", ""); code != 200 || !strings.Contains(string(body), held.ApprovalID) {
		t.Fatalf("GET /v1/approvals after a restart = %d %s; want the pending approval", code, body)
	}
	code, a, body := d2.approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`)
	if code != 200 || a.res.Status != dispatch.Success || a.res.Output != "survived\n" {
		t.Errorf("approve after a restart = %d %s; want it to run", code, body)
	}
}

// TestApprovalsCLI: `toolagent call` holds a call in STATE/approvals and
// `toolagent approvals` lists, shows, approves and denies it.
// Not parallel: its in-process commands take the approval queue's lock
// one after another, and a process another test starts in a sandbox
// (user namespace: no vfork) holds a copy of the lock until it execs; a
// run with a CPU burner saw the next command refused as "in use".
func TestApprovalsCLI(t *testing.T) {
	tools := t.TempDir()
	putTool(t, tools, "guarded", guardedTool("run a command after an approval"))
	state := t.TempDir()
	alice, bob := []string{"USER=alice"}, []string{"USER=bob"}
	flags := []string{"--tools", tools, "--state", state}
	hold := func(cmd string) string {
		t.Helper()
		out, stderr, code := runCLI(t, alice, append([]string{"call", "guarded", "cmd=" + cmd}, flags...)...)
		var r dispatch.Result
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != exitRefused || r.Status != dispatch.ApprovalRequired || r.ApprovalID == "" {
			t.Fatalf("call guarded = exit %d %s %s; want 5 approval_required with an id", code, out, stderr)
		}
		return r.ApprovalID
	}
	approvals := func(env []string, args ...string) (approvalAnswer, string, int) {
		t.Helper()
		out, stderr, code := runCLI(t, env, append(append([]string{"approvals"}, args...), flags...)...)
		var a approvalAnswer
		if json.Unmarshal([]byte(out), &a.Approval) == nil && len(a.Result) > 0 {
			json.Unmarshal(a.Result, &a.res)
		}
		return a, out + stderr, code
	}

	id := hold("echo from-cli")
	if _, out, code := approvals(bob, "list"); code != 0 || !strings.Contains(out, id) {
		t.Errorf("approvals list = exit %d %s; want the held call", code, out)
	}
	if a, out, code := approvals(bob, "show", id); code != 0 || a.Status != "pending" || a.Caller != "alice" || a.Door != "cli" {
		t.Errorf("approvals show = exit %d %s; want pending, asked by alice through the cli", code, out)
	}
	if _, out, code := approvals(alice, "approve", "--allow-self-approval", id); code != exitUsage || !strings.Contains(out, "is gone") || !strings.Contains(out, "confirms a call you asked for yourself") {
		t.Errorf("approvals approve --allow-self-approval = exit %d %s; want 2, saying what replaced the flag", code, out)
	}
	if a, out, code := approvals(bob, "approve", id); code != 0 || a.Status != "executed" || a.Decider != "bob" || a.DecisionReason != "" || a.res.Output != "from-cli\n" {
		t.Errorf("bob approves = exit %d %s; want 0 and the run's result", code, out)
	}
	// The user on the host holds the state directory: the operator, who
	// confirms a call they asked for themselves.
	own := hold("echo own")
	if a, out, code := approvals(alice, "approve", own); code != 0 || a.Status != "executed" || a.Decider != "alice" || a.DecisionReason != dispatch.ReasonOperatorOwn || a.res.Output != "own\n" {
		t.Errorf("alice confirming her own call = exit %d %s; want 0, run, reason %q", code, out, dispatch.ReasonOperatorOwn)
	}
	if out, _, code := runCLI(t, alice, append([]string{"call", "--allow-self-approval", "guarded", "cmd=echo x"}, flags...)...); code != exitUsage {
		t.Errorf("call --allow-self-approval = exit %d %s; want 2", code, out)
	}
	if _, out, code := approvals(bob, "approve", id); code != exitRefused {
		t.Errorf("approving again = exit %d %s; want 5", code, out)
	}
	id2 := hold("echo never")
	if a, out, code := approvals(bob, "deny", id2); code != 0 || a.Status != "denied" {
		t.Errorf("approvals deny = exit %d %s; want denied", code, out)
	}
	if _, out, code := approvals(bob, "list"); code != 0 || strings.Contains(out, id2) || strings.Contains(out, id) {
		t.Errorf("approvals list = %s; want no pending approval left", out)
	}
	if _, out, code := approvals(bob, "list", "--all"); code != 0 || !strings.Contains(out, id2) || !strings.Contains(out, id) {
		t.Errorf("approvals list --all = %s; want both", out)
	}
	if _, out, code := approvals(bob, "show", "0123456789abcdef0123456789abcdef"); code != exitNotFound {
		t.Errorf("approvals show of an unknown id = exit %d %s; want 3", code, out)
	}
}

// TestShellPolicyOverride: the operator's shell_policy.commands and
// shell_policy.classes change the default shell policy of exec tools, in
// dispatch and in the shell executor's re-check alike.
func TestShellPolicyOverride(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	env := map[string]string{"TOOLAGENT_SHELL_POLICY_COMMANDS": "{uname: confirm, touch: deny}"}
	d := startDaemon(t, env, "--tools", tools)
	for _, tc := range []struct {
		cmd    string
		code   int
		status dispatch.ResultStatus
	}{
		{"echo read-only", 200, dispatch.Success},
		{"uname", 202, dispatch.ApprovalRequired},
		{"touch " + filepath.Join(t.TempDir(), "x"), 403, dispatch.Denied},
	} {
		code, res := d.call(t, "shell-exec", map[string]any{"cmd": tc.cmd})
		if code != tc.code || res.Status != tc.status {
			t.Errorf("call shell-exec %q = %d %s (%s); want %d %s", tc.cmd, code, res.Status, res.Rule, tc.code, tc.status)
		}
	}
	for _, bad := range []map[string]string{
		{"TOOLAGENT_SHELL_POLICY_COMMANDS": "{uname: maybe}"},
		{"TOOLAGENT_SHELL_POLICY_CLASSES": "{catastrophic: allow}"},
		{"TOOLAGENT_SHELL_POLICY_CLASSES": "{networking: deny}"},
	} {
		envKV := []string{}
		for k, v := range bad {
			envKV = append(envKV, k+"="+v)
		}
		if _, stderr, code := runCLI(t, envKV, "serve", "--listen", "127.0.0.1:0", "--tools", tools, "--state", t.TempDir()); code == 0 || !strings.Contains(stderr, "shell_policy") {
			t.Errorf("serve with %v = exit %d %q; want a config error naming shell_policy", bad, code, stderr)
		}
	}
}

// TestApproveHintWorksWhereShown: on a daemon without tokens every caller
// is anonymous and cannot approve its own call, so the hint names the
// operator's way (the CLI on the host, or the operator token); with tokens
// it names the API (issue 14, trap 2's hint).
func TestApproveHintWorksWhereShown(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "guarded", guardedTool("run a command after an approval"))
	open := startDaemon(t, nil, "--tools", tools)
	if held := open.hold(t, "echo x"); !strings.Contains(held.Suggestion, "toolagent approvals approve "+held.ApprovalID) || !strings.Contains(held.Suggestion, operator.TokenFile) {
		t.Errorf("hint on a daemon without tokens: %q; want the operator's way: the CLI, or the operator token", held.Suggestion)
	}
	withTokens := startApprovalDaemon(t, tools).as(aliceToken)
	if held := withTokens.hold(t, "echo x"); !strings.Contains(held.Suggestion, "approve role: POST /v1/approvals/"+held.ApprovalID) {
		t.Errorf("hint on a daemon with tokens: %q; want the approvers' API", held.Suggestion)
	}
}

// TestServeSharedApprovals: two replicas (daemons with state directories
// of their own) on one PostgreSQL database: a call held on the first is
// listed on the second and approved there, runs once, and its result is
// fetched from the first. The database URL comes from the variable
// store_url_env names.
func TestServeSharedApprovals(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	env := map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceToken + ",bob:approve:" + bobToken, "TOOLAGENT_STORE_URL": url}
	one := startDaemon(t, env, "--tools", tools, "--store", "postgres")
	two := startDaemon(t, env, "--tools", tools, "--store", "postgres")

	one.token = aliceToken
	marker := filepath.Join(proctest.HostDir(t), "ran")
	code, res := one.call(t, "shell-exec", map[string]any{"cmd": "rm -f " + marker + "; echo removed"})
	if code != 202 && code != 200 || res.Status != dispatch.ApprovalRequired || res.ApprovalID == "" {
		t.Fatalf("a call that needs an approval on replica 1: %d %+v", code, res)
	}
	two.token = bobToken
	code, body := two.request(t, "GET", "/v1/approvals", "")
	if code != 200 || !strings.Contains(string(body), res.ApprovalID) {
		t.Fatalf("GET /v1/approvals on replica 2: %d %s; want the call held on replica 1", code, body)
	}
	// The caller waits on replica 1 for the result (one request, no
	// polling); the approval on replica 2 wakes it.
	one.token = aliceToken
	if code, body := one.request(t, "GET", "/v1/approvals/"+res.ApprovalID+"?wait=forever", ""); code != 400 || !strings.Contains(string(body), "wait") {
		t.Errorf("GET ?wait=forever: %d %s; want 400 naming the parameter", code, body)
	}
	waited := make(chan string, 1)
	go func() {
		_, body := one.request(t, "GET", "/v1/approvals/"+res.ApprovalID+"?wait=60s", "")
		waited <- string(body)
	}()
	code, body = two.request(t, "POST", "/v1/approvals/"+res.ApprovalID, `{"decision":"approve"}`)
	if code != 200 || !strings.Contains(string(body), `removed\n`) {
		t.Fatalf("approve on replica 2: %d %s; want it run there", code, body)
	}
	if got := <-waited; !strings.Contains(got, `"executed"`) || !strings.Contains(got, `removed\n`) {
		t.Errorf("the caller's GET ?wait=60s on replica 1 answered %s; want executed with the result", got)
	}
	code, body = two.request(t, "POST", "/v1/approvals/"+res.ApprovalID, `{"decision":"approve"}`)
	if code != 409 {
		t.Errorf("approving again: %d %s; want 409", code, body)
	}
	one.token = aliceToken
	code, body = one.request(t, "GET", "/v1/approvals/"+res.ApprovalID, "")
	if code != 200 || !strings.Contains(string(body), `"executed"`) || !strings.Contains(string(body), `removed\n`) {
		t.Errorf("the caller's GET on replica 1: %d %s; want executed with the result", code, body)
	}
}

// TestAuditVerifyAndExport: the replicas' audit records are rows of one
// hash chain in the shared database; `toolagent audit verify` says it
// holds, and fails naming the row once a row is deleted by hand;
// `audit export` writes the rows; with the file store it says what is
// needed.
func TestAuditVerifyAndExport(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	env := map[string]string{"TOOLAGENT_STORE_URL": url}
	for range 2 {
		d := startDaemon(t, env, "--tools", tools, "--store", "postgres")
		for k := range 3 {
			if code, res := d.call(t, "shell-exec", map[string]any{"cmd": fmt.Sprintf("echo %d", k)}); code != 200 || !res.OK {
				t.Fatalf("call: %d %+v", code, res)
			}
		}
		if err := d.stop(t); err != nil { // a clean stop writes every queued record
			t.Fatal(err)
		}
	}
	kv := []string{"TOOLAGENT_STORE_URL=" + url}
	out, errOut, code := runCLI(t, kv, "audit", "verify", "--store", "postgres")
	var res struct {
		Rows   int
		Head   string
		Broken string
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Rows < 6 || res.Broken != "" {
		t.Fatalf("audit verify = %d %s %s; want every call of both replicas in one unbroken chain", code, out, errOut)
	}
	out, _, code = runCLI(t, kv, "audit", "export", "--store", "postgres")
	if code != 0 || strings.Count(out, "\n") != res.Rows || !strings.Contains(out, `\"tool\":\"shell-exec\"`) && !strings.Contains(out, `"tool":"shell-exec"`) {
		t.Errorf("audit export = %d, %d lines; want %d rows with the calls", code, strings.Count(out, "\n"), res.Rows)
	}

	db, err := pgstore.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Pool.Exec(t.Context(), `ALTER TABLE toolagent_audit DISABLE TRIGGER USER; DELETE FROM toolagent_audit WHERE seq = 3`); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCLI(t, kv, "audit", "verify", "--store", "postgres")
	if code == 0 || !strings.Contains(errOut, "row 4") || !strings.Contains(out, `"rows": 2`) {
		t.Errorf("audit verify after a row was deleted = %d %s %s; want a failure naming row 4", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, nil, "audit", "verify", "--state", t.TempDir()); code == 0 || !strings.Contains(errOut, "no audit trail in the state directory") {
		t.Errorf("audit verify with the file store and no trail = %d %s; want it to say there is none", code, errOut)
	}
}

// TestServeSharedStoreDown: when the shared database goes away (here:
// dropped), calls that need no shared state keep working; a call that
// needs an approval is unavailable (503), saying the approval store is;
// a tool with max_concurrency is unavailable, the cap never guessed;
// listing approvals is 503, not an empty list. (TestServeStoreOutage
// stops the server and starts it again.)
func TestServeSharedStoreDown(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	putTool(t, tools, "capped", testTool("capped", "intent: capped\nmethod: run\nexecutor: shell\nargv: [echo, capped]\nparams_schema: {}\nconstraints:\n  max_concurrency: 1\n"))
	d := startDaemon(t, map[string]string{"TOOLAGENT_STORE_URL": url}, "--tools", tools, "--store", "postgres")
	if code, res := d.call(t, "capped", nil); code != 200 || res.Output != "capped\n" {
		t.Fatalf("a capped call with the database up: %d %+v", code, res)
	}
	pgtest.Drop(t, url)
	if code, res := d.call(t, "capped", nil); code != 503 || res.Status != dispatch.Unavailable || !strings.HasPrefix(res.Error, "shared store unavailable: ") {
		t.Errorf("a tool with max_concurrency with the database gone: %d %+v; want unavailable, saying the shared store is", code, res)
	}
	if code, res := d.call(t, "shell-exec", map[string]any{"cmd": "echo still here"}); code != 200 || res.Output != "still here\n" {
		t.Errorf("a call that needs no approval with the database gone: %d %+v; want it run", code, res)
	}
	if code, res := d.call(t, "shell-exec", map[string]any{"cmd": "rm -f /var/lib/nothing-here"}); code != 503 || res.ApprovalID != "" || !strings.HasPrefix(res.Error, "approval store unavailable: ") || !strings.Contains(res.Error, "no approval was recorded") {
		t.Errorf("a call that needs an approval with the database gone: %d %+v; want 503, saying the approval store is unavailable and nothing was recorded", code, res)
	}
	if code, body := d.request(t, "GET", "/v1/approvals", ""); code != 503 || !strings.Contains(string(body), "approval store unavailable: ") {
		t.Errorf("GET /v1/approvals with the database gone: %d %s; want 503 with the cause", code, body)
	}
}

// TestServeSharedConcurrency: constraints.max_concurrency 1 holds across
// three replicas (real processes) on one database: while a call runs on
// the first, calls on the others are busy (429, saying so); once it ended,
// they run.
func TestServeSharedConcurrency(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	env := []string{"TOOLAGENT_STORE_URL=" + url}
	flag := goOnFlag(t)
	tools := t.TempDir()
	putTool(t, tools, "deploy", testTool("deploy", "intent: deploy\nmethod: run\nexecutor: shell\nargv: [sh, -c, \"while [ ! -e "+flag+" ]; do sleep 0.05; done; echo deployed\"]\nparams_schema: {}\nconstraints:\n  timeout_ms: 120000\n  max_concurrency: 1\n"))
	one := processDaemon(t, env, "--tools", tools, "--store", "postgres")
	two := processDaemon(t, env, "--tools", tools, "--store", "postgres")
	three := processDaemon(t, env, "--tools", tools, "--store", "postgres")
	db, err := pgstore.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	first := make(chan dispatch.Result, 1)
	go func() {
		_, res := one.call(t, "deploy", nil)
		first <- res
	}()
	pollUntil(t, "the first call holds the shared slot", func() bool {
		var n int
		return db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM toolagent_slots WHERE tool = 'deploy' AND holder IS NOT NULL`).Scan(&n) == nil && n == 1
	})
	for i, d := range []*liveDaemon{two, three} {
		code, res := d.call(t, "deploy", nil)
		if code != 429 || res.Status != dispatch.Busy || !strings.Contains(res.Error, "across the replicas") {
			t.Errorf("a call on replica %d while the first runs: %d %+v; want busy across the replicas", i+2, code, res)
		}
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := <-first; res.Output != "deployed\n" {
		t.Fatalf("the first call: %+v", res)
	}
	for i, d := range []*liveDaemon{two, three} {
		if code, res := d.call(t, "deploy", nil); code != 200 || res.Output != "deployed\n" {
			t.Errorf("a call on replica %d once the first ended: %d %+v; want it run", i+2, code, res)
		}
	}
}

// TestReplicasEndToEnd: three replicas as real processes, each with a
// state directory of its own, on one tools tree and one database: a call
// held on 1 is listed on 2 and approved on 3, which runs it; replica 3 is
// killed with SIGKILL while the call runs, and once its lease is past the
// approval reads interrupted on 1 (never running, never run again); of two
// approvers racing on 1 and 2 for a new call, one wins and the other gets
// 409; the audit chain of all of it verifies.
func TestReplicasEndToEnd(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	env := withEnv("TOOLAGENT_STORE_URL="+url, "TOOLAGENT_TOKENS=alice:call:"+aliceToken+",bob:approve:"+bobToken+",carol:approve:carol-0123456789abcdef0")
	tools := t.TempDir()
	putTool(t, tools, "long", longTool(true))
	var rs []*daemonProcess
	for range 3 {
		rs = append(rs, startDaemonProcessCmd(t, env, "--state", t.TempDir(), "--tools", tools, "--store", "postgres", "--store-lease", "2s"))
	}
	as := func(token string, d *daemonProcess, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, d.url+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	marker := "toolagent-replicas-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	code, body := as(aliceToken, rs[0], "POST", "/v1/call", fmt.Sprintf(`{"tool":"long","params":{"cmd":"exec -a %s sleep 1000"}}`, marker))
	var held struct {
		ApprovalID string `json:"approval_id"`
	}
	if code != http.StatusAccepted || json.Unmarshal([]byte(body), &held) != nil || held.ApprovalID == "" {
		t.Fatalf("held on replica 1: %d %s", code, body)
	}
	if code, body := as(bobToken, rs[1], "GET", "/v1/approvals", ""); code != 200 || !strings.Contains(body, held.ApprovalID) {
		t.Fatalf("listed on replica 2: %d %s", code, body)
	}
	go as(bobToken, rs[2], "POST", "/v1/approvals/"+held.ApprovalID, `{"decision":"approve"}`) // runs on 3; answers nothing: 3 dies
	waitFor(t, 60*time.Second, "the approved call to run on replica 3", func() bool { return proctest.CountMarked(marker) > 0 })
	rs[2].kill(t)
	waitFor(t, 60*time.Second, "the killed replica's call to be gone", func() bool { return proctest.CountMarked(marker) == 0 })
	waitFor(t, 60*time.Second, "the approval to read interrupted on replica 1 once the lease is past", func() bool {
		_, body := as(aliceToken, rs[0], "GET", "/v1/approvals/"+held.ApprovalID, "")
		return strings.Contains(body, `"status":"interrupted"`)
	})
	if n := proctest.CountMarked(marker); n != 0 {
		t.Errorf("the interrupted call ran again (%d processes)", n)
	}

	code, body = as(aliceToken, rs[0], "POST", "/v1/call", `{"tool":"long","params":{"cmd":"echo raced"}}`)
	if code != http.StatusAccepted || json.Unmarshal([]byte(body), &held) != nil {
		t.Fatalf("second call: %d %s", code, body)
	}
	codes := make(chan int, 2)
	for i, tok := range []string{bobToken, "carol-0123456789abcdef0"} {
		go func() {
			c, _ := as(tok, rs[i], "POST", "/v1/approvals/"+held.ApprovalID, `{"decision":"approve"}`)
			codes <- c
		}()
	}
	got := []int{<-codes, <-codes}
	slices.Sort(got)
	if got[0] != 200 || got[1] != http.StatusConflict {
		t.Errorf("two approvers racing on replicas 1 and 2: %v; want one 200 and one 409", got)
	}
	for _, d := range rs[:2] {
		d.cmd.Process.Signal(syscall.SIGTERM) // a clean stop writes the queued audit records
		d.cmd.Wait()
	}
	out, errOut, code := runCLI(t, []string{"TOOLAGENT_STORE_URL=" + url}, "audit", "verify", "--store", "postgres")
	if code != 0 || !strings.Contains(out, `"rows"`) {
		t.Errorf("audit verify after all of it: %d %s %s", code, out, errOut)
	}
}

// BenchmarkSharedStoreEcho: `echo hello` through POST /v1/call, a tool
// without approvals, on one replica with the file store, on one replica
// with the PostgreSQL store (every call an audit row, written in batches
// off the call path), and on three replicas with the PostgreSQL store
// (clients spread over them; on one host they share its cores, so their
// sum is the figure, not three times one). In one run, with the sandbox
// off so that the store's cost is not lost in the sandbox's:
//
//	eval "$(scripts/test-postgres.sh start $(mktemp -d -u))"
//	go test -run '^$' -bench SharedStoreEcho -benchtime 3000x -count 3 ./cmd/toolagent/
func BenchmarkSharedStoreEcho(b *testing.B) {
	for _, c := range []struct {
		name     string
		replicas int
		store    string
	}{{"files-1", 1, "files"}, {"postgres-1", 1, "postgres"}, {"postgres-3", 3, "postgres"}} {
		b.Run(c.name, func(b *testing.B) {
			env := map[string]string{}
			if c.store == "postgres" {
				env["TOOLAGENT_STORE_URL"] = pgtest.URL(b)
			}
			tools := b.TempDir()
			putTool(b, tools, "shell-exec", shellExec(b))
			var ds []*liveDaemon
			for range c.replicas {
				ds = append(ds, startDaemon(b, env, "--tools", tools, "--sandbox", "off", "--store", c.store))
			}
			body := `{"tool":"shell-exec","params":{"cmd":"echo hello"}}`
			var next atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				d := ds[int(next.Add(1))%len(ds)]
				for pb.Next() {
					resp, err := d.client.Post(d.url+"/v1/call", "application/json", strings.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("HTTP %d", resp.StatusCode)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
