package main

import (
	"context"
	"time"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/daemon"
)

// runSync syncs the configured source once (daemon.Sync: for a git
// source, clone or fetch into STATE/repo), builds the snapshot through
// the persisted parse cache, saves the cache, and prints a JSON summary.
// It exits 1 when the source cannot be synced or the tree cannot be
// built; files that do not load are listed under problems without
// failing the sync. It takes the settings of serve; do not point it at
// the state directory of a running daemon (ask that one with POST
// /v1/sync).
func runSync(ctx context.Context, e env, args []string) error {
	cfg, err := loadConfig(e, "sync", args, nil)
	if err != nil {
		return err
	}
	start := time.Now()
	d, err := daemon.New(daemonConfig(e, cfg, daemon.Sync))
	if err != nil {
		return err
	}
	defer d.Close()
	sum, err := d.Sync(ctx, start)
	if perr := cli.PrintJSON(e.stdout, sum); perr != nil {
		return perr
	}
	if err != nil {
		return exitError{Code: exitFailed, Msg: err.Error()}
	}
	return nil
}
