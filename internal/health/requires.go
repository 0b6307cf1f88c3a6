package health

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
)

// reqVerdict is the last evaluation of one tool's prerequisites.
type reqVerdict struct {
	tool   *hldp.Tool // a definition with these requires
	reason string     // what is missing; "" when every prerequisite is met
	// used is when a build last asked for this verdict; see Recheck.
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
func (h *Monitor) prerequisites(t *hldp.Tool) string {
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

// Recheck evaluates again the prerequisites of the tools of snap whose
// verdicts builds asked for, and reports whether a verdict changed. It
// forgets verdicts of definitions snap no longer holds, unless a build
// newer than snap asked for them (that build's snapshot will hold them).
func (h *Monitor) Recheck(ctx context.Context, snap *catalog.Snapshot) (changed bool) {
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
func (h *Monitor) evalRequires(ctx context.Context, t *hldp.Tool) string {
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
func (h *Monitor) runCheck(ctx context.Context, t *hldp.Tool, probe *hldp.Tool) error {
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
