package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
)

// Loading a catalog makes garbage: the parse or the parse cache's
// decoding, the listing, the match index's build, the MCP lists. The
// collector frees it, but the Go runtime hands the pages back to the OS
// slowly and keeps up to its heap goal (twice the live heap with GOGC
// 100): after starting on 100,000 tools serve held 1.06 GB resident
// for a live heap of 300 MB. Once a reload's snapshot is listed and
// indexed, and after a sync that found nothing new (the watcher's first,
// which lists the whole directory), a releaser gives back what is idle
// in one go (a collection, then every free page: debug.FreeOSMemory)
// when that is much.
const (
	// releaseMin is how much more than the live heap the process must
	// hold for a release: below it a collection costs more than the
	// pages are worth.
	releaseMin = 64 << 20
	// releaseEvery is the least time between two releases: each is a
	// full collection, and a burst of reloads needs one at its end.
	releaseEvery = time.Minute
)

// releaser returns idle memory after reloads (see releaseMin).
type releaser struct {
	store *catalog.Store
	log   *slog.Logger
	kick  chan struct{}
	// usage reports the bytes the process holds from the OS for the Go
	// runtime (not yet released) and the live heap at the last
	// collection; free returns what is idle. Tests replace both.
	usage func() (held, live uint64)
	free  func()
	last  time.Time // the last release
}

func newReleaser(store *catalog.Store, log *slog.Logger) *releaser {
	return &releaser{store: store, log: log, kick: make(chan struct{}, 1), usage: memUsage, free: debug.FreeOSMemory}
}

// synced tells the releaser the MCP lists were made for the store's
// latest change (mcpserver.Options.AfterSync), or a sync attempt ended
// (reload.Loop.AfterAttempt). It never blocks.
func (r *releaser) synced() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run releases after each sync, at most once per releaseEvery (a sync
// within it is served at its end), until ctx is done.
func (r *releaser) run(ctx context.Context) error {
	var due <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
			if due != nil || r.store.Load() == nil {
				continue // one is due already; or nothing is loaded yet
			}
			if wait := releaseEvery - time.Since(r.last); !r.last.IsZero() && wait > 0 {
				due = time.After(wait)
				continue
			}
			r.release()
		case <-due:
			due = nil
			r.release()
		}
	}
}

// release returns the idle memory if it is at least releaseMin, after
// the snapshot's match index is built (its build's garbage too).
func (r *releaser) release() {
	if snap := r.store.Load(); snap != nil {
		snap.BuildIndex()
	}
	held, live := r.usage()
	if held < live+releaseMin {
		return
	}
	r.free()
	r.last = time.Now()
	now, live := r.usage()
	r.log.Info("returned idle memory to the OS after a reload", "held_mib", held>>20, "now_mib", now>>20, "live_heap_mib", live>>20)
}

// memUsage is the runtime's own account (runtime/metrics): all it holds
// from the OS minus what it released, and the live heap.
func memUsage() (held, live uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64(), s[2].Value.Uint64()
}
