package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

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

func open(t *testing.T, dir string, c *clock, mod ...func(*Options)) *Store {
	t.Helper()
	o := Options{Dir: dir, Now: c.Now}
	for _, m := range mod {
		m(&o)
	}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newStore(t *testing.T, mod ...func(*Options)) (*Store, *clock, string) {
	dir := filepath.Join(t.TempDir(), "approvals")
	c := &clock{t: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	return open(t, dir, c, mod...), c, dir
}

var params = map[string]any{"cmd": "rm -rf /tmp/build", "cwd": "/srv"}

func create(t *testing.T, s *Store) Request {
	t.Helper()
	r, err := s.Create("shell-exec", "rev1", params, "alice", "shell: command `rm` deletes files")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestApproveEndToEnd(t *testing.T) {
	s, c, _ := newStore(t)
	r := create(t, s)
	if !validID(r.ID) || r.Status != Pending || r.ParamsHash != HashParams(params) || !r.ExpiresAt.Equal(c.Now().Add(DefaultTTL)) {
		t.Fatalf("Create = %+v", r)
	}
	if got := s.List(true); len(got) != 1 || got[0].ID != r.ID {
		t.Fatalf("List(pending) = %v", got)
	}
	c.Add(time.Minute)
	d, err := s.Decide(r.ID, Decider{Name: "bob"}, true, nil, nil)
	if err != nil || d.Status != Approved || d.Decider != "bob" || !d.DecidedAt.Equal(c.Now()) {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
	if got := s.List(true); len(got) != 0 {
		t.Errorf("List(pending) after approval = %v", got)
	}
	cl, err := s.Claim(r.ID, "shell-exec", "rev1", HashParams(d.RunParams()))
	if err != nil || cl.Status != Running {
		t.Fatalf("Claim = %+v, %v", cl, err)
	}
	res := json.RawMessage(`{"ok":true,"status":"success","output":"done\n"}`)
	if _, err := s.Complete(r.ID, res); err != nil {
		t.Fatal(err)
	}
	g, err := s.Get(r.ID)
	if err != nil || g.Status != Executed || string(g.Result) != string(res) || g.Caller != "alice" || g.Decider != "bob" {
		t.Errorf("Get after Complete = %+v, %v", g, err)
	}
	if _, err := s.Complete(r.ID, res); !errors.Is(err, ErrNotRunning) {
		t.Errorf("second Complete = %v; want ErrNotRunning", err)
	}
}

func TestDeny(t *testing.T) {
	s, _, _ := newStore(t)
	r := create(t, s)
	d, err := s.Decide(r.ID, Decider{Name: "bob"}, false, nil, nil)
	if err != nil || d.Status != Denied {
		t.Fatalf("Decide(deny) = %+v, %v", d, err)
	}
	if _, err := s.Claim(r.ID, "shell-exec", "rev1", r.ParamsHash); !errors.Is(err, ErrNotApproved) {
		t.Errorf("Claim of a denied request = %v; want ErrNotApproved", err)
	}
	if _, err := s.Decide(r.ID, Decider{Name: "carol"}, true, nil, nil); !errors.Is(err, ErrAlreadyDecided) || !strings.Contains(err.Error(), "denied (by bob)") {
		t.Errorf("Decide after deny = %v; want ErrAlreadyDecided naming the decision", err)
	}
	if _, err := s.Decide(r.ID, Decider{Name: " "}, true, nil, nil); !errors.Is(err, ErrNoIdentity) {
		t.Errorf("Decide without identity = %v; want ErrNoIdentity", err)
	}
}

func TestExpiry(t *testing.T) {
	s, c, _ := newStore(t, func(o *Options) { o.TTL = 10 * time.Minute })
	r := create(t, s)
	c.Add(10*time.Minute - time.Second)
	if g, _ := s.Get(r.ID); g.Status != Pending {
		t.Fatalf("status before the TTL = %s", g.Status)
	}
	c.Add(time.Second)
	if g, _ := s.Get(r.ID); g.Status != Expired || g.Note == "" {
		t.Errorf("status at the TTL = %s (%q); want expired with a note", g.Status, g.Note)
	}
	if _, err := s.Decide(r.ID, Decider{Name: "bob"}, true, nil, nil); !errors.Is(err, ErrExpired) {
		t.Errorf("Decide after expiry = %v; want ErrExpired", err)
	}
	if got := s.List(true); len(got) != 0 {
		t.Errorf("List(pending) holds an expired request: %v", got)
	}

	// An approval expires too when it is not claimed in time.
	r2 := create(t, s)
	c.Add(9 * time.Minute)
	if _, err := s.Decide(r2.ID, Decider{Name: "bob"}, true, nil, nil); err != nil {
		t.Fatal(err)
	}
	c.Add(9 * time.Minute) // 18 min after creation, 9 after approval: still valid
	if g, _ := s.Get(r2.ID); g.Status != Approved {
		t.Fatalf("approval 9 min after the decision = %s; the TTL restarts at approval", g.Status)
	}
	c.Add(time.Minute)
	if _, err := s.Claim(r2.ID, "shell-exec", "rev1", r2.ParamsHash); !errors.Is(err, ErrExpired) {
		t.Errorf("Claim of an expired approval = %v; want ErrExpired", err)
	}
}

func TestReuse(t *testing.T) {
	s, _, _ := newStore(t)
	r := create(t, s)
	s.Decide(r.ID, Decider{Name: "bob"}, true, nil, nil)
	if _, err := s.Claim(r.ID, "shell-exec", "rev1", r.ParamsHash); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(r.ID, "shell-exec", "rev1", r.ParamsHash); !errors.Is(err, ErrAlreadyUsed) {
		t.Errorf("second Claim = %v; want ErrAlreadyUsed", err)
	}
	s.Complete(r.ID, json.RawMessage(`{}`))
	if _, err := s.Claim(r.ID, "shell-exec", "rev1", r.ParamsHash); !errors.Is(err, ErrAlreadyUsed) {
		t.Errorf("Claim after Complete = %v; want ErrAlreadyUsed", err)
	}
}

func TestTamperedParams(t *testing.T) {
	s, _, _ := newStore(t)
	r := create(t, s)
	s.Decide(r.ID, Decider{Name: "bob"}, true, nil, nil)
	tampered := map[string]any{"cmd": "rm -rf /", "cwd": "/srv"}
	_, err := s.Claim(r.ID, "shell-exec", "rev1", HashParams(tampered))
	if !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), "params changed") {
		t.Fatalf("Claim with other params = %v; want ErrBindingMismatch naming the params", err)
	}
	// The approval is void now, even for the approved params.
	if _, err := s.Claim(r.ID, "shell-exec", "rev1", r.ParamsHash); !errors.Is(err, ErrBindingMismatch) {
		t.Errorf("Claim after a mismatch = %v; want the approval void", err)
	}
	if g, _ := s.Get(r.ID); g.Status != Invalid || !strings.Contains(g.Note, "params") {
		t.Errorf("status after a mismatch = %s (%q)", g.Status, g.Note)
	}
	// Another tool with the same params is a mismatch too.
	r2 := create(t, s)
	s.Decide(r2.ID, Decider{Name: "bob"}, true, nil, nil)
	if _, err := s.Claim(r2.ID, "file-write", "rev1", r2.ParamsHash); !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), `tool "file-write"`) {
		t.Errorf("Claim for another tool = %v", err)
	}
}

