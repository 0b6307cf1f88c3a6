// Package shell is the local-process executor: it runs the tools whose
// executor is "shell" on this host.
//
// It owns four methods (Tool.Method):
//
//   - exec: the tool's "cmd" param runs under /bin/bash -p -c (the generic
//     shell tool; the shell policy applies, see below).
//   - run: the tool's argv template, filled by hldp.(*Tool).RenderArgv, runs
//     directly with no shell, so params cannot inject commands.
//   - read, write: a file inside Options.FilesRoot, confined with os.Root so
//     "..", absolute paths and symlinks cannot leave the root.
//
// Every child goes through proc.Run: its own process group, the tool's
// timeout with a grace period, the tool's output cap, and a minimal
// environment (never the daemon's). With Options.Sandbox (the default in
// the daemon) it runs inside the sandbox with a grant the runtime picks,
// not the caller:
//
//   - exec without an approval (the policy judged the command read-only):
//     read-only, no network, whatever the tool declares, so a command the
//     policy misjudged cannot change anything;
//   - exec with an approval, and run: the tool's declared grant
//     (hldp.Sandbox), which the approver was shown;
//   - sandbox: none (only with require_confirm): outside the sandbox.
//
// An Executor is safe for concurrent use.
//
// Defence in depth: dispatch judges every call with internal/policy before
// it gets here, but Execute judges it again (policy.Recheck) right before
// the side effect, for every method: a call whose verdict is deny, or
// confirm without a claimed approval (Request.Approval), is refused with
// an error wrapping executors.ErrRefused that names the rule, and nothing
// runs, even if a bug upstream let it through.
//
// Imports: executors, hldp, proc, policy. Imported only by internal/host,
// which builds it for the daemon's and the CLI's dispatchers.
package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/policy"
	"github.com/toolagent/toolagent/internal/proc"
)

// Interpreter is the shell every exec call runs under: bash, the dialect
// the shell policy parses (mvdan.cc/sh in bash mode), so the command that
// runs is the command that was judged. It runs as `bash -p -c CMD`: -p
// keeps it from reading $BASH_ENV or $ENV and from importing functions or
// SHELLOPTS from the environment.
const Interpreter = "/bin/bash"

// The methods of the shell executor, as written in TOOL.hdlp.
const (
	MethodExec  = "exec"
	MethodRun   = "run"
	MethodRead  = "read"
	MethodWrite = "write"
)

// methods lists the shell executor's methods in a stable order, for messages.
var methods = []string{MethodExec, MethodRun, MethodRead, MethodWrite}

// Options configure an Executor. The zero value is usable: exec and run
// work, read and write are disabled.
type Options struct {
	// FilesRoot is the directory the read and write methods are confined
	// to; "" disables those methods.
	FilesRoot string
	// Env holds extra KEY=VALUE entries added after proc.MinimalEnv
	// (PATH, LANG, HOME) for every child; a key given here overrides the
	// minimal one. Entries without "=" are dropped with a warning. Do not
	// put secrets here: every shell tool sees them.
	Env []string
	// Grace is the time between SIGTERM and SIGKILL on timeout; 0 means
	// proc.DefaultGrace.
	Grace time.Duration
	// Logger receives debug lines per call and construction warnings;
	// nil discards them.
	Logger *slog.Logger
	// ShellPolicy replaces the built-in default shell policy in the
	// re-check before a process starts (nil: policy.DefaultShellPolicy),
	// for tools whose shell_policy is absent or "default". Give it the
	// same value as dispatch.Options.ShellPolicy.
	ShellPolicy *policy.ShellPolicy
	// Sandbox, when non-nil, runs every child inside it (see the package
	// doc for the grant each call gets). nil runs children unsandboxed:
	// only for an operator's explicit --sandbox=off, and for tests.
	Sandbox *proc.Sandbox
}

// Executor runs shell tools. Build it with New.
type Executor struct {
	filesRoot string
	env       []string
	grace     time.Duration
	log       *slog.Logger
	shell     *policy.ShellPolicy
	sandbox   *proc.Sandbox
}

var _ executors.Executor = (*Executor)(nil)

