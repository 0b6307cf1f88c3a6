package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/daemon"
)

// runMCP serves the catalog over MCP on stdin/stdout, for clients that
// spawn a process (daemon.ServeStdio). It takes the same source and limit
// settings as serve. Logs go to stderr: stdout is the protocol.
func runMCP(ctx context.Context, e env, args []string) error {
	var opts daemon.StdioOptions
	var profile string
	cfg, err := loadConfig(e, "mcp", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&opts.MetaOnly, "meta-only", false, "list only the find_tool and call_tool meta-tools (for catalogs of hundreds of tools)")
		fs.StringVar(&profile, "profile", "", "serve only the tools of the config's profile `NAME` (profiles: NAME: {tools, tags})")
	})
	if err != nil {
		return err
	}
	if profile != "" {
		p, ok := cfg.Profiles[profile]
		if !ok {
			return usageError{Err: fmt.Errorf("mcp --profile %s: no such profile in the config (profiles: %v)", profile, slices.Sorted(maps.Keys(cfg.Profiles)))}
		}
		opts.Surface = catalog.Surface(nil).With(p.Scope())
	}
	d, err := daemon.New(daemonConfig(e, cfg, daemon.Stdio))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.ServeStdio(ctx, e.stdin, e.stdout, opts)
}
