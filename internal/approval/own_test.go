package approval

import (
	"errors"
	"testing"
)

// ownQueue is what the own-request tests need of a store.
type ownQueue interface {
	CreateWith(in Request) (Request, error)
	Get(id string) (Request, error)
	Decide(id string, by Decider, approve bool, editedParams map[string]any, validate func(map[string]any) (map[string]any, error)) (Request, error)
	Claim(id, tool, rev, paramsHash string) (Request, error)
}

// testOwnRequest: who may approve a call it asked for itself. The
// operator confirms their own call (not one asked through MCP), as asked,
// recorded as ReasonOperatorOwn, and the approval binds to the asked
// params; an edit is refused and the request stays pending. Any other
// decider of the same name (a token, an agent) is refused unless the
// store allows self-approval (then ReasonSelfApproval); deciding someone
// else's call records no reason.
func testOwnRequest(t *testing.T, strict, allowSelf ownQueue) {
	asked := map[string]any{"cmd": "touch console-file"}
	edit := map[string]any{"cmd": "touch other-file"}
	keep := func(p map[string]any) (map[string]any, error) { return p, nil }
	op := Decider{Name: "operator", Operator: true}
	cases := []struct {
		name   string
		q      ownQueue
		caller string
		door   string
		by     Decider
		edited map[string]any
		want   error // nil: approved
		reason string
	}{
		{"the operator confirms their own console call", strict, "operator", "console", op, nil, nil, ReasonOperatorOwn},
		{"the operator confirms their own CLI call", strict, "operator", "cli", op, nil, nil, ReasonOperatorOwn},
		{"the operator confirms their own API call", strict, "operator", "api", op, nil, nil, ReasonOperatorOwn},
		{"the operator edits their own call", strict, "operator", "console", op, edit, ErrInvalidEdit, ""},
		{"an agent's call under the operator's name", strict, "operator", AgentDoor, op, nil, ErrSelfApproval, ""},
		{"a token named like the caller, not the operator", strict, "operator", "console", Decider{Name: "operator"}, nil, ErrSelfApproval, ""},
		{"a call token approving its own", strict, "ci-bot", "api", Decider{Name: "ci-bot"}, nil, ErrSelfApproval, ""},
		{"an agent approving its own", strict, "agent", AgentDoor, Decider{Name: "agent"}, nil, ErrSelfApproval, ""},
		{"the operator approves an agent's call", strict, "agent", AgentDoor, op, nil, nil, ""},
		{"the operator approves anonymous's call", strict, "anonymous", "api", op, nil, nil, ""},
		{"self-approval allowed: another role", allowSelf, "ci-bot", "api", Decider{Name: "ci-bot"}, nil, nil, ReasonSelfApproval},
		{"self-approval allowed: the operator's own", allowSelf, "operator", "cli", op, nil, nil, ReasonOperatorOwn},
		{"self-approval allowed: the operator's own MCP call", allowSelf, "operator", AgentDoor, op, nil, nil, ReasonSelfApproval},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.q.CreateWith(Request{Tool: "shell-exec", Revision: "rev1", Params: asked, Caller: tc.caller, Door: tc.door, Why: "shell: touch writes files"})
			if err != nil {
				t.Fatal(err)
			}
			validate := keep
			if tc.edited == nil {
				validate = nil
			}
			d, err := tc.q.Decide(r.ID, tc.by, true, tc.edited, validate)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("Decide by %+v of %s's %s call = %+v, %v; want %v", tc.by, tc.caller, tc.door, d, err, tc.want)
				}
				if g, _ := tc.q.Get(r.ID); g.Status != Pending || g.DecisionReason != "" {
					t.Errorf("after the refusal the request is %s (reason %q); want pending", g.Status, g.DecisionReason)
				}
				return
			}
			if err != nil || d.Status != Approved || d.Decider != tc.by.Name || d.DecisionReason != tc.reason {
				t.Fatalf("Decide by %+v of %s's %s call = status %s, decider %q, reason %q, %v; want approved by %s, reason %q", tc.by, tc.caller, tc.door, d.Status, d.Decider, d.DecisionReason, err, tc.by.Name, tc.reason)
			}
			if g, err := tc.q.Get(r.ID); err != nil || g.DecisionReason != tc.reason {
				t.Errorf("the stored reason = %q, %v; want %q", g.DecisionReason, err, tc.reason)
			}
			if _, err := tc.q.Claim(r.ID, "shell-exec", "rev1", HashParams(edit)); !errors.Is(err, ErrBindingMismatch) {
				t.Errorf("Claim with other params = %v; want ErrBindingMismatch: the approval binds to the asked params", err)
			}
		})
	}
	t.Run("the operator withdraws their own call", func(t *testing.T) {
		r, err := strict.CreateWith(Request{Tool: "shell-exec", Revision: "rev1", Params: asked, Caller: "operator", Door: "console"})
		if err != nil {
			t.Fatal(err)
		}
		if d, err := strict.Decide(r.ID, op, false, nil, nil); err != nil || d.Status != Denied || d.DecisionReason != "" {
			t.Errorf("deny = %s %q, %v; want denied, no reason", d.Status, d.DecisionReason, err)
		}
	})
}

func TestOwnRequest(t *testing.T) {
	strict, _, _ := newStore(t)
	allowSelf, _, _ := newStore(t, func(o *Options) { o.AllowSelfApproval = true })
	testOwnRequest(t, strict, allowSelf)
}

func TestPGOwnRequest(t *testing.T) {
	strict := replicas(t, 1, 0, nil)[0]
	db := strict.db
	allowSelf, err := OpenPG(db, PGOptions{Options: Options{AllowSelfApproval: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { allowSelf.Close() })
	testOwnRequest(t, strict, allowSelf)
}
