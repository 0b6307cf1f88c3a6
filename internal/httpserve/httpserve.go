// Package httpserve owns how toolagent's long-running servers (the
// daemon, the gatekeeper server) serve HTTP: the limits every http.Server
// gets, and the graceful shutdown that gives running requests a grace
// period, then cancels their work and waits a little for their answers.
// It holds no state; only the packages that run servers import it.
package httpserve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server limits. There is no WriteTimeout: a call's answer is written
// when the tool ends, up to its own timeout (at most an hour).
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = time.Minute
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 64 << 10
	// WorkEndWait bounds the wait for cancelled work to end after the
	// grace period: process groups get SIGTERM, then SIGKILL after the
	// shell executor's 2s grace.
	WorkEndWait = 5 * time.Second
)

// New returns a server of h with the limits above, whose requests'
// contexts derive from base (the work's context, cancelled after the
// grace period, not at the signal), logging its own errors to log.
func New(h http.Handler, base context.Context, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// Shutdown stops srv once its context is done: the listener closes,
// running requests get grace to finish, then cancelWork cancels what
// they run (process groups get SIGTERM, SIGKILL after the executor's
// grace) and their answers still get up to WorkEndWait to be written
// before the connections close. what names the work in log lines
// ("calls", "commands"). ctx is already done when this is called: the
// waits use contexts of their own.
func Shutdown(ctx context.Context, srv *http.Server, grace time.Duration, cancelWork func(), log *slog.Logger, what string) {
	log.Info("shutting down", "grace", grace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("grace period over; cancelling running " + what)
		cancelWork()
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), WorkEndWait)
		defer wcancel()
		if err := srv.Shutdown(wctx); errors.Is(err, context.DeadlineExceeded) {
			log.Error(what + " did not end after cancellation; closing their connections")
		}
	}
	cancelWork()
	srv.Close()
}
