package main

import (
	"flag"

	"github.com/toolagent/toolagent/internal/host"
)

// sandboxFlag registers --sandbox (default: TOOLAGENT_SANDBOX, else on)
// on a subcommand's own flag set; serve, mcp and sync take it from Config.
func sandboxFlag(fs *flag.FlagSet, e env, mode *string, what string) {
	def := e.getenv("TOOLAGENT_SANDBOX")
	if def == "" {
		def = host.SandboxOn
	}
	fs.StringVar(mode, "sandbox", def, "run "+what+" in a sandbox of its own each: on or off (env TOOLAGENT_SANDBOX; default on)")
}
