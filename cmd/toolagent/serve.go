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
	neturl "net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/toolagent/toolagent/internal/api"
	"github.com/toolagent/toolagent/internal/console"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/httpserve"
	"github.com/toolagent/toolagent/internal/mcpserver"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/reload"
)

// runServe runs the daemon until ctx ends, then shuts down gracefully:
// the listener closes, running calls have cfg.ShutdownGrace to finish,
// then their contexts are cancelled (killing their process groups), and
// runServe returns once every goroutine it started has ended.
func runServe(ctx context.Context, e env, args []string) error {
	cfg, err := loadConfig(e, "serve", args, nil)
	if err != nil {
		return err
	}
	log := newLogger(cfg, e.stderr)

	tokens, err := loadTokens(cfg, log)
	if err != nil {
		return err
	}
	if tokens.Open() && !isLoopback(cfg.Listen) {
		return fmt.Errorf("refusing to listen on %s without API tokens: every tool would be open to the network; "+
			"configure tokens (--tokens-file or TOOLAGENT_TOKENS), or listen on a loopback address such as 127.0.0.1:8765", cfg.Listen)
	}

	cr, err := newCore(e, cfg, log, approvalsRequired)
	if err != nil {
		return err
	}
	store, disp := cr.store, cr.disp
	open := tokens.Open()
	opToken, err := addOperatorToken(tokens, cr.common.State, log)
	if err != nil {
		cr.close()
		return err
	}
	dropSecretEnv(e, cfg)
	var hooks lastDelivery
	apiHandler := api.New(api.Options{OnWebhook: hooks.saw, Tokens: tokens, MaxBodyBytes: cfg.MaxBodyBytes, Registry: cr.reg, Webhook: cr.src.webhook, Approvals: disp, Sandbox: sandboxStatus(cr.sandbox), Version: buildVersion(),
		Runs: cr.runReg, ReattachGrace: cfg.ReattachGrace, OnMatch: cr.onMatch(), Feedback: cr.feedback, Shared: cr.sharedStatus()},
		store, disp, cr.syncer(), log.With(slog.String("log", "api")))
	// MCP over streamable HTTP beside the API (api may not import
	// mcpserver: both sit on one layer). No write timeout applies: its
	// long-lived stream carries list_changed.
	rel := newReleaser(store, log.With(slog.String("log", "memory")))
	cr.loop.AfterAttempt = rel.synced // a sync that publishes nothing makes garbage too
	mcpSrv := mcpserver.NewSurfaces(store, disp, mcpserver.Options{Version: buildVersion(), Logger: log.With(slog.String("log", "mcp")), OnMatch: cr.onMatch(), AfterSync: rel.synced})
	// An MCP client's standalone GET /mcp stream carries notifications,
	// never a call: it ends as soon as shutdown begins instead of holding
	// the grace period that running calls get.
	streams, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	mux := http.NewServeMux()
	mcpH := endGetsOn(streams, mcpHandler(mcpSrv, tokens, cfg.Profiles, cfg.MaxBodyBytes, cfg.MCPStateless))
	mux.Handle("/mcp", mcpH)
	mux.Handle("/mcp/{profile}", mcpH)
	ui := console.New(store, disp, console.Options{
		Authenticate: func(secret string) (console.User, bool) {
			p, ok := tokens.Find(secret)
			return console.User{Name: p.Name, CanCall: p.Role >= api.RoleCall, CanApprove: p.Role >= api.RoleApprove, Scope: p.Scope}, ok
		},
		Open:        open,
		Operator:    console.User{Name: operator.Name, CanCall: true, CanApprove: true},
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
		Links:   forgeLinks(cfg.Repo, cfg.ToolsPath),
		Version: buildVersion(),
		Sandbox: sandboxLine(sandboxStatus(cr.sandbox)),
		Logger:  log.With(slog.String("log", "console")),
	})
	mux.Handle("/ui/", ui.Handler())
	mux.Handle("/", toConsole(apiHandler))

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		cr.close()
		return fmt.Errorf("listen: %w", err)
	}
	// One guard in front of every route: Host must name this listener,
	// a foreign Origin is refused, a JSON body must say so. The console's
	// forms are its own pages' (same origin, CSRF token).
	gopts := cfg.guardOptions()
	gopts.Listen = listenNames(cfg.Listen, ln.Addr())
	gopts.FormPaths = []string{"/ui/"}
	gopts.Logger = log.With(slog.String("log", "http"))
	handler, err := api.Guard(gopts, mux)
	if err != nil { // validate checked the settings; the addresses are the listener's
		ln.Close()
		cr.close()
		return err
	}
	if everyAddress(cfg.Listen) && len(cfg.PublicHosts) == 0 {
		log.Warn("listening on every address, but only loopback names and the listen address are accepted as Host: "+
			"clients reaching the daemon by another name or address get 421; name those in public_hosts", "listen", cfg.Listen)
	}
	auth := "tokens"
	if open {
		auth = "open (loopback, no tokens but the operator's)"
	}
	url := "http://" + ln.Addr().String()
	info := operator.Info{URL: url, PID: os.Getpid(), Source: cr.loop.Status().Source, Open: open, Version: buildVersion()}
	if cfg.Repo == "" {
		info.Tools = cr.common.Tools
	}
	removeInfo, err := operator.WriteInfo(cr.common.State, info)
	if err != nil {
		ln.Close()
		cr.close()
		return err
	}
	defer removeInfo()
	log.Info("listening", "version", buildVersion(), "addr", ln.Addr().String(), "url", url, "source", cr.loop.Status().Source,
		"state", cr.common.State, "files_root", cr.common.FilesRoot, "auth", auth, "max_concurrent", cfg.MaxConcurrent)
	if open {
		log.Info("web console: sign in as the operator with this one-time link (valid 10 minutes)", "url", url+ui.OneTimeLink())
	} else {
		log.Info("web console: sign in with an API token", "url", url+"/ui/")
	}
	if opToken != "" {
		log.Info("the operator token is yours: the CLI on this host uses it (toolagent approvals list, toolagent status); other clients send it as Authorization: Bearer $(cat FILE)",
			"file", opToken, "caller", operator.Name)
	}

	// Calls run on callsCtx, not on ctx: a signal stops new work at once,
	// but running calls get the grace period before this is cancelled.
	callsCtx, cancelCallsCause := context.WithCancelCause(context.WithoutCancel(ctx))
	cancelCalls := func() { cancelCallsCause(dispatch.ErrShutdown) } // results say cancelled: shutdown
	defer cancelCalls()
	srv := httpserve.New(handler, callsCtx, log)
	srv.RegisterOnShutdown(endStreams)

	g, gctx := errgroup.WithContext(ctx)
	cr.start(gctx, g)
	g.Go(func() error { return mcpSrv.Run(gctx) })
	g.Go(func() error { return rel.run(gctx) })
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
	err = g.Wait()
	cr.close() // after every goroutine that reads trees or runs calls has ended
	log.Info("stopped")
	return err
}