// New returns an Executor configured by a copy of opts.
func New(opts Options) *Executor {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var env []string
	for _, kv := range opts.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			log.Warn("shell executor env entry dropped", "reason", "not KEY=VALUE", "key", k)
			continue
		}
		env = append(env, kv)
	}
	root := opts.FilesRoot
	if root != "" {
		// Absolute, so Plan shows the real path and a later chdir of the
		// daemon cannot move the root.
		if abs, err := filepath.Abs(root); err == nil {
			root = abs
		}
	}
	return &Executor{filesRoot: root, env: env, grace: opts.Grace, log: log, shell: opts.ShellPolicy, sandbox: opts.Sandbox}
}

// Check reports whether this executor can run t at all: the executor is
// shell, the method is known, exec has a string "cmd" param, run has an
// argv template, read and write have a string "path" param (write also a
// string "content") and a configured FilesRoot. An error wrapping
// executors.ErrNotConfigured means the tool is fine but this host lacks the
// configuration; the lead marks such tools disabled with the error as
// reason.
func (e *Executor) Check(t *hldp.Tool) error {
	if t == nil {
		return errors.New("no tool")
	}
	if t.Executor != hldp.Shell {
		return fmt.Errorf("executor is %q, not %q", t.Executor, hldp.Shell)
	}
	switch t.Method {
	case MethodExec:
		if err := wantParam(t, "cmd", hldp.TypeString); err != nil {
			return err
		}
		return optionalParam(t, "cwd", hldp.TypeString)
	case MethodRun:
		if len(t.Argv) == 0 {
			return errors.New("method run needs an argv template, and the definition has none")
		}
		return optionalParam(t, "cwd", hldp.TypeString)
	case MethodRead, MethodWrite:
		if e.filesRoot == "" {
			return fmt.Errorf("method %s: shell files root %w", t.Method, executors.ErrNotConfigured)
		}
		if err := wantParam(t, "path", hldp.TypeString); err != nil {
			return err
		}
		if t.Method == MethodRead {
			return optionalParam(t, "offset", hldp.TypeInteger)
		}
		if err := wantParam(t, "content", hldp.TypeString); err != nil {
			return err
		}
		return optionalParam(t, "append", hldp.TypeBoolean)
	default:
		return unknownMethod(t)
	}
}

func unknownMethod(t *hldp.Tool) error {
	return fmt.Errorf("the shell executor has no method %q (methods: %s)", t.Method, strings.Join(methods, ", "))
}

func wantParam(t *hldp.Tool, name string, typ hldp.ParamType) error {
	p, ok := t.Param(name)
	if !ok {
		return fmt.Errorf("method %s needs a %s param %q in params_schema", t.Method, typ, name)
	}
	if p.Type != typ {
		return fmt.Errorf("param %q of method %s must be of type %s, not %s", name, t.Method, typ, p.Type)
	}
	return nil
}

func optionalParam(t *hldp.Tool, name string, typ hldp.ParamType) error {
	if p, ok := t.Param(name); ok && p.Type != typ {
		return fmt.Errorf("param %q of method %s must be of type %s, not %s", name, t.Method, typ, p.Type)
	}
	return nil
}

// Plan returns exactly what Execute would do for req, without side
// effects: for exec and run the argv, working directory and environment;
// for read and write the file path (Extra holds root, offset, mode and
// size); and the timeout and output cap. Execute runs from the same plan.
func (e *Executor) Plan(req executors.Request) (executors.Plan, error) {
	c, err := e.prepare(req)
	return c.plan, err
}

// call is one prepared call: the public Plan plus what the file methods
// need to carry it out.
type call struct {
	plan      executors.Plan
	sandboxed bool       // exec, run: inside e.sandbox with grant
	grant     proc.Grant // exec, run
	rel       string     // read, write: path inside the files root
	offset    int64      // read
	content   string     // write
	append    bool       // write
	// output is Request.Output: the process's output as it comes.
	output func(stream string, p []byte)
	// followed is Request.Followed.
	followed func() bool
	// started is Request.Started.
	started func()
}

