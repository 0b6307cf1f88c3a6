package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/approval"
)

// countedStore is a real approval store whose Check is counted and, while
// gate is open (not closed), held.
func countedStore(t *testing.T) (dir string, check func(context.Context) error, n *atomic.Int64, gate chan struct{}) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "approvals")
	q, err := approval.Open(approval.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	n, gate = new(atomic.Int64), make(chan struct{})
	return dir, func(ctx context.Context) error {
		n.Add(1)
		<-gate
		return q.Check(ctx)
	}, n, gate
}

// waitFor waits, up to a minute, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// TestSharedCheckOneAtATime: a hundred callers at once (as unauthenticated
// /readyz requests may come) make one check of the store, and all get its
// answer.
func TestSharedCheckOneAtATime(t *testing.T) {
	_, check, n, gate := countedStore(t)
	c := newSharedCheck(check)
	errs := make(chan error, 100)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() { errs <- c.Check(t.Context()) })
	}
	waitFor(t, "the first check", func() bool { return n.Load() >= 1 })
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Check() = %v; want nil (the store is writable)", err)
		}
	}
	if got := n.Load(); got != 1 {
		t.Errorf("the store was checked %d times for 100 callers at once; want 1", got)
	}
}

// TestSharedCheckFreshness: an answer serves until it is storeCheckFresh
// old, then the store is asked again; a store that stopped answering is
// reported with its cause, and that answer is kept as long.
func TestSharedCheckFreshness(t *testing.T) {
	dir, check, n, gate := countedStore(t)
	close(gate)
	c := newSharedCheck(check)
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	ask := func(wantChecks int64, wantErr bool) {
		t.Helper()
		err := c.Check(t.Context())
		if (err != nil) != wantErr || wantErr && !errors.Is(err, approval.ErrUnavailable) {
			t.Errorf("at %v: Check() = %v; want an error: %v (approval.ErrUnavailable)", now.Format(time.StampMilli), err, wantErr)
		}
		if got := n.Load(); got != wantChecks {
			t.Errorf("at %v: the store was checked %d times; want %d", now.Format(time.StampMilli), got, wantChecks)
		}
	}
	ask(1, false)
	ask(1, false)
	now = now.Add(storeCheckFresh - time.Nanosecond)
	ask(1, false)
	if err := os.RemoveAll(dir); err != nil { // the store can write nothing now
		t.Fatal(err)
	}
	ask(1, false) // still the answer of a moment ago
	now = now.Add(time.Nanosecond)
	ask(2, true)
	ask(2, true)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now = now.Add(storeCheckFresh)
	ask(3, false)
}

// TestSharedCheckCallerLeaves: a caller that leaves stops waiting at once;
// the check it started runs on, with a context of its own that did not
// end, for those still waiting.
func TestSharedCheckCallerLeaves(t *testing.T) {
	_, check, n, gate := countedStore(t)
	checkCtxErr := make(chan error, 1)
	c := newSharedCheck(func(ctx context.Context) error {
		err := check(ctx)
		checkCtxErr <- ctx.Err()
		return err
	})
	ctx, cancel := context.WithCancel(t.Context())
	left := make(chan error, 1)
	go func() { left <- c.Check(ctx) }()
	waitFor(t, "the first caller's check", func() bool { return n.Load() == 1 })
	stays := make(chan error, 1)
	go func() { stays <- c.Check(t.Context()) }()
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that left got %v; want context.Canceled", err)
	}
	close(gate)
	if err := <-stays; err != nil {
		t.Errorf("the caller that stayed got %v; want the store's answer, nil", err)
	}
	if err := <-checkCtxErr; err != nil {
		t.Errorf("the check's context ended with its first caller: %v", err)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("the store was checked %d times; want 1", got)
	}
}
