package approval

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
)

// outageQueue is a store with its readiness check.
type outageQueue interface {
	Queue
	Check(ctx context.Context) error
}

// testOutage: while the store cannot serve (down), every operation and
// the check fail with ErrUnavailable ("approval store unavailable: "
// and a cause without any of hidden), and nothing changes; once it can
// again (up), the request held before is there as it was, and it can be
// approved.
func testOutage(t *testing.T, q outageQueue, down, up func(), hidden ...string) {
	before, _, err := q.Hold(Request{Tool: "t", Revision: "r1", Params: map[string]any{"cmd": "touch x"}, Caller: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Check(t.Context()); err != nil {
		t.Fatalf("Check with the store up: %v", err)
	}
	down()
	unavailable := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), "approval store unavailable: ") {
			t.Errorf("%s during the outage: %v; want ErrUnavailable, \"approval store unavailable: CAUSE\"", what, err)
			return
		}
		t.Logf("%s during the outage: %v", what, err)
		for _, h := range hidden {
			if strings.Contains(err.Error(), h) {
				t.Errorf("%s during the outage: %q shows %q", what, err, h)
			}
		}
	}
	_, _, err = q.Hold(Request{Tool: "t", Revision: "r1", Params: map[string]any{"cmd": "touch y"}, Caller: "alice"})
	unavailable("Hold", err)
	_, err = q.Decide(before.ID, Decider{Name: "bob"}, true, nil, nil)
	unavailable("Decide", err)
	unavailable("Check", q.Check(t.Context()))
	up()
	if err := q.Check(t.Context()); err != nil {
		t.Fatalf("Check once the store is back: %v", err)
	}
	got, err := q.Get(before.ID)
	if err != nil || got.Status != Pending || got.ParamsHash != before.ParamsHash {
		t.Fatalf("the request held before the outage, after it: %+v %v; want it pending as it was", got, err)
	}
	list, err := q.ListRequests(true)
	if err != nil || len(list) != 1 {
		t.Errorf("pending after the outage: %d requests, %v; want the one held before (the one refused during it was never recorded)", len(list), err)
	}
	if _, err := q.Decide(before.ID, Decider{Name: "bob"}, true, nil, nil); err != nil {
		t.Errorf("approving it once the store is back: %v", err)
	}
}

// TestFileStoreOutage: the directory gone (moved away, as an unmounted
// or deleted volume) is an outage of the file store; the cause names no
// path.
func TestFileStoreOutage(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "approvals")
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	away := filepath.Join(base, "away")
	testOutage(t, s,
		func() {
			if err := os.Rename(dir, away); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if err := os.Rename(away, dir); err != nil {
				t.Fatal(err)
			}
		}, base)
}

// TestPGStoreOutage: PostgreSQL stopped and started again under an open
// store; the cause names neither the password nor the address.
func TestPGStoreOutage(t *testing.T) {
	c := pgtest.NewCluster(t)
	url := strings.Replace(c.URL, "toolagent@", "toolagent:pw-9a8b7c6d5e@", 1) // the cluster trusts loopback
	db, err := pgstore.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := OpenPG(db, PGOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host := strings.SplitN(strings.SplitN(c.URL, "@", 2)[1], "/", 2)[0]
	testOutage(t, s, func() { c.Stop(t) }, func() { c.Start(t) }, "pw-9a8b7c6d5e", host, "toolagent_test", "user=")
}

// TestPGResultKeptThroughAnOutage: an approved call that ends while the
// database is stopped cannot store its result then; Complete says the
// store is unavailable and keeps it, and once the server is started
// again the request reads executed with that result (not running, not
// interrupted).
func TestPGResultKeptThroughAnOutage(t *testing.T) {
	c := pgtest.NewCluster(t)
	db, err := pgstore.Open(t.Context(), c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := OpenPG(db, PGOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, _, err := s.Hold(Request{Tool: "t", Revision: "r1", Params: map[string]any{"cmd": "touch x"}, Caller: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(r.ID, Decider{Name: "bob"}, true, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(r.ID, "t", "r1", r.ParamsHash); err != nil {
		t.Fatal(err)
	}
	c.Stop(t)
	result := json.RawMessage(`{"ok":true,"output":"done\n"}`)
	if _, err := s.Complete(r.ID, result); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "kept") {
		t.Fatalf("Complete during the outage: %v; want ErrUnavailable saying the result is kept", err)
	}
	c.Start(t)
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := s.Get(r.ID)
		if err == nil && got.Status == Executed {
			if string(got.Result) != string(result) {
				t.Errorf("the stored result = %s; want %s", got.Result, result)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the result of the call that ended during the outage, a minute after the database returned: %+v %v; want executed", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
