package daemon

import (
	"context"
	"log/slog"
	"os"
	"runtime"
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
	// releaseFloor is the least idle memory worth a release (see
	// releaseMin).
	releaseFloor = 16 << 20
	// releaseEvery is the least time between two releases: each is a
	// full collection, and a burst of reloads needs one at its end.
	releaseEvery = time.Minute
)

// releaseMin is how much more than a live heap of live bytes the process
// must hold for a release: a quarter of the live heap, at least
// releaseFloor. Below it a collection, whose cost grows with the live
// heap, costs more than the pages are worth. (A fixed 64 MiB left a
// catalog of 10,000 tools, 23 MiB live, at 89 MiB resident.)
func releaseMin(live uint64) uint64 { return max(releaseFloor, live/4) }

// The collector's target. Go collects when the heap has grown by GOGC
// percent (100) over what the last collection found live: a daemon whose
// live heap is a big catalog (100,000 tools: 230 MiB) then holds twice
// that once traffic has made garbage (measured: 514 MiB resident under
// intent queries, 292 MiB idle). Unless the operator set GOGC or
// GOMEMLIMIT, serve sets GOGC after each reload so that the heap grows
// by gcHeadroom over the live heap, at most by 100 percent (a small
// catalog collects as Go's default does) and at least by gcPercentMin
// (a huge one is not collected all the time). Collecting a big heap more
// often costs CPU: at 100,000 tools, with both cores busy answering
// intent queries for a minute, two runs answered 134,589 and 154,352
// against 150,660 with GOGC 100 (resident: 322 MiB against 514).
const (
	gcHeadroom   = 32 << 20
	gcPercentMin = 10
)

// gcPercent is the GOGC that grows a live heap of live bytes by
// gcHeadroom, within [gcPercentMin, 100].
func gcPercent(live uint64) int {
	if live == 0 {
		return 100
	}
	return int(min(100, max(gcPercentMin, gcHeadroom*100/live)))
}

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
	// collect runs a full collection (runtime.GC), which measures the
	// live heap when the runtime's figure says too little is idle to
	// release. Tests replace it.
	collect  func()
	last     time.Time // the last release
	measured time.Time // the last measuring collection
	// setGC sets GOGC (debug.SetGCPercent), unless the operator's
	// environment did (nil then); gc is the value in force (Go's default,
	// 100, until setGC changes it).
	setGC func(percent int) int
	gc    int
}

func newReleaser(store *catalog.Store, log *slog.Logger) *releaser {
	r := &releaser{store: store, log: log, kick: make(chan struct{}, 1), usage: memUsage, free: debug.FreeOSMemory, collect: runtime.GC, setGC: debug.SetGCPercent, gc: 100}
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		r.setGC = nil // the operator's choice
	}
	return r
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
// within it is served at its end), and tunes GOGC after each, until ctx
// is done.
func (r *releaser) run(ctx context.Context) error {
	var due <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
			if r.store.Load() == nil {
				continue // nothing is loaded yet
			}
			if due != nil {
				r.tune()
				continue // a release is due already
			}
			if wait := releaseEvery - time.Since(r.last); !r.last.IsZero() && wait > 0 {
				due = time.After(wait)
				r.tune()
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
// the snapshot's match index is built (its build's garbage too), then
// tunes the collector (after the index's build, which a tighter target
// would slow, and from the live heap that a release's full collection
// measures).
func (r *releaser) release() {
	if snap := r.store.Load(); snap != nil {
		snap.BuildIndex()
	}
	defer r.tune()
	held, live := r.usage()
	if held < live+releaseMin(live) && held >= releaseFloor && time.Since(r.measured) >= releaseEvery {
		// The live heap the last collection found may hold the load's
		// garbage (a 10,000-tool catalog's 23 MiB read as 40): measure
		// it, at most once per releaseEvery.
		r.collect()
		r.measured = time.Now()
		held, live = r.usage()
	}
	if held < live+releaseMin(live) {
		return
	}
	r.free()
	r.last = time.Now()
	now, live := r.usage()
	r.log.Info("returned idle memory to the OS after a reload", "held_mib", held>>20, "now_mib", now>>20, "live_heap_mib", live>>20)
}

// tune sets GOGC for the live heap (see gcHeadroom), when the operator
// did not and it changes.
func (r *releaser) tune() {
	if r.setGC == nil {
		return
	}
	_, live := r.usage()
	if p := gcPercent(live); p != r.gc {
		r.setGC(p)
		r.gc = p
		r.log.Info("collection target set for the catalog's heap", "gogc", p, "live_heap_mib", live>>20)
	}
}

// memUsage is the runtime's own account (runtime/metrics): all it holds
// from the OS minus what it released, and the live heap.
func memUsage() (held, live uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64(), s[2].Value.Uint64()
}
