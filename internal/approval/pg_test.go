package approval

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
)

// replicas opens n PGStores on one new database, as n replicas would.
func replicas(t *testing.T, n int, lease time.Duration, now func() time.Time) []*PGStore {
	t.Helper()
	url := pgtest.URL(t)
	out := make([]*PGStore, n)
	for i := range out {
		db, err := pgstore.Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		s, err := OpenPG(db, PGOptions{Options: Options{Now: now}, LeaseTTL: lease})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

var _ Queue = (*PGStore)(nil)
var _ Queue = (*Store)(nil)

// TestPGAcrossReplicas: held on 1, listed on 2, approved on 3, claimed
// and completed on 3, the result fetched from 1; numbers keep their
// spelling (the params hash holds).
func TestPGAcrossReplicas(t *testing.T) {
	rs := replicas(t, 3, 0, nil)
	params := map[string]any{"cmd": "rm -rf build", "n": json.Number("1.50")}
	r, err := rs[0].CreateWith(Request{Tool: "shell-exec", Revision: "rev1", Params: params, Caller: "alice", Why: "shell: rm deletes files"})
	if err != nil {
		t.Fatal(err)
	}
	list, err := rs[1].ListRequests(true)
	if err != nil || len(list) != 1 || list[0].ID != r.ID || list[0].ParamsHash != r.ParamsHash || list[0].Params["n"] != json.Number("1.50") {
		t.Fatalf("replica 2 lists %+v, %v; want the request held on replica 1, params as asked", list, err)
	}
	if _, err := rs[2].Decide(r.ID, Decider{Name: "alice"}, true, nil, nil); !errors.Is(err, ErrSelfApproval) {
		t.Errorf("the caller approving its own call on replica 3: %v; want ErrSelfApproval", err)
	}
	if _, err := rs[2].Decide(r.ID, Decider{Name: "bob"}, true, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := rs[2].Claim(r.ID, "shell-exec", "rev1", r.ParamsHash); err != nil {
		t.Fatal(err)
	}
	if _, err := rs[1].Claim(r.ID, "shell-exec", "rev1", r.ParamsHash); !errors.Is(err, ErrAlreadyUsed) {
		t.Errorf("a second claim on replica 2: %v; want ErrAlreadyUsed", err)
	}
	if _, err := rs[1].Complete(r.ID, json.RawMessage(`{"ok":true}`)); !errors.Is(err, ErrNotRunning) {
		t.Errorf("completing on a replica that did not claim it: %v; want ErrNotRunning", err)
	}
	if _, err := rs[2].Complete(r.ID, json.RawMessage(`{"ok":true,"output":"done"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := rs[0].Get(r.ID)
	if err != nil || got.Status != Executed || string(got.Result) != `{"ok":true,"output":"done"}` || got.Decider != "bob" {
		t.Errorf("replica 1 Get = %+v, %v; want executed with the result, decided by bob", got, err)
	}
	if list, _ := rs[1].ListRequests(true); len(list) != 0 {
		t.Errorf("pending after the run: %+v; want none", list)
	}
}

// TestPGRacingApprovers: approvers on several replicas decide one request
// at once: exactly one wins, the others get ErrAlreadyDecided; and of
// several replicas claiming it at once exactly one runs it.
func TestPGRacingApprovers(t *testing.T) {
	rs := replicas(t, 4, 0, nil)
	for round := range 5 {
		r, err := rs[0].CreateWith(Request{Tool: "t", Revision: "r", Params: map[string]any{"round": round}, Caller: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		decideErrs := make([]error, len(rs))
		for i, s := range rs {
			wg.Go(func() {
				_, decideErrs[i] = s.Decide(r.ID, Decider{Name: "approver-" + string(rune('a'+i))}, i%2 == 0, nil, nil)
			})
		}
		wg.Wait()
		won := 0
		for _, err := range decideErrs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrAlreadyDecided):
				t.Errorf("round %d: a losing approver got %v; want ErrAlreadyDecided", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d approvers won; want exactly 1 (%v)", round, won, decideErrs)
		}
		got, _ := rs[1].Get(r.ID)
		if got.Status != Approved {
			continue // a denier won
		}
		claims := make([]error, len(rs))
		for i, s := range rs {
			wg.Go(func() { _, claims[i] = s.Claim(r.ID, "t", "r", got.ParamsHash) })
		}
		wg.Wait()
		ran := 0
		for _, err := range claims {
			if err == nil {
				ran++
			} else if !errors.Is(err, ErrAlreadyUsed) {
				t.Errorf("round %d: a losing claim got %v; want ErrAlreadyUsed", round, err)
			}
		}
		if ran != 1 {
			t.Errorf("round %d: %d replicas claimed the approved call; want exactly 1", round, ran)
		}
	}
}

// TestPGLeaseExpiryInterrupts: a replica that claimed a call and stopped
// renewing (closed, as a dead one would be) leaves it running only until
// the lease is past; then any replica reads it as interrupted, with when
// and who, and it cannot be claimed or completed again. A live replica's
// lease is renewed past its first term.
func TestPGLeaseExpiryInterrupts(t *testing.T) {
	rs := replicas(t, 2, 600*time.Millisecond, nil)
	mk := func() Request {
		r, err := rs[0].CreateWith(Request{Tool: "t", Revision: "r", Params: map[string]any{}, Caller: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rs[1].Decide(r.ID, Decider{Name: "bob"}, true, nil, nil); err != nil {
			t.Fatal(err)
		}
		return r
	}
	live := mk()
	if _, err := rs[1].Claim(live.ID, "t", "r", live.ParamsHash); err != nil {
		t.Fatal(err)
	}
	dead := mk()
	if _, err := rs[0].Claim(dead.ID, "t", "r", dead.ParamsHash); err != nil {
		t.Fatal(err)
	}
	rs[0].Close() // replica 1 dies: no more renewals
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := rs[1].Get(dead.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == Interrupted {
			if got.InterruptedAt.IsZero() || got.Note == "" {
				t.Errorf("interrupted without when or why: %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead replica's call is still %s after 2 minutes; want interrupted once its lease is past", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := rs[1].Claim(dead.ID, "t", "r", dead.ParamsHash); !errors.Is(err, ErrAlreadyUsed) {
		t.Errorf("claiming an interrupted call: %v; want ErrAlreadyUsed", err)
	}
	// The live replica renews: wait past several lease terms, measured
	// by renewals seen in the row, and it still runs.
	var first time.Time
	for {
		rw, err := rs[1].read(t.Context(), live.ID)
		if err != nil {
			t.Fatal(err)
		}
		if first.IsZero() {
			first = *rw.leaseUntil
		} else if rw.leaseUntil.Sub(first) > 2*600*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the live replica's lease was not renewed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, _ := rs[1].Get(live.ID); got.Status != Running {
		t.Fatalf("the live replica's call is %s; want running", got.Status)
	}
	if _, err := rs[1].Complete(live.ID, json.RawMessage(`{}`)); err != nil {
		t.Errorf("completing the live call: %v", err)
	}
}

// TestPGExpiry: a pending request past its TTL reads as expired on every
// replica and cannot be decided.
func TestPGExpiry(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	rs := replicas(t, 2, 0, now)
	r, err := rs[0].CreateWith(Request{Tool: "t", Revision: "r", Params: map[string]any{}, Caller: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	clock = clock.Add(DefaultTTL + time.Second)
	mu.Unlock()
	if _, err := rs[1].Decide(r.ID, Decider{Name: "bob"}, true, nil, nil); !errors.Is(err, ErrExpired) {
		t.Errorf("deciding past the TTL: %v; want ErrExpired", err)
	}
	if got, _ := rs[0].Get(r.ID); got.Status != Expired || got.Note == "" {
		t.Errorf("Get past the TTL = %+v; want expired with a note", got)
	}
	if _, err := rs[0].Get("0123456789abcdef0123456789abcdef"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(unknown) = %v; want ErrNotFound", err)
	}
}

// TestPGWatchAcrossReplicas: a caller watching a request on one replica
// is woken when another replica decides it (NOTIFY), and reads the
// decision there.
func TestPGWatchAcrossReplicas(t *testing.T) {
	rs := replicas(t, 2, 0, nil)
	<-rs[0].Listening()
	r, err := rs[0].CreateWith(Request{Tool: "t", Revision: "r", Params: map[string]any{}, Caller: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	changed, stop := rs[0].Watch(r.ID)
	defer stop()
	if _, err := rs[1].Decide(r.ID, Decider{Name: "bob"}, false, nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(2 * time.Minute):
		t.Fatal("a decision on replica 2 did not wake the watcher on replica 1")
	}
	if got, _ := rs[0].Get(r.ID); got.Status != Denied {
		t.Errorf("after the wake-up replica 1 reads %s; want denied", got.Status)
	}
}

// TestWatchFileStore: the file store wakes a watcher on a change of its
// request, not of another one.
func TestWatchFileStore(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, _ := s.Create("t", "r", map[string]any{}, "alice", "why")
	b, _ := s.Create("t", "r", map[string]any{}, "alice", "why")
	changed, stop := s.Watch(a.ID)
	defer stop()
	if _, err := s.Decide(b.ID, Decider{Name: "bob"}, false, nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
		t.Fatal("a decision on another request woke the watcher")
	default:
	}
	if _, err := s.Decide(a.ID, Decider{Name: "bob"}, false, nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("the decision on the watched request did not wake the watcher")
	}
}
