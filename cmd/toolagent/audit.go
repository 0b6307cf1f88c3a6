package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/toolagent/toolagent/internal/daemon"
)

// runAudit is `audit verify` (the hash chain of either store, postgres'
// rows or STATE/audit/audit.jsonl and its rotations: exit status 1 when
// it is broken, naming the row or line) and `audit export [--follow]
// [--cursor-file F]` (the trail as JSON lines, on either store; with
// --follow new records as they come, resuming after the cursor's seq):
// daemon.AuditCommand.
func runAudit(ctx context.Context, e env, args []string) error {
	var follow bool
	var cursor string
	flags := func(fs *flag.FlagSet) {
		fs.BoolVar(&follow, "follow", false, "export: keep writing new records as they come (for a log shipper)")
		fs.StringVar(&cursor, "cursor-file", "", "export: `FILE` keeping the seq of the last record written; start after it")
	}
	if len(args) == 0 || args[0] != "verify" && args[0] != "export" {
		if _, err := loadConfig(e, "audit", args, flags); err != nil {
			return err // -h prints the usage; a bad flag says so
		}
		return usageError{Err: fmt.Errorf("audit: want verify or export")}
	}
	cfg, err := loadConfig(e, "audit", args[1:], flags)
	if err != nil {
		return err
	}
	cfg.Getenv, cfg.Unsetenv = e.getenv, e.unsetenv
	return daemon.AuditCommand(ctx, cfg, args[0], e.stdout, follow, cursor)
}
