package approval

import (
	"sync"
	"testing"
	"time"
)

// holdQueue is what the hold tests need of a store: Hold, and a decision
// and a clock to move past a request.
type holdQueue interface {
	Hold(in Request) (Request, bool, error)
	Decide(id string, by Decider, approve bool, editedParams map[string]any, validate func(map[string]any) (map[string]any, error)) (Request, error)
}

// testHold: the same caller asking the same call while it is pending
// gets that request back, on whichever replica; another caller, other
// params or another revision get a new one; once decided or expired, a
// new one; concurrent holds of one call make one request.
func testHold(t *testing.T, qs []holdQueue, advance func(time.Duration)) {
	in := Request{Tool: "shell-exec", Revision: "rev1", Params: map[string]any{"cmd": "touch x", "n": 1.5}, Caller: "alice", Door: "api", Why: "write"}
	hold := func(q holdQueue, r Request) (Request, bool) {
		t.Helper()
		got, again, err := q.Hold(r)
		if err != nil {
			t.Fatal(err)
		}
		return got, again
	}
	first, again := hold(qs[0], in)
	if again {
		t.Fatalf("the first hold says again")
	}
	other := in
	other.Door = "mcp" // another door, the same caller: the same call
	for i, q := range qs {
		if got, again := hold(q, other); !again || got.ID != first.ID {
			t.Errorf("replica %d: the same call again = %s (again %v); want %s", i, got.ID, again, first.ID)
		}
	}
	for name, change := range map[string]func(*Request){
		"another caller":   func(r *Request) { r.Caller = "carol" },
		"other params":     func(r *Request) { r.Params = map[string]any{"cmd": "touch y", "n": 1.5} },
		"another revision": func(r *Request) { r.Revision = "rev2" },
		"another tool":     func(r *Request) { r.Tool = "other" },
	} {
		r := in
		change(&r)
		if got, again := hold(qs[len(qs)-1], r); again || got.ID == first.ID {
			t.Errorf("%s: got %s (again %v); want a new request", name, got.ID, again)
		}
	}
	if _, err := qs[0].Decide(first.ID, Decider{Name: "bob"}, false, nil, nil); err != nil {
		t.Fatal(err)
	}
	second, again := hold(qs[0], in)
	if again || second.ID == first.ID {
		t.Errorf("after a denial: %s (again %v); want a new request", second.ID, again)
	}
	advance(DefaultTTL + time.Second)
	third, again := hold(qs[len(qs)-1], in)
	if again || third.ID == second.ID {
		t.Errorf("after the pending one expired: %s (again %v); want a new request", third.ID, again)
	}

	race := in
	race.Params = map[string]any{"cmd": "touch race"}
	ids := make(chan string, 32)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			got, _, err := qs[i%len(qs)].Hold(race)
			if err != nil {
				t.Error(err)
				return
			}
			ids <- got.ID
		})
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	if len(seen) != 1 {
		t.Errorf("32 concurrent holds of one call made %d requests; want 1", len(seen))
	}
}

func TestHold(t *testing.T) {
	s, c, _ := newStore(t)
	testHold(t, []holdQueue{s}, c.Add)
}

func TestPGHold(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	rs := replicas(t, 2, 0, now)
	testHold(t, []holdQueue{rs[0], rs[1]}, func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() })
}
