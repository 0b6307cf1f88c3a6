package console

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/audit"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/reload"
)

// tokenConsole is the console of a daemon with API tokens: alice (call),
// bob (approve), reader (read) and the operator, over the real
// dispatcher, approval queue, shell executor and audit file; synced
// counts the "Sync now" asks.
type tokenConsole struct {
	srv    *httptest.Server
	d      *dispatch.Dispatcher
	q      *approval.Store
	synced chan struct{}
}

func newTokenConsole(t *testing.T) *tokenConsole {
	t.Helper()
	tl, err := hldp.Parse("tools/deploy/TOOL.hdlp", []byte(deployTool))
	if err != nil {
		t.Fatal(err)
	}
	st := new(catalog.Store)
	st.Swap(catalog.New("rev1", []catalog.Entry{{Name: "deploy", Tool: tl, Rev: "rev1", Status: catalog.Enabled, File: "deploy/TOOL.hdlp"}}, catalog.Options{LazyIndex: true}))
	q, err := approval.Open(approval.Options{Dir: filepath.Join(t.TempDir(), "approvals")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	af, err := audit.Open(t.TempDir(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { af.Close() })
	d := dispatch.New(st, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: shell.New(shell.Options{})},
		dispatch.Options{Approvals: q, Audit: slog.New(af.Handler())})
	users := map[string]User{
		"alice-secret":  {Name: "alice", CanCall: true},
		"bob-secret":    {Name: "bob", CanCall: true, CanApprove: true},
		"reader-secret": {Name: "reader"},
		"op-secret":     {Name: "operator", CanCall: true, CanApprove: true, Operator: true},
	}
	tc := &tokenConsole{d: d, q: q, synced: make(chan struct{}, 10)}
	var mu sync.Mutex
	var lastOK time.Time
	c := New(st, d, Options{
		Authenticate: func(s string) (User, bool) { u, ok := users[s]; return u, ok },
		History:      af,
		Source:       func(string) ([]byte, error) { return []byte(deployTool), nil },
		Sync: func() {
			mu.Lock()
			lastOK = time.Now()
			mu.Unlock()
			tc.synced <- struct{}{}
		},
		Status: func() reload.Status {
			mu.Lock()
			defer mu.Unlock()
			return reload.Status{Source: "file:///srv/tools.git (branch main)", Rev: "rev1", LastOK: lastOK}
		},
	})
	tc.srv = httptest.NewServer(c.Handler())
	t.Cleanup(tc.srv.Close)
	return tc
}

func (tc *tokenConsole) signIn(t *testing.T, secret string) *visitor {
	t.Helper()
	v := newVisitor(t, tc.srv)
	resp, err := v.c.PostForm(tc.srv.URL+"/ui/login", url.Values{"token": {secret}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code, _ := v.do("GET", "/ui/", nil); code != 200 {
		t.Fatalf("sign in with %s: catalog = %d", secret, code)
	}
	return v
}

// TestConsoleApproveButtonsFollowTheRules: without JavaScript, the
// approvals inbox shows Approve and Deny to an approver (bob) only; the
// caller (alice, role call) sees her call's params, grant, definition
// commit and expiry but no button, and her forged approve is refused; a
// POST without the CSRF token is refused; bob's plain form post approves,
// and the decided call is one line that links to its result. Two
// requests for the same call are listed once with a count.
func TestConsoleApproveButtonsFollowTheRules(t *testing.T) {
	tc := newTokenConsole(t)
	held := tc.d.Invoke(context.Background(), dispatch.Call{Tool: "deploy", Params: json.RawMessage(`{"app":"web && rm -rf /"}`), Caller: "alice", Door: dispatch.DoorAPI})
	if held.Status != dispatch.ApprovalRequired {
		t.Fatalf("deploy = %+v; want held", held)
	}
	id := held.ApprovalID

	alice := tc.signIn(t, "alice-secret")
	_, page := alice.do("GET", "/ui/approvals", nil)
	card := article(page, id)
	for _, want := range []string{"web &amp;&amp; rm -rf /", "rev1", "Expires", "Asked by", "alice", `<pre class="command">printf $&#39;deployed %s\n&#39; &#39;web &amp;&amp; rm -rf /&#39;</pre>`} {
		if !strings.Contains(card, want) {
			t.Errorf("alice's view of her call lacks %q:\n%s", want, card)
		}
	}
	if strings.Contains(card, `class="approve"`) || strings.Contains(card, `class="deny"`) || strings.Contains(card, `name="decision"`) {
		t.Errorf("alice (role call) is offered a decision:\n%s", card)
	}
	if code, _ := alice.do("POST", "/ui/approvals/"+id, url.Values{"decision": {"approve"}}); code != http.StatusForbidden {
		t.Errorf("alice's forged approve = %d; want 403", code)
	}
	reader := tc.signIn(t, "reader-secret")
	if _, page := reader.do("GET", "/ui/approvals", nil); strings.Contains(page, id) || strings.Contains(page, `class="approve"`) {
		t.Errorf("the read role sees alice's call or an Approve button:\n%s", page)
	}

	bob := tc.signIn(t, "bob-secret")
	_, page = bob.do("GET", "/ui/approvals", nil)
	if card := article(page, id); !strings.Contains(card, `class="approve"`) || !strings.Contains(card, `class="deny"`) {
		t.Errorf("bob (approver) is not offered Approve and Deny:\n%s", card)
	}
	// Without the CSRF token: refused, still pending.
	resp, err := bob.c.PostForm(tc.srv.URL+"/ui/approvals/"+id, url.Values{"decision": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a, _ := tc.d.Approval(id); resp.StatusCode != http.StatusForbidden || a.Status != approval.Pending {
		t.Errorf("approve without the CSRF token = %d, %s; want 403, pending", resp.StatusCode, a.Status)
	}
	code, page := bob.do("POST", "/ui/approvals/"+id, url.Values{"decision": {"approve"}})
	line := article(page, id)
	if code != 200 || !strings.Contains(line, "executed") || strings.Contains(line, "<pre") || !strings.Contains(line, `href="/ui/approvals/`+id+`"`) {
		t.Errorf("after bob's approve = %d; the decided line:\n%s\nwant executed, on one line, linking to its result", code, line)
	}
	if _, page := bob.do("GET", "/ui/approvals/"+id, nil); !strings.Contains(page, "deployed web &amp;&amp; rm -rf /") {
		t.Errorf("the decided call's page lacks its output:\n%s", page)
	}

	// The same call asked twice (two requests): listed once, ×2.
	p := map[string]any{"app": "db"}
	for range 2 {
		if _, err := tc.q.Create("deploy", "rev1", p, "carol", "held"); err != nil {
			t.Fatal(err)
		}
	}
	_, page = bob.do("GET", "/ui/approvals", nil)
	if n := strings.Count(page, `<code class="param-value">db</code>`); n != 1 || !strings.Contains(page, "×2") {
		t.Errorf("two requests for the same call are listed %d times (×2 shown: %v); want once, ×2", n, strings.Contains(page, "×2"))
	}
}

// TestConsoleSyncNowIsTheOperators: the status page shows "Sync now" to
// the operator alone; their form post (CSRF token) asks the reload loop
// and comes back to the status page; bob's forged post, and a post
// without the token, are refused and ask nothing.
func TestConsoleSyncNowIsTheOperators(t *testing.T) {
	tc := newTokenConsole(t)
	bob := tc.signIn(t, "bob-secret")
	if _, page := bob.do("GET", "/ui/status", nil); strings.Contains(page, "sync-now") || !strings.Contains(page, "file:///srv/tools.git") {
		t.Errorf("bob's status page offers Sync now, or lacks the source:\n%s", page)
	}
	if code, _ := bob.do("POST", "/ui/sync", url.Values{}); code != http.StatusForbidden {
		t.Errorf("bob's forged Sync now = %d; want 403", code)
	}
	op := tc.signIn(t, "op-secret")
	if _, page := op.do("GET", "/ui/status", nil); !strings.Contains(page, `id="sync-now"`) {
		t.Errorf("the operator's status page lacks Sync now:\n%s", page)
	}
	resp, err := op.c.PostForm(tc.srv.URL+"/ui/sync", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("Sync now without the CSRF token = %d; want 403", resp.StatusCode)
	}
	if len(tc.synced) != 0 {
		t.Fatalf("a refused Sync now asked for a sync")
	}
	code, page := op.do("POST", "/ui/sync", url.Values{})
	if code != 200 || !strings.Contains(page, `id="synced"`) || len(tc.synced) != 1 {
		t.Errorf("the operator's Sync now = %d, %d asks:\n%s", code, len(tc.synced), page)
	}
}

// TestConsoleAnonymousSeesSignIn: on an open daemon an anonymous visitor
// sees "Sign in", not "Sign out", and is offered no Approve for its own
// call (the approval rules refuse it) but may withdraw it.
func TestConsoleAnonymousSeesSignIn(t *testing.T) {
	srv, _, d := ownConsole(t)
	anon := newVisitor(t, srv)
	_, page := anon.do("GET", "/ui/", nil)
	if !strings.Contains(page, `id="signin"`) || strings.Contains(page, `id="signout"`) {
		t.Errorf("anonymous header: want Sign in, no Sign out:\n%s", page)
	}
	held := d.Invoke(context.Background(), dispatch.Call{Tool: "deploy", Params: json.RawMessage(`{"app":"x"}`), Caller: dispatch.Anonymous, Door: DoorConsole})
	_, page = anon.do("GET", "/ui/approvals", nil)
	card := article(page, held.ApprovalID)
	if strings.Contains(card, `class="approve"`) || strings.Contains(card, `class="confirm"`) || !strings.Contains(card, `class="deny"`) {
		t.Errorf("anonymous's own call:\n%s\nwant no Approve or Confirm, a Withdraw", card)
	}
}

// TestConsoleHistoryFilters: the history page reads local times, filters
// by a time range and pages fifty rows at a time, all as GET params.
func TestConsoleHistoryFilters(t *testing.T) {
	tc := newTokenConsole(t)
	for i := range historyPageSize + 5 {
		tc.d.Invoke(context.Background(), dispatch.Call{Tool: "deploy", Params: json.RawMessage(`{"app":"a` + string(rune('a'+i%26)) + `"}`), Caller: "alice", Door: dispatch.DoorAPI})
	}
	bob := tc.signIn(t, "bob-secret")
	_, page := bob.do("GET", "/ui/history?tool=deploy", nil)
	if n := strings.Count(page, `<tr class="row">`); n != historyPageSize || !strings.Contains(page, `id="next"`) {
		t.Errorf("page 1 has %d rows (next link: %v); want %d and a next link", n, strings.Contains(page, `id="next"`), historyPageSize)
	}
	if strings.Contains(page, "T"+time.Now().UTC().Format("15")) && strings.Contains(page, "Z</td>") {
		t.Errorf("history shows RFC 3339 times")
	}
	if !strings.Contains(page, time.Now().Format("2006-01-02")) {
		t.Errorf("history lacks today's local date")
	}
	_, page = bob.do("GET", "/ui/history?tool=deploy&page=2", nil)
	if n := strings.Count(page, `<tr class="row">`); n < 5 || strings.Contains(page, `id="next"`) || !strings.Contains(page, `id="prev"`) {
		t.Errorf("page 2 has %d rows; want the rest, a prev link, no next", n)
	}
	future := time.Now().Add(time.Hour).Format(timeInput)
	if _, page = bob.do("GET", "/ui/history?from="+url.QueryEscape(future), nil); strings.Contains(page, `<tr class="row">`) {
		t.Errorf("history from an hour ahead lists rows")
	}
	if code, page := bob.do("GET", "/ui/history?from=yesterday", nil); code != 200 || !strings.Contains(page, "from: want a time") {
		t.Errorf("a bad from = %d; want the page saying what was expected", code)
	}
}

// deployStore is a store serving deployTool, enabled, at rev1.
func deployStore(t *testing.T) *catalog.Store {
	t.Helper()
	tl, err := hldp.Parse("tools/deploy/TOOL.hdlp", []byte(deployTool))
	if err != nil {
		t.Fatal(err)
	}
	st := new(catalog.Store)
	st.Swap(catalog.New("rev1", []catalog.Entry{{Name: "deploy", Tool: tl, Rev: "rev1", Status: catalog.Enabled}}, catalog.Options{LazyIndex: true}))
	return st
}

// TestConsoleDiffIsBounded: a diff longer than maxDiffShown is cut at a
// line's end and the page says so; a diff of a tool off the visitor's
// surface, or without a "to", is refused.
func TestConsoleDiffIsBounded(t *testing.T) {
	st := deployStore(t)
	big := strings.Repeat("+"+strings.Repeat("x", 99)+"\n", 2*maxDiffShown/100)
	c := New(st, nil, Options{Open: true, ToolDiff: func(_ context.Context, name, from, to string) (string, error) { return big, nil }})
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	v := newVisitor(t, srv)
	code, page := v.do("GET", "/ui/tools/deploy/diff?to=abc", nil)
	if code != 200 || !strings.Contains(page, `id="diff-cut"`) || len(page) > 2*maxDiffShown {
		t.Errorf("a %d-byte diff = %d, %d bytes, cut note %v; want cut", len(big), code, len(page), strings.Contains(page, `id="diff-cut"`))
	}
	if code, _ := v.do("GET", "/ui/tools/nosuch/diff?to=abc", nil); code != http.StatusNotFound {
		t.Errorf("the diff of no such tool = %d; want 404", code)
	}
	if code, _ := v.do("GET", "/ui/tools/deploy/diff", nil); code != http.StatusBadRequest {
		t.Errorf("a diff without to = %d; want 400", code)
	}
}
