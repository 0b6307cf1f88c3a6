package main

import (
	"context"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/scan"
)

// syncSummary is what `toolagent sync` prints.
type syncSummary struct {
	OK       bool           `json:"ok"`
	Source   string         `json:"source"`
	Revision string         `json:"revision"`
	Changed  bool           `json:"changed"` // the synced revision differs from the one the state held
	Tools    map[string]int `json:"tools"`   // by status: enabled, disabled, failed, stale
	Problems []string       `json:"problems"`
	Parsed   int            `json:"parsed"`
	Reused   int            `json:"reused"`
	TookMS   int64          `json:"took_ms"`
	Error    string         `json:"error,omitempty"`
}

// runSync syncs the configured source once (for a git source: clone or
// fetch into STATE/repo), builds the snapshot through the persisted parse
// cache, saves the cache, and prints a JSON summary. It exits 1 when the
// source cannot be synced or the tree cannot be built; files that do not
// load are listed under problems without failing the sync. It takes the
// settings of serve; do not point it at the state directory of a running
// daemon (ask that one with POST /v1/sync).
func runSync(ctx context.Context, e env, args []string) error {
	cfg, err := loadConfig(e, "sync", args, nil)
	if err != nil {
		return err
	}
	log := newLogger(cfg, e.stderr)
	start := time.Now()
	cr, err := newCore(e, cfg, log, noApprovals)
	if err != nil {
		return err
	}
	var last scan.Report
	build := cr.loop.Build
	cr.loop.Build = func(prev *catalog.Snapshot, t scan.Tree) (*catalog.Snapshot, scan.Report, error) {
		snap, rep, err := build(prev, t)
		last = rep
		return snap, rep, err
	}
	cr.prime()
	before := cr.store.Load()
	_, err = cr.loop.Once(ctx)
	cr.saver.close() // the parse cache on disk: the next sync parses nothing
	cr.src.close()

	st := cr.loop.Status()
	sum := syncSummary{
		OK:       err == nil,
		Source:   st.Source,
		Tools:    map[string]int{},
		Problems: host.ProblemLines(last.Problems),
		Parsed:   last.Parsed,
		Reused:   last.Reused,
		TookMS:   time.Since(start).Milliseconds(),
	}
	if sum.Problems == nil {
		sum.Problems = []string{}
	}
	if snap := cr.store.Load(); snap != nil {
		sum.Revision = snap.Rev()
		sum.Changed = before == nil || before.Rev() != snap.Rev()
		for st, n := range snap.Counts() {
			sum.Tools[st.String()] = n
		}
	}
	if err != nil {
		sum.Error = err.Error()
	}
	if perr := printJSON(e.stdout, sum); perr != nil {
		return perr
	}
	if err != nil {
		return exitError{code: exitFailed, msg: err.Error()}
	}
	return nil
}