// prepare checks req and turns it into a call; errors carry the tool name.
func (e *Executor) prepare(req executors.Request) (call, error) {
	if req.Tool == nil {
		return call{}, errors.New("shell executor: request without a tool")
	}
	c, err := e.prepareTool(req.Tool, req.Params)
	if err != nil {
		return call{}, fmt.Errorf("tool %s: %w", req.Tool.Name, err)
	}
	if m := req.Tool.Method; m == MethodExec || m == MethodRun {
		if c.sandboxed, c.grant, err = e.grant(req.Tool, req.Approval != ""); err != nil {
			return call{}, fmt.Errorf("tool %s: %w", req.Tool.Name, err)
		}
		if c.sandboxed {
			c.plan.Env = append(proc.SandboxEnv(), e.env...)
		}
		c.plan.Extra = map[string]string{"sandbox": e.describe(req.Tool, c.sandboxed, c.grant)}
	}
	return c, nil
}

// DescribeGrant says what an approved call of t may change and reach, as
// the approver should see it: the declared grant with ${files_root}
// resolved, or that the sandbox is off.
func (e *Executor) DescribeGrant(t *hldp.Tool) string {
	sandboxed, g, err := e.grant(t, true)
	if err != nil {
		return t.Sandbox().String() + " (" + err.Error() + ")"
	}
	return e.describe(t, sandboxed, g)
}

// describe says in one line what a call of t runs with (see grant).
func (e *Executor) describe(t *hldp.Tool, sandboxed bool, g proc.Grant) string {
	switch {
	case e.sandbox == nil:
		return "off (the daemon runs without a sandbox)"
	case !sandboxed:
		return t.Sandbox().String() // sandbox: none
	}
	return g.String()
}

// grant picks what a child of a call of t may touch, approved or not: see
// the package doc. It reports false when the child runs outside the
// sandbox.
func (e *Executor) grant(t *hldp.Tool, approved bool) (bool, proc.Grant, error) {
	sb := t.Sandbox()
	if e.sandbox == nil || sb.None {
		return false, proc.Grant{}, nil
	}
	if t.Method == MethodExec && !approved {
		return true, proc.Grant{}, nil // judged read-only: read-only it runs
	}
	g := proc.Grant{Network: sb.Network}
	for _, w := range sb.Write {
		if w == hldp.SandboxFilesRoot {
			if e.filesRoot == "" {
				return false, proc.Grant{}, fmt.Errorf("%w: the sandbox grant names %s, and this daemon has no files root", executors.ErrRefused, w)
			}
			w = e.filesRoot
		}
		g.Write = append(g.Write, w)
	}
	return true, g, nil
}

func (e *Executor) prepareTool(t *hldp.Tool, params map[string]any) (call, error) {
	if err := e.Check(t); err != nil {
		return call{}, fmt.Errorf("%w: %w", executors.ErrRefused, err)
	}
	timeout, maxOut := limits(t)
	c := call{plan: executors.Plan{
		Timeout:        timeout,
		TimeoutMS:      timeout.Milliseconds(),
		MaxOutputBytes: maxOut,
		OutputKeep:     executors.OutputKeep(t),
	}}
	var err error
	switch t.Method {
	case MethodExec, MethodRun:
		dir, err := executors.StringParam(params, "cwd", false)
		if err != nil {
			return call{}, err
		}
		if t.Method == MethodExec {
			cmd, err := executors.StringParam(params, "cmd", true)
			if err != nil {
				return call{}, err
			}
			c.plan.Argv = []string{Interpreter, "-p", "-c", cmd}
		} else {
			argv, err := t.RenderArgv(params)
			if err != nil {
				return call{}, err
			}
			if len(argv) == 0 {
				return call{}, errors.New("argv template rendered to nothing")
			}
			c.plan.Argv = argv
		}
		c.plan.Dir = dir
		c.plan.Env = append(proc.MinimalEnv(dir), e.env...)
	case MethodRead:
		if c.rel, err = filePath(params); err != nil {
			return call{}, err
		}
		if c.offset, err = intParam(params, "offset"); err != nil {
			return call{}, err
		}
		c.plan.Path = filepath.Join(e.filesRoot, c.rel)
		c.plan.Extra = map[string]string{"root": e.filesRoot, "offset": strconv.FormatInt(c.offset, 10)}
	case MethodWrite:
		if c.rel, err = filePath(params); err != nil {
			return call{}, err
		}
		if c.content, err = executors.StringParam(params, "content", true); err != nil {
			return call{}, err
		}
		if c.append, err = boolParam(params, "append"); err != nil {
			return call{}, err
		}
		mode := "truncate"
		if c.append {
			mode = "append"
		}
		c.plan.Path = filepath.Join(e.filesRoot, c.rel)
		c.plan.Extra = map[string]string{"root": e.filesRoot, "mode": mode, "bytes": strconv.Itoa(len(c.content))}
	}
	return c, nil
}