func TestChangedDefinition(t *testing.T) {
	s, _, _ := newStore(t)
	r := create(t, s)
	s.Decide(r.ID, Decider{Name: "bob"}, true, nil, nil)
	_, err := s.Claim(r.ID, "shell-exec", "rev2", r.ParamsHash)
	if !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), `definition revision "rev2", approved "rev1"`) {
		t.Errorf("Claim at a new revision = %v; want ErrBindingMismatch naming both revisions", err)
	}
}

func TestSelfApproval(t *testing.T) {
	s, _, _ := newStore(t)
	r := create(t, s)
	if _, err := s.Decide(r.ID, Decider{Name: "alice"}, true, nil, nil); !errors.Is(err, ErrSelfApproval) {
		t.Errorf("self-approval = %v; want ErrSelfApproval", err)
	}
	if g, _ := s.Get(r.ID); g.Status != Pending {
		t.Errorf("a refused self-approval changed the request: %s", g.Status)
	}
	if d, err := s.Decide(r.ID, Decider{Name: "alice"}, false, nil, nil); err != nil || d.Status != Denied {
		t.Errorf("a caller withdrawing its own call = %+v, %v", d, err)
	}

	s2, _, _ := newStore(t, func(o *Options) { o.AllowSelfApproval = true })
	r2 := create(t, s2)
	if d, err := s2.Decide(r2.ID, Decider{Name: "alice"}, true, nil, nil); err != nil || d.Status != Approved {
		t.Errorf("self-approval when allowed = %+v, %v", d, err)
	}
}

