package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolagent/toolagent/internal/audit"
	"github.com/toolagent/toolagent/internal/daemon"
)

// runAudit reads the shared store's audit trail: `audit verify` checks
// its hash chain (exit status 1 when it is broken, naming the row) and
// prints the row count and the head hash to keep elsewhere; `audit
// export` writes every row as a JSON line. Both need store postgres (the
// file store's STATE/audit/audit.jsonl is a plain log, not a chain).
func runAudit(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || args[0] != "verify" && args[0] != "export" {
		if _, err := loadConfig(e, "audit", args, nil); err != nil {
			return err // -h prints the usage; a bad flag says so
		}
		return usageError{Err: fmt.Errorf("audit: want verify or export")}
	}
	verb := args[0]
	cfg, err := loadConfig(e, "audit", args[1:], nil)
	if err != nil {
		return err
	}
	cfg.Getenv, cfg.Unsetenv = e.getenv, e.unsetenv
	db, err := daemon.OpenStore(cfg)
	if err != nil {
		return fmt.Errorf("audit %s: %w", verb, err)
	}
	defer db.Close()
	if verb == "export" {
		_, err := audit.Export(ctx, db, e.stdout)
		return err
	}
	res, err := audit.Verify(ctx, db)
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Fprintln(e.stdout, string(b))
	if res.Broken != "" {
		return errors.New("audit verify: the chain is broken: " + res.Broken)
	}
	return nil
}
