package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/scan"
)

// ownStack is the API over the real dispatcher and a real approval queue
// (files in a temp directory), serving the require_confirm tool
// "confirm", with tokens.
func ownStack(t *testing.T, toks *Tokens, allowSelf bool) http.Handler {
	t.Helper()
	snap, _, err := scan.Build(nil, scan.FromFS(fstest.MapFS{"confirm/TOOL.hdlp": testTools["confirm/TOOL.hdlp"]}, "rev1"), nil, scan.Options{Check: check})
	if err != nil {
		t.Fatal(err)
	}
	st := new(catalog.Store)
	st.Swap(snap)
	q, err := approval.Open(approval.Options{Dir: filepath.Join(t.TempDir(), "approvals"), AllowSelfApproval: allowSelf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	d := dispatch.New(st, execs(), dispatch.Options{Approvals: q})
	return New(Options{Tokens: toks, Approvals: d}, st, d, nil, nil)
}

// send makes one request to h with token ("" for none) and returns the
// status and the decoded body.
func send(t *testing.T, h http.Handler, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s %s = %d %q: not JSON", method, path, w.Code, w.Body)
	}
	return w.Code, m
}

// TestOperatorConfirmsOwnCallOverHTTP: with the operator token a held
// call the operator asked for is confirmed by approving it (recorded as
// "confirmed by operator (own request)") and runs; a call token never
// approves (its own neither); an approve token does not approve its own
// unless the daemon allows self-approval; the operator approving
// another's call is a plain approval. On an open daemon (no tokens but the
// operator's) an anonymous caller cannot approve its own call, and the
// operator approves it.
func TestOperatorConfirmsOwnCallOverHTTP(t *testing.T) {
	const opTok, aliceTok, bobTok = "operator-0123456789abcdef", "alice-0123456789abcdef", "bob-0123456789abcdef00"
	var toks Tokens
	if err := toks.Parse("test", "alice:call:"+aliceTok+",bob:approve:"+bobTok); err != nil {
		t.Fatal(err)
	}
	if err := toks.AddOperator("operator", opTok); err != nil {
		t.Fatal(err)
	}
	hold := func(t *testing.T, h http.Handler, token string) string {
		t.Helper()
		code, res := send(t, h, "POST", "/v1/call", token, `{"tool":"confirm","params":{}}`)
		id, _ := res["approval_id"].(string)
		if code != http.StatusAccepted || id == "" {
			t.Fatalf("call = %d %v; want 202 with an approval id", code, res)
		}
		return id
	}
	decide := func(t *testing.T, h http.Handler, id, token string) (int, map[string]any) {
		t.Helper()
		return send(t, h, "POST", "/v1/approvals/"+id, token, `{"decision":"approve"}`)
	}
	ran := func(a map[string]any) bool {
		res, _ := a["result"].(map[string]any)
		return a["status"] == "executed" && res["ok"] == true
	}

	h := ownStack(t, &toks, false)
	t.Run("the operator confirms their own call", func(t *testing.T) {
		id := hold(t, h, opTok)
		code, a := decide(t, h, id, opTok)
		if code != http.StatusOK || !ran(a) || a["decider"] != "operator" || a["decision_reason"] != dispatch.ReasonOperatorOwn {
			t.Errorf("approve = %d %v; want 200, executed, decided by operator, reason %q", code, a, dispatch.ReasonOperatorOwn)
		}
	})
	t.Run("a call token cannot approve its own call", func(t *testing.T) {
		id := hold(t, h, aliceTok)
		if code, a := decide(t, h, id, aliceTok); code != http.StatusForbidden {
			t.Errorf("alice approving her own call = %d %v; want 403", code, a)
		}
		if code, a := decide(t, h, id, opTok); code != http.StatusOK || !ran(a) || a["decision_reason"] != nil {
			t.Errorf("the operator approving alice's call = %d %v; want 200, executed, no decision reason", code, a)
		}
	})
	t.Run("an approve token cannot approve its own call", func(t *testing.T) {
		id := hold(t, h, bobTok)
		if code, a := decide(t, h, id, bobTok); code != http.StatusForbidden || !strings.Contains(a["error"].(string), "cannot approve") {
			t.Errorf("bob approving his own call = %d %v; want 403 saying why", code, a)
		}
	})
	t.Run("allow_self_approval keeps its meaning for other roles", func(t *testing.T) {
		h := ownStack(t, &toks, true)
		id := hold(t, h, bobTok)
		if code, a := decide(t, h, id, bobTok); code != http.StatusOK || !ran(a) || a["decision_reason"] != approval.ReasonSelfApproval {
			t.Errorf("bob approving his own call where allowed = %d %v; want 200, reason %q", code, a, approval.ReasonSelfApproval)
		}
		id = hold(t, h, aliceTok)
		if code, a := decide(t, h, id, aliceTok); code != http.StatusForbidden {
			t.Errorf("a call token approving its own where self-approval is allowed = %d %v; want 403: its role never approves", code, a)
		}
	})
	t.Run("open daemon", func(t *testing.T) {
		var open Tokens
		if err := open.AddOperator("operator", opTok); err != nil {
			t.Fatal(err)
		}
		h := ownStack(t, &open, false)
		id := hold(t, h, "")
		if code, a := decide(t, h, id, ""); code != http.StatusForbidden || !strings.Contains(a["error"].(string), "operator token") {
			t.Errorf("anonymous approving its own call = %d %v; want 403 naming the operator token", code, a)
		}
		if code, a := decide(t, h, id, opTok); code != http.StatusOK || !ran(a) || a["decision_reason"] != nil {
			t.Errorf("the operator approving anonymous's call = %d %v; want a plain approval", code, a)
		}
		id = hold(t, h, opTok)
		if code, a := decide(t, h, id, opTok); code != http.StatusOK || !ran(a) || a["decision_reason"] != dispatch.ReasonOperatorOwn {
			t.Errorf("the operator confirming their own call on an open daemon = %d %v; want 200, reason %q", code, a, dispatch.ReasonOperatorOwn)
		}
	})
}
