package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/policy"
)

// These tests run the whole path with real parts: the shipped shell-exec
// definition, the real catalog, the real shell executor (real processes),
// and a real approval store in a temp dir; only the approval clock is
// fake.

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// shippedShellExec parses native-repo/tools/shell-exec/TOOL.hdlp as shipped.
func shippedShellExec(t *testing.T) *hldp.Tool {
	t.Helper()
	file := filepath.Join("..", "..", "native-repo", "tools", "shell-exec", hldp.FileName)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := hldp.Parse(file, data)
	if err != nil {
		t.Fatalf("Parse(%s) = %v", file, err)
	}
	return tl
}

func mustParse(t *testing.T, src string) *hldp.Tool {
	t.Helper()
	name, _, _ := strings.Cut(strings.TrimPrefix(src, "name: "), "\n")
	tl, err := hldp.Parse("tools/"+name+"/TOOL.hdlp", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// guardedTool is a run tool whose env param has an allowlist and a
// confirm pattern.
const guardedTool = `name: guarded
display: guarded
intent: print the environment
method: run
executor: shell
argv: [printf, "%s\n", "{env}"]
params_schema:
  env: { type: string, required: true }
constraints:
  rules:
    env: { allow: ['^(dev|staging|prod)$'], confirm: ['^prod$'] }
author: a
created: 2026-12-01
why: tests
`

// confirmTool needs an approval for every call.
const confirmTool = `name: deploy
display: deploy
intent: deploy
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

type env struct {
	d     *Dispatcher
	cat   *catalog.Store
	ap    *approval.Store
	clock *clock
	dir   string // approval store directory
	audit *bytes.Buffer
	tmp   string
	opts  Options
	execs map[hldp.ExecutorKind]executors.Executor
}

func setup(t *testing.T, mod ...func(*approval.Options)) *env {
	t.Helper()
	e := &env{
		cat:   new(catalog.Store),
		clock: &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)},
		dir:   filepath.Join(t.TempDir(), "approvals"),
		audit: new(bytes.Buffer),
		tmp:   t.TempDir(),
	}
	e.cat.Swap(catalog.New("rev1", []catalog.Entry{
		{Name: "shell-exec", Tool: shippedShellExec(t), Rev: "rev1", Status: catalog.Enabled},
		{Name: "guarded", Tool: mustParse(t, guardedTool), Rev: "rev1", Status: catalog.Enabled},
		{Name: "deploy", Tool: mustParse(t, confirmTool), Rev: "rev1", Status: catalog.Enabled},
	}, catalog.Options{LazyIndex: true}))
	e.ap = e.open(t, mod...)
	e.execs = map[hldp.ExecutorKind]executors.Executor{hldp.Shell: shell.New(shell.Options{Grace: 200 * time.Millisecond})}
	e.opts = Options{Approvals: e.ap, Audit: slog.New(slog.NewJSONHandler(e.audit, nil))}
	e.d = New(e.cat, e.execs, e.opts)
	return e
}

// open opens the approval store under e.dir (again: a restart).
func (e *env) open(t *testing.T, mod ...func(*approval.Options)) *approval.Store {
	t.Helper()
	o := approval.Options{Dir: e.dir, Now: e.clock.Now}
	for _, m := range mod {
		m(&o)
	}
	s, err := approval.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// restart reopens the approval store and builds a new dispatcher over it,
// as a daemon restart does.
func (e *env) restart(t *testing.T) {
	t.Helper()
	e.ap.Close() // the old process is gone: its lock with it
	e.ap = e.open(t)
	e.opts.Approvals = e.ap
	e.d = New(e.cat, e.execs, e.opts)
}

func (e *env) invoke(t *testing.T, tool, caller string, params any) Result {
	t.Helper()
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	return e.d.Invoke(context.Background(), Call{Tool: tool, Caller: caller, Params: b})
}

// ask invokes shell-exec with cmd as alice and wants approval_required.
func (e *env) ask(t *testing.T, cmd string) Result {
	t.Helper()
	r := e.invoke(t, "shell-exec", "alice", map[string]any{"cmd": cmd})
	if r.Status != ApprovalRequired || r.ApprovalID == "" {
		t.Fatalf("Invoke(%q) = %s %q (approval %q); want approval_required with an approval id", cmd, r.Status, r.Error, r.ApprovalID)
	}
	return r
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestShellExecPolicyThroughDispatch is the policy table seen from a
// caller of the shipped shell-exec: reads run (and fail for real), writes
// and their look-alikes wait for an approval, catastrophic commands are
// denied; every refusal names its rule; nothing held or denied runs.
func TestShellExecPolicyThroughDispatch(t *testing.T) {
	e := setup(t)
	marker := filepath.Join(e.tmp, "marker")
	tests := []struct {
		cmd    string
		status ResultStatus
		rule   string // substring of Result.Rule ("" for runs)
	}{
		{"echo hello", Success, ""},
		{"ls /nonexistent", Error, ""},
		{"true", NoData, ""},
		{"echo a b | wc -w", Success, ""},
		{"find " + e.tmp + " -maxdepth 0", Success, ""},
		{"touch " + marker, ApprovalRequired, "command `touch`"},
		{"echo hi > " + marker, ApprovalRequired, "redirection"},
		{"echo ok; rm -rf " + marker, ApprovalRequired, "command `rm`"},
		{"echo $(touch " + marker + ")", ApprovalRequired, "command `touch`"},
		{"curl -s http://127.0.0.1:1/", ApprovalRequired, "network"},
		{"sudo ls", ApprovalRequired, "sudo"},
		{"$CMD " + marker, ApprovalRequired, "dynamic"},
		{"python3 -c 'print(1)'", ApprovalRequired, "python3"},
		{"rm -rf /", Denied, "catastrophic"},
		{"sh -c 'rm -rf /'", Denied, "catastrophic"},
		{":(){ :|:& };:", Denied, "shell:"},
		{"mkfs.ext4 /dev/sda", Denied, "catastrophic"},
		{"echo 'unterminated", Denied, "shell: cannot parse"},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			r := e.invoke(t, "shell-exec", "alice", map[string]any{"cmd": tt.cmd})
			if r.Status != tt.status {
				t.Fatalf("Invoke(%q) = %s (%q, rule %q); want %s", tt.cmd, r.Status, r.Error, r.Rule, tt.status)
			}
			switch tt.status {
			case ApprovalRequired, Denied:
				if !strings.Contains(r.Rule, tt.rule) || !strings.Contains(r.Error, r.Rule) || r.Reason == "" {
					t.Errorf("Invoke(%q): rule %q, error %q; want the rule (containing %q) named in the error, and a reason", tt.cmd, r.Rule, r.Error, tt.rule)
				}
				if r.ExitCode != -1 || r.Output != "" || r.OK {
					t.Errorf("Invoke(%q) ran: exit %d output %q", tt.cmd, r.ExitCode, r.Output)
				}
				if (r.ApprovalID != "") != (tt.status == ApprovalRequired) {
					t.Errorf("Invoke(%q) approval id %q with status %s", tt.cmd, r.ApprovalID, r.Status)
				}
			default:
				if r.Rule != "" || r.ApprovalID != "" {
					t.Errorf("Invoke(%q) that ran carries rule %q approval %q", tt.cmd, r.Rule, r.ApprovalID)
				}
			}
		})
	}
	if exists(marker) {
		t.Errorf("a held or denied command ran: %s exists", marker)
	}
	if n := len(e.ap.List(true)); n != 8 {
		t.Errorf("%d pending approvals, want 8 (one per approval_required row)", n)
	}
}

// TestApproveRunsOnTheServer: approval_required says what would run and
// how to approve; an approver approves; the call runs at once with the
// approved params; the caller fetches the result; the audit log says who
// asked, who decided, when, and what ran.
func TestApproveRunsOnTheServer(t *testing.T) {
	e := setup(t)
	marker := filepath.Join(e.tmp, "marker")
	cmd := "touch " + marker + " && echo done"
	r := e.ask(t, cmd)
	id := r.ApprovalID
	wantParams := map[string]any{"cmd": cmd}
	if r.Revision != "rev1" || r.Params["cmd"] != cmd || r.ParamsHash != approval.HashParams(wantParams) ||
		!r.ExpiresAt.Equal(e.clock.Now().Add(approval.DefaultTTL)) || r.Decision != "confirm" {
		t.Errorf("approval_required result = %+v", r)
	}
	for _, w := range []string{"POST /v1/approvals/" + id, `{"decision":"approve"}`, "toolagent approvals approve " + id, "GET /v1/approvals/" + id} {
		if !strings.Contains(r.Suggestion, w) {
			t.Errorf("suggestion %q does not say %q", r.Suggestion, w)
		}
	}
	if exists(marker) {
		t.Fatal("the held call ran before the approval")
	}
	pending, err := e.d.Approvals(true)
	if err != nil || len(pending) != 1 || pending[0].ID != id || pending[0].Caller != "alice" || !strings.Contains(pending[0].Why, "command `touch`") {
		t.Fatalf("Approvals(pending) = %+v, %v", pending, err)
	}

	// The pending record survives a restart.
	e.restart(t)
	e.clock.Add(2 * time.Minute)
	a, res, err := e.d.Decide(context.Background(), id, Decider{Name: "bob"}, true, nil)
	if err != nil {
		t.Fatalf("Decide(approve) = %v", err)
	}
	if res == nil || res.Status != Success || res.Output != "done\n" || res.ApprovalID != id || res.Revision != "rev1" || !res.OK {
		t.Fatalf("approved run result = %+v", res)
	}
	if !exists(marker) {
		t.Errorf("the approved call did not run")
	}
	if a.Status != approval.Executed || a.Decider != "bob" || !a.DecidedAt.Equal(e.clock.Now()) {
		t.Errorf("approval after the run = %+v", a)
	}

	// The caller fetches the outcome, also after another restart.
	e.restart(t)
	got, err := e.d.Approval(id)
	if err != nil {
		t.Fatal(err)
	}
	var stored Result
	if err := json.Unmarshal(got.Result, &stored); err != nil {
		t.Fatalf("stored result %s: %v", got.Result, err)
	}
	if got.Status != approval.Executed || stored.Status != Success || stored.Output != "done\n" || stored.ApprovalID != id {
		t.Errorf("Approval(%s) = %s with result %s", id, got.Status, got.Result)
	}

	// Audit: the held call, the decision, and what ran; never the command text.
	log := e.audit.String()
	if strings.Contains(log, marker) {
		t.Errorf("audit log holds a raw param value:\n%s", log)
	}
	var sawHeld, sawDecision, sawRun bool
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		switch {
		case m["msg"] == "call" && m["status"] == "approval_required":
			sawHeld = m["caller"] == "alice" && m["approval_id"] == id && strings.Contains(m["rule"].(string), "touch")
		case m["msg"] == "approval":
			sawDecision = m["event"] == "approved" && m["asked_by"] == "alice" && m["decided_by"] == "bob" && m["decided_at"] != nil &&
				m["params_sha256"] == r.ParamsHash && m["approval_id"] == id
		case m["msg"] == "call" && m["status"] == "success":
			// The approved run names itself, as the stored result does.
			sawRun = m["approval_id"] == id && m["asked_by"] == "alice" && m["decided_by"] == "bob" && m["params_sha256"] == r.ParamsHash && m["revision"] == "rev1" &&
				m["run_id"] != "" && m["run_id"] == stored.RunID
		}
	}
	if !sawHeld || !sawDecision || !sawRun {
		t.Errorf("audit lines held=%v decision=%v run=%v:\n%s", sawHeld, sawDecision, sawRun, log)
	}
}

// TestDenyExpireReuse: a denied call never runs; an undecided one
// expires; an approval runs once.
func TestDenyExpireReuse(t *testing.T) {
	e := setup(t)
	counter := filepath.Join(e.tmp, "count")
	cmd := "echo run >> " + counter

	t.Run("deny", func(t *testing.T) {
		id := e.ask(t, cmd).ApprovalID
		a, res, err := e.d.Decide(context.Background(), id, Decider{Name: "bob"}, false, nil)
		if err != nil || res != nil || a.Status != approval.Denied || a.Decider != "bob" {
			t.Fatalf("Decide(deny) = %+v, %+v, %v", a, res, err)
		}
		if _, _, err := e.d.Decide(context.Background(), id, Decider{Name: "carol"}, true, nil); !errors.Is(err, ErrAlreadyDecided) {
			t.Errorf("approve after deny = %v, want ErrAlreadyDecided", err)
		}
		if _, _, err := e.d.RunApproved(context.Background(), id); !errors.Is(err, ErrNotApproved) {
			t.Errorf("RunApproved(denied) = %v, want ErrNotApproved", err)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		id := e.ask(t, cmd).ApprovalID
		e.clock.Add(approval.DefaultTTL + time.Second)
		if _, _, err := e.d.Decide(context.Background(), id, Decider{Name: "bob"}, true, nil); !errors.Is(err, ErrApprovalExpired) {
			t.Errorf("Decide after the TTL = %v, want ErrApprovalExpired", err)
		}
		if a, _ := e.d.Approval(id); a.Status != approval.Expired {
			t.Errorf("status after the TTL = %s, want expired", a.Status)
		}
	})
	if exists(counter) {
		t.Fatal("a denied or expired call ran")
	}
	t.Run("used once", func(t *testing.T) {
		id := e.ask(t, cmd).ApprovalID
		if _, res, err := e.d.Decide(context.Background(), id, Decider{Name: "bob"}, true, nil); err != nil || res.Status != NoData {
			t.Fatalf("Decide(approve) = %+v, %v", res, err)
		}
		if _, res, err := e.d.RunApproved(context.Background(), id); !errors.Is(err, ErrApprovalUsed) || res != nil {
			t.Errorf("second RunApproved = %+v, %v; want ErrApprovalUsed", res, err)
		}
		if _, _, err := e.d.Decide(context.Background(), id, Decider{Name: "carol"}, true, nil); !errors.Is(err, ErrAlreadyDecided) {
			t.Errorf("second Decide = %v, want ErrAlreadyDecided", err)
		}
		if b, _ := os.ReadFile(counter); string(b) != "run\n" {
			t.Errorf("the approved call ran %d times, want once", strings.Count(string(b), "run"))
		}
	})
}

// TestApproveWithEdits: the approver amends the params; the edit is
// validated against the schema and the policy again, and the approval
// binds to the edited params.
func TestApproveWithEdits(t *testing.T) {
	e := setup(t)
	r := e.ask(t, "rm -rf "+filepath.Join(e.tmp, "build"))
	id := r.ApprovalID
	for _, tt := range []struct {
		name, edit string
		want       []string
	}{
		{"policy denies the edit", `{"cmd":"rm -rf /"}`, []string{"refused by policy", "catastrophic"}},
		{"schema refuses the edit", `{"cmd":7,"cmnd":"x"}`, []string{"param cmd: want string", "param cmnd: unknown parameter"}},
		{"not an object", `[1]`, []string{"params must be a JSON object"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, res, err := e.d.Decide(context.Background(), id, Decider{Name: "bob"}, true, json.RawMessage(tt.edit))
			if !errors.Is(err, ErrInvalidEdit) || res != nil {
				t.Fatalf("Decide(edit %s) = %+v, %v; want ErrInvalidEdit", tt.edit, res, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Decide(edit %s) error %q does not say %q", tt.edit, err, w)
				}
			}
		})
	}
	if a, _ := e.d.Approval(id); a.Status != approval.Pending {
		t.Fatalf("after refused edits the request is %s, want still pending", a.Status)
	}
	edited := filepath.Join(e.tmp, "edited")
	a, res, err := e.d.Decide(context.Background(), id, Decider{Name: "bob"}, true, json.RawMessage(`{"cmd":"mkdir `+edited+` && echo made"}`))
	if err != nil || res.Status != Success || res.Output != "made\n" {
		t.Fatalf("Decide(good edit) = %+v, %v", res, err)
	}
	want := map[string]any{"cmd": "mkdir " + edited + " && echo made"}
	if a.EditedParams["cmd"] != want["cmd"] || a.ParamsHash != approval.HashParams(want) || a.ParamsHash == r.ParamsHash {
		t.Errorf("approval binds to %s (edited %v), want the hash of the edited params", a.ParamsHash, a.EditedParams)
	}
	if !exists(edited) || exists(filepath.Join(e.tmp, "build")) {
		t.Errorf("the edited command did not run, or the original did")
	}
}

// TestBindingMismatch: params tampered with in the store, and a
// definition that changed between request and approval, void the
// approval with a message saying what changed; nothing runs.
func TestBindingMismatch(t *testing.T) {
	t.Run("tampered params", func(t *testing.T) {
		e := setup(t)
		marker := filepath.Join(e.tmp, "marker")
		id := e.ask(t, "touch "+marker).ApprovalID
		file := filepath.Join(e.dir, id+".json")
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		evil := filepath.Join(e.tmp, "evil")
		data = bytes.Replace(data, []byte(marker), []byte(evil), 1)
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		e.restart(t)
		a, res, err := e.d.Decide(context.Background(), id, Decider{Name: "bob"}, true, nil)
		if !errors.Is(err, ErrBindingMismatch) || res != nil || !strings.Contains(err.Error(), "the params changed") {
			t.Fatalf("Decide over tampered params = %+v, %v; want ErrBindingMismatch naming the params", res, err)
		}
		if a.Status != approval.Invalid || exists(evil) || exists(marker) {
			t.Errorf("status %s; evil ran %v; marker %v", a.Status, exists(evil), exists(marker))
		}
	})
	t.Run("definition changed", func(t *testing.T) {
		e := setup(t)
		marker := filepath.Join(e.tmp, "marker")
		id := e.ask(t, "touch "+marker).ApprovalID
		// A new commit changes shell-exec: a new snapshot with a new revision.
		next := e.cat.Load().All()
		for i := range next {
			next[i].Rev = "rev2"
		}
		e.cat.Swap(catalog.New("rev2", next, catalog.Options{LazyIndex: true}))
		a, res, err := e.d.Decide(context.Background(), id, Decider{Name: "bob"}, true, nil)
		if !errors.Is(err, ErrBindingMismatch) || res != nil {
			t.Fatalf("Decide after a definition change = %+v, %v; want ErrBindingMismatch", res, err)
		}
		if !strings.HasPrefix(err.Error(), "the definition changed; ask again: ") || !strings.Contains(err.Error(), `definition revision "rev2", approved "rev1"`) {
			t.Errorf("error %q does not name the revision change", err)
		}
		if a.Status != approval.Invalid || !strings.Contains(a.Note, "rev2") || exists(marker) {
			t.Errorf("approval = %s %q; ran: %v", a.Status, a.Note, exists(marker))
		}
		if _, _, err := e.d.RunApproved(context.Background(), id); !errors.Is(err, ErrBindingMismatch) {
			t.Errorf("RunApproved of a void approval = %v, want ErrBindingMismatch", err)
		}
	})
}

// TestCallInFlightKeepsItsDefinition: a call that started before a
// reload changed its tool runs, and reports, the definition it started
// with; the next call gets the new one.
func TestCallInFlightKeepsItsDefinition(t *testing.T) {
	e := setup(t)
	started, release := filepath.Join(e.tmp, "started"), filepath.Join(e.tmp, "release")
	def := func(version string) *hldp.Tool {
		return mustParse(t, `name: slow
display: slow
intent: wait for a file, then print the version
method: run
executor: shell
argv: [sh, -c, 'touch "$0"; while [ ! -e "$1" ]; do sleep 0.01; done; echo `+version+`', "`+started+`", "`+release+`"]
params_schema: {}
author: a
created: 2026-12-01
why: tests
`)
	}
	e.cat.Swap(catalog.New("rev1", []catalog.Entry{{Name: "slow", Tool: def("v1"), Rev: "rev1", Status: catalog.Enabled}}, catalog.Options{LazyIndex: true}))
	done := make(chan Result, 1)
	go func() {
		done <- e.d.Invoke(context.Background(), Call{Tool: "slow", Params: json.RawMessage(`{}`), Caller: "alice"})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !exists(started) {
		if time.Now().After(deadline) {
			t.Fatal("the call did not start within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A reload changes the tool while the call runs.
	e.cat.Swap(catalog.New("rev2", []catalog.Entry{{Name: "slow", Tool: def("v2"), Rev: "rev2", Status: catalog.Enabled}}, catalog.Options{LazyIndex: true}))
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.Status != Success || r.Output != "v1\n" || r.Revision != "rev1" {
		t.Errorf("the call in flight = %s %q at %s; want success v1 at rev1 (%s)", r.Status, r.Output, r.Revision, r.Error)
	}
	if r := e.d.Invoke(context.Background(), Call{Tool: "slow", Params: json.RawMessage(`{}`), Caller: "alice"}); r.Output != "v2\n" || r.Revision != "rev2" {
		t.Errorf("the next call = %s %q at %s; want v2 at rev2 (%s)", r.Status, r.Output, r.Revision, r.Error)
	}
}

// TestSelfApproval: the caller's own identity cannot approve its call
// unless the store is configured to allow it; it may withdraw it.
func TestSelfApproval(t *testing.T) {
	e := setup(t)
	id := e.ask(t, "touch "+filepath.Join(e.tmp, "m")).ApprovalID
	if _, _, err := e.d.Decide(context.Background(), id, Decider{Name: "alice"}, true, nil); !errors.Is(err, ErrSelfApproval) {
		t.Errorf("alice approving her own call = %v, want ErrSelfApproval", err)
	}
	if _, _, err := e.d.Decide(context.Background(), id, Decider{Name: ""}, true, nil); !errors.Is(err, ErrNoIdentity) {
		t.Errorf("anonymous approval = %v, want ErrNoIdentity", err)
	}
	if a, _, err := e.d.Decide(context.Background(), id, Decider{Name: "alice"}, false, nil); err != nil || a.Status != approval.Denied {
		t.Errorf("alice withdrawing her own call = %+v, %v", a, err)
	}

	allowed := setup(t, func(o *approval.Options) { o.AllowSelfApproval = true })
	id = allowed.ask(t, "touch "+filepath.Join(allowed.tmp, "m")).ApprovalID
	if _, res, err := allowed.d.Decide(context.Background(), id, Decider{Name: "alice"}, true, nil); err != nil || res.Status != NoData {
		t.Errorf("self-approval where allowed = %+v, %v", res, err)
	}
}

// TestOperatorConfirmsOwnCall: the operator's own held call (asked at a
// door a person uses) runs once the operator confirms it, as asked; the
// approval and both audit lines (the decision, the run) say
// ReasonOperatorOwn. The same call asked through MCP under the operator's
// name is an agent's: refused, and it stays pending. Another approver
// deciding someone else's call records no reason.
func TestOperatorConfirmsOwnCall(t *testing.T) {
	e := setup(t)
	op := Decider{Name: "operator", Operator: true}
	marker := filepath.Join(e.tmp, "console-file")
	b, _ := json.Marshal(map[string]any{"cmd": "touch " + marker})
	held := e.d.Invoke(context.Background(), Call{Tool: "shell-exec", Caller: "operator", Door: "console", Params: b})
	if held.Status != ApprovalRequired || held.ApprovalID == "" {
		t.Fatalf("the operator's call = %s %q; want approval_required with an id", held.Status, held.Error)
	}
	if _, _, err := e.d.Decide(context.Background(), held.ApprovalID, op, true, json.RawMessage(`{"cmd":"touch `+marker+`-other"}`)); !errors.Is(err, ErrInvalidEdit) {
		t.Errorf("the operator confirming their own call with edits = %v; want ErrInvalidEdit", err)
	}
	if _, _, err := e.d.Decide(context.Background(), held.ApprovalID, Decider{Name: "operator"}, true, nil); !errors.Is(err, ErrSelfApproval) || exists(marker) {
		t.Errorf("a decider named operator that is not the operator = %v (ran: %v); want ErrSelfApproval", err, exists(marker))
	}
	a, res, err := e.d.Decide(context.Background(), held.ApprovalID, op, true, nil)
	if err != nil || res == nil || res.Status != NoData || !exists(marker) {
		t.Fatalf("the operator confirming their own call = %+v, %v (ran: %v); want it run", res, err, exists(marker))
	}
	if a.Status != approval.Executed || a.Decider != "operator" || a.DecisionReason != ReasonOperatorOwn || a.ParamsHash != held.ParamsHash {
		t.Errorf("approval = %s by %q reason %q hash %s; want executed by operator, %q, bound to %s", a.Status, a.Decider, a.DecisionReason, a.ParamsHash, ReasonOperatorOwn, held.ParamsHash)
	}
	var decision, run bool
	for _, line := range strings.Split(strings.TrimSpace(e.audit.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if rec["approval_id"] != held.ApprovalID || rec["decision_reason"] != ReasonOperatorOwn {
			continue
		}
		decision = decision || rec["msg"] == "approval" && rec["event"] == "approved" && rec["decided_by"] == "operator"
		run = run || rec["msg"] != "approval" && rec["decided_by"] == "operator" && rec["asked_by"] == "operator"
	}
	if !decision || !run {
		t.Errorf("audit: decision line with %q: %v, run line with it: %v\n%s", ReasonOperatorOwn, decision, run, e.audit)
	}

	agent := e.d.Invoke(context.Background(), Call{Tool: "shell-exec", Caller: "operator", Door: DoorMCP, Params: b})
	if _, _, err := e.d.Decide(context.Background(), agent.ApprovalID, op, true, nil); !errors.Is(err, ErrSelfApproval) {
		t.Errorf("the operator confirming a call asked through MCP under their name = %v; want ErrSelfApproval", err)
	}
	if a, err := e.d.Approval(agent.ApprovalID); err != nil || a.Status != approval.Pending {
		t.Errorf("after the refusal: %s, %v; want pending", a.Status, err)
	}

	other := e.ask(t, "touch "+filepath.Join(e.tmp, "by-alice"))
	if a, _, err := e.d.Decide(context.Background(), other.ApprovalID, op, true, nil); err != nil || a.DecisionReason != "" || a.Decider != "operator" {
		t.Errorf("the operator approving alice's call = %q by %q, %v; want a plain approval", a.DecisionReason, a.Decider, err)
	}
}

// TestParamRulesAndRequireConfirm: per-argument rules and require_confirm
// through dispatch; each refusal names its rule.
func TestParamRulesAndRequireConfirm(t *testing.T) {
	e := setup(t)
	for _, tt := range []struct {
		tool   string
		params map[string]any
		status ResultStatus
		rule   string
	}{
		{"guarded", map[string]any{"env": "dev"}, Success, ""},
		{"guarded", map[string]any{"env": "prod"}, ApprovalRequired, "param env: confirm pattern `^prod$`"},
		{"guarded", map[string]any{"env": "qa"}, Denied, "param env: allow list (`^(dev|staging|prod)$`)"},
		{"deploy", map[string]any{"app": "web"}, ApprovalRequired, "constraints.require_confirm: true"},
	} {
		r := e.invoke(t, tt.tool, "alice", tt.params)
		if r.Status != tt.status || r.Rule != tt.rule && !strings.Contains(r.Rule, tt.rule) {
			t.Errorf("Invoke(%s, %v) = %s rule %q; want %s rule %q", tt.tool, tt.params, r.Status, r.Rule, tt.status, tt.rule)
		}
		if tt.status == Denied && !strings.Contains(r.Error, tt.rule) {
			t.Errorf("denied error %q does not name the rule", r.Error)
		}
		if tt.status == ApprovalRequired {
			if _, res, err := e.d.Decide(context.Background(), r.ApprovalID, Decider{Name: "bob"}, true, nil); err != nil || res.Status != Success {
				t.Errorf("approved %s = %+v, %v", tt.tool, res, err)
			}
		}
	}
}

// TestNoQueueAndDryRun: without an approval store a held call says so;
// a dry run reports the verdict and never creates an approval.
func TestNoQueueAndDryRun(t *testing.T) {
	e := setup(t)
	noQueue := New(e.cat, e.execs, Options{})
	r := noQueue.Invoke(context.Background(), Call{Tool: "shell-exec", Params: json.RawMessage(`{"cmd":"rm x"}`)})
	if r.Status != ApprovalRequired || r.ApprovalID != "" || !strings.Contains(r.Suggestion, "no approval queue") || !strings.Contains(r.Error, "command `rm`") {
		t.Errorf("without a queue: %+v", r)
	}
	if _, _, err := noQueue.Decide(context.Background(), "x", Decider{Name: "bob"}, true, nil); !errors.Is(err, ErrNoApprovals) {
		t.Errorf("Decide without a queue = %v", err)
	}
	if _, err := noQueue.Approvals(false); !errors.Is(err, ErrNoApprovals) {
		t.Errorf("Approvals without a queue = %v", err)
	}
	for cmd, decision := range map[string]string{"rm -rf /tmp/x": "confirm", "rm -rf /": "deny", "ls": "allow"} {
		r := e.d.Invoke(context.Background(), Call{Tool: "shell-exec", DryRun: true, Params: json.RawMessage(`{"cmd":` + jsonString(cmd) + `}`)})
		if r.Status != DryRun || r.Decision != decision || r.Rule == "" || r.Plan == nil || r.ApprovalID != "" {
			t.Errorf("dry run of %q = %s decision %q rule %q", cmd, r.Status, r.Decision, r.Rule)
		}
	}
	if all, _ := e.d.Approvals(false); len(all) != 0 {
		t.Errorf("dry runs created %d approvals", len(all))
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestExecutorRecheckThroughDispatch: when dispatch's policy lets a call
// through that the executor's policy refuses (here: an operator override
// given to dispatch but not to the executor), the executor's re-check
// refuses it, nothing runs, and the result is denied naming the rule.
func TestExecutorRecheckThroughDispatch(t *testing.T) {
	e := setup(t)
	lax := policy.DefaultShellPolicy()
	lax.Commands["touch"] = policy.Allow
	d := New(e.cat, e.execs, Options{Approvals: e.ap, ShellPolicy: lax})
	marker := filepath.Join(e.tmp, "marker")
	r := d.Invoke(context.Background(), Call{Tool: "shell-exec", Params: json.RawMessage(`{"cmd":` + jsonString("touch "+marker) + `}`)})
	if r.Status != Denied || !strings.Contains(r.Rule, "command `touch`") || !strings.Contains(r.Error, "needs an approval and has none") {
		t.Errorf("Invoke past a lax dispatcher = %s rule %q error %q; want denied by the executor's re-check", r.Status, r.Rule, r.Error)
	}
	if exists(marker) {
		t.Error("the executor ran a call its policy refuses")
	}
}

// TestApprovedRunRespectsLimits: an approved run takes the same
// concurrency slots as any call; when they are full it answers busy, the
// approval stays approved and unused, and it runs once a slot is free.
func TestApprovedRunRespectsLimits(t *testing.T) {
	e := setup(t)
	started, release := make(chan struct{}), make(chan struct{})
	block := fakeExec{func(ctx context.Context, req executors.Request) (executors.Outcome, error) {
		if req.Approval == "" {
			started <- struct{}{}
			<-release
		}
		return executors.Outcome{Completed: true, Output: []byte("ran " + req.Approval)}, nil
	}}
	d := New(e.cat, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: block}, Options{Approvals: e.ap, MaxConcurrent: 1})
	r := d.Invoke(context.Background(), Call{Tool: "deploy", Caller: "alice", Params: json.RawMessage(`{"app":"web"}`)})
	if r.Status != ApprovalRequired {
		t.Fatalf("Invoke(deploy) = %s", r.Status)
	}
	done := make(chan Result)
	go func() {
		done <- d.Invoke(context.Background(), Call{Tool: "guarded", Params: json.RawMessage(`{"env":"dev"}`)})
	}()
	<-started
	a, res, err := d.Decide(context.Background(), r.ApprovalID, Decider{Name: "bob"}, true, nil)
	if err != nil || res == nil || res.Status != Busy || a.Status != approval.Approved {
		t.Fatalf("Decide while the slot is taken = %+v %+v %v; want busy and the approval still approved", a, res, err)
	}
	close(release)
	<-done
	a, res, err = d.RunApproved(context.Background(), r.ApprovalID)
	if err != nil || res.Status != Success || res.Output != "ran "+r.ApprovalID || a.Status != approval.Executed {
		t.Errorf("RunApproved after the slot freed = %+v %+v %v", a, res, err)
	}
}

// sharedSlotsDown is a shared count that cannot be read (the database
// does not answer), as pgstore.Slots answers then.
type sharedSlotsDown struct{}

func (sharedSlotsDown) Acquire(context.Context, string, int) (func(), bool, error) {
	return nil, false, errors.New("shared store unavailable: cannot connect: connection refused")
}

// TestStoreUnavailable: with the approval store's directory gone, a call
// that needs an approval is unavailable (nothing held, the cause given),
// a deciding approver gets ErrStoreUnavailable, and a call that needs no
// approval runs; a max_concurrency tool whose shared count cannot be
// read is unavailable, not busy. Once the directory is back, the request
// held before is there and the same call is held.
func TestStoreUnavailable(t *testing.T) {
	e := setup(t)
	before := e.ask(t, "touch "+filepath.Join(e.tmp, "before"))
	away := e.dir + ".away"
	if err := os.Rename(e.dir, away); err != nil {
		t.Fatal(err)
	}
	r := e.invoke(t, "shell-exec", "alice", map[string]any{"cmd": "touch " + filepath.Join(e.tmp, "during")})
	if r.Status != Unavailable || r.ApprovalID != "" || !strings.HasPrefix(r.Error, "approval store unavailable: ") || strings.Contains(r.Error, e.dir) {
		t.Errorf("a call that needs an approval with the store gone: %s %q (approval %q); want unavailable, the cause first, no path", r.Status, r.Error, r.ApprovalID)
	}
	if _, _, err := e.d.Decide(context.Background(), before.ApprovalID, Decider{Name: "bob"}, true, nil); !errors.Is(err, ErrStoreUnavailable) {
		t.Errorf("approving with the store gone: %v; want ErrStoreUnavailable", err)
	}
	if r := e.invoke(t, "shell-exec", "alice", map[string]any{"cmd": "echo plain"}); r.Status != Success || r.Output != "plain\n" {
		t.Errorf("a plain call with the store gone: %s %q; want it run", r.Status, r.Error)
	}
	if err := os.Rename(away, e.dir); err != nil {
		t.Fatal(err)
	}
	if a, err := e.d.Approval(before.ApprovalID); err != nil || a.Status != approval.Pending {
		t.Errorf("the request held before, after: %+v %v; want it pending", a, err)
	}

	capped := parse(t, "capped", "max_concurrency: 1")
	st := newStore(t, catalog.Entry{Name: "capped", Tool: capped, Rev: "r", Status: catalog.Enabled})
	ran := fakeExec{func(context.Context, executors.Request) (executors.Outcome, error) {
		return executors.Outcome{Completed: true, Output: []byte("ran")}, nil
	}}
	d := New(st, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: ran}, Options{SharedSlots: sharedSlotsDown{}})
	if r := d.Invoke(context.Background(), Call{Tool: "capped", Params: json.RawMessage(`{"cmd":"x"}`)}); r.Status != Unavailable || !strings.HasPrefix(r.Error, "shared store unavailable: cannot connect") || !strings.Contains(r.Error, "max_concurrency") {
		t.Errorf("a max_concurrency call with the shared count unreadable: %s %q; want unavailable with the cause", r.Status, r.Error)
	}
}

// TestRetryCollectsTheApprovedResult: with CollectHeld (the MCP door),
// asking again while pending gives the same approval; once approved and
// run, the retry gets the stored result, across a restart, and the call
// ran once; the next identical call is new. An approval whose call did
// not run yet (approved in the store alone) runs at the retry, once.
func TestRetryCollectsTheApprovedResult(t *testing.T) {
	e := setup(t)
	counter := filepath.Join(e.tmp, "count")
	cmd := "echo run >> " + counter + " && echo done"
	retry := func(cmd string) Result {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"cmd": cmd})
		return e.d.Invoke(context.Background(), Call{Tool: "shell-exec", Caller: "alice", Door: DoorMCP, Params: b, CollectHeld: true})
	}
	runs := func() int {
		b, _ := os.ReadFile(counter)
		return strings.Count(string(b), "run\n")
	}
	first := retry(cmd)
	if first.Status != ApprovalRequired || first.ApprovalID == "" {
		t.Fatalf("first call = %s %q; want approval_required", first.Status, first.Error)
	}
	if !strings.Contains(first.Suggestion, "call this tool again with the same arguments") || strings.Contains(first.Suggestion, "GET /v1/approvals") {
		t.Errorf("suggestion %q: want the retry named, not GET /v1/approvals", first.Suggestion)
	}
	if again := retry(cmd); again.Status != ApprovalRequired || again.ApprovalID != first.ApprovalID {
		t.Errorf("retry while pending = %s %s; want approval_required %s", again.Status, again.ApprovalID, first.ApprovalID)
	}
	e.restart(t)
	if _, res, err := e.d.Decide(context.Background(), first.ApprovalID, Decider{Name: "bob"}, true, nil); err != nil || res.Status != Success {
		t.Fatalf("Decide = %+v, %v", res, err)
	}
	e.restart(t)
	got := retry(cmd)
	if got.Status != Success || got.Output != "done\n" || !got.Collected || got.ApprovalID != first.ApprovalID || !got.OK {
		t.Errorf("retry after the run = %+v; want its collected result", got)
	}
	if n := runs(); n != 1 {
		t.Errorf("the approved call ran %d times; want 1", n)
	}
	if next := retry(cmd); next.Status != ApprovalRequired || next.ApprovalID == first.ApprovalID {
		t.Errorf("the call after its result was collected = %s %s; want a new approval", next.Status, next.ApprovalID)
	}
	if !strings.Contains(e.audit.String(), `"collected":true`) {
		t.Errorf("no audit line says a result was collected:\n%s", e.audit.String())
	}

	// Approved in the store alone (its run answered busy, say): the
	// retry runs it under the approval, once.
	cmd2 := "echo run >> " + counter + " && echo later"
	held := retry(cmd2)
	if _, err := e.ap.Decide(held.ApprovalID, approval.Decider{Name: "bob"}, true, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := retry(cmd2); got.Status != Success || got.Output != "later\n" || !got.Collected || got.ApprovalID != held.ApprovalID {
		t.Errorf("retry of an approved call not run yet = %+v; want it run now", got)
	}
	if n := runs(); n != 2 {
		t.Errorf("runs = %d; want 2", n)
	}
	if next := retry(cmd2); next.Status != ApprovalRequired || next.ApprovalID == held.ApprovalID {
		t.Errorf("after that = %s %s; want a new approval", next.Status, next.ApprovalID)
	}
}
