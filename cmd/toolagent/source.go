package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolagent/toolagent/internal/api"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/health"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/match"
	"github.com/toolagent/toolagent/internal/policy"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/repo"
	"github.com/toolagent/toolagent/internal/scan"
	nativerepo "github.com/toolagent/toolagent/native-repo"
)

var errFlagHelp = flag.ErrHelp

// embeddedTools is the --tools value that selects the tools tree compiled
// into the binary.
const embeddedTools = "embedded"

// common holds the flags every subcommand shares.
type common struct {
	tools     string       // tools tree directory, or "embedded"
	state     string       // state directory
	filesRoot string       // root of the file-read / file-write tools
	vocab     *match.Vocab // intent-matching vocabulary (nil: the built-in one)
	// shellPolicy is the operator's override of the default shell policy
	// (nil: the built-in one); dispatch gets the same value.
	shellPolicy *policy.ShellPolicy

	// sandboxMode is "on" or "off" (--sandbox); sandboxOpts its settings,
	// hidden the secret files beyond the state directory (token and key
	// files); sandbox is set by executors when it is on.
	sandboxMode string
	sandboxOpts proc.SandboxOptions
	hidden      []string
	sandbox     *proc.Sandbox
	// runsTools is set by the commands that run tools (serve, mcp, call,
	// approvals approve): only they build, and need, a sandbox.
	runsTools bool

	// Set by resolve: toolsChosen when --tools or TOOLAGENT_TOOLS named
	// the tree, toolsFromWorkDir when findTools found it from the
	// working directory; resolved once resolve ran.
	toolsChosen, toolsFromWorkDir, resolved bool
}

// sandboxStatus is what /v1/status says of c's sandbox.
func (c *common) sandboxStatus() api.SandboxStatus {
	if c.sandbox == nil {
		return api.SandboxStatus{Warning: "the sandbox is off (--sandbox=off): tool processes run with the daemon's own view of the host: its files, its network and its other processes"}
	}
	enforced, err := c.sandbox.Cgroups()
	if err != nil {
		enforced = "rlimits only: " + err.Error()
	} else {
		enforced += ", with rlimits"
	}
	return api.SandboxStatus{Active: true, Mechanism: c.sandbox.Mechanism(), Version: c.sandbox.Version(), Limits: c.sandbox.Limits(), Enforced: enforced, Isolation: "per call: a sandbox serves one call and is gone with it"}
}

// newSandbox builds the sandbox of c (nil when it is off). It hides the
// state directory (approvals, parse cache, repository clone) and every
// secret file, and shows the files root read-only inside it.
func (c *common) newSandbox() (*proc.Sandbox, error) {
	opts := c.sandboxOpts
	opts.Hide = append(append([]string{c.state}, c.hidden...), opts.Hide...)
	opts.Expose = append(opts.Expose, c.filesRoot)
	return openSandbox(c.sandboxMode, opts)
}