func TestApproveWithEdits(t *testing.T) {
	s, _, _ := newStore(t)
	r := create(t, s)
	validate := func(p map[string]any) (map[string]any, error) {
		cmd, _ := p["cmd"].(string)
		if strings.Contains(cmd, "-rf /") && !strings.Contains(cmd, "/tmp") {
			return nil, fmt.Errorf("policy: shell: command `rm -rf /` (default policy: catastrophic)")
		}
		out := map[string]any{"cwd": "/srv"} // the schema's default
		for k, v := range p {
			out[k] = v
		}
		return out, nil
	}
	if _, err := s.Decide(r.ID, Decider{Name: "bob"}, true, map[string]any{"cmd": "rm -rf /"}, validate); !errors.Is(err, ErrInvalidEdit) || !strings.Contains(err.Error(), "catastrophic") {
		t.Fatalf("an edit the policy denies = %v; want ErrInvalidEdit with the reason", err)
	}
	if g, _ := s.Get(r.ID); g.Status != Pending {
		t.Fatalf("a refused edit decided the request: %s", g.Status)
	}
	if _, err := s.Decide(r.ID, Decider{Name: "bob"}, true, map[string]any{"cmd": "x"}, nil); !errors.Is(err, ErrInvalidEdit) {
		t.Errorf("an edit without a validator = %v", err)
	}
	edit := map[string]any{"cmd": "rm -rf /tmp/build/cache"}
	d, err := s.Decide(r.ID, Decider{Name: "bob"}, true, edit, validate)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"cmd": "rm -rf /tmp/build/cache", "cwd": "/srv"}
	if d.ParamsHash != HashParams(want) || d.EditedParams["cwd"] != "/srv" || d.Params["cmd"] != params["cmd"] {
		t.Fatalf("Decide with edits = %+v; want the normalized edit bound and the original kept", d)
	}
	if HashParams(d.RunParams()) != d.ParamsHash {
		t.Error("RunParams does not hash to the bound hash")
	}
	if _, err := s.Claim(r.ID, "shell-exec", "rev1", HashParams(params)); !errors.Is(err, ErrBindingMismatch) {
		t.Errorf("Claim with the original params after an edit = %v; want ErrBindingMismatch", err)
	}
	r2 := create(t, s)
	s.Decide(r2.ID, Decider{Name: "bob"}, true, edit, validate)
	if _, err := s.Claim(r2.ID, "shell-exec", "rev1", HashParams(want)); err != nil {
		t.Errorf("Claim with the edited params = %v", err)
	}
}

