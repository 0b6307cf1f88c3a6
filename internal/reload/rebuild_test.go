package reload

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/scan"
)

// TestRebuild: a change outside the tree (the checker's answer) reaches
// the store through Rebuild, from the last synced tree and without a new
// sync; a failed rebuild keeps the current snapshot.
func TestRebuild(t *testing.T) {
	src := &fakeSource{}
	src.set("echo/TOOL.hdlp", toolFile("echo", "print a line"))
	var down atomic.Bool
	var failBuild atomic.Bool
	check := func(*hldp.Tool) (catalog.Status, string) {
		if down.Load() {
			return catalog.Failed, "executor shell is down"
		}
		return catalog.Enabled, ""
	}
	l, st := newLoop(src)
	l.Build = func(prev *catalog.Snapshot, tr scan.Tree) (*catalog.Snapshot, scan.Report, error) {
		if failBuild.Load() {
			return nil, scan.Report{}, errors.New("build broke")
		}
		return scan.Build(prev, tr, nil, scan.Options{Check: check})
	}

	if rebuilt, err := l.Rebuild(t.Context()); rebuilt || err != nil {
		t.Fatalf("Rebuild() before any sync = %v, %v; want false, nil", rebuilt, err)
	}
	if _, err := l.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	syncs := src.syncs.Load()
	status := func() catalog.Status {
		e, _ := st.Load().Lookup("echo")
		return e.Status
	}

	down.Store(true)
	if rebuilt, err := l.Rebuild(t.Context()); !rebuilt || err != nil {
		t.Fatalf("Rebuild() = %v, %v; want true, nil", rebuilt, err)
	}
	if got := status(); got != catalog.Failed {
		t.Errorf("after Rebuild with the executor down: echo is %s; want failed", got)
	}
	down.Store(false)
	l.Rebuild(t.Context())
	if got := status(); got != catalog.Enabled {
		t.Errorf("after Rebuild with the executor back: echo is %s; want enabled", got)
	}
	if n := src.syncs.Load(); n != syncs {
		t.Errorf("Rebuild synced the source %d times; want none", n-syncs)
	}
	if got, want := l.Status().Gen, st.Load().Gen(); got != want {
		t.Errorf("Status().Gen = %d after Rebuild; want the store's %d", got, want)
	}

	gen := st.Load().Gen()
	failBuild.Store(true)
	down.Store(true)
	if rebuilt, err := l.Rebuild(t.Context()); rebuilt || err == nil {
		t.Errorf("Rebuild() with a broken build = %v, %v; want false and an error", rebuilt, err)
	}
	if st.Load().Gen() != gen || status() != catalog.Enabled {
		t.Errorf("a failed Rebuild published a snapshot (gen %d, was %d)", st.Load().Gen(), gen)
	}
}
