package main

import (
	"context"

	"github.com/toolagent/toolagent/internal/daemon"
)

// runServe runs the daemon (internal/daemon: the HTTP API, MCP, the
// console, hot reload) until ctx ends, then shuts it down gracefully.
func runServe(ctx context.Context, e env, args []string) error {
	cfg, err := loadConfig(e, "serve", args, nil)
	if err != nil {
		return err
	}
	d, err := daemon.New(daemonConfig(e, cfg, daemon.Serve))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Run(ctx)
}
