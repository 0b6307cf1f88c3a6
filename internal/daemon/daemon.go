// Package daemon is the long-running toolagent service: it owns the
// catalog store and the reload loop that keeps it current (a local
// directory watched, the embedded tools, or a git branch synced on a
// schedule and a push webhook), the executors and their health checks,
// the dispatcher with its approval queue, audit trail and run registry,
// the parse cache's saver, and the servers in front of them: the HTTP API, MCP over HTTP and the web console (Serve),
// or MCP over a stream (Stdio).
//
// New builds a Daemon from a Config, Run (or ServeStdio, or Sync) runs
// it until its context ends, and Close releases what New opened. A
// Daemon is used by one goroutine; what it serves is safe for concurrent
// use. Only command packages (cmd/...) import this package; it sits
// above every other internal package it wires.
package daemon

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
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/toolagent/toolagent/internal/api"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/console"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/httpserve"
	"github.com/toolagent/toolagent/internal/mcpserver"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/repo"
	"github.com/toolagent/toolagent/internal/scan"
	"github.com/toolagent/toolagent/internal/telemetry"
)

// Daemon is a toolagent service built by New.
type Daemon struct {
	*core
	role Role

	// Serve only: what New set up for Run.
	ln         net.Listener
	handler    http.Handler
	mcpSrv     *mcpserver.Surfaces
	endStreams context.CancelFunc
	removeInfo func()
	url        string
	open       bool   // no API tokens but the operator's
	opToken    string // the operator token's file; "" when a configured token is the operator's
	oneTime    string // the console's one-time sign-in link (open daemons)
	base       string // the URL people reach the console by (public_hosts' first, else the listener's)
	ran        bool   // Run began
}

