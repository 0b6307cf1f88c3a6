package main

import (
	"context"
	"fmt"

	"github.com/toolagent/toolagent/internal/daemon"
)

// runDoctor checks this host as `toolagent serve` with the same settings
// would use it (daemon.Doctor): a line per check, OK, WARN or FAIL with
// the fix; exit 1 when one failed.
func runDoctor(ctx context.Context, e env, args []string) error {
	cfg, err := loadConfig(e, "doctor", args, nil)
	if err != nil {
		return err
	}
	if n := daemon.WriteChecks(e.stdout, daemon.Doctor(ctx, daemonConfig(e, cfg, daemon.Serve))); n > 0 {
		return exitError{Code: exitFailed, Msg: fmt.Sprintf("doctor: %d check(s) failed; fix them as each says", n)}
	}
	return nil
}
