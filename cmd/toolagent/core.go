package main

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	nativerepo "github.com/toolagent/toolagent/native-repo"

	"github.com/toolagent/toolagent/internal/cache"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/reload"
	"github.com/toolagent/toolagent/internal/repo"
	"github.com/toolagent/toolagent/internal/scan"
)

// core is what every long-running command (serve, mcp) is built on: the
// catalog store kept current by the reload loop, the executors and the
// dispatcher. newCore builds it; start runs its goroutines.
type core struct {
	cfg      Config
	log      *slog.Logger
	common   common // resolved paths
	reg      *prometheus.Registry
	store    *catalog.Store
	execs    map[hldp.ExecutorKind]executors.Executor
	disp     *dispatch.Dispatcher
	loop     *reload.Loop
	trigger  *reload.Trigger
	watchDir string // local tools dir to watch; "" for none
}

// newCore wires the catalog, executors, dispatcher and reload loop from
// cfg. Nothing runs until start.
func newCore(e env, cfg Config, log *slog.Logger) (*core, error) {
	c := common{tools: cfg.Tools, state: cfg.State, filesRoot: cfg.FilesRoot}
	if err := c.resolve(e); err != nil {
		return nil, err
	}
	src, watchDir, err := toolsSource(c.tools)
	if err != nil {
		return nil, err
	}
	execs, err := c.executors()
	if err != nil {
		return nil, err
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
	return &core{
		cfg: cfg, log: log, common: c, reg: reg, store: store, execs: execs, disp: disp,
		loop: loop, trigger: reload.NewTrigger(), watchDir: watchDir,
	}, nil
}

// start runs the reload loop and, for a local directory, its watcher in
// g until ctx ends.
func (cr *core) start(ctx context.Context, g *errgroup.Group) {
	g.Go(func() error { return cr.loop.Run(ctx, cr.trigger.C()) })
	if cr.watchDir != "" {
		g.Go(func() error {
			return reload.Watch(ctx, cr.watchDir, cr.trigger, cr.log.With(slog.String("log", "reload")))
		})
	}
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
