package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"golang.org/x/sys/unix"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/console"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/reload"
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

// health checks the executors and the tools' prerequisites on a schedule
// and narrows the catalog by the result: the tools of an executor (or
// gatekeeper target) whose Health fails are Failed with its error, those
// whose Health says executors.ErrNotConfigured are Disabled, and a tool
// whose requires (hldp.Requires) are not met is Disabled with a reason
// naming what is missing. Until the first check ends every executor
// counts as healthy; a tool's prerequisites are evaluated when a build
// first sees them (at load), then on the schedule. Safe for concurrent
// use: the reload loop's builds call the checker while run updates the
// verdicts.
type health struct {
	probes    []probe
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

// reqVerdict is the last evaluation of one tool's prerequisites.
type reqVerdict struct {
	tool   *hldp.Tool // a definition with these requires
	reason string     // what is missing; "" when every prerequisite is met
	// used is when a build last asked for this verdict; see recheck.
	used time.Time
}

// Limits of the prerequisite checks (requires.check).
const (
	// requiresCheckTimeout bounds one run of a check: a check answers
	// "is it ready?", and a build at load waits for it.
	requiresCheckTimeout = 5 * time.Second
	// requiresCheckOutput caps what is kept of a check's output; its
	// first line is all a reason shows.
	requiresCheckOutput = 4 << 10
	// requiresParallel bounds the prerequisite evaluations that run at
	// once on the schedule.
	requiresParallel = 4
)

func newHealth(probes []probe, gkDefault string, sched cron.Schedule, timeout time.Duration, log *slog.Logger) *health {
	h := &health{probes: probes, gkDefault: gkDefault, sched: sched, timeout: timeout, log: log,
		verdicts: map[probeKey]verdict{}, reqs: map[string]*reqVerdict{}}
	for _, p := range probes {
		if ex, ok := p.ex.(executors.Executor); ok && p.kind == hldp.Shell {
			h.shell = ex
		}
	}
	return h
}

// narrow wraps base (configured? can the executor run it?) with the
// health verdicts and then the tool's prerequisites. It is the
// scan.Checker of every build.
func (h *health) narrow(base scan.Checker) scan.Checker {
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
func (h *health) executorVerdict(t *hldp.Tool) (catalog.Status, string) {
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

// requiresKey names what a prerequisite verdict depends on: the tool, its
// requires and the grant its check runs with. An edit that changes none
// of them keeps the verdict; one that does is evaluated anew.
func requiresKey(t *hldp.Tool) string {
	r := t.Prereqs()
	return fmt.Sprintf("%s\x00%q\x00%q\x00%q\x00%t", t.Name, r.Programs, r.Files, r.Check, t.Sandbox().Network)
}

// prerequisites returns what t lacks of its requires ("" for nothing):
// the last verdict, or, for requires no build has seen before, a new
// evaluation (a check runs now: "at load").
func (h *health) prerequisites(t *hldp.Tool) string {
	key, now := requiresKey(t), time.Now()
	h.reqMu.Lock()
	if v, ok := h.reqs[key]; ok {
		v.used = now
		reason := v.reason
		h.reqMu.Unlock()
		return reason
	}
	h.reqMu.Unlock()
	// A build has no context; the check's own timeout bounds the wait.
	reason := h.evalRequires(context.Background(), t)
	h.reqMu.Lock()
	h.reqs[key] = &reqVerdict{tool: t, reason: reason, used: now}
	h.reqMu.Unlock()
	if reason != "" {
		h.log.Warn("tool prerequisites missing; it is disabled", "tool", t.Name, "reason", reason)
	}
	return reason
}

// recheck evaluates again the prerequisites of the tools of snap whose
// verdicts builds asked for, and reports whether a verdict changed. It
// forgets verdicts of definitions snap no longer holds, unless a build
// newer than snap asked for them (that build's snapshot will hold them).
func (h *health) recheck(ctx context.Context, snap *catalog.Snapshot) (changed bool) {
	if snap == nil {
		return false
	}
	type job struct {
		key string
		v   *reqVerdict
	}
	var jobs []job
	h.reqMu.Lock()
	for key, v := range h.reqs {
		if e, ok := snap.Lookup(v.tool.Name); !ok || e.Tool == nil || requiresKey(e.Tool) != key {
			if v.used.Before(snap.BuiltAt()) {
				delete(h.reqs, key)
			}
			continue
		}
		jobs = append(jobs, job{key, v})
	}
	h.reqMu.Unlock()

	reasons := make([]string, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, requiresParallel)
	for i, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			reasons[i] = h.evalRequires(ctx, j.v.tool)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return false // shutting down: a cancelled check says nothing
	}
	h.reqMu.Lock()
	defer h.reqMu.Unlock()
	for i, j := range jobs {
		if h.reqs[j.key] != j.v || j.v.reason == reasons[i] {
			continue
		}
		j.v.reason = reasons[i]
		changed = true
		if reasons[i] == "" {
			h.log.Info("tool prerequisites met; it is enabled", "tool", j.v.tool.Name)
		} else {
			h.log.Warn("tool prerequisites missing; it is disabled", "tool", j.v.tool.Name, "reason", reasons[i])
		}
	}
	return changed
}

// evalRequires evaluates t's requires on this host and returns what is
// missing, "" when nothing is. Programs are looked up on the PATH the
// shell executor gives t's processes (the host's /usr and the like are
// what its sandbox shows, read-only), files must exist and be readable by
// the daemon, and when both hold the check runs through the shell
// executor as a call of t would, but never with more: in the sandbox
// (also for a tool with sandbox: none), read-only, with network only when
// t's sandbox grants it, under requiresCheckTimeout.
func (h *health) evalRequires(ctx context.Context, t *hldp.Tool) string {
	if h.shell == nil {
		return "its prerequisites cannot be checked: no shell executor"
	}
	r := t.Prereqs()
	probe := checkTool(t)
	plan, err := h.shell.Plan(executors.Request{Tool: probe, Params: map[string]any{}})
	if err != nil {
		return fmt.Sprintf("its prerequisites cannot be checked: %v", err)
	}
	pathList := planEnvValue(plan.Env, "PATH")
	var missing []string
	for _, prog := range r.Programs {
		if err := findToolProgram(prog, pathList); err != nil {
			missing = append(missing, err.Error())
		}
	}
	for _, f := range r.Files {
		if err := fileReadable(f); err != nil {
			missing = append(missing, err.Error())
		}
	}
	if len(missing) == 0 && len(r.Check) > 0 {
		if err := h.runCheck(ctx, t, probe); err != nil {
			missing = append(missing, err.Error())
		}
	}
	return strings.Join(missing, "; ")
}

// checkTool is the tool a prerequisite check of t runs as: method run of
// the shell executor with t.Requires().Check as a literal argv (braces
// escaped: a check has no params), t's network grant and nothing to
// write, and the check's limits. Without a check its argv is a
// placeholder that Plan needs and nothing runs.
func checkTool(t *hldp.Tool) *hldp.Tool {
	words := t.Prereqs().Check
	if len(words) == 0 {
		words = []string{"true"}
	}
	argv := make([]hldp.ArgvItem, len(words))
	for i, w := range words {
		argv[i] = hldp.ArgvItem{Word: strings.NewReplacer("{", "{{", "}", "}}").Replace(w)}
	}
	return &hldp.Tool{
		Name: t.Name, Display: t.Display, Intent: t.Intent, Method: "run", Executor: hldp.Shell, Argv: argv,
		Constraints: hldp.Constraints{Timeout: requiresCheckTimeout, MaxOutputBytes: requiresCheckOutput},
		Ext:         &hldp.Ext{Sandbox: hldp.Sandbox{Network: t.Sandbox().Network}},
		File:        t.File,
	}
}

// runCheck runs t's requires.check as probe and says why it failed (nil:
// it exited 0).
func (h *health) runCheck(ctx context.Context, t *hldp.Tool, probe *hldp.Tool) error {
	shown := "[" + strings.Join(t.Prereqs().Check, " ") + "]"
	out, err := h.shell.Execute(ctx, executors.Request{Tool: probe, Params: map[string]any{}})
	switch {
	case err != nil:
		return fmt.Errorf("check %s could not run: %s", shown, strings.TrimPrefix(err.Error(), "tool "+t.Name+": "))
	case out.TimedOut:
		return fmt.Errorf("check %s did not finish within %s", shown, requiresCheckTimeout)
	case out.ExitCode != 0:
		line := checkOutputLine(out.Stderr)
		if line == "" {
			line = checkOutputLine(out.Output)
		}
		if line == "" {
			return fmt.Errorf("check %s exited %d", shown, out.ExitCode)
		}
		return fmt.Errorf("check %s exited %d: %s", shown, out.ExitCode, line)
	}
	return nil
}

// checkOutputLine is the first non-empty line of b, cut to 200 bytes.
func checkOutputLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 200 {
				l = strings.ToValidUTF8(l[:200], "") + "..."
			}
			return l
		}
	}
	return ""
}

