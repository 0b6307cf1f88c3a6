package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
)

// fakeApprover answers every Decide with err, and holds one approval
// asked by alice. The real queue is exercised end to end in
// cmd/toolagent; this checks the HTTP edge: roles, who may see what, and
// the error mapping.
type fakeApprover struct {
	err     error
	decider dispatch.Decider
}

var aliceApproval = dispatch.Approval{ID: "a1", Tool: "t", Caller: "alice", Status: "pending"}

func (f *fakeApprover) ApprovalsOn(bool, catalog.Surface) ([]dispatch.Approval, error) {
	return []dispatch.Approval{aliceApproval}, nil
}

func (f *fakeApprover) ApprovalOn(id string, _ catalog.Surface) (dispatch.Approval, error) {
	if id != aliceApproval.ID {
		return dispatch.Approval{}, fmt.Errorf("%w: %q", dispatch.ErrApprovalNotFound, id)
	}
	return aliceApproval, nil
}

func (f *fakeApprover) ApprovalWait(_ context.Context, id string, sf catalog.Surface, _ time.Duration) (dispatch.Approval, error) {
	return f.ApprovalOn(id, sf)
}

func (f *fakeApprover) DecideOn(_ context.Context, id string, by dispatch.Decider, _ catalog.Surface, approve bool, _ json.RawMessage) (dispatch.Approval, *dispatch.Result, error) {
	f.decider = by
	if f.err != nil {
		return dispatch.Approval{}, nil, f.err
	}
	a := aliceApproval
	a.Status, a.Decider = "denied", by.Name
	if approve {
		a.Status = "executed"
		return a, &dispatch.Result{Status: dispatch.Success, Tool: "t", Output: "ran"}, nil
	}
	return a, nil, nil
}

