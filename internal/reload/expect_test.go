package reload

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolagent/toolagent/internal/scan"
)

// TestRunExpect checks, on a fake clock, that a trigger that follows
// Expect (a push webhook naming its commit) syncs at once, without the
// debounce wait a plain trigger gets, also when it arrives while a plain
// trigger's debounce is running; and that Expect is used up by one
// trigger.
func TestRunExpect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		src := &fakeSource{}
		src.set("echo/TOOL.hdlp", toolFile("echo", "one"))
		l, _ := newLoop(src)
		l.Debounce = Debounce{Min: 100 * time.Millisecond, Max: time.Second}
		trig := NewTrigger()
		go l.Run(ctx, trig.C())
		synctest.Wait()
		if got := src.syncs.Load(); got != 1 {
			t.Fatalf("syncs after start = %d; want 1", got)
		}

		start := time.Now()
		l.Expect("0123456789abcdef0123456789abcdef01234567")
		trig.Poke()
		synctest.Wait()
		if got, waited := src.syncs.Load(), time.Since(start); got != 2 || waited != 0 {
			t.Fatalf("after Expect and a poke: %d syncs after %v of fake time; want 2 at once", got, waited)
		}

		// A plain poke waits for the debounce; an expected one during that
		// wait ends it.
		start = time.Now()
		trig.Poke()
		synctest.Wait()
		if got := src.syncs.Load(); got != 2 {
			t.Fatalf("a plain poke synced at once (%d syncs); want it to wait for the debounce", got)
		}
		l.Expect("89abcdef0123456789abcdef0123456789abcdef")
		trig.Poke()
		synctest.Wait()
		if got, waited := src.syncs.Load(), time.Since(start); got != 3 || waited != 0 {
			t.Fatalf("Expect during a debounce: %d syncs after %v; want 3 at once", got, waited)
		}

		// Used up: the next plain poke waits again.
		trig.Poke()
		synctest.Wait()
		if got := src.syncs.Load(); got != 3 {
			t.Fatalf("a poke after the expected one synced at once (%d syncs); Expect must apply to one trigger", got)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := src.syncs.Load(); got != 4 {
			t.Fatalf("syncs after the debounce = %d; want 4", got)
		}
	})
}

// fetchGate is a fakeSource whose Sync, while hold is set, waits for
// release: a fetch in progress.
type fetchGate struct {
	*fakeSource
	hold    atomic.Bool
	release chan struct{}
}

func (s *fetchGate) Sync(ctx context.Context) (scan.Tree, error) {
	if s.hold.Load() {
		<-s.release
	}
	return s.fakeSource.Sync(ctx)
}

// TestRunExpectDuringFetch checks, on a fake clock, that pushes naming
// their commits that arrive while a sync runs are coalesced into one
// sync, which starts as soon as that one ends, without a debounce wait.
func TestRunExpectDuringFetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		src := &fetchGate{fakeSource: &fakeSource{}, release: make(chan struct{})}
		src.set("echo/TOOL.hdlp", toolFile("echo", "one"))
		l, _ := newLoop(src)
		l.Debounce = Debounce{Min: 100 * time.Millisecond, Max: time.Second}
		trig := NewTrigger()
		go l.Run(ctx, trig.C())
		synctest.Wait()

		src.hold.Store(true)
		l.Expect("0123456789abcdef0123456789abcdef01234567")
		trig.Poke()
		synctest.Wait() // the second sync waits for its fetch
		for _, rev := range []string{"1123456789abcdef0123456789abcdef01234567", "2123456789abcdef0123456789abcdef01234567"} {
			l.Expect(rev)
			trig.Poke()
		}
		synctest.Wait()
		if got := src.syncs.Load(); got != 1 {
			t.Fatalf("syncs done while the second waits = %d; want 1", got)
		}
		start := time.Now()
		src.hold.Store(false)
		src.release <- struct{}{}
		synctest.Wait()
		if got, waited := src.syncs.Load(), time.Since(start); got != 3 || waited != 0 {
			t.Fatalf("after the fetch ended: %d syncs after %v of fake time; want 3 (the pushes during it in one) at once", got, waited)
		}
		time.Sleep(2 * time.Second) // past any debounce
		synctest.Wait()
		if got := src.syncs.Load(); got != 3 {
			t.Errorf("syncs once quiet = %d; want 3: the two pushes during the fetch make one sync", got)
		}
	})
}
