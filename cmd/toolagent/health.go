package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/scan"
)

// probe is one health check: an executor, or one gatekeeper target (so a
// target that fails fails only the tools that run on it).
type probe struct {
	kind   hldp.ExecutorKind
	target string // gatekeeper target name; "" for the whole executor
	ex     interface{ Health(context.Context) error }
}

type probeKey struct {
	kind   hldp.ExecutorKind
	target string
}

// verdict is what a failed health check does to the tools it covers.
type verdict struct {
	status catalog.Status // Disabled (not configured) or Failed
	reason string
}

// health checks the executors on a schedule and narrows the catalog by
// the result: the tools of an executor (or gatekeeper target) whose
// Health fails are Failed with its error, those whose Health says
// executors.ErrNotConfigured are Disabled. Until the first check ends
// every executor counts as healthy. Safe for concurrent use: the reload
// loop's builds call the checker while run updates the verdicts.
type health struct {
	probes    []probe
	gkDefault string // gatekeeper target of tools without `target:`
	sched     cron.Schedule
	timeout   time.Duration
	log       *slog.Logger

	mu       sync.Mutex
	verdicts map[probeKey]verdict // failed probes only
}

func newHealth(probes []probe, gkDefault string, sched cron.Schedule, timeout time.Duration, log *slog.Logger) *health {
	return &health{probes: probes, gkDefault: gkDefault, sched: sched, timeout: timeout, log: log, verdicts: map[probeKey]verdict{}}
}

// narrow wraps base (configured? can the executor run it?) with the
// health verdicts. It is the scan.Checker of every build.
func (h *health) narrow(base scan.Checker) scan.Checker {
	return func(t *hldp.Tool) (catalog.Status, string) {
		if st, reason := base(t); st != catalog.Enabled {
			return st, reason
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if t.Executor == hldp.Gatekeeper {
			target := t.Target
			if target == "" {
				target = h.gkDefault
			}
			if v, ok := h.verdicts[probeKey{t.Executor, target}]; ok {
				return v.status, v.reason
			}
		}
		if v, ok := h.verdicts[probeKey{t.Executor, ""}]; ok {
			return v.status, v.reason
		}
		return catalog.Enabled, ""
	}
}

// check runs every probe at once, each bounded by the timeout, records
// the verdicts and reports whether they changed. Changes are logged, once
// each (the errors name targets and URLs, never tokens).
func (h *health) check(ctx context.Context) (changed bool) {
	errs := make([]error, len(h.probes))
	var wg sync.WaitGroup
	for i, p := range h.probes {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, h.timeout)
			defer cancel()
			errs[i] = p.ex.Health(pctx)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return false // shutting down: a cancelled check says nothing
	}
	next := map[probeKey]verdict{}
	for i, p := range h.probes {
		err := errs[i]
		switch {
		case err == nil:
			continue
		case errors.Is(err, executors.ErrNotConfigured):
			next[probeKey{p.kind, p.target}] = verdict{catalog.Disabled, err.Error()}
		case errors.Is(err, context.DeadlineExceeded):
			next[probeKey{p.kind, p.target}] = verdict{catalog.Failed, fmt.Sprintf("health check of executor %s: no answer within %s: %v", p.kind, h.timeout, err)}
		default:
			next[probeKey{p.kind, p.target}] = verdict{catalog.Failed, err.Error()}
		}
	}
	h.mu.Lock()
	prev := h.verdicts
	h.verdicts = next
	h.mu.Unlock()
	for _, p := range h.probes {
		k := probeKey{p.kind, p.target}
		was, wasBad := prev[k]
		now, isBad := next[k]
		switch {
		case isBad && (!wasBad || was != now):
			h.log.Warn("executor unhealthy; its tools are "+now.status.String(), "executor", p.kind, "target", p.target, "err", now.reason)
		case wasBad && !isBad:
			h.log.Info("executor healthy again; its tools are enabled", "executor", p.kind, "target", p.target)
		}
	}
	return !maps.Equal(prev, next)
}

// rebuilder rebuilds the catalog from the last synced tree; *reload.Loop
// is one.
type rebuilder interface {
	Rebuild(ctx context.Context) (bool, error)
}

// run checks at once, then on the schedule, until ctx ends; when the
// verdicts change it rebuilds the catalog (without a new sync), so a
// recovered executor's tools come back without a restart. It returns nil.
func (h *health) run(ctx context.Context, r rebuilder) error {
	retry := false // the last rebuild failed: try again next round
	for {
		if h.check(ctx) || retry {
			_, err := r.Rebuild(ctx)
			retry = err != nil
			if err != nil && ctx.Err() == nil {
				h.log.Error("rebuild after an executor health change failed; the last snapshot keeps serving", "err", err)
			}
		}
		now := time.Now()
		timer := time.NewTimer(h.sched.Next(now).Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}
