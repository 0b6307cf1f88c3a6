package main

import (
	"flag"
	"io"
	"io/fs"

	"github.com/toolagent/toolagent/internal/host"
	nativerepo "github.com/toolagent/toolagent/native-repo"
)

var errFlagHelp = flag.ErrHelp

// common holds the flags every subcommand shares: where the tools tree
// and the state are, and how tools run (host.Setup).
type common struct{ host.Setup }

// embeddedTools is the tools tree compiled into the binary.
func embeddedTools() fs.FS {
	sub, err := fs.Sub(nativerepo.Tools, "tools")
	if err != nil {
		panic(err) // the embed pattern names tools/
	}
	return sub
}

// resolve fills the defaults that depend on the machine.
func (c *common) resolve(e env) error {
	c.Embedded = embeddedTools()
	return c.Paths.Resolve(e.getenv)
}

// load resolves c and loads the tools tree once (host.Setup.Load).
func (c *common) load(e env, lazyIndex bool) (*host.Loaded, error) {
	if err := c.resolve(e); err != nil {
		return nil, err
	}
	return c.Setup.Load(lazyIndex)
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
	fs.StringVar(&c.Tools, "tools", e.getenv("TOOLAGENT_TOOLS"), "tools tree `DIR` (env TOOLAGENT_TOOLS; default: found as git finds .git: this directory if it holds */TOOL.hdlp, else ./tools, else the nearest parent's tools/, else the checkout's native-repo/tools, else the embedded copy)")
	c.registerState(fs, e)
}

// registerState adds --state alone (status).
func (c *common) registerState(fs *flag.FlagSet, e env) {
	fs.StringVar(&c.State, "state", e.getenv("TOOLAGENT_STATE"), "state `DIR` (env TOOLAGENT_STATE; default $XDG_STATE_HOME/toolagent or ~/.local/state/toolagent)")
}

// registerRun adds the flags of the commands that run tools (call,
// approvals): --files-root and --sandbox.
func (c *common) registerRun(fs *flag.FlagSet, e env) {
	fs.StringVar(&c.FilesRoot, "files-root", e.getenv("TOOLAGENT_FILES_ROOT"), "root `DIR` the file-read and file-write tools are confined to (env TOOLAGENT_FILES_ROOT; default STATE/files)")
	sandboxFlag(fs, e, &c.Sandbox, "tool processes")
}
