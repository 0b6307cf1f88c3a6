package daemon

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
)

// TestReleaser: after a sync of the MCP lists the releaser returns idle
// memory when the process holds at least releaseMin more than the live
// heap, not before anything is loaded, not for less, and at most once per
// releaseEvery: a sync within it is served when it has passed, once.
func TestReleaser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := new(catalog.Store)
		r := newReleaser(store, slog.New(slog.DiscardHandler))
		var held atomic.Uint64
		var frees atomic.Int32
		const live = 100 << 20
		r.usage = func() (uint64, uint64) { return held.Load(), live }
		r.free = func() { frees.Add(1) }
		r.setGC = nil         // TestReleaserTunes checks tuning
		r.collect = func() {} // the live heap is what usage says
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.run(ctx) }()
		sync := func(what string, want int32) {
			t.Helper()
			r.synced()
			synctest.Wait()
			if n := frees.Load(); n != want {
				t.Fatalf("%s: %d releases, want %d", what, n, want)
			}
		}

		held.Store(live + releaseMin(live))
		sync("a sync before any snapshot", 0)
		store.Swap(catalog.New("rev1", nil, catalog.Options{}))
		held.Store(live + releaseMin(live) - 1)
		sync("idle memory just under releaseMin", 0)
		held.Store(live + releaseMin(live))
		sync("idle memory of releaseMin", 1)
		sync("a second sync at once", 1)
		sync("a third", 1)
		time.Sleep(releaseEvery - time.Nanosecond)
		synctest.Wait()
		if n := frees.Load(); n != 1 {
			t.Fatalf("just before releaseEvery passed: %d releases, want 1", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n := frees.Load(); n != 2 {
			t.Fatalf("once releaseEvery passed: %d releases, want 2 (the syncs within it served once)", n)
		}
		time.Sleep(2 * releaseEvery)
		sync("a sync long after", 3)

		cancel()
		if err := <-done; err != nil {
			t.Errorf("run() = %v after cancel, want nil", err)
		}
	})
}

// TestGCPercent: the collection target grows a live heap by gcHeadroom,
// as Go's default does for a small one, never by less than gcPercentMin.
func TestGCPercent(t *testing.T) {
	for _, tt := range []struct {
		live uint64
		want int
	}{
		{0, 100},
		{1 << 20, 100},
		{gcHeadroom, 100},
		{2 * gcHeadroom, 50},
		{230 << 20, 13},
		{10 * gcHeadroom, gcPercentMin},
		{1 << 40, gcPercentMin},
	} {
		if got := gcPercent(tt.live); got != tt.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", tt.live>>20, got, tt.want)
		}
	}
}

// TestReleaserTunes: after each sync the releaser sets GOGC for the live
// heap when that changes it, not before a snapshot is loaded, and never
// when the operator's environment set GOGC or GOMEMLIMIT; with nothing
// to release it measures the live heap with a collection first, at most
// once per releaseEvery.
func TestReleaserTunes(t *testing.T) {
	run := func(t *testing.T, env bool, lives ...uint64) []int {
		if env {
			t.Setenv("GOGC", "100")
		}
		var set []int
		collects := 0
		synctest.Test(t, func(t *testing.T) {
			store := new(catalog.Store)
			r := newReleaser(store, slog.New(slog.DiscardHandler))
			var live atomic.Uint64
			r.usage = func() (uint64, uint64) { return live.Load(), live.Load() } // nothing to release
			r.free = func() { t.Error("released with nothing idle") }
			r.collect = func() { collects++ }
			if r.setGC != nil {
				r.setGC = func(p int) int { set = append(set, p); return 0 }
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- r.run(ctx) }()
			live.Store(lives[0])
			r.synced()
			synctest.Wait()
			if len(set) > 0 {
				t.Errorf("GOGC set to %v before any snapshot was loaded", set)
			}
			store.Swap(catalog.New("rev1", nil, catalog.Options{}))
			for _, l := range lives {
				live.Store(l)
				r.synced()
				synctest.Wait()
			}
			cancel()
			<-done
		})
		if want := 1; !env && collects != want {
			t.Errorf("%d measuring collections, want %d (the first sync's: the others came within releaseEvery)", collects, want)
		}
		return set
	}
	if got, want := run(t, false, 230<<20, 230<<20, 20<<20, 64<<20), []int{13, 100, 50}; !slices.Equal(got, want) {
		t.Errorf("GOGC set to %v, want %v (once per change)", got, want)
	}
	t.Run("operator's GOGC", func(t *testing.T) {
		if got := run(t, true, 230<<20); len(got) > 0 {
			t.Errorf("GOGC set to %v though the environment sets it", got)
		}
	})
}

// TestReleaserMeasures: when the runtime's figure of the live heap (the
// last collection's, taken during the load) leaves too little idle to
// release, the releaser measures it with a collection, at most once per
// releaseEvery, and releases when the measured heap leaves enough.
func TestReleaserMeasures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := new(catalog.Store)
		store.Swap(catalog.New("rev1", nil, catalog.Options{}))
		r := newReleaser(store, slog.New(slog.DiscardHandler))
		r.setGC = nil
		const held = 100 << 20
		var live atomic.Uint64
		live.Store(90 << 20) // the load's figure: 10 MiB idle, under releaseMin
		var collects, frees atomic.Int32
		r.usage = func() (uint64, uint64) { return held, live.Load() }
		r.collect = func() { collects.Add(1); live.Store(23 << 20) }
		r.free = func() { frees.Add(1) }
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go r.run(ctx)
		r.synced()
		synctest.Wait()
		if c, f := collects.Load(), frees.Load(); c != 1 || f != 1 {
			t.Fatalf("after the first sync: %d collections, %d releases; want 1 and 1 (77 MiB idle once measured)", c, f)
		}
		live.Store(90 << 20)
		r.collect = func() { collects.Add(1) } // the heap is what the figure says
		time.Sleep(releaseEvery)
		r.synced()
		synctest.Wait()
		r.synced()
		synctest.Wait()
		if c, f := collects.Load(), frees.Load(); c != 2 || f != 1 {
			t.Fatalf("after two more syncs a releaseEvery later: %d collections, %d releases; want 2 and 1", c, f)
		}
	})
}

// TestReleaseMin: a release needs a quarter of the live heap idle, and
// at least releaseFloor.
func TestReleaseMin(t *testing.T) {
	for _, tt := range []struct{ live, want uint64 }{
		{0, releaseFloor},
		{23 << 20, releaseFloor},
		{4 * releaseFloor, releaseFloor},
		{230 << 20, 230 << 20 / 4},
	} {
		if got := releaseMin(tt.live); got != tt.want {
			t.Errorf("releaseMin(%d MiB) = %d MiB, want %d MiB", tt.live>>20, got>>20, tt.want>>20)
		}
	}
}
