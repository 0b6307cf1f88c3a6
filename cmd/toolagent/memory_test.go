package main

import (
	"context"
	"log/slog"
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

		held.Store(live + releaseMin)
		sync("a sync before any snapshot", 0)
		store.Swap(catalog.New("rev1", nil, catalog.Options{}))
		held.Store(live + releaseMin - 1)
		sync("idle memory just under releaseMin", 0)
		held.Store(live + releaseMin)
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