// newFlagSet returns the flag set of subcommand name. Its -h prints the
// subcommand's help (writeHelp) on stdout; parseArgs reports a bad flag.
func newFlagSet(name string, e env) *flag.FlagSet {
	fs := flag.NewFlagSet("toolagent "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() { writeHelp(e.stdout, name, fs) }
	return fs
}

// register adds the flags of the commands that read a tools tree: --tools
// and --state; their defaults come from the environment.
func (c *common) register(fs *flag.FlagSet, e env) {
	fs.StringVar(&c.tools, "tools", e.getenv("TOOLAGENT_TOOLS"), "tools tree `DIR` (env TOOLAGENT_TOOLS; default: found as git finds .git: this directory if it holds */TOOL.hdlp, else ./tools, else the nearest parent's tools/, else the checkout's native-repo/tools, else the embedded copy)")
	c.registerState(fs, e)
}

// registerState adds --state alone (status).
func (c *common) registerState(fs *flag.FlagSet, e env) {
	fs.StringVar(&c.state, "state", e.getenv("TOOLAGENT_STATE"), "state `DIR` (env TOOLAGENT_STATE; default $XDG_STATE_HOME/toolagent or ~/.local/state/toolagent)")
}

// registerRun adds the flags of the commands that run tools (call,
// approvals): --files-root and --sandbox.
func (c *common) registerRun(fs *flag.FlagSet, e env) {
	fs.StringVar(&c.filesRoot, "files-root", e.getenv("TOOLAGENT_FILES_ROOT"), "root `DIR` the file-read and file-write tools are confined to (env TOOLAGENT_FILES_ROOT; default STATE/files)")
	sandboxFlag(fs, e, &c.sandboxMode, "tool processes")
}

// parseArgs parses flags anywhere among the arguments (so `call NAME
// --dry-run k=v` works); "--" ends flag parsing.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	help := fs.Usage
	fs.Usage = func() {} // the flag package calls it on errors too
	defer func() { fs.Usage = help }()
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			help()
			return nil, errFlagHelp
		} else if err != nil {
			return nil, usageError{fmt.Errorf("%s: %v (`%s -h` lists its flags)", strings.TrimPrefix(fs.Name(), "toolagent "), err, fs.Name())}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// resolve fills defaults that depend on the machine.
func (c *common) resolve(e env) error {
	if c.tools == "" {
		c.tools, c.toolsFromWorkDir = findTools()
	} else if !c.resolved {
		c.toolsChosen = true
	}
	c.resolved = true
	if c.state == "" {
		base := e.getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return fmt.Errorf("no state directory: set --state or TOOLAGENT_STATE (%v)", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		c.state = filepath.Join(base, "toolagent")
	}
	if c.filesRoot == "" {
		c.filesRoot = filepath.Join(c.state, "files")
	}
	return nil
}

// findTools finds the tools tree the way git finds .git: the working
// directory itself when it holds */TOOL.hdlp, else ./tools when it does,
// else the nearest parent whose tools/ does, else a checkout's
// native-repo/tools (this repository), else the copy compiled into the
// binary. fromWorkDir says the tree was found from the working directory
// (itself, its tools/ or a parent's), not a fallback.
func findTools() (dir string, fromWorkDir bool) {
	dir, err := os.Getwd()
	if err != nil {
		return embeddedTools, false
	}
	if holdsTools(dir) {
		return dir, true
	}
	native := ""
	for d := dir; ; {
		if t := filepath.Join(d, "tools"); holdsTools(t) {
			return t, true
		}
		if t := filepath.Join(d, "native-repo", "tools"); native == "" && isDir(t) {
			native = t
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if native != "" {
		return native, false
	}
	return embeddedTools, false
}

// holdsTools reports whether dir has a tool folder: */TOOL.hdlp.
func holdsTools(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*", hldp.FileName))
	return len(m) > 0
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// openTree opens the tools tree named by c.tools. The closer releases the
// directory handle.
func (c *common) openTree() (scan.Tree, func(), error) {
	if c.tools == embeddedTools {
		sub, err := fs.Sub(nativerepo.Tools, "tools")
		if err != nil {
			return nil, nil, err
		}
		return scan.FromFS(sub, "embedded"), func() {}, nil
	}
	// The same source as the daemon's, so the CLI and the daemon report
	// one revision for one tree.
	dir := &repo.LocalDir{Path: c.tools}
	t, err := dir.Sync(context.Background())
	if err != nil {
		dir.Close()
		return nil, nil, fmt.Errorf("open tools tree: %w", err)
	}
	return t, func() { dir.Close() }, nil
}

// executors builds the executors configured on this host, and, for a
// command that runs tools, the sandbox their processes run in.
func (c *common) executors() (map[hldp.ExecutorKind]executors.Executor, error) {
	// The state directory holds approvals, the parse cache and the
	// repository clone: the daemon's user only.
	if err := os.MkdirAll(c.state, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if err := os.Chmod(c.state, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if err := os.MkdirAll(c.filesRoot, 0o750); err != nil {
		return nil, fmt.Errorf("files root: %w", err)
	}
	var sb *proc.Sandbox
	if c.runsTools {
		var err error
		if sb, err = c.newSandbox(); err != nil {
			return nil, err
		}
	}
	c.sandbox = sb
	if gid, ok := sb.Group(); ok {
		if err := shareFilesRoot(c.filesRoot, int(gid)); err != nil {
			sb.Close()
			return nil, fmt.Errorf("files root: %w", err)
		}
	}
	return map[hldp.ExecutorKind]executors.Executor{
		hldp.Shell: shell.New(shell.Options{FilesRoot: c.filesRoot, ShellPolicy: c.shellPolicy, Sandbox: sb}),
	}, nil
}

// shareFilesRoot gives the files root to the sandbox's group: calls run
// as users of their own in that group, and an approved call may write
// the files root (its grant). Directories get the setgid bit, so what is
// made in them is the group's too; files and directories become group
// writable. Nobody else may enter it.
func shareFilesRoot(root string, gid int) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil // never followed
		}
		if err := os.Lchown(p, -1, gid); err != nil {
			return err
		}
		mode := os.FileMode(0o664)
		if d.IsDir() {
			mode = 0o775 | os.ModeSetgid
			if p == root {
				mode = 0o770 | os.ModeSetgid
			}
		} else if fi, err := d.Info(); err == nil {
			mode = fi.Mode().Perm() | 0o060
		}
		return os.Chmod(p, mode)
	})
}

// loaded is a catalog loaded once for a CLI command.
type loaded struct {
	snap  *catalog.Snapshot
	rep   scan.Report
	execs map[hldp.ExecutorKind]executors.Executor
}

func (c *common) load(e env, lazyIndex bool) (*loaded, error) {
	if err := c.resolve(e); err != nil {
		return nil, err
	}
	execs, err := c.executors()
	if err != nil {
		return nil, err
	}
	tree, closeTree, err := c.openTree()
	if err != nil {
		return nil, err
	}
	defer closeTree()
	snap, rep, err := scan.Build(nil, tree, nil, scan.Options{Check: health.Configured(execs), Catalog: catalog.Options{LazyIndex: lazyIndex, Vocab: c.vocab}})
	if err != nil {
		return nil, err
	}
	return &loaded{snap: snap, rep: rep, execs: execs}, nil
}

// problemLines flattens scan problems into one line per diagnostic.
func problemLines(probs []error) []string {
	var out []string
	for _, p := range probs {
		for _, l := range strings.Split(p.Error(), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}
