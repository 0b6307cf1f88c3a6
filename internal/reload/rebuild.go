package reload

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/scan"
)

// setTree records t as the tree of the snapshot in the store, for Rebuild.
func (l *Loop) setTree(t scan.Tree) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tree = t
}

// Tree returns the tree of the snapshot the loop last published or kept
// (nil before the first), for reading a definition's file as it is in the
// source.
func (l *Loop) Tree() scan.Tree {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tree
}

// Rebuild builds a new snapshot from the tree of the last successful
// reload, without syncing the source again, and swaps it in. It is for
// changes that lie outside the tree but change the snapshot, such as an
// executor's health: Build's checker sees the new state, so tools of a
// failed executor turn failed and come back when it recovers, without a
// restart and without waiting for a commit.
//
// rebuilt is false when no tree has been synced yet (the first reload
// will see the new state anyway). On error nothing is published and the
// current snapshot keeps serving; the sync status is not touched, since
// no sync happened. Rebuild serialises with Once and Run.
func (l *Loop) Rebuild(ctx context.Context) (rebuilt bool, err error) {
	if l.Store == nil {
		panic("reload: Loop needs a Store")
	}
	l.onceMu.Lock()
	defer l.onceMu.Unlock()
	if err := ctx.Err(); err != nil {
		return false, err
	}
	l.mu.Lock()
	t := l.tree
	l.mu.Unlock()
	prev := l.Store.Load()
	if t == nil || prev == nil {
		return false, nil
	}
	build := l.Build
	if build == nil {
		build = func(prev *catalog.Snapshot, t scan.Tree) (*catalog.Snapshot, scan.Report, error) {
			return scan.Build(prev, t, nil, scan.Options{})
		}
	}
	start := l.now()
	next, rep, err := build(prev, t)
	if err == nil && next == nil {
		err = errors.New("no snapshot")
	}
	if err != nil {
		return false, fmt.Errorf("reload: rebuild %s: %w", t.Rev(), err)
	}
	l.Store.Swap(next)
	l.mu.Lock()
	if l.status.Rev == next.Rev() {
		l.status.Gen = next.Gen()
	}
	l.mu.Unlock()
	counts := next.Counts()
	l.logger().Info("rebuilt", "revision", next.Rev(), "generation", next.Gen(),
		"tools", next.Len(), "enabled", counts[catalog.Enabled], "stale", counts[catalog.Stale],
		"failed", counts[catalog.Failed], "disabled", counts[catalog.Disabled], "untrusted", counts[catalog.Untrusted],
		"problems", len(rep.Problems), "took_ms", l.now().Sub(start).Milliseconds())
	l.indexAfterPublish(next)
	return true, nil
}
