package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/hldp"
)

const deployTool = `name: deploy
display: deploy
intent: deploy an app
method: run
executor: shell
argv: [printf, "deployed %s\n", "{app}"]
params_schema:
  app: { type: string, required: true }
constraints: { require_confirm: true }
author: a
created: 2026-12-01
why: tests
`

// ownConsole serves the console of an open daemon over the real
// dispatcher, a real approval queue and the shell executor, with the tool
// deploy, which always needs a confirmation.
func ownConsole(t *testing.T) (*httptest.Server, *Console, *dispatch.Dispatcher) {
	t.Helper()
	tl, err := hldp.Parse("tools/deploy/TOOL.hdlp", []byte(deployTool))
	if err != nil {
		t.Fatal(err)
	}
	st := new(catalog.Store)
	st.Swap(catalog.New("rev1", []catalog.Entry{{Name: "deploy", Tool: tl, Rev: "rev1", Status: catalog.Enabled}}, catalog.Options{LazyIndex: true}))
	q, err := approval.Open(approval.Options{Dir: filepath.Join(t.TempDir(), "approvals")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	d := dispatch.New(st, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: shell.New(shell.Options{})}, dispatch.Options{Approvals: q})
	c := New(st, d, Options{Open: true, Operator: User{Name: "operator", CanCall: true, CanApprove: true, Operator: true}})
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return srv, c, d
}

// visitor is one browser: its own cookies.
type visitor struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newVisitor(t *testing.T, srv *httptest.Server) *visitor {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &visitor{t: t, base: srv.URL, c: &http.Client{Jar: jar}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (v *visitor) do(method, path string, form url.Values) (int, string) {
	v.t.Helper()
	var resp *http.Response
	var err error
	if method == "GET" {
		resp, err = v.c.Get(v.base + path)
	} else {
		form.Set("csrf", v.csrf)
		resp, err = v.c.PostForm(v.base+path, form)
	}
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		v.t.Fatal(err)
	}
	if m := csrfField.FindStringSubmatch(string(b)); m != nil {
		v.csrf = m[1]
	}
	return resp.StatusCode, string(b)
}

// article is the approval's <article> on the page.
func article(page, id string) string {
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		return ""
	}
	rest := page[i:]
	if j := strings.Index(rest, "</article>"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// TestOperatorConfirmsOwnCall: the operator (signed in with the one-time
// link) runs deploy, it is held, and the approvals page offers "Confirm
// and run" for it (the params as asked, no edit field) while another
// caller's call shows Approve; confirming runs it and the decided entry
// says "confirmed by operator (own request)". An anonymous visitor of the
// open daemon is not the operator: approving its own call is refused with
// what to do.
func TestOperatorConfirmsOwnCall(t *testing.T) {
	srv, c, d := ownConsole(t)
	op := newVisitor(t, srv)
	if code, page := op.do("GET", c.OneTimeLink(), nil); code != 200 || !strings.Contains(page, "operator") {
		t.Fatalf("one-time link = %d; want signed in as operator:\n%s", code, page)
	}
	op.do("GET", "/ui/tools/deploy", nil)
	code, page := op.do("POST", "/ui/tools/deploy", url.Values{"action": {"run"}, "p.app": {"web"}})
	m := regexp.MustCompile(`id="approval-link" href="/ui/approvals#([0-9a-f]{32})"`).FindStringSubmatch(page)
	if code != 200 || !strings.Contains(page, "approval_required") || m == nil {
		t.Fatalf("run deploy = %d; want held, with a link to its approval:\n%s", code, page)
	}
	own := m[1]
	other := d.Invoke(context.Background(), dispatch.Call{Tool: "deploy", Params: json.RawMessage(`{"app":"db"}`), Caller: "alice", Door: dispatch.DoorAPI})

	_, page = op.do("GET", "/ui/approvals", nil)
	mine, theirs := article(page, own), article(page, other.ApprovalID)
	if !strings.Contains(mine, `class="confirm"`) || !strings.Contains(mine, "Confirm and run") || strings.Contains(mine, `class="approve"`) || strings.Contains(mine, `name="params"`) {
		t.Errorf("the operator's own pending call shows:\n%s\nwant Confirm and run, no Approve, no edit", mine)
	}
	if !strings.Contains(theirs, `class="approve"`) || strings.Contains(theirs, "Confirm and run") {
		t.Errorf("alice's pending call shows:\n%s\nwant Approve", theirs)
	}

	code, page = op.do("POST", "/ui/approvals/"+own, url.Values{"decision": {"approve"}})
	decided := article(page, own)
	if code != 200 || !strings.Contains(decided, "executed") || !strings.Contains(decided, dispatch.ReasonOperatorOwn) || strings.Contains(decided, "deployed web") {
		t.Errorf("confirm = %d; the entry shows:\n%s\nwant one line: executed, %q, no output", code, decided, dispatch.ReasonOperatorOwn)
	}
	if code, page = op.do("GET", "/ui/approvals/"+own, nil); code != 200 || !strings.Contains(page, "deployed web") || !strings.Contains(page, dispatch.ReasonOperatorOwn) {
		t.Errorf("the decided approval's page = %d; want its output and reason:\n%s", code, page)
	}
	if a, err := d.Approval(own); err != nil || a.DecisionReason != dispatch.ReasonOperatorOwn || a.Decider != "operator" {
		t.Errorf("approval = %+v, %v", a, err)
	}

	anon := newVisitor(t, srv)
	anon.do("GET", "/ui/tools/deploy", nil)
	_, page = anon.do("POST", "/ui/tools/deploy", url.Values{"action": {"run"}, "p.app": {"cache"}})
	m = regexp.MustCompile(`/ui/approvals#([0-9a-f]{32})`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("anonymous run = %s; want held", page)
	}
	_, page = anon.do("GET", "/ui/approvals", nil)
	if strings.Contains(article(page, m[1]), "Confirm and run") {
		t.Errorf("an anonymous visitor is offered Confirm and run")
	}
	code, page = anon.do("POST", "/ui/approvals/"+m[1], url.Values{"decision": {"approve"}})
	if code != http.StatusForbidden || !strings.Contains(page, "only the operator confirms their own calls") {
		t.Errorf("anonymous approving its own call = %d; want 403 saying who may:\n%s", code, page)
	}
	if a, _ := d.Approval(m[1]); a.Status != approval.Pending {
		t.Errorf("after the refusal: %s; want pending", a.Status)
	}
}