// New builds the daemon cfg describes for cfg.Role: the catalog store
// and its reload loop, the executors and their health checks, the
// dispatcher and its stores; for Serve also the API tokens, the operator
// token, the handlers and the listener (so a port in use fails here).
// Nothing runs until Run; Close releases what New opened. cfg is
// expected to be valid (Config.Validate).
func New(cfg Config) (_ *Daemon, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mode := map[Role]approvalMode{Serve: approvalsRequired, Stdio: approvalsIfFree, Sync: noApprovals}[cfg.Role]
	if cfg.Role != Serve {
		cr, err := newCore(cfg, log, mode)
		if err != nil {
			return nil, err
		}
		if cfg.Role == Stdio {
			cfg.dropSecretEnv()
		}
		return &Daemon{core: cr, role: cfg.Role}, nil
	}

	tokens, err := LoadTokens(cfg, log)
	if err != nil {
		return nil, err
	}
	if tokens.Open() && !isLoopback(cfg.Listen) {
		return nil, fmt.Errorf("refusing to listen on %s without API tokens: every tool would be open to the network; "+
			"configure tokens (--tokens-file or TOOLAGENT_TOKENS), or listen on a loopback address such as 127.0.0.1:8765", cfg.Listen)
	}
	cr, err := newCore(cfg, log, mode)
	if err != nil {
		return nil, err
	}
	d := &Daemon{core: cr, role: Serve, open: tokens.Open()}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	cfg.dropSecretEnv()
	store, disp := cr.store, cr.disp
	var hooks lastDelivery
	apiHandler := api.New(api.Options{OnWebhook: hooks.saw, Tokens: tokens, MaxBodyBytes: cfg.MaxBodyBytes, Registry: cr.reg, Webhook: cr.src.webhook, Approvals: disp, Sandbox: sandboxStatus(cr.sandbox), Version: Version(),
		Runs: cr.runReg, ReattachGrace: cfg.ReattachGrace, OnMatch: cr.onMatch(), Match: cr.matchFunc(), Feedback: cr.feedback, Shared: cr.sharedStatus(), Notifications: cr.notificationStatus(), Store: cr.storeStatus(),
		Serving: func() bool { return d.mcpSrv.Serving() }, // d.mcpSrv is made below, before any request
		Listen:  func() string { return strings.TrimPrefix(d.url, "http://") }},
		store, disp, cr.syncer(), log.With(slog.String("log", "api")))
	// MCP over streamable HTTP beside the API (api may not import
	// mcpserver: both sit on one layer). No write timeout applies: its
	// long-lived stream carries list_changed.
	d.mcpSrv = mcpserver.NewSurfaces(store, disp, mcpserver.Options{Version: Version(), Logger: log.With(slog.String("log", "mcp")), OnMatch: cr.onMatch(), Match: cr.matchFunc(),
		// d.base is set once the listener is (below), before any call.
		ApprovalURL: func(id string) string { return d.base + "/ui/approvals#" + id }})
	// An MCP client's standalone GET /mcp stream carries notifications,
	// never a call: it ends as soon as shutdown begins instead of holding
	// the grace period that running calls get.
	cr.doors = d.mcpSrv.Ready() // what the start does after its publish waits for the lists
	streams, endStreams := context.WithCancel(context.Background())
	d.endStreams = endStreams
	mux := http.NewServeMux()
	mcpH := endStreamsOn(streams, mcpHandler(d.mcpSrv, tokens, cfg.Profiles, cfg.MaxBodyBytes, cfg.MCPStateless))
	mux.Handle("/mcp", mcpH)
	mux.Handle("/mcp/{profile}", mcpH)
	ui := console.New(store, disp, console.Options{
		Authenticate: func(secret string) (console.User, bool) {
			p, ok := tokens.Find(secret)
			return console.User{Name: p.Name, CanCall: p.Role >= api.RoleCall, CanApprove: p.Role >= api.RoleApprove, Operator: p.Operator, Scope: p.Scope}, ok
		},
		Open:        d.open,
		Operator:    console.User{Name: operator.Name, CanCall: true, CanApprove: true, Operator: true},
		Status:      cr.loop.Status,
		History:     cr.history(),
		Executors:   cr.executorHealth,
		LastWebhook: hooks.last,
		Run:         cr.runs.get,
		Source: func(file string) ([]byte, error) {
			t := cr.loop.Tree()
			if t == nil {
				return nil, fs.ErrNotExist
			}
			return fs.ReadFile(t.FS(), file)
		},
		ToolLog: cr.toolLog, ToolDiff: cr.toolDiff, Sync: cr.syncer().Poke, Facts: cr.consoleFacts(func() string { return d.url }),
		Links:   forgeLinks(cfg.Repo, cfg.ToolsPath),
		Version: Version(),
		Sandbox: sandboxLine(sandboxStatus(cr.sandbox)),
		Logger:  log.With(slog.String("log", "console")),
	})
	mux.Handle("/ui/", ui.Handler())
	mux.Handle("/", toConsole(apiHandler))

	if d.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	// Made once the port is ours: a serve that cannot listen leaves no
	// operator token behind.
	if d.opToken, err = addOperatorToken(tokens, cr.setup.State, log); err != nil {
		return nil, err
	}
	// One guard in front of every route: Host must name this listener,
	// a foreign Origin is refused, a JSON body must say so. The console's
	// forms are its own pages' (same origin, CSRF token).
	gopts := cfg.GuardOptions()
	gopts.Listen = listenNames(cfg.Listen, d.ln.Addr())
	gopts.FormPaths = []string{"/ui/"}
	gopts.Logger = log.With(slog.String("log", "http"))
	if d.handler, err = api.Guard(gopts, mux); err != nil { // Validate checked the settings; the addresses are the listener's
		return nil, err
	}
	d.handler = telemetry.Handler(d.handler, "toolagent") // a span per request when tracing is on
	if everyAddress(cfg.Listen) && len(cfg.PublicHosts) == 0 {
		log.Warn("listening on every address, but only loopback names and the listen address are accepted as Host: "+
			"clients reaching the daemon by another name or address get 421; name those in public_hosts", "listen", cfg.Listen)
	}
	d.url = "http://" + d.ln.Addr().String()
	base := d.url
	if len(cfg.PublicHosts) > 0 {
		base = "http://" + cfg.PublicHosts[0] // the name people reach the daemon by
	}
	d.base = base
	cr.notifier.listening(base)
	info := operator.Info{URL: d.url, PID: os.Getpid(), Source: cr.loop.Status().Source, Open: d.open, Version: Version()}
	if cfg.Repo == "" {
		info.Tools = cr.setup.Tools
	}
	if d.removeInfo, err = operator.WriteInfo(cr.setup.State, info); err != nil {
		return nil, err
	}
	if d.open {
		d.oneTime = ui.OneTimeLink()
	}
	return d, nil
}

