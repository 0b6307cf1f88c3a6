package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/daemon"
)

// runAudit reads the audit trail of the store configured (postgres: the
// shared rows; files: STATE/audit/audit.jsonl and its rotations, chained
// the same way): `audit verify` checks its hash chain (exit status 1 when
// it is broken, naming the row or line) and prints the count and the head
// hash to keep elsewhere; `audit export` writes every record as a JSON line.
func runAudit(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || args[0] != "verify" && args[0] != "export" {
		if _, err := loadConfig(e, "audit", args, nil); err != nil {
			return err // -h prints the usage; a bad flag says so
		}
		return usageError{Err: fmt.Errorf("audit: want verify or export")}
	}
	cfg, err := loadConfig(e, "audit", args[1:], nil)
	if err != nil {
		return err
	}
	cfg.Getenv, cfg.Unsetenv = e.getenv, e.unsetenv
	if args[0] == "export" {
		return daemon.AuditExport(ctx, cfg, e.stdout)
	}
	res, err := daemon.AuditVerify(ctx, cfg)
	if err == nil {
		err = cli.PrintJSON(e.stdout, res)
	}
	if err == nil && res.Broken != "" {
		return errors.New("audit verify: the chain is broken: " + res.Broken)
	}
	return err
}