// limits returns the tool's timeout and output cap, with hldp's defaults
// for zero values so no child ever runs unbounded.
func limits(t *hldp.Tool) (time.Duration, int64) {
	timeout, maxOut := t.Constraints.Timeout, t.Constraints.MaxOutputBytes
	if timeout <= 0 {
		timeout = hldp.DefaultTimeout
	}
	if maxOut <= 0 {
		maxOut = hldp.DefaultMaxOutputBytes
	}
	return timeout, maxOut
}

// Execute runs req as its Plan describes. A command that ran and failed,
// timed out or was killed, and a file method that hit an ordinary file
// error (missing file, permission denied), are Outcomes with a non-zero
// ExitCode and the real error text in Stderr. The error is for calls that
// could not run: an unknown method or unusable tool, or a call the policy
// refuses (both wrapping executors.ErrRefused; a policy refusal also
// wraps *policy.RefusedError), bad params, a program that could not start.
func (e *Executor) Execute(ctx context.Context, req executors.Request) (executors.Outcome, error) {
	c, err := e.prepare(req)
	if err != nil {
		return executors.Outcome{}, err
	}
	c.output, c.followed, c.started = req.Output, req.Followed, req.Started
	if err := ctx.Err(); err != nil {
		return executors.Outcome{}, err
	}
	t := req.Tool
	// The last check before the side effect: the same judgement dispatch
	// made, with the approval dispatch claimed (or none).
	if err := policy.Recheck(t, req.Params, policy.ForTool(t, e.shell), req.Approval != ""); err != nil {
		e.log.WarnContext(ctx, "shell call refused", "tool", t.Name, "rev", req.Rev, "approval", req.Approval, "err", err)
		return executors.Outcome{}, fmt.Errorf("tool %s: %w", t.Name, policyRefusal{err})
	}
	var out executors.Outcome
	switch t.Method {
	case MethodExec, MethodRun:
		out, err = e.run(ctx, c)
	case MethodRead:
		out, err = e.read(c)
	case MethodWrite:
		out, err = e.write(c)
	}
	if err != nil {
		return executors.Outcome{}, fmt.Errorf("tool %s: %w", t.Name, err)
	}
	e.log.DebugContext(ctx, "shell call", "tool", t.Name, "method", t.Method, "rev", req.Rev,
		"exit_code", out.ExitCode, "timed_out", out.TimedOut, "truncated", out.Truncated, "duration", out.Duration)
	return out, nil
}

func (e *Executor) run(ctx context.Context, c call) (executors.Outcome, error) {
	p := c.plan
	s := proc.Spec{
		Argv:      p.Argv,
		Dir:       p.Dir,
		Env:       p.Env,
		Timeout:   p.Timeout,
		Grace:     e.grace,
		MaxOutput: p.MaxOutputBytes,
		Keep:      proc.Keep(p.OutputKeep), // "" is the head
		OnOutput:  c.output,
		Followed:  c.followed,
		Started:   c.started,
	}
	if c.sandboxed {
		s.Sandbox, s.Grant = e.sandbox, c.grant
	}
	o, err := proc.Run(ctx, s)
	if err != nil {
		return executors.Outcome{}, err
	}
	sandbox := c.plan.Extra["sandbox"]
	if c.sandboxed {
		sandbox += "; limits: " + e.sandbox.DescribeLimits()
	}
	return executors.Outcome{
		Output:      o.Stdout,
		Stderr:      o.Stderr,
		ExitCode:    o.ExitCode,
		Truncated:   o.Truncated,
		CutOff:      o.CutOff,
		OutputBytes: o.StdoutBytes,
		TimedOut:    o.TimedOut,
		Duration:    o.Duration,
		Queued:      o.Queued,
		Sandbox:     sandbox,
		LimitHit:    o.LimitHit,
		Completed:   true, // proc.Run reaped it: ExitCode is its status
	}, nil
}