// findToolProgram finds prog as the tool's processes would: an absolute path
// as it is, a bare name in the absolute directories of pathList. Like
// internal/proc, it wants a regular file with an execute bit.
func findToolProgram(prog, pathList string) error {
	isExec := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("not an executable file (mode %s)", fi.Mode())
		}
		return nil
	}
	if filepath.IsAbs(prog) {
		if err := isExec(prog); err != nil {
			return fmt.Errorf("program %s not found: %w", prog, pathErrCause(err))
		}
		return nil
	}
	for _, dir := range filepath.SplitList(pathList) {
		if filepath.IsAbs(dir) && isExec(filepath.Join(dir, prog)) == nil {
			return nil
		}
	}
	return fmt.Errorf("program %s not found on PATH (%s)", prog, pathList)
}

// fileReadable reports whether the daemon can read the file or directory f.
// It opens nothing (a FIFO or a device must not block or wake), so it
// asks access(2).
func fileReadable(f string) error {
	if _, err := os.Stat(f); err != nil {
		return fmt.Errorf("file %s not readable: %w", f, pathErrCause(err))
	}
	if err := unix.Access(f, unix.R_OK); err != nil {
		return fmt.Errorf("file %s not readable: %w", f, err)
	}
	return nil
}

// pathErrCause drops the path of a *fs.PathError, which the message names
// already.
func pathErrCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// planEnvValue is the value of the last key entry of env, as a child sees it.
func planEnvValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
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

// run checks at once, then on the schedule, until ctx ends: the
// executors, then the prerequisites of the tools of loop's current
// snapshot. When a verdict changes it rebuilds the catalog (without a new
// sync), so a recovered executor's tools, and a tool whose missing
// program or file appeared, come back without a restart. It returns nil.
func (h *health) run(ctx context.Context, loop *reload.Loop) error {
	retry := false // the last rebuild failed: try again next round
	for {
		changed := h.check(ctx)
		if h.recheck(ctx, loop.Store.Load()) {
			changed = true
		}
		if changed || retry {
			_, err := loop.Rebuild(ctx)
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

// report says, for each executor (and gatekeeper target) probed, whether
// its last health check passed, for the console's status page.
func (h *health) report() []console.ExecutorHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]console.ExecutorHealth, 0, len(h.probes))
	for _, p := range h.probes {
		name := string(p.kind)
		if p.target != "" {
			name += " " + p.target
		}
		eh := console.ExecutorHealth{Name: name, OK: true}
		if v, failed := h.verdicts[probeKey{p.kind, p.target}]; failed {
			eh.OK, eh.Reason = false, v.status.String()+": "+v.reason
		}
		out = append(out, eh)
	}
	return out
}
