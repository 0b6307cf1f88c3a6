package gatekeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/toolagent/toolagent/internal/httpserve"
	"github.com/toolagent/toolagent/internal/telemetry"
)

// Serve serves the protocol with opts on the address listen until ctx
// ends, then shuts down gracefully: running commands get grace to finish,
// then they are cancelled (their process groups killed). A listen address
// off loopback needs a token (ListenCheck). log gets the server's lines,
// and the audit lines under log=audit.
func Serve(ctx context.Context, listen string, opts Options, grace time.Duration, log *slog.Logger) error {
	hasToken := len(opts.Tokens)+len(opts.TokenSHA256) > 0
	if err := ListenCheck(listen, hasToken); err != nil {
		return err
	}
	stopTracing, err := telemetry.Setup(log.With(slog.String("log", "tracing")))
	if err != nil {
		return err
	}
	defer stopTracing()
	handler := NewHandler(opts, log.With(slog.String("log", "audit")))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	auth := "token"
	if !hasToken {
		auth = "none (loopback clients only)"
	}
	sandbox := "off"
	if opts.Sandbox != nil {
		sandbox = opts.Sandbox.Version()
	}
	log.Info("listening", "addr", ln.Addr().String(), "auth", auth, "allow", opts.Allow, "sandbox", sandbox,
		"max_timeout", opts.MaxTimeout, "max_output", opts.MaxOutput, "max_concurrent", opts.MaxConcurrent)

	// Commands run on cmdCtx: a signal stops new requests at once, running
	// commands get the grace period before it is cancelled.
	cmdCtx, cancelCmds := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCmds()
	srv := httpserve.New(handler, cmdCtx, log)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		httpserve.Shutdown(ctx, srv, grace, cancelCmds, log, "commands")
		return nil
	})
	err = g.Wait()
	log.Info("stopped")
	return err
}