func TestPersistence(t *testing.T) {
	s, c, dir := newStore(t)
	pending := create(t, s)
	approved := create(t, s)
	s.Decide(approved.ID, Decider{Name: "bob"}, true, map[string]any{"cmd": "ls", "n": json.Number("2.0")}, func(p map[string]any) (map[string]any, error) { return p, nil })
	done := create(t, s)
	s.Decide(done.ID, Decider{Name: "bob"}, true, nil, nil)
	s.Claim(done.ID, "shell-exec", "rev1", done.ParamsHash)
	s.Complete(done.ID, json.RawMessage(`{"status":"success"}`))
	os.WriteFile(filepath.Join(dir, "0123456789abcdef0123456789abcdef.json"), []byte("{not json"), 0o600)
	os.WriteFile(filepath.Join(dir, ".tmp-crashed"), []byte("x"), 0o600)

	before := map[string]Request{}
	for _, id := range []string{pending.ID, approved.ID, done.ID} {
		before[id], _ = s.Get(id)
	}
	s.Close()
	s2 := open(t, dir, c) // a restart
	for _, id := range []string{pending.ID, approved.ID, done.ID} {
		a := before[id]
		b, err := s2.Get(id)
		if err != nil || a.Status != b.Status || a.ParamsHash != b.ParamsHash || string(a.Result) != string(b.Result) || !a.ExpiresAt.Equal(b.ExpiresAt) {
			t.Errorf("after reopen %s = %+v, %v; want %+v", id, b, err, a)
		}
	}
	if got := s2.List(false); len(got) != 3 {
		t.Errorf("List after reopen = %d requests; want 3 (the corrupt file skipped)", len(got))
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-crashed")); !os.IsNotExist(err) {
		t.Error("a leftover temp file was not removed")
	}
	b, _ := s2.Get(approved.ID)
	if _, err := s2.Claim(approved.ID, "shell-exec", "rev1", HashParams(b.RunParams())); err != nil {
		t.Errorf("Claim after reopen = %v (the hash must survive the JSON round trip)", err)
	}
	if _, err := s2.Decide(pending.ID, Decider{Name: "bob"}, true, nil, nil); err != nil {
		t.Errorf("Decide after reopen = %v", err)
	}
	// Expiry and retention work on reloaded state.
	c.Add(DefaultRetention + time.Hour)
	s2.Close()
	s3 := open(t, dir, c)
	var left []Status
	for _, r := range s3.List(false) {
		left = append(left, r.Status)
	}
	// The one claimed in s2 was running when s2 closed: interrupted now
	// (issue: it stayed running forever), and kept within the retention.
	if len(left) != 2 || !slices.Contains(left, Interrupted) || !slices.Contains(left, Expired) {
		t.Errorf("after the retention: %v; want the interrupted and the newly expired request kept, the executed one removed", left)
	}
}

func TestConcurrentClaim(t *testing.T) {
	s, _, _ := newStore(t)
	r := create(t, s)
	s.Decide(r.ID, Decider{Name: "bob"}, true, nil, nil)
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := s.Claim(r.ID, "shell-exec", "rev1", r.ParamsHash)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	wins := 0
	for err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, ErrAlreadyUsed):
			t.Errorf("losing Claim = %v; want ErrAlreadyUsed", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d concurrent Claims won; want exactly 1", wins)
	}
}

func TestGetUnknown(t *testing.T) {
	s, _, _ := newStore(t)
	for _, id := range []string{"", "nope", "../../etc/passwd", strings.Repeat("a", 32)} {
		if _, err := s.Get(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) = %v; want ErrNotFound", id, err)
		}
		if _, err := s.Claim(id, "t", "r", "h"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Claim(%q) = %v; want ErrNotFound", id, err)
		}
	}
	if _, err := Open(Options{}); err == nil {
		t.Error("Open without a directory succeeded")
	}
}

func TestHashParams(t *testing.T) {
	a := HashParams(map[string]any{"b": 1, "a": []any{"x", true, nil}, "c": map[string]any{"z": 1.5, "y": "é<>"}})
	b := HashParams(map[string]any{"c": map[string]any{"y": "é<>", "z": json.Number("1.5")}, "a": []any{"x", true, nil}, "b": json.Number("1.0")})
	if a != b || len(a) != 64 {
		t.Errorf("HashParams is not canonical: %s vs %s", a, b)
	}
	if HashParams(nil) != HashParams(map[string]any{}) {
		t.Error("nil and empty params hash differently")
	}
	if HashParams(map[string]any{"n": 1}) == HashParams(map[string]any{"n": "1"}) {
		t.Error("a number and a string hash alike")
	}
	if h := HashParams(map[string]any{"f": func() {}}); !strings.HasPrefix(h, "unhashable") {
		t.Errorf("HashParams(func) = %q", h)
	}
}