// Run serves the API, MCP over HTTP and the console until ctx ends, then
// shuts down gracefully: the listener closes, running calls have
// ShutdownGrace to finish, then their contexts are cancelled (killing
// their process groups), and Run returns once every goroutine it
// started has ended. Only a daemon of role Serve runs.
func (d *Daemon) Run(ctx context.Context) error {
	if d.role != Serve {
		panic("daemon: Run of a daemon not built to serve")
	}
	cfg, log := d.cfg, d.log
	d.ran = true
	auth := "tokens"
	if d.open {
		auth = "open (loopback, no tokens but the operator's)"
	}
	log.Info("listening", "version", Version(), "addr", d.ln.Addr().String(), "url", d.url, "source", d.loop.Status().Source,
		"state", d.setup.State, "files_root", d.setup.FilesRoot, "auth", auth, "max_concurrent", cfg.MaxConcurrent)
	if d.open {
		log.Info("web console: sign in as the operator with this one-time link (valid 10 minutes)", "url", d.url+d.oneTime)
	} else {
		log.Info("web console: sign in with an API token", "url", d.url+"/ui/")
	}
	if d.opToken != "" {
		log.Info("the operator token is yours: the CLI on this host uses it (toolagent approvals list, toolagent status); other clients send it as Authorization: Bearer $(cat FILE)",
			"file", d.opToken, "caller", operator.Name)
	}

	// Calls run on callsCtx, not on ctx: a signal stops new work at once,
	// but running calls get the grace period before this is cancelled.
	callsCtx, cancelCallsCause := context.WithCancelCause(context.WithoutCancel(ctx))
	cancelCalls := func() { cancelCallsCause(dispatch.ErrShutdown) } // results say cancelled: shutdown
	defer cancelCalls()
	srv := httpserve.New(d.handler, callsCtx, log)
	srv.RegisterOnShutdown(d.endStreams)
	ln := d.ln
	d.ln = nil // served: Serve closes it

	g, gctx := errgroup.WithContext(ctx)
	d.start(gctx, g)
	g.Go(func() error { return d.mcpSrv.Run(gctx) })
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		httpserve.Shutdown(ctx, srv, cfg.ShutdownGrace, cancelCalls, log, "calls")
		return nil
	})
	return g.Wait()
}

// StdioOptions shape the MCP server of ServeStdio.
type StdioOptions struct {
	// MetaOnly lists only the find_tool and call_tool meta-tools (for
	// catalogs of hundreds of tools).
	MetaOnly bool
	// Surface narrows the tools served (a profile's scope).
	Surface catalog.Surface
}

