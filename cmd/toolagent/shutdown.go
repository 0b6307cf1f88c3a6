package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// shutdownGracefully stops srv once its context is done: the listener
// closes, running requests get grace to finish, then cancelWork cancels
// what they run (process groups get SIGTERM, SIGKILL after the executor's
// grace) and their answers still get up to callsEndWait to be written
// before the connections close. what names the work in log lines
// ("calls", "commands"). ctx is already done when this is called: the
// waits use contexts of their own.
func shutdownGracefully(ctx context.Context, srv *http.Server, grace time.Duration, cancelWork func(), log *slog.Logger, what string) {
	log.Info("shutting down", "grace", grace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("grace period over; cancelling running " + what)
		cancelWork()
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), callsEndWait)
		defer wcancel()
		if err := srv.Shutdown(wctx); errors.Is(err, context.DeadlineExceeded) {
			log.Error(what + " did not end after cancellation; closing their connections")
		}
	}
	cancelWork()
	srv.Close()
}
