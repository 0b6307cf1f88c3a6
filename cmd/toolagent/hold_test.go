package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestHoldOnceThroughServe (#36 items 3 and 5): the same caller asking
// the same held call twice gets one approval back, through the HTTP API
// as through MCP or the console (one store method); once it is decided, a
// new one. /metrics counts what is pending and what was decided.
func TestHoldOnceThroughServe(t *testing.T) {
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	d := startDaemon(t, map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceCallToken + ",carol:call:" + carolCallToken + ",bob:approve:" + bobToken}, "--tools", tools)
	alice, carol, bob := d.as(aliceCallToken), d.as(carolCallToken), d.as(bobToken)
	cmd := map[string]any{"cmd": "touch /tmp/held"}
	_, first := alice.call(t, "shell-exec", cmd)
	code, again := alice.call(t, "shell-exec", cmd)
	if first.ApprovalID == "" || code != http.StatusAccepted || again.ApprovalID != first.ApprovalID || !strings.Contains(again.Suggestion, "not a new one") {
		t.Fatalf("asked twice: %s then %d %s (%q); want the same approval, said so", first.ApprovalID, code, again.ApprovalID, again.Suggestion)
	}
	if _, other := carol.call(t, "shell-exec", cmd); other.ApprovalID == first.ApprovalID {
		t.Errorf("another caller's hold of the same call is alice's %s; want her own", other.ApprovalID)
	}
	metric := func(name string) string {
		t.Helper()
		_, b := bob.request(t, "GET", "/metrics", "")
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				return v
			}
		}
		return "absent"
	}
	if got := metric("toolagent_approvals_pending"); got != "2" { // alice's once, carol's
		t.Errorf("toolagent_approvals_pending = %s; want 2", got)
	}
	if code, body := bob.request(t, "POST", "/v1/approvals/"+first.ApprovalID, `{"decision":"deny"}`); code != 200 {
		t.Fatalf("bob denies it: %d %s", code, body)
	}
	for name, want := range map[string]string{
		"toolagent_approvals_pending":                            "1",
		`toolagent_approvals_decided_total{decision="denied"}`:   "1",
		`toolagent_approvals_decided_total{decision="approved"}`: "0",
		"toolagent_approval_wait_seconds_count":                  "1",
	} {
		if got := metric(name); got != want {
			t.Errorf("after bob's denial: %s = %s; want %s", name, got, want)
		}
	}
	if _, next := alice.call(t, "shell-exec", cmd); next.ApprovalID == "" || next.ApprovalID == first.ApprovalID {
		t.Errorf("after the denial: %q; want a new approval", next.ApprovalID)
	}
}