// ServeStdio serves the catalog over MCP on in and out, for clients that
// spawn a process, until ctx ends or the client closes in. The catalog
// reloads live and clients get notifications/tools/list_changed. While
// it owns the approval queue, its held calls are decided on this host
// through the queue's control socket. Only a daemon of role Stdio serves.
func (d *Daemon) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, opts StdioOptions) error {
	if d.role != Stdio {
		panic("daemon: ServeStdio of a daemon not built for it")
	}
	// The first snapshot is loaded before the client connects, so its
	// first tools/list is complete.
	if _, err := d.loop.Once(ctx); err != nil {
		return err
	}
	srv := mcpserver.New(d.store, d.disp, mcpserver.Options{Version: Version(), Logger: d.log.With(slog.String("log", "mcp")), MetaOnly: opts.MetaOnly, Surface: opts.Surface, OnMatch: d.onMatch(), Match: d.matchFunc(),
		DecideHint: func(id string) string {
			return fmt.Sprintf("an operator on this host decides it with `toolagent approvals approve %s --state %s` (or deny) while this MCP server runs", id, d.setup.State)
		}})

	// Calls learn why they end: a signal is a shutdown, the client closing
	// in is the client gone (dispatch says which in the result).
	base, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stop(nil)
	defer context.AfterFunc(ctx, func() { stop(dispatch.ErrShutdown) })()
	g, runCtx := errgroup.WithContext(base)
	d.start(runCtx, g)
	g.Go(func() error { return srv.Run(runCtx) })
	if d.approvals != nil {
		// Its held calls are decided on this host while it runs.
		g.Go(func() error {
			return operator.ServeControl(runCtx, host.ApprovalsDir(d.setup.State), d.disp, d.log.With(slog.String("log", "approvals")))
		})
	}
	g.Go(func() error {
		defer stop(context.Canceled) // the client closed in: stop the loops too
		// Task requests are answered below the SDK (mcpserver's tasks.go).
		t := srv.Transport(&mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
		if err := srv.MCP().Run(runCtx, t); err != nil && !clientGone(err) {
			return err
		}
		return nil
	})
	return g.Wait()
}

// clientGone reports whether err only says the client went away: stdin
// ended, or stdout was closed under a write.
func clientGone(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Close releases what New opened: the listener and daemon.json of a
// daemon that serves, the source, the sandbox, the stores. Call it once
// Run (ServeStdio, Sync) has returned.
func (d *Daemon) Close() {
	if d.ln != nil {
		d.ln.Close()
	}
	if d.endStreams != nil {
		d.endStreams()
	}
	d.core.close() // after every goroutine that reads trees or runs calls has ended
	if d.ran {
		d.log.Info("stopped")
	}
	if d.removeInfo != nil {
		d.removeInfo()
	}
}

// Store is the catalog store the daemon keeps current.
func (d *Daemon) Store() *catalog.Store { return d.store }

// Dispatcher is the one invoke path of the daemon's calls.
func (d *Daemon) Dispatcher() *dispatch.Dispatcher { return d.disp }

// Once syncs the source and builds once, as a trigger makes the reload
// loop do, and reports whether a new snapshot was published.
func (d *Daemon) Once(ctx context.Context) (changed bool, err error) { return d.loop.Once(ctx) }

// WaitSaved returns once every save of the parse cache asked for so far
// has ended.
func (d *Daemon) WaitSaved() { d.saver.wait() }

// LocalDir is the tools directory the daemon serves (nil for the
// embedded tools and a git source).
func (d *Daemon) LocalDir() *repo.LocalDir {
	if ls, ok := d.loop.Source.(*localSource); ok {
		return ls.dir
	}
	return nil
}

// SyncSummary is what one Sync did.
type SyncSummary struct {
	OK       bool           `json:"ok"`
	Source   string         `json:"source"`
	Revision string         `json:"revision"`
	Changed  bool           `json:"changed"` // the synced revision differs from the one the state held
	Tools    map[string]int `json:"tools"`   // by status: enabled, disabled, failed, stale
	Problems []string       `json:"problems"`
	Parsed   int            `json:"parsed"`
	Reused   int            `json:"reused"`
	TookMS   int64          `json:"took_ms"`
	Error    string         `json:"error,omitempty"`
}

// Sync syncs the source once (for a git source: clone or fetch into
// STATE/repo), builds the snapshot through the persisted parse cache and
// saves the cache. The summary is complete also when the sync failed
// (the error says why); files that do not load are listed under problems
// without failing it. start is when the command began, for took_ms.
func (d *Daemon) Sync(ctx context.Context, start time.Time) (SyncSummary, error) {
	var last scan.Report
	build := d.loop.Build
	d.loop.Build = func(prev *catalog.Snapshot, t scan.Tree) (*catalog.Snapshot, scan.Report, error) {
		snap, rep, err := build(prev, t)
		last = rep
		return snap, rep, err
	}
	d.prime()
	before := d.store.Load()
	_, err := d.loop.Once(ctx)
	d.saver.close() // the parse cache on disk: the next sync parses nothing

	st := d.loop.Status()
	sum := SyncSummary{
		OK:       err == nil,
		Source:   st.Source,
		Tools:    map[string]int{},
		Problems: host.ProblemLines(last.Problems),
		Parsed:   last.Parsed,
		Reused:   last.Reused,
		TookMS:   time.Since(start).Milliseconds(),
	}
	if sum.Problems == nil {
		sum.Problems = []string{}
	}
	if snap := d.store.Load(); snap != nil {
		sum.Revision = snap.Rev()
		sum.Changed = before == nil || before.Rev() != snap.Rev()
		for st, n := range snap.Counts() {
			sum.Tools[st.String()] = n
		}
	}
	if err != nil {
		sum.Error = err.Error()
	}
	return sum, err
}