// filePath returns the "path" param after the lexical check: relative,
// no "..", not empty. Symlinks are left to os.Root at open time.
func filePath(params map[string]any) (string, error) {
	rel, err := executors.StringParam(params, "path", true)
	if err != nil {
		return "", err
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: path %q is not a relative path inside the files root", executors.ErrRefused, rel)
	}
	return filepath.Clean(rel), nil
}

// read returns the file's bytes from offset, at most MaxOutputBytes of
// them. OutputBytes is the number of bytes from offset to the end of the
// file, the size the output would have had uncapped.
func (e *Executor) read(c call) (executors.Outcome, error) {
	start := time.Now()
	rel, off, maxOut := c.rel, c.offset, c.plan.MaxOutputBytes
	root, err := os.OpenRoot(e.filesRoot)
	if err != nil {
		return executors.Outcome{}, fmt.Errorf("open files root: %w", err)
	}
	defer root.Close()
	if err := noSymlinks(root, rel); err != nil {
		return executors.Outcome{}, err
	}
	// O_NONBLOCK: opening a FIFO must not hang; it is refused just below.
	// O_NOFOLLOW: a symlink swapped in after the walk above is refused.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fileFailure(rel, err, start)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fileFailure(rel, err, start)
	}
	if !fi.Mode().IsRegular() {
		return fileFailure(rel, &fs.PathError{Op: "read", Path: rel, Err: fmt.Errorf("%w (%s)", errNotRegular, fi.Mode().Type())}, start)
	}
	if err := singleLink(rel, fi); err != nil {
		return executors.Outcome{}, err
	}
	avail := max(fi.Size()-off, 0)
	buf := make([]byte, min(avail, maxOut))
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return fileFailure(rel, err, start)
	}
	return executors.Outcome{
		Completed:   true,
		Output:      buf[:n],
		Truncated:   avail > maxOut,
		OutputBytes: avail,
		Duration:    time.Since(start),
	}, nil
}

// write writes the content param to the file, creating parent
// directories inside the root.
func (e *Executor) write(c call) (executors.Outcome, error) {
	start := time.Now()
	rel := c.rel
	// Never O_TRUNC at open: the link count is checked first.
	flag := os.O_WRONLY | os.O_CREATE
	if c.append {
		flag |= os.O_APPEND
	}
	root, err := os.OpenRoot(e.filesRoot)
	if err != nil {
		return executors.Outcome{}, fmt.Errorf("open files root: %w", err)
	}
	defer root.Close()
	_, shared := e.sandbox.Group()
	if dir := filepath.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fileFailure(rel, err, start)
		}
		if shared {
			if err := shareDirs(root, dir); err != nil {
				return fileFailure(rel, err, start)
			}
		}
	}
	if err := noSymlinks(root, rel); err != nil {
		return executors.Outcome{}, err
	}
	// O_NONBLOCK: opening a FIFO without a reader fails instead of hanging.
	// O_NOFOLLOW: a symlink swapped in after the walk above is refused.
	f, err := root.OpenFile(rel, flag|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fileFailure(rel, err, start)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return fileFailure(rel, err, start)
	} else if !fi.Mode().IsRegular() {
		return fileFailure(rel, &fs.PathError{Op: "write", Path: rel, Err: fmt.Errorf("%w (%s)", errNotRegular, fi.Mode().Type())}, start)
	} else if err := singleLink(rel, fi); err != nil {
		return executors.Outcome{}, err
	}
	if !c.append {
		if err := f.Truncate(0); err != nil {
			return fileFailure(rel, err, start)
		}
	}
	if shared {
		// Approved calls run as users of their own in the sandbox's
		// group: the files root is theirs to change too.
		if err := f.Chmod(0o664); err != nil {
			return fileFailure(rel, err, start)
		}
	}
	n, err := io.WriteString(f, c.content)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fileFailure(rel, err, start)
	}
	msg := fmt.Sprintf("wrote %d bytes to %s\n", n, filepath.ToSlash(rel))
	return executors.Outcome{
		Completed:   true,
		Output:      []byte(msg),
		OutputBytes: int64(len(msg)),
		Duration:    time.Since(start),
	}, nil
}

