package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/notify"
)

// TestHoldOnceThroughServe (#36 items 3 and 5): the same caller asking
// the same held call twice gets one approval back, through the HTTP API
// as through MCP or the console (one store method); once it is decided, a
// new one. /metrics counts what is pending and what was decided.
func TestHoldOnceThroughServe(t *testing.T) {
	t.Parallel()
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

// TestApprovalNotifyThroughServe (#36 item 5): approval_notify's
// receivers, real servers on loopback, hear of a held call and of its
// decision: a JSON one signed with its secret, a Slack one in Slack's
// format; with the console's link, and no secret in either.
func TestApprovalNotifyThroughServe(t *testing.T) {
	t.Parallel()
	type got struct {
		header http.Header
		body   []byte
	}
	receiver := func() (string, chan got) {
		ch := make(chan got, 8)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			ch <- got{r.Header, b}
		}))
		t.Cleanup(srv.Close)
		return srv.URL, ch
	}
	next := func(ch chan got) got {
		t.Helper()
		select {
		case g := <-ch:
			return g
		case <-time.After(time.Minute):
			t.Fatal("no notification within a minute")
		}
		return got{}
	}
	hookURL, hooks := receiver()
	slackURL, slack := receiver()
	const secret = "notify-secret-0123456789"
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	d := startDaemon(t, map[string]string{
		"TOOLAGENT_TOKENS":          "alice:call:" + aliceCallToken + ",bob:approve:" + bobToken,
		"TOOLAGENT_APPROVAL_NOTIFY": fmt.Sprintf(`{ops: {url: %q, format: json, secret_env: NOTIFY_SECRET}, chat: {url_env: SLACK_URL, format: slack}}`, hookURL),
		"NOTIFY_SECRET":             secret,
		"SLACK_URL":                 slackURL,
	}, "--tools", tools)
	_, res := d.as(aliceCallToken).call(t, "shell-exec", map[string]any{"cmd": "touch /tmp/notified"})
	if res.ApprovalID == "" {
		t.Fatalf("no hold: %+v", res)
	}
	g := next(hooks)
	if want := notify.Sign([]byte(secret), g.body); g.header.Get(notify.SignatureHeader) != want {
		t.Errorf("signature %q; want %q", g.header.Get(notify.SignatureHeader), want)
	}
	var e notify.Event
	if err := json.Unmarshal(g.body, &e); err != nil {
		t.Fatal(err)
	}
	if e.Kind != "pending" || e.ApprovalID != res.ApprovalID || e.Caller != "alice" || e.Params["cmd"] != "touch /tmp/notified" || !strings.HasSuffix(e.URL, "/ui/approvals#"+res.ApprovalID) || e.Sandbox == "" {
		t.Errorf("the held call's event: %s", g.body)
	}
	s := next(slack)
	if !strings.Contains(string(s.body), "*alice*") || !strings.Contains(string(s.body), res.ApprovalID) {
		t.Errorf("the Slack message: %s", s.body)
	}
	for _, b := range [][]byte{g.body, s.body} {
		if strings.Contains(string(b), secret) || strings.Contains(string(b), aliceCallToken) {
			t.Errorf("a secret or a token in a notification: %s", b)
		}
	}
	if code, body := d.as(bobToken).request(t, "POST", "/v1/approvals/"+res.ApprovalID, `{"decision":"deny"}`); code != 200 {
		t.Fatalf("deny: %d %s", code, body)
	}
	g = next(hooks)
	if err := json.Unmarshal(g.body, &e); err != nil || e.Kind != "denied" || e.Decider != "bob" {
		t.Errorf("the decision's event: %s (%v)", g.body, err)
	}
	// /v1/status reports each receiver's deliveries.
	pollUntil(t, "two deliveries to ops in /v1/status", func() bool {
		_, b := d.as(bobToken).request(t, "GET", "/v1/status", "")
		var st struct{ Notifications []notify.TargetStatus }
		return json.Unmarshal(b, &st) == nil && len(st.Notifications) == 2 && st.Notifications[1].Name == "ops" && st.Notifications[1].Delivered == 2
	})
}
