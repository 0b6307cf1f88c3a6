package reload

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/scan"
)

// Prime publishes a snapshot of t, a tree a source kept from an earlier
// run (repo.Git.Offline: the last synced commit), while the store is still
// empty, so a restarted daemon serves its last catalog at once, before and
// without the network. It records the build (revision, parsed and reused
// counts) but not a sync: LastOK stays as it was. It does nothing and
// returns false once the store holds a snapshot. Call it before Run.
func (l *Loop) Prime(t scan.Tree) (bool, error) {
	if l.Store == nil {
		panic("reload: Loop needs a Store")
	}
	l.onceMu.Lock()
	defer l.onceMu.Unlock()
	if l.Store.Load() != nil {
		return false, nil
	}
	next, rep, err := l.build()(nil, t)
	if err == nil && next == nil {
		err = errors.New("no snapshot")
	}
	if err != nil {
		return false, fmt.Errorf("reload: prime from %s: %w", t.Rev(), err)
	}
	l.Store.Swap(next)
	l.setTree(t)
	l.mu.Lock()
	s := &l.status
	s.Rev, s.Gen = next.Rev(), next.Gen()
	s.Reloads++
	s.Problems = len(rep.Problems)
	l.mu.Unlock()
	l.recordBuild(rep)
	l.logger().Info("serving the last synced catalog", "revision", next.Rev(), "tools", next.Len(),
		"parsed", rep.Parsed, "reused", rep.Reused, "problems", len(rep.Problems), "from_listing", rep.FromListing)
	l.indexAfterPublish(next)
	return true, nil
}

// indexAfterPublish builds the match index of a snapshot that was just
// published. Prime, Once and Rebuild call it after Store.Swap and after
// recording the status, on the goroutine that built the snapshot: a
// snapshot serves lookups, calls and listings (and the daemon is ready)
// without waiting for its index, and a Match that comes first waits for
// this one build. The snapshot itself never changes; builds of the index
// stay one per snapshot, during reload (catalog.Options.LazyIndex), and
// the next reload waits for it (Once holds onceMu).
//
// The swap woke the goroutines waiting on Store.Changed (the MCP tool
// list among them) onto this goroutine's processor; yielding first lets
// them run before the index build holds it, so they are not delayed by the
// build; BeforeIndex may hold it longer.
func (l *Loop) indexAfterPublish(s *catalog.Snapshot) {
	runtime.Gosched()
	if l.BeforeIndex != nil {
		l.BeforeIndex()
	}
	s.BuildIndex()
}

// recordBuild keeps a build's parse counts in the status.
func (l *Loop) recordBuild(rep scan.Report) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status.Parsed, l.status.Reused = rep.Parsed, rep.Reused
	l.status.ParsedTotal += uint64(rep.Parsed)
}

// build returns l.Build, or scan.Build without a cache.
func (l *Loop) build() BuildFunc {
	if l.Build != nil {
		return l.Build
	}
	return func(prev *catalog.Snapshot, t scan.Tree) (*catalog.Snapshot, scan.Report, error) {
		return scan.Build(prev, t, nil, scan.Options{})
	}
}