// keptRuns holds the results of the last calls, for the console's
// history to open (bounded: the oldest go first).
type keptRuns struct {
	mu    sync.Mutex
	order []string
	byID  map[string]keptRun
}

type keptRun struct {
	caller string
	res    dispatch.Result
}

// maxKeptRuns bounds keptRuns.
const maxKeptRuns = 256

func (k *keptRuns) keep(c dispatch.Call, r dispatch.Result) {
	if r.RunID == "" {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byID == nil {
		k.byID = map[string]keptRun{}
	}
	if len(k.order) == maxKeptRuns {
		delete(k.byID, k.order[0])
		k.order = k.order[1:]
	}
	k.order = append(k.order, r.RunID)
	k.byID[r.RunID] = keptRun{caller: c.Caller, res: r}
}

func (k *keptRuns) get(id string) (string, dispatch.Result, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	kr, ok := k.byID[id]
	return kr.caller, kr.res, ok
}

// lastDelivery remembers the last push webhook delivery for the console.
type lastDelivery struct {
	mu     sync.Mutex
	at     time.Time
	result string
}

func (d *lastDelivery) saw(result string) {
	d.mu.Lock()
	d.at, d.result = time.Now(), result
	d.mu.Unlock()
}

func (d *lastDelivery) last() (time.Time, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at, d.result
}

// forgeLinks returns the console's links into a Forgejo or Gitea web UI
// for an http(s) repository: the commit, and the file at it; nil for other
// sources. Credentials in the URL are dropped.
func forgeLinks(repoURL, toolsPath string) func(rev, file string) (string, string) {
	u, err := neturl.Parse(repoURL)
	if repoURL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil
	}
	u.User = nil
	base := strings.TrimSuffix(strings.TrimSuffix(u.String(), "/"), ".git")
	hexRev := regexp.MustCompile(`^[0-9a-f]{40}$`)
	return func(rev, file string) (string, string) {
		if !hexRev.MatchString(rev) {
			return "", ""
		}
		return base + "/commit/" + rev, base + "/src/commit/" + rev + "/" + path.Join(toolsPath, file)
	}
}

