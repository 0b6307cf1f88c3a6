package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	nativerepo "github.com/toolagent/toolagent/native-repo"

	"github.com/toolagent/toolagent/internal/api"
	"github.com/toolagent/toolagent/internal/cache"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/reload"
	"github.com/toolagent/toolagent/internal/repo"
	"github.com/toolagent/toolagent/internal/scan"
)

// HTTP server limits. There is no WriteTimeout: a call's answer is written
// when the tool ends, up to its own timeout (at most an hour).
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	// callsEndWait bounds the wait for cancelled calls to end after the
	// grace period: their process groups get SIGTERM, then SIGKILL after
	// the shell executor's 2s grace.
	callsEndWait = 5 * time.Second
)

// runServe runs the daemon until ctx ends, then shuts down gracefully:
// the listener closes, running calls have cfg.ShutdownGrace to finish,
// then their contexts are cancelled (killing their process groups), and
// runServe returns once every goroutine it started has ended.
func runServe(ctx context.Context, e env, args []string) error {
	cfg, err := loadConfig(e, args)
	if err != nil {
		return err
	}
	log := newLogger(cfg, e.stderr)

	tokens, err := loadTokens(cfg, log)
	if err != nil {
		return err
	}
	if tokens.Len() == 0 && !isLoopback(cfg.Listen) {
		return fmt.Errorf("refusing to listen on %s without API tokens: every tool would be open to the network; "+
			"configure tokens (--tokens-file or TOOLAGENT_TOKENS), or listen on a loopback address such as 127.0.0.1:8765", cfg.Listen)
	}

	c := common{tools: cfg.Tools, state: cfg.State, filesRoot: cfg.FilesRoot}
	if err := c.resolve(e); err != nil {
		return err
	}
	src, watchDir, err := toolsSource(c.tools)
	if err != nil {
		return err
	}
	execs, err := c.executors()
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	store := new(catalog.Store)
	disp := dispatch.New(store, execs, dispatch.Options{
		MaxConcurrent: cfg.MaxConcurrent,
		Audit:         log.With(slog.String("log", "audit")),
	})
	parseCache := cache.New()
	scanOpts := scan.Options{Check: checker(execs)}
	loop := &reload.Loop{
		Source: src,
		Build: func(prev *catalog.Snapshot, t scan.Tree) (*catalog.Snapshot, scan.Report, error) {
			return scan.Build(prev, t, parseCache, scanOpts)
		},
		Store:    store,
		Logger:   log.With(slog.String("log", "reload")),
		Backoff:  reload.Backoff{Min: cfg.RetryMin, Max: cfg.RetryMax},
		Debounce: reload.Debounce{Min: cfg.ReloadDebounce, Max: cfg.ReloadMaxWait},
	}
	trigger := reload.NewTrigger()
	handler := api.New(api.Options{Tokens: tokens, MaxBodyBytes: cfg.MaxBodyBytes, Registry: reg},
		store, disp, syncer{loop, trigger}, log.With(slog.String("log", "api")))

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	auth := "tokens"
	if tokens.Len() == 0 {
		auth = "open (loopback, no tokens)"
	}
	log.Info("listening", "addr", ln.Addr().String(), "tools", c.tools, "auth", auth, "max_concurrent", cfg.MaxConcurrent)

	// Calls run on callsCtx, not on ctx: a signal stops new work at once,
	// but running calls get the grace period before this is cancelled.
	callsCtx, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCalls()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return callsCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return loop.Run(gctx, trigger.C()) })
	if watchDir != "" {
		g.Go(func() error { return reload.Watch(gctx, watchDir, trigger, log.With(slog.String("log", "reload"))) })
	}
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		log.Info("shutting down", "grace", cfg.ShutdownGrace)
		// Contexts of their own: ctx is already done.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownGrace)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("grace period over; cancelling running calls")
			cancelCalls()
			// The cancelled calls' process groups get SIGTERM (SIGKILL
			// after the executor's grace); their results are still
			// written, then the connections close.
			wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), callsEndWait)
			defer wcancel()
			if err := srv.Shutdown(wctx); errors.Is(err, context.DeadlineExceeded) {
				log.Error("calls did not end after cancellation; closing their connections")
			}
		}
		cancelCalls()
		srv.Close()
		return nil
	})
	err = g.Wait()
	log.Info("stopped")
	return err
}

// syncer joins the reload loop's status and its trigger into api.Syncer.
type syncer struct {
	*reload.Loop
	*reload.Trigger
}

// toolsSource returns the reload source for the tools tree dir, and the
// directory to watch ("" for the embedded tree, which never changes).
func toolsSource(dir string) (reload.Source, string, error) {
	if dir == embeddedTools {
		sub, err := fs.Sub(nativerepo.Tools, "tools")
		if err != nil {
			return nil, "", err
		}
		return staticSource{scan.FromFS(sub, "embedded")}, "", nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, "", fmt.Errorf("tools tree: %w", err)
	}
	if !fi.IsDir() {
		return nil, "", fmt.Errorf("tools tree %s: not a directory", dir)
	}
	return localSource{repo.LocalDir{Path: dir}}, dir, nil
}

// localSource adapts repo.LocalDir, whose Sync returns the concrete
// *repo.Tree, to reload.Source.
type localSource struct{ dir repo.LocalDir }

func (s localSource) Sync(ctx context.Context) (scan.Tree, error) {
	t, err := s.dir.Sync(ctx)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// staticSource serves one tree forever (the embedded tools).
type staticSource struct{ tree scan.Tree }

func (s staticSource) Sync(context.Context) (scan.Tree, error) { return s.tree, nil }

// loadTokens reads the API tokens from cfg.TokensFile and cfg.Tokens (the
// environment). Token values are never logged.
func loadTokens(cfg Config, log *slog.Logger) (*api.Tokens, error) {
	toks := new(api.Tokens)
	if cfg.TokensFile != "" {
		fi, err := os.Stat(cfg.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("tokens file: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			log.Warn("tokens file is readable by other users; chmod 600 it", "file", cfg.TokensFile, "mode", fi.Mode().Perm().String())
		}
		data, err := os.ReadFile(cfg.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("tokens file: %w", err)
		}
		if err := toks.Parse(cfg.TokensFile, string(data)); err != nil {
			return nil, err
		}
	}
	if cfg.Tokens != "" {
		if err := toks.Parse("TOOLAGENT_TOKENS", cfg.Tokens); err != nil {
			return nil, err
		}
	}
	return toks, nil
}

// isLoopback reports whether addr (host:port) only listens on loopback.
// An empty host listens everywhere; a host name other than localhost may
// resolve anywhere, so it counts as not loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newLogger builds the daemon's logger; cfg was validated.
func newLogger(cfg Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