// TestOpenLocksTheDirectory: a second Store on one directory would trust
// its own memory and could run an approval twice, so Open refuses it until
// the first is closed.
func TestOpenLocksTheDirectory(t *testing.T) {
	s, c, dir := newStore(t)
	r := create(t, s)
	if _, err := Open(Options{Dir: dir, Now: c.Now}); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open(%s) while open = %v; want ErrLocked", dir, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	s2 := open(t, dir, c)
	if got, err := s2.Get(r.ID); err != nil || got.Status != Pending {
		t.Errorf("Get(%s) after reopen = %v, %v; want pending", r.ID, got.Status, err)
	}
}

// TestRunningBecomesInterrupted: a call claimed (running) when its process
// died is interrupted at the next Open, with when and why, on disk too;
// it cannot be decided or claimed again.
func TestRunningBecomesInterrupted(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	s, err := Open(Options{Dir: dir, Now: c.Now, AllowSelfApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]any{"cmd": "sleep 1000"}
	r, err := s.Create("shell-exec", "rev1", params, "alice", "why")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(r.ID, Decider{Name: "bob"}, true, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(r.ID, "shell-exec", "rev1", HashParams(params)); err != nil {
		t.Fatal(err)
	}
	s.Close()     // the process dies here: no Complete
	for range 2 { // the second Open reads what the first one wrote
		s2, err := Open(Options{Dir: dir, Now: c.Now, AllowSelfApproval: true})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s2.Get(r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != Interrupted || got.InterruptedAt.IsZero() || !strings.Contains(got.Note, "does not run again") {
			t.Errorf("after a restart: %+v; want interrupted with when and why", got)
		}
		if _, err := s2.Decide(r.ID, Decider{Name: "bob"}, true, nil, nil); !errors.Is(err, ErrAlreadyDecided) {
			t.Errorf("Decide(interrupted) = %v; want ErrAlreadyDecided", err)
		}
		if _, err := s2.Claim(r.ID, "shell-exec", "rev1", HashParams(params)); !errors.Is(err, ErrAlreadyUsed) {
			t.Errorf("Claim(interrupted) = %v; want ErrAlreadyUsed", err)
		}
		s2.Close()
	}
}

// TestMayApproveFollowsDecide: MayApprove answers as Decide would, and
// decides nothing: the caller may not approve its own call (unless the
// store allows it), another approver and the operator confirming their
// own console call may; a decided request may not be approved again.
func TestMayApproveFollowsDecide(t *testing.T) {
	s, _, _ := newStore(t)
	r := create(t, s)
	if err := s.MayApprove(r, Decider{Name: r.Caller}); !errors.Is(err, ErrSelfApproval) {
		t.Errorf("its caller = %v; want ErrSelfApproval", err)
	}
	if err := s.MayApprove(r, Decider{Name: "bob"}); err != nil {
		t.Errorf("another approver = %v; want nil", err)
	}
	if err := s.MayApprove(r, Decider{Name: ""}); !errors.Is(err, ErrNoIdentity) {
		t.Errorf("no name = %v; want ErrNoIdentity", err)
	}
	if err := s.MayApprove(r, Decider{Name: r.Caller, Operator: true}); err != nil {
		t.Errorf("the operator's own call = %v; want nil", err)
	}
	if got, _ := s.Get(r.ID); got.Status != Pending {
		t.Fatalf("MayApprove changed the request: %s", got.Status)
	}
	if _, err := s.Decide(r.ID, Decider{Name: "bob"}, false, nil, nil); err != nil {
		t.Fatal(err)
	}
	r, _ = s.Get(r.ID)
	if err := s.MayApprove(r, Decider{Name: "carol"}); !errors.Is(err, ErrAlreadyDecided) {
		t.Errorf("a denied request = %v; want ErrAlreadyDecided", err)
	}
	self, _, _ := newStore(t, func(o *Options) { o.AllowSelfApproval = true })
	r = create(t, self)
	if err := self.MayApprove(r, Decider{Name: r.Caller}); err != nil {
		t.Errorf("its caller with AllowSelfApproval = %v; want nil", err)
	}
}