// sandboxLine is the sandbox as the console's status page says it.
func sandboxLine(st api.SandboxStatus) string {
	if !st.Active {
		return st.Warning
	}
	return st.Mechanism + " (" + st.Version + ")"
}

// toConsole sends a browser that asks for / to the web console; other
// clients get the API's JSON index.
func toConsole(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, "/ui/", http.StatusSeeOther)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// endGetsOn ends the GET requests h serves when ctx is done (their
// request contexts are cancelled); other methods are left alone.
func endGetsOn(ctx context.Context, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			h.ServeHTTP(w, r)
			return
		}
		rctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(ctx, cancel)()
		h.ServeHTTP(w, r.WithContext(rctx))
	})
}

// syncer joins the reload loop's status and its trigger into api.Syncer.
type syncer struct {
	*reload.Loop
	*reload.Trigger
}

// announcingSyncer is the syncer of a replica on the shared store: a
// push webhook or POST /v1/sync also tells the other replicas to sync.
type announcingSyncer struct {
	syncer
	bc  *pgstore.Broadcast
	log *slog.Logger
}

func (s announcingSyncer) Poke() {
	s.syncer.Poke()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.bc.Announce(ctx); err != nil {
			s.log.Warn("the other replicas were not told of the push; they sync on their schedule", "err", err)
		}
	}()
}

// syncer is the API's reload control: announcing to the other replicas
// when there are any.
func (cr *core) syncer() api.Syncer {
	s := syncer{cr.loop, cr.trigger}
	if cr.broadcast == nil {
		return s
	}
	return announcingSyncer{syncer: s, bc: cr.broadcast, log: cr.log.With(slog.String("log", "replicas"))}
}

// sharedStatus is /v1/status's "shared": the store, and the newest
// revision any replica has seen; nil without the shared store.
func (cr *core) sharedStatus() func(context.Context) any {
	if cr.broadcast == nil {
		return nil
	}
	return func(ctx context.Context) any {
		out := struct {
			Store  string                   `json:"store"`
			Newest *pgstore.ReplicaRevision `json:"newest,omitempty"`
			Error  string                   `json:"error,omitempty"`
		}{Store: "postgres"}
		n, err := cr.broadcast.Newest(ctx)
		switch {
		case err != nil:
			out.Error = err.Error()
		case n.Revision != "":
			out.Newest = &n
		}
		return out
	}
}

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

// addOperatorToken adds the operator token of the state directory to
// tokens (making it at first start) and returns its file; "" when a
// configured token already has the operator's name (that token is then the
// operator's way in).
func addOperatorToken(tokens *api.Tokens, state string, log *slog.Logger) (string, error) {
	secret, created, err := operator.EnsureToken(state)
	if err != nil {
		return "", err
	}
	if err := tokens.AddOperator(operator.Name, secret); err != nil {
		if _, _, taken := tokens.Lookup(secret); taken {
			return "", fmt.Errorf("%w: a configured token has the operator token's secret; delete %s and restart", err, operator.TokenPath(state))
		}
		log.Warn("no operator token: a configured token is named "+operator.Name+"; use it to approve", "err", err)
		return "", nil
	}
	if created {
		log.Info("made the operator token", "file", operator.TokenPath(state))
	}
	return operator.TokenPath(state), nil
}

// listenNames are the addresses the daemon listens on as api.Guard takes
// them: the configured one (a host name counts as one of the daemon's)
// and the listener's, both with the port the listener got.
func listenNames(configured string, got net.Addr) []string {
	_, port, err := net.SplitHostPort(got.String())
	if err != nil {
		return nil
	}
	names := []string{got.String()}
	if host, _, err := net.SplitHostPort(configured); err == nil && host != "" {
		names = append(names, net.JoinHostPort(host, port))
	}
	return names
}

// everyAddress reports whether addr (host:port) listens on every address
// of the host.
func everyAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
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

// executorHealth is the health monitor's report as the console shows it.
func (cr *core) executorHealth() []console.ExecutorHealth {
	var out []console.ExecutorHealth
	for _, p := range cr.health.Report() {
		out = append(out, console.ExecutorHealth{Name: p.Name, OK: p.OK, Reason: p.Reason})
	}
	return out
}