// shareDirs makes dir and its parents inside root writable by the
// sandbox's group, which the setgid bit gives to what is made in them.
func shareDirs(root *os.Root, dir string) error {
	p := ""
	for part := range strings.SplitSeq(filepath.ToSlash(dir), "/") {
		p = filepath.Join(p, part)
		if err := root.Chmod(p, 0o775|os.ModeSetgid); err != nil {
			return err
		}
	}
	return nil
}

// noSymlinks refuses rel when any of its components inside the root is a
// symbolic link, even one that stays inside: a link planted in the files
// root must not redirect file-read or file-write. Missing components are
// fine (write creates them).
func noSymlinks(root *os.Root, rel string) error {
	p := ""
	for part := range strings.SplitSeq(filepath.ToSlash(rel), "/") {
		p = filepath.Join(p, part)
		fi, err := root.Lstat(p)
		if err != nil {
			return nil // missing, or an error the open reports
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: path %q: %s is a symbolic link, and the files root follows none", executors.ErrRefused, rel, filepath.ToSlash(p))
		}
	}
	return nil
}

// singleLink refuses a file with more than one hard link: another name of
// it may be outside the files root (a link planted there by a tool).
func singleLink(rel string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Errorf("%w: path %q has %d hard links; the files root reads and writes only files with one, since another name may be outside it", executors.ErrRefused, rel, st.Nlink)
	}
	return nil
}

// policyRefusal is a *policy.RefusedError that also matches
// executors.ErrRefused, with the policy's message alone (it already says
// "refused by policy").
type policyRefusal struct{ err error }

func (r policyRefusal) Error() string   { return r.err.Error() }
func (r policyRefusal) Unwrap() []error { return []error{executors.ErrRefused, r.err} }

// errNotRegular marks a read or write of a directory, FIFO or device.
var errNotRegular = errors.New("not a regular file")

// fileFailure turns a file error into a result. An error from the
// operating system (missing file, permission, not a directory) is what a
// command like cat would report: exit code 1 with the text on stderr. Any
// other error from os.Root is its confinement refusing a path that leaves
// the root through a symlink: a refusal, returned as an error.
func fileFailure(rel string, err error, start time.Time) (executors.Outcome, error) {
	var errno syscall.Errno
	if errors.As(err, &errno) || errors.Is(err, errNotRegular) {
		return executors.Outcome{
			Completed: true,
			Stderr:    []byte(err.Error() + "\n"),
			ExitCode:  1,
			Duration:  time.Since(start),
		}, nil
	}
	return executors.Outcome{}, fmt.Errorf("%w: path %q leaves the files root: %w", executors.ErrRefused, rel, err)
}

// Health reports whether /bin/sh exists and is executable.
func (e *Executor) Health(ctx context.Context) error {
	fi, err := os.Stat(Interpreter)
	if err != nil {
		return fmt.Errorf("shell executor: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("shell executor: %s is not an executable file (mode %s)", Interpreter, fi.Mode())
	}
	return nil
}

// intParam returns the optional non-negative integer param name; absent
// is 0. CheckParams gives int64; other integer forms are accepted too.
func intParam(params map[string]any, name string) (int64, error) {
	var n int64
	switch v := params[name].(type) {
	case nil:
		return 0, nil
	case int64:
		n = v
	case int:
		n = int64(v)
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, fmt.Errorf("param %q must be an integer, got %v", name, v)
		}
		n = int64(v)
	case json.Number:
		var err error
		if n, err = v.Int64(); err != nil {
			return 0, fmt.Errorf("param %q must be an integer: %w", name, err)
		}
	default:
		return 0, fmt.Errorf("param %q must be an integer, got %T", name, v)
	}
	if n < 0 {
		return 0, fmt.Errorf("param %q must not be negative, got %d", name, n)
	}
	return n, nil
}

// boolParam returns the optional boolean param name; absent is false.
func boolParam(params map[string]any, name string) (bool, error) {
	switch v := params[name].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	default:
		return false, fmt.Errorf("param %q must be a boolean, got %T", name, v)
	}
}