func TestApprovalRoutes(t *testing.T) {
	const aliceTok, malloryTok, bobTok, readerTok = "alice-0123456789abcdef", "mallory-0123456789abcd", "bob-0123456789abcdef00", "reader-0123456789abcde"
	var toks Tokens
	if err := toks.Parse("test", "alice:call:"+aliceTok+",mallory:call:"+malloryTok+",bob:approve:"+bobTok+",reader:read:"+readerTok); err != nil {
		t.Fatal(err)
	}
	st := new(catalog.Store)
	st.Swap(catalog.New("r", nil, catalog.Options{}))
	inv := invokerFunc(func(context.Context, dispatch.Call) dispatch.Result { return dispatch.Result{} })
	tests := []struct {
		name, method, path, token, body string
		err                             error
		want                            int
		wantBody                        string
	}{
		{"reader cannot fetch", "GET", "/v1/approvals/a1", readerTok, "", nil, 403, "forbidden"},
		{"asker fetches", "GET", "/v1/approvals/a1", aliceTok, "", nil, 200, `"caller":"alice"`},
		{"another caller does not see it", "GET", "/v1/approvals/a1", malloryTok, "", nil, 404, "no approval"},
		{"approver fetches any", "GET", "/v1/approvals/a1", bobTok, "", nil, 200, `"id":"a1"`},
		{"call token cannot list", "GET", "/v1/approvals", aliceTok, "", nil, 403, "forbidden"},
		{"approver lists", "GET", "/v1/approvals", bobTok, "", nil, 200, `"approvals":[{"id":"a1"`},
		{"bad all", "GET", "/v1/approvals?all=maybe", bobTok, "", nil, 400, "query all"},
		{"call token cannot decide", "POST", "/v1/approvals/a1", aliceTok, `{"decision":"approve"}`, nil, 403, "forbidden"},
		{"approve runs", "POST", "/v1/approvals/a1", bobTok, `{"decision":"approve"}`, nil, 200, `"output":"ran"`},
		{"deny", "POST", "/v1/approvals/a1", bobTok, `{"decision":"deny"}`, nil, 200, `"status":"denied"`},
		{"bad decision", "POST", "/v1/approvals/a1", bobTok, `{"decision":"maybe"}`, nil, 400, "want approve or deny"},
		{"deny with edits", "POST", "/v1/approvals/a1", bobTok, `{"decision":"deny","params":{"x":1}}`, nil, 400, "a deny takes none"},
		{"decider in body", "POST", "/v1/approvals/a1", bobTok, `{"decision":"approve","decider":"alice"}`, nil, 400, "unknown field"},
		{"not found", "POST", "/v1/approvals/zz", bobTok, `{"decision":"approve"}`, dispatch.ErrApprovalNotFound, 404, "no approval"},
		{"self-approval", "POST", "/v1/approvals/a1", bobTok, `{"decision":"approve"}`, dispatch.ErrSelfApproval, 403, "own call"},
		{"already decided", "POST", "/v1/approvals/a1", bobTok, `{"decision":"approve"}`, dispatch.ErrAlreadyDecided, 409, "already decided"},
		{"used", "POST", "/v1/approvals/a1", bobTok, `{"decision":"approve"}`, dispatch.ErrApprovalUsed, 409, "already used"},
		{"definition changed", "POST", "/v1/approvals/a1", bobTok, `{"decision":"approve"}`,
			fmt.Errorf("%w: a1: definition revision \"r2\", approved \"r1\"", dispatch.ErrBindingMismatch), 409, `definition revision \"r2\", approved \"r1\"`},
		{"expired", "POST", "/v1/approvals/a1", bobTok, `{"decision":"approve"}`, dispatch.ErrApprovalExpired, 410, "expired"},
		{"invalid edit", "POST", "/v1/approvals/a1", bobTok, `{"decision":"approve","params":{"cmd":5}}`, fmt.Errorf("%w: want a string", dispatch.ErrInvalidEdit), 422, "want a string"},
		{"no queue", "POST", "/v1/approvals/a1", bobTok, `{"decision":"approve"}`, dispatch.ErrNoApprovals, 501, "no approval queue"},
		{"internal", "POST", "/v1/approvals/a1", bobTok, `{"decision":"approve"}`, fmt.Errorf("disk on fire"), 500, "internal error"},
		{"store unavailable", "POST", "/v1/approvals/a1", bobTok, `{"decision":"approve"}`,
			fmt.Errorf("%w: cannot connect: connection refused", dispatch.ErrStoreUnavailable), 503, `{"error":"approval store unavailable: cannot connect: connection refused"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ap := &fakeApprover{err: tc.err}
			h := New(Options{Tokens: &toks, Approvals: ap}, st, inv, nil, nil)
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+tc.token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.wantBody) {
				t.Errorf("%s %s = %d %s; want %d containing %s", tc.method, tc.path, w.Code, w.Body, tc.want, tc.wantBody)
			}
			if w.Code == 503 && w.Header().Get("Retry-After") == "" {
				t.Errorf("%s %s = 503 without Retry-After", tc.method, tc.path)
			}
			if tc.method == "POST" && w.Code == 200 && ap.decider != (dispatch.Decider{Name: "bob"}) {
				t.Errorf("decider = %+v; want the token's name bob, not the operator", ap.decider)
			}
		})
	}
	t.Run("no approver", func(t *testing.T) {
		h := New(Options{}, st, inv, nil, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/approvals", nil))
		if w.Code != http.StatusNotImplemented {
			t.Errorf("GET /v1/approvals without an approver = %d %s; want 501", w.Code, w.Body)
		}
	})
}

// TestResultHTTPStatus covers the statuses the approval flow added to the
// one mapping of a call's result to HTTP.
func TestResultHTTPStatus(t *testing.T) {
	tests := []struct {
		res          dispatch.Result
		want         int
		wantLocation string
	}{
		{dispatch.Result{Status: dispatch.ApprovalRequired, ApprovalID: "a1"}, 202, "/v1/approvals/a1"},
		{dispatch.Result{Status: dispatch.ApprovalRequired}, 409, ""},
		{dispatch.Result{Status: dispatch.Denied, Rule: "param cmd: deny pattern"}, 403, ""},
		{dispatch.Result{Status: dispatch.Disabled}, 409, ""},
		{dispatch.Result{Status: dispatch.Error}, 200, ""},
		{dispatch.Result{Status: dispatch.Unavailable, Error: "approval store unavailable: cannot connect: connection refused; ..."}, 503, ""},
	}
	st := new(catalog.Store)
	st.Swap(catalog.New("r", nil, catalog.Options{}))
	for _, tc := range tests {
		h := New(Options{}, st, invokerFunc(func(context.Context, dispatch.Call) dispatch.Result { return tc.res }), nil, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/call", strings.NewReader(`{"tool":"t"}`)))
		if w.Code != tc.want || w.Header().Get("Location") != tc.wantLocation {
			t.Errorf("POST /v1/call answering %s (approval %q) = %d Location %q; want %d %q", tc.res.Status, tc.res.ApprovalID, w.Code, w.Header().Get("Location"), tc.want, tc.wantLocation)
		}
	}
}

// TestReadyzNamesTheStore: while the store does not answer, /readyz is
// 503 naming it and /v1/status says so and what still works; once it
// answers, /readyz is 200.
func TestReadyzNamesTheStore(t *testing.T) {
	st := new(catalog.Store)
	st.Swap(catalog.New("r", nil, catalog.Options{}))
	down := true
	store := func(context.Context) StoreStatus {
		if down {
			return StoreStatus{Kind: "postgres", Error: "approval store unavailable: cannot connect: connection refused", Effect: "calls that need no approval keep running"}
		}
		return StoreStatus{Kind: "postgres", Available: true}
	}
	h := New(Options{Store: store}, st, invokerFunc(func(context.Context, dispatch.Call) dispatch.Result { return dispatch.Result{} }), nil, nil)
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w.Code, w.Body.String()
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, `"store":"approval store unavailable: cannot connect: connection refused"`) {
		t.Errorf("GET /readyz with the store down = %d %s; want 503 naming the store", code, body)
	}
	if code, body := get("/v1/status"); code != 200 || !strings.Contains(body, `"store":{"kind":"postgres","available":false,"error":"approval store unavailable: `) || !strings.Contains(body, "keep running") {
		t.Errorf("GET /v1/status with the store down = %d %s; want the store unavailable and what still works", code, body)
	}
	down = false
	if code, body := get("/readyz"); code != 200 {
		t.Errorf("GET /readyz with the store back = %d %s; want 200", code, body)
	}
}
