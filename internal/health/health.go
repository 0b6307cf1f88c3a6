// Package health owns what makes a parsed tool callable on this host
// besides its definition: whether an executor here can run it
// (Configured), the last health check of its executor or gatekeeper
// target, and its prerequisites (hldp's requires: programs, files, a
// check command). A Monitor narrows every build's verdict by them
// (Monitor.Narrow is the scan.Checker the reload loop builds with) and,
// run on a schedule, rebuilds the catalog when a verdict changes, so a
// recovered executor or a program that appeared brings its tools back
// without a restart.
//
// A Monitor is safe for concurrent use. The daemon (internal/daemon)
// and the one-shot CLI commands import this package; it imports only
// the catalog's and the executors' contracts.
package health

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

// Probe is one health check: an executor, or one gatekeeper target (so a
// target that fails fails only the tools that run on it).
type Probe struct {
	Kind hldp.ExecutorKind
	// Target is the gatekeeper target's name; "" for the whole executor.
	Target string
	Ex     interface{ Health(context.Context) error }
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

// Options configure a Monitor.
type Options struct {
	// Probes are the checks run on the schedule; a probe whose executor
	// is the shell executor (Kind hldp.Shell) also evaluates the tools'
	// prerequisites: programs are looked up on the PATH its processes
	// get, and a check runs through it, in its sandbox.
	Probes []Probe
	// GatekeeperDefault is the gatekeeper target of tools without
	// `target:`.
	GatekeeperDefault string
	// Schedule says when Run checks again (required by Run).
	Schedule cron.Schedule
	// Timeout bounds one probe's check.
	Timeout time.Duration
	// Logger gets the changes of verdicts; nil discards them.
	Logger *slog.Logger
}

// Monitor checks the executors and the tools' prerequisites on a
// schedule and narrows the catalog by the result: the tools of an
// executor (or gatekeeper target) whose Health fails are Failed with its
// error, those whose Health says executors.ErrNotConfigured are Disabled,
// and a tool whose requires (hldp.Requires) are not met is Disabled with a
// reason naming what is missing. Until the first check ends every
// executor counts as healthy; a tool's prerequisites are evaluated when a
// build first sees them (at load), then on the schedule. Safe for
// concurrent use: the reload loop's builds call the checker while Run
// updates the verdicts.
type Monitor struct {
	probes    []Probe
	gkDefault string // gatekeeper target of tools without `target:`
	sched     cron.Schedule
	timeout   time.Duration
	log       *slog.Logger
	// shell is the shell executor among the probes (nil without one):
	// prerequisites are evaluated on the PATH its processes get, and a
	// check runs through it, in its sandbox.
	shell executors.Executor

	mu       sync.Mutex
	verdicts map[probeKey]verdict // failed probes only

	reqMu sync.Mutex
	reqs  map[string]*reqVerdict // by requiresKey
}

// New returns a Monitor of opts' probes. Nothing runs until Run.
func New(opts Options) *Monitor {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Monitor{probes: opts.Probes, gkDefault: opts.GatekeeperDefault, sched: opts.Schedule, timeout: opts.Timeout, log: log,
		verdicts: map[probeKey]verdict{}, reqs: map[string]*reqVerdict{}}
	for _, p := range opts.Probes {
		if ex, ok := p.Ex.(executors.Executor); ok && p.Kind == hldp.Shell {
			h.shell = ex
		}
	}
	return h
}

// Configured is the base verdict of every build: a tool is Disabled when
// no executor of its kind is configured here, or when that executor
// cannot run it (its Check says why); Enabled otherwise.
func Configured(execs map[hldp.ExecutorKind]executors.Executor) scan.Checker {
	return func(t *hldp.Tool) (catalog.Status, string) {
		ex, ok := execs[t.Executor]
		if !ok {
			return catalog.Disabled, fmt.Sprintf("executor %s is not configured", t.Executor)
		}
		if ch, ok := ex.(interface{ Check(*hldp.Tool) error }); ok {
			if err := ch.Check(t); err != nil {
				return catalog.Disabled, fmt.Sprintf("executor %s cannot run it: %v", t.Executor, err)
			}
		}
		return catalog.Enabled, ""
	}
}

// Narrow wraps base (configured? can the executor run it?) with the
// health verdicts and then the tool's prerequisites. It is the
// scan.Checker of every build.
func (h *Monitor) Narrow(base scan.Checker) scan.Checker {
	return func(t *hldp.Tool) (catalog.Status, string) {
		if st, reason := base(t); st != catalog.Enabled {
			return st, reason
		}
		if st, reason := h.executorVerdict(t); st != catalog.Enabled {
			return st, reason
		}
		if !t.Requires().IsZero() {
			if reason := h.prerequisites(t); reason != "" {
				return catalog.Disabled, reason
			}
		}
		return catalog.Enabled, ""
	}
}

// executorVerdict is the verdict of the last health check of t's
// executor (or gatekeeper target).
func (h *Monitor) executorVerdict(t *hldp.Tool) (catalog.Status, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.Executor == hldp.Gatekeeper {
		target := t.Target()
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

// Check runs every probe at once, each bounded by the timeout, records
// the verdicts and reports whether they changed. Changes are logged, once
// each (the errors name targets and URLs, never tokens).
func (h *Monitor) Check(ctx context.Context) (changed bool) {
	errs := make([]error, len(h.probes))
	var wg sync.WaitGroup
	for i, p := range h.probes {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, h.timeout)
			defer cancel()
			errs[i] = p.Ex.Health(pctx)
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
			next[probeKey{p.Kind, p.Target}] = verdict{catalog.Disabled, err.Error()}
		case errors.Is(err, context.DeadlineExceeded):
			next[probeKey{p.Kind, p.Target}] = verdict{catalog.Failed, fmt.Sprintf("health check of executor %s: no answer within %s: %v", p.Kind, h.timeout, err)}
		default:
			next[probeKey{p.Kind, p.Target}] = verdict{catalog.Failed, err.Error()}
		}
	}
	h.mu.Lock()
	prev := h.verdicts
	h.verdicts = next
	h.mu.Unlock()
	for _, p := range h.probes {
		k := probeKey{p.Kind, p.Target}
		was, wasBad := prev[k]
		now, isBad := next[k]
		switch {
		case isBad && (!wasBad || was != now):
			h.log.Warn("executor unhealthy; its tools are "+now.status.String(), "executor", p.Kind, "target", p.Target, "err", now.reason)
		case wasBad && !isBad:
			h.log.Info("executor healthy again; its tools are enabled", "executor", p.Kind, "target", p.Target)
		}
	}
	return !maps.Equal(prev, next)
}

// Run checks at once, then on the schedule, until ctx ends: the
// executors, then the prerequisites of the tools of store's current
// snapshot. When a verdict changes it calls rebuild (the reload loop's
// Rebuild: the catalog built again without a new sync), so a recovered
// executor's tools, and a tool whose missing program or file appeared,
// come back without a restart. It returns nil.
func (h *Monitor) Run(ctx context.Context, store *catalog.Store, rebuild func(context.Context) (bool, error)) error {
	retry := false // the last rebuild failed: try again next round
	for {
		changed := h.Check(ctx)
		if h.Recheck(ctx, store.Load()) {
			changed = true
		}
		if changed || retry {
			_, err := rebuild(ctx)
			retry = err != nil
			if err != nil && ctx.Err() == nil {
				h.log.Error("rebuild after a health change failed; the last snapshot keeps serving", "err", err)
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

// ProbeStatus is one probe's last health check, as the console's status
// page shows it.
type ProbeStatus struct {
	// Name is the executor, with the gatekeeper target after a space.
	Name   string
	OK     bool
	Reason string // why not OK: the status the tools get, and the error
}

// Report says, for each executor (and gatekeeper target) probed, whether
// its last health check passed.
func (h *Monitor) Report() []ProbeStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]ProbeStatus, 0, len(h.probes))
	for _, p := range h.probes {
		name := string(p.Kind)
		if p.Target != "" {
			name += " " + p.Target
		}
		ps := ProbeStatus{Name: name, OK: true}
		if v, failed := h.verdicts[probeKey{p.Kind, p.Target}]; failed {
			ps.OK, ps.Reason = false, v.status.String()+": "+v.reason
		}
		out = append(out, ps)
	}
	return out
}
