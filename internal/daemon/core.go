package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/audit"
	"github.com/toolagent/toolagent/internal/cache"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/embed"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/feedback"
	"github.com/toolagent/toolagent/internal/health"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/hugeheap"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/reload"
	"github.com/toolagent/toolagent/internal/repo"
	runsreg "github.com/toolagent/toolagent/internal/runs"
	"github.com/toolagent/toolagent/internal/scan"
	"github.com/toolagent/toolagent/internal/telemetry"
)

// core is what a daemon of every role (Serve, Stdio, Sync) is built on:
// the catalog store kept current by the reload loop, the executors and
// the dispatcher. newCore builds it; start runs its goroutines.
type core struct {
	cfg      Config
	log      *slog.Logger
	setup    host.Setup    // resolved paths; how tools run
	sandbox  *proc.Sandbox // nil: off, or a command that runs no tool
	reg      *prometheus.Registry
	store    *catalog.Store
	execs    map[hldp.ExecutorKind]executors.Executor
	disp     *dispatch.Dispatcher
	loop     *reload.Loop
	trigger  *reload.Trigger
	watchDir string // local tools dir to watch; "" for none
	// doors, when set, is closed once the daemon's other doors (the MCP
	// tool lists of serve) list the first snapshot: the daemon is ready
	// then (/readyz). What a start does after its publish and nobody
	// waits for (the match index, the watches, the parse cache's save)
	// waits for it, so as not to take the cores from them (see start).
	doors   <-chan struct{}
	offline func() (scan.Tree, error) // the tree of the last run (startOffline)
	health  *health.Monitor
	src     *source // where trees come from (source.go)
	// approvals is the approval queue: under STATE/approvals, or in the
	// shared database (store postgres); nil without one. close releases
	// its directory lock, or stops its leases.
	approvals closingQueue
	// storeCheck asks approvals whether it answers, for /readyz, /v1/status
	// and the console (nil without approvals).
	storeCheck *sharedCheck
	// db is the shared database (store postgres), or nil; slots hold
	// max_concurrency across the replicas on it.
	db        *pgstore.DB
	slots     *pgstore.Slots
	broadcast *pgstore.Broadcast
	// runs keeps the last calls' results for the console.
	runs *keptRuns
	// runReg keeps every call's run (output events, result) for
	// GET /v1/runs/{id} and streams.
	runReg *runsreg.Registry
	// saver writes the parse cache after builds, off the reload path.
	saver *cacheSaver
	// notifier tells approval_notify's targets of held calls and
	// decisions (nil without targets).
	notifier *approvalNotifier
	// feedback learns from use (nil for sync); onMatch feeds it.
	feedback *feedback.Store
	// auditFile keeps the audit trail in STATE/audit for the console's
	// history; nil for commands that run no calls, and with the shared
	// store, where auditPG keeps it in the database.
	auditFile *audit.File
	auditPG   *audit.PG
	// trust checks signatures (nil without a trust policy); the console
	// shows who signed each commit of a tool's history with it.
	trust *trustGate
	// logs keeps the tool histories the console showed.
	logs logCache
	// exporters send the audit trail on (audit_export); serve only.
	exporters []*audit.Exporter
	// stopTracing flushes the spans (internal/telemetry; a no-op when
	// the OTEL_* environment asks for no tracing).
	stopTracing func()
	// embed is the embeddings backend of matching (nil: none).
	embed *embed.Matcher
}

// history is where the console reads the audit trail, or nil.
func (cr *core) history() audit.Store {
	switch {
	case cr.auditPG != nil:
		return cr.auditPG
	case cr.auditFile != nil:
		return cr.auditFile
	}
	return nil
}

// approvalMode says whether a command needs the approval queue.
type approvalMode int

const (
	// noApprovals: the command never runs calls (sync).
	noApprovals approvalMode = iota
	// approvalsRequired: the command owns the queue; another process
	// holding STATE/approvals is an error (serve).
	approvalsRequired
	// approvalsIfFree: the command uses the queue when no other process
	// holds it, and otherwise answers held calls without an approval id
	// (mcp over stdio, which a client may start beside a daemon).
	approvalsIfFree
)

// approveHint says how a held call is decided where it was held: on a
// daemon (serve), by its operator with `toolagent approvals` on its host
// (the CLI finds the daemon and the operator token in the state
// directory) or, with tokens, by an approver through the API; under
// `toolagent mcp` over stdio, with `toolagent approvals` on this host,
// which reaches it through its control socket.
func approveHint(mode approvalMode, state string, open bool) func(id string) string {
	if mode == approvalsIfFree { // toolagent mcp over stdio
		return func(id string) string {
			return fmt.Sprintf("an operator on this host, while this MCP server runs: `toolagent approvals approve %[1]s --state %[2]s` (or deny; --params to approve with edits; `toolagent approvals list --state %[2]s` shows what waits)", id, state)
		}
	}
	byOperator := func(id string) string {
		return fmt.Sprintf("the operator on the daemon's host: `toolagent approvals approve %[1]s --state %[2]s` (or deny; --params JSON to approve with edits), or POST /v1/approvals/%[1]s {\"decision\":\"approve\"} with the operator token (%[3]s) as Authorization: Bearer", id, state, operator.TokenPath(state))
	}
	if open {
		// Every other caller is anonymous and cannot approve its own
		// call: the operator can, and confirms their own the same way.
		return func(id string) string {
			return byOperator(id) + "; an anonymous caller cannot approve its own call, the operator confirms theirs the same way (or in the console with \"Confirm and run\")"
		}
	}
	return func(id string) string {
		return fmt.Sprintf("an approver with the approve role: POST /v1/approvals/%s {\"decision\":\"approve\"} (or \"deny\"; \"params\" to approve with edits); or %s", id, byOperator(id))
	}
}

// hostSetup is how the daemon cfg describes finds its paths and runs
// tools on this host: paths resolved, the sandbox's settings, the shell
// policy.
func (cfg Config) hostSetup() (host.Setup, error) {
	c := host.Setup{Paths: host.Paths{Tools: cfg.Tools, State: cfg.State, FilesRoot: cfg.FilesRoot, Embedded: cfg.Embedded}, Sandbox: cfg.Sandbox, Hidden: cfg.secretFiles()}
	if err := c.Resolve(cfg.getenv); err != nil {
		return c, err
	}
	user, err := host.SandboxUser(cfg.SandboxUser)
	if err != nil {
		return c, err
	}
	c.SandboxOptions = proc.SandboxOptions{Bwrap: cfg.SandboxBwrap, User: user, Mechanism: host.SandboxMechanism(cfg.SandboxMechanism),
		UIDBase: uint32(cfg.SandboxUIDBase), UIDCount: cfg.SandboxUIDs, Limits: proc.Limits{MaxProcs: cfg.SandboxMaxProcs, MaxMemory: cfg.SandboxMaxMemory}}
	c.ShellPolicy, err = cfg.shellPolicy()
	return c, err
}

// retryJitter is the random part of a retry's wait after a failed
// reload: up to 20 % more, so replicas that failed together spread out.
const retryJitter = 0.2

// newCore wires the catalog, executors, dispatcher and reload loop from
// cfg. Nothing runs until start; close releases what it opened.
func newCore(cfg Config, log *slog.Logger, mode approvalMode) (_ *core, err error) {
	c, err := cfg.hostSetup()
	if err != nil {
		return nil, err
	}
	if mode == approvalsRequired {
		if err := operator.AlreadyServing(c.State); err != nil {
			return nil, err // its message names the daemon, not the queue it holds
		}
	}
	em, err := newEmbeddings(cfg, c.State, log)
	if err != nil {
		return nil, err
	}
	src, err := newSource(cfg, c, log)
	if err != nil {
		return nil, err
	}
	// What is opened from here on is closed again when newCore fails: a
	// caller that gets no core has nothing to close (the sandbox's warm
	// worker would otherwise outlive the refusal, as long as the process).
	var undo []func()
	defer func() {
		if err != nil {
			for _, f := range slices.Backward(undo) {
				f()
			}
		}
	}()
	undo = append(undo, src.close)
	stopTracing, err := telemetry.Setup(log.With(slog.String("log", "tracing")))
	if err != nil {
		return nil, err
	}
	undo = append(undo, stopTracing)
	// The parse cache is decoded while the sandbox is probed, the queues
	// opened and the API, MCP and console built (daemon.New): at 10,000
	// tools it is most of a warm start. The first build waits for it.
	cacheOpened := make(chan *cache.Cache, 1)
	go func() { cacheOpened <- openParseCache(c.State, log) }()
	parseCache := sync.OnceValue(func() *cache.Cache { return <-cacheOpened })
	offline, readOffline := startOffline(src) // and the tree of the last run read
	undo = append(undo, readOffline)
	c.RunsTools = mode != noApprovals // sync runs no tool
	execs, sb, err := c.Executors()
	if err != nil {
		return nil, err
	}
	if sb != nil {
		undo = append(undo, sb.Close)
	}
	if c.RunsTools {
		host.LogSandbox(log, sb, "tool processes")
	}
	hc, err := remoteExecutors(execs, cfg, log)
	if err != nil {
		return nil, err
	}
	var ap closingQueue
	var db *pgstore.DB
	var slots *pgstore.Slots
	replica := ""
	noQueue := ""
	if mode != noApprovals && cfg.Store != "files" {
		var pg *approval.PGStore
		if db, pg, err = openSharedApprovals(cfg, log); err != nil {
			return nil, err
		}
		undo = append(undo, db.Close)
		ap, replica = pg, pg.Replica()
		slots = pgstore.NewSlots(db, replica, cfg.StoreLease, log.With(slog.String("log", "slots")))
	} else if mode != noApprovals {
		var fs *approval.Store
		fs, err = host.OpenApprovals(c.State, cfg.ApprovalTTL, cfg.AllowSelfApproval, log)
		if err == nil {
			ap = fs
			undo = append(undo, func() { fs.Close() })
		}
		switch {
		case errors.Is(err, approval.ErrLocked) && mode == approvalsIfFree:
			log.Warn("no approval queue: another toolagent process (a daemon?) holds it; calls that need an approval cannot be held here, call them through that daemon",
				"dir", host.ApprovalsDir(c.State))
			ap = nil
			noQueue = "the approval queue of this state directory belongs to another toolagent process (a daemon?); call the tool through that daemon"
		case err != nil:
			return nil, err
		}
	}
	auditLog := log.With(slog.String("log", "audit"))
	var af *audit.File
	var apg *audit.PG
	if mode != noApprovals && db != nil {
		// The shared trail: every record a row in the database's hash
		// chain, which every replica's console reads.
		apg = audit.OpenPG(db, replica, log)
		undo = append(undo, func() { apg.Close() })
		auditLog = slog.New(slog.NewMultiHandler(log.Handler(), apg.Handler())).With(slog.String("log", "audit"))
	} else if mode != noApprovals {
		if af, err = audit.Open(host.AuditDir(c.State), 0, 0); err != nil {
			log.Warn("no audit file: the console's history stays empty; the audit log lines are kept", "err", err)
			af = nil
		} else {
			undo = append(undo, func() { af.Close() })
			auditLog = slog.New(slog.NewMultiHandler(log.Handler(), af.Handler())).With(slog.String("log", "audit"))
		}
	}
	var exporters []*audit.Exporter
	if mode == approvalsRequired {
		if exporters, err = auditExporters(cfg, c.State, db, log); err != nil {
			return nil, err
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	store := new(catalog.Store)
	runs := new(keptRuns)
	runReg := runsreg.New(runsreg.Options{Keep: cfg.RunKeep, StallWindow: cfg.StallWindow})
	// Learning from use: a request by intent followed by a call of one of
	// its candidates joins that tool's text (internal/feedback).
	var fb *feedback.Store
	var learned func(name, intent string) []catalog.Learned
	if mode != noApprovals {
		ri := &reindexer{store: store}
		var err error
		fb, err = feedback.Open(host.FeedbackFile(c.State), feedback.Options{OnLearn: func(string) { ri.kick() }})
		if err != nil {
			log.Warn("learned requests not read; learning starts again", "err", err)
		}
		learned = host.LearnedOf(fb)
	}
	kept := func(call dispatch.Call, r dispatch.Result) {
		runs.keep(call, r)
		if fb == nil || call.DryRun {
			return
		}
		intent := ""
		if snap := store.Load(); snap != nil {
			if e, ok := snap.Lookup(call.Tool); ok && e.Tool != nil {
				intent = e.Tool.Intent
			}
		}
		// Only a successful call teaches (success, no_data): not one
		// that failed with not_found or invalid_params, nor one whose
		// tool failed, which may have been the wrong choice.
		fb.Called(call.Caller, call.Tool, intent, intent != "" && r.OK)
	}
	am := newApprovalMetrics(reg)
	an, err := newApprovalNotifier(cfg, log)
	if err != nil {
		return nil, err
	}
	undo = append(undo, an.close)
	onHeld, onDecided := func(dispatch.Approval) {}, am.decided
	if an != nil {
		onHeld = an.held
		onDecided = func(a dispatch.Approval) { am.decided(a); an.decided(a) }
	}
	disp := dispatch.New(store, execs, dispatch.Options{
		OnHeld:        onHeld,
		OnDecided:     onDecided,
		Kept:          kept,
		Runs:          runReg,
		MaxConcurrent: cfg.MaxConcurrent,
		Audit:         auditLog,
		Approvals:     ap,
		SharedSlots:   sharedSlots(slots),
		ShellPolicy:   c.ShellPolicy,
		NoQueueReason: noQueue,
		ApproveHint:   approveHint(mode, c.State, cfg.Tokens == "" && cfg.TokensFile == ""),
	})
	if ap != nil {
		am.watch(disp)
	}
	saver := newCacheSaver(parseCache, log)
	vocab, err := host.LoadVocab(cfg.VocabFile)
	if err != nil {
		return nil, err
	}
	// LazyIndex: the reload loop publishes each snapshot, then builds its
	// match index, so readiness and calls do not wait for the index.
	scanOpts := scan.Options{Check: hc.Narrow(health.Configured(execs)), Prefix: src.prefix, Catalog: catalog.Options{Vocab: vocab, LazyIndex: true, Learned: learned}}
	tg, err := newTrustGate(cfg, host.TrustFile(c.State), src.prefix, log.With(slog.String("log", "trust")))
	if err != nil {
		return nil, err
	}
	if tg != nil {
		scanOpts.Vet, scanOpts.VetDelta = tg.vet, tg.vetDelta
	}
	loop := &reload.Loop{
		Source: src.src,
		Build: func(prev *catalog.Snapshot, t scan.Tree) (*catalog.Snapshot, scan.Report, error) {
			snap, rep, err := scan.Build(prev, t, parseCache(), scanOpts)
			if cfg.OnBuild != nil {
				cfg.OnBuild(rep)
			}
			if err == nil {
				// Saved after every build, so a restart parses nothing;
				// in the background, so the snapshot is published first.
				saver.dirty()
			}
			return snap, rep, err
		},
		Store:    store,
		Logger:   log.With(slog.String("log", "reload")),
		Backoff:  reload.Backoff{Min: cfg.RetryMin, Max: cfg.RetryMax, Jitter: retryJitter},
		Debounce: reload.Debounce{Min: cfg.ReloadDebounce, Max: cfg.ReloadMaxWait},
	}
	loop.Scheduled = src.next // next_sync in /v1/status
	loop.Quiet = returnMemory
	if tg != nil {
		loop.Dirty = tg.dirty
	}
	trigger := reload.NewTrigger()
	loop.Ticks = trigger.Ticks()
	var bc *pgstore.Broadcast
	if db != nil {
		// One push, every replica: another replica's announcement makes
		// this one sync now; what it publishes is recorded for status.
		bc = pgstore.NewBroadcast(db, replica, func(from string) {
			log.Info("another replica announced a push; syncing now", "from", from)
			trigger.Poke()
		}, log.With(slog.String("log", "replicas")))
		loop.OnPublish = func(snap *catalog.Snapshot) {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := bc.Serving(ctx, snap.Rev()); err != nil {
					log.Warn("could not record the served revision in the shared store", "err", err)
				}
			}()
		}
	}
	var storeCheck *sharedCheck
	if ap != nil {
		storeCheck = newSharedCheck(ap.Check)
	}
	return &core{
		embed: em, cfg: cfg, log: log, setup: c, sandbox: sb, reg: reg, store: store, execs: execs, disp: disp,
		loop: loop, trigger: trigger, watchDir: src.watchDir, offline: offline, health: hc, src: src,
		approvals: ap, db: db, slots: slots, broadcast: bc, auditFile: af, auditPG: apg, runs: runs, runReg: runReg, saver: saver, notifier: an, feedback: fb,
		storeCheck:  storeCheck,
		trust:       tg,
		exporters:   exporters,
		stopTracing: stopTracing,
	}, nil
}

// quietWhenWatching is the watcher's reload.Tracker: once every folder
// is watched, the sync the watcher asks for (which reads the whole tree)
// is followed by returnMemory too (reload.Loop.QuietAfterNext). The
// rest goes to the source's tracker, if any.
type quietWhenWatching struct {
	inner reload.Tracker
	loop  *reload.Loop
}

func (q quietWhenWatching) Track(on bool) {
	if on {
		q.loop.QuietAfterNext()
	}
	if q.inner != nil {
		q.inner.Track(on)
	}
}

func (q quietWhenWatching) Changed(name string) {
	if q.inner != nil {
		q.inner.Changed(name)
	}
}

// returnMemory gives the OS back the memory a start or an index
// compaction left free. Go's scavenger would return it over minutes,
// holding the peak of decoding the parse cache and building the index
// meanwhile: at 10,000 tools the resident set 3 s after ready went from
// about 107 MiB to the live heap and the binary (docs/operations.md,
// "Start time"). Called on the reload loop's goroutine (reload.Loop.Quiet),
// after a collection it forces; nothing waits for it. The start is over
// then: the huge pages asked for it are asked no more (hugeheap.Settle),
// and those the returned memory held are split.
func returnMemory() {
	hugeheap.Settle()
	debug.FreeOSMemory()
}

// close releases what newCore opened: the source, the sandbox and
// the approval queue's lock. Call it after every goroutine start began has ended.
func (cr *core) close() {
	cr.saver.close() // the last build's parse cache is on disk
	cr.notifier.close()
	cr.src.close()
	if cr.sandbox != nil {
		cr.sandbox.Close() // its reaper ends what a call left
	}
	if cr.auditFile != nil {
		cr.auditFile.Close()
	}
	if cr.auditPG != nil {
		cr.auditPG.Close() // writes what is queued: nothing lost on a clean stop
	}
	if cr.approvals != nil {
		if err := cr.approvals.Close(); err != nil {
			cr.log.Warn("close the approval queue", "err", err)
		}
	}
	if cr.slots != nil {
		cr.slots.Close()
	}
	if cr.broadcast != nil {
		cr.broadcast.Close()
	}
	if cr.db != nil {
		cr.db.Close()
	}
	cr.stopTracing() // last: the spans of everything closed above
}

// OpenStore opens the shared database of cfg.Store (postgres: the URL in
// the variable cfg.StoreURLEnv names, which is then removed from the
// environment; or a URL without a password).
func OpenStore(cfg Config) (*pgstore.DB, error) {
	url := cfg.Store
	if url == "files" {
		return nil, errors.New("store files has no shared database: set store to postgres (with the URL in the variable store_url_env names) or a postgres:// URL")
	}
	if url == "postgres" {
		url = cfg.getenv(cfg.StoreURLEnv)
		if cfg.Unsetenv != nil {
			// Read once, then out of the daemon's environment, like the
			// tokens: it may carry the password.
			_ = cfg.Unsetenv(cfg.StoreURLEnv)
		}
		if url == "" {
			return nil, fmt.Errorf("store postgres: the environment variable %s (store_url_env) is empty: set it to the database URL, e.g. postgres://toolagent@db.example/toolagent", cfg.StoreURLEnv)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return pgstore.Open(ctx, url)
}

// sharedSlots is s as dispatch's shared slots: nil when s is nil.
func sharedSlots(s *pgstore.Slots) dispatch.SharedSlots {
	if s == nil {
		return nil
	}
	return s
}

// closingQueue is an approval queue the core closes, and asks whether
// it answers (/readyz, /v1/status).
type closingQueue interface {
	approval.Queue
	Close() error
	Check(ctx context.Context) error
}

// openSharedApprovals opens the shared database (cfg.Store postgres, or a
// URL) and its approval queue. The URL with a password comes only from
// the environment variable cfg.StoreURLEnv names, which is then removed
// from the daemon's environment.
func openSharedApprovals(cfg Config, log *slog.Logger) (*pgstore.DB, *approval.PGStore, error) {
	db, err := OpenStore(cfg)
	if err != nil {
		return nil, nil, err
	}
	ap, err := approval.OpenPG(db, approval.PGOptions{Options: approval.Options{TTL: cfg.ApprovalTTL, AllowSelfApproval: cfg.AllowSelfApproval, Logger: log}, LeaseTTL: cfg.StoreLease})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	log.Info("approvals in the shared database", "store", "postgres", "schema_version", db.Version, "replica", ap.Replica())
	return db, ap, nil
}

// onMatch records an intent query for learning from use (nil without a
// feedback store).
func (cr *core) onMatch() func(caller, request string, resp catalog.MatchResponse) {
	if cr.feedback == nil {
		return nil
	}
	return func(caller, request string, resp catalog.MatchResponse) {
		names := make([]string, len(resp.Candidates))
		for i, c := range resp.Candidates {
			names[i] = c.Name
		}
		cr.feedback.Matched(caller, request, names, resp.Found)
	}
}

// reindexAfter is how long a learned request waits before the match index
// is rebuilt with it (learning in a burst rebuilds once).
const reindexAfter = time.Second

// reindexer rebuilds the current snapshot's match index once after a
// burst of learning.
type reindexer struct {
	store *catalog.Store
	mu    sync.Mutex
	timer *time.Timer
}

func (ri *reindexer) kick() {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if ri.timer != nil {
		return
	}
	ri.timer = time.AfterFunc(reindexAfter, func() {
		ri.mu.Lock()
		ri.timer = nil
		ri.mu.Unlock()
		ri.store.Reindex()
	})
}

// cacheSaver saves the parse cache on a goroutine of its own whenever a
// build changed it: one save at a time, the last one after close.
type cacheSaver struct {
	c      func() *cache.Cache // waits for the cache to be opened
	log    *slog.Logger
	kick   chan struct{}
	done   chan struct{}
	mu     sync.Mutex // orders dirty and close; guards asked and saved
	closed bool
	// asked counts the saves asked for; saved is the count when the last
	// save began. saves broadcasts when saved changes.
	asked, saved int
	saves        *sync.Cond
	// hold, when set, is waited for before a save (holdUntil), until
	// holdCtx ends or the saver closes (stop).
	hold    <-chan struct{}
	holdCtx context.Context
	stop    chan struct{}
	held    func() // tests: called when a save begins to wait for hold
}

// holdUntil makes saves wait until ch is closed or ctx ends (a close
// saves at once). Call it before the first build.
func (s *cacheSaver) holdUntil(ctx context.Context, ch <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.holdCtx = ch, ctx
}

func newCacheSaver(c func() *cache.Cache, log *slog.Logger) *cacheSaver {
	s := &cacheSaver{c: c, log: log, kick: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{})}
	s.saves = sync.NewCond(&s.mu)
	go s.run()
	return s
}

// wait returns once every save asked for so far has ended (bench measures
// memory after it, not during an encoding).
func (s *cacheSaver) wait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.saved < s.asked && !s.closed {
		s.saves.Wait()
	}
}

// dirty asks for a save (coalesced); after close it saves at once.
func (s *cacheSaver) dirty() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked++
	if s.closed {
		if err := s.c().Save(); err != nil {
			s.log.Warn("parse cache not saved; a restart parses again", "err", err)
		}
		return
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *cacheSaver) run() {
	defer close(s.done)
	for range s.kick {
		s.mu.Lock()
		hold, holdCtx := s.hold, s.holdCtx
		s.mu.Unlock()
		if hold != nil {
			if s.held != nil {
				s.held()
			}
			select {
			case <-hold:
			case <-holdCtx.Done():
			case <-s.stop:
			}
		}
		s.mu.Lock()
		asked := s.asked
		s.mu.Unlock()
		if err := s.c().Save(); err != nil {
			s.log.Warn("parse cache not saved; a restart parses again", "err", err)
		}
		s.mu.Lock()
		s.saved = max(s.saved, asked)
		s.saves.Broadcast()
		s.mu.Unlock()
	}
}

// close saves what is pending and stops the saver. Call it once builds
// have ended.
func (s *cacheSaver) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
		close(s.kick)
		s.saves.Broadcast()
	}
	s.mu.Unlock()
	<-s.done
}

// start runs the reload loop, the executors' health checks and, for a
// local directory, its watcher in g until ctx ends.
func (cr *core) start(ctx context.Context, g *errgroup.Group) {
	if cr.doors != nil {
		// A start's publish is followed by the MCP lists (readiness
		// waits for them) and by work nobody waits for: the match index
		// (the biggest), the folder watches and the parse cache's save.
		// On two cores those took the lists' core: they wait until the
		// lists are made.
		cr.loop.BeforeIndex = func() { cr.whenReady(ctx) }
		cr.saver.holdUntil(ctx, cr.doors)
	}
	g.Go(func() error {
		cr.prime() // the catalog of the last run is served at once
		if snap := cr.store.Load(); snap != nil && cr.loop.OnPublish != nil {
			cr.loop.OnPublish(snap) // what it serves from the start
		}
		if cr.watchDir != "" {
			// After the first publish, which its watches do not delay:
			// Watch then pokes, and the Sync it asks for stats everything.
			// With nothing primed (a first start) that publish ends the
			// first sync: placing a watch per tool folder beside the parse
			// competed with it for the cores (about 4 % of a cold start's
			// CPU at 10,000 tools, perf). A first sync that fails leaves
			// the watches unplaced until one publishes; the loop retries.
			g.Go(func() error {
				if !cr.whenReady(ctx) {
					return nil
				}
				var tr reload.Tracker
				if ls, ok := cr.loop.Source.(*localSource); ok {
					tr = ls.dir // a watched directory rereads only what changed
				}
				return reload.Watch(ctx, cr.watchDir, cr.trigger, quietWhenWatching{tr, cr.loop}, cr.log.With(slog.String("log", "reload")))
			})
		}
		return cr.loop.Run(ctx, cr.trigger.C())
	})
	if cr.src.sched != nil {
		g.Go(func() error { return cr.src.sched.Run(ctx, cr.trigger) })
	}
	g.Go(func() error { return cr.health.Run(ctx, cr.store, cr.loop.Rebuild) })
	for _, x := range cr.exporters {
		g.Go(func() error { x.Run(ctx); return nil })
	}
	g.Go(func() error { return cr.watchEmbeddings(ctx) })
}

// whenReady waits until the doors list the first snapshot (with no doors
// to wait for, until the store holds one: published); false if ctx ended
// first.
func (cr *core) whenReady(ctx context.Context) bool {
	if cr.doors == nil {
		return published(ctx, cr.store)
	}
	select {
	case <-cr.doors:
		return true
	case <-ctx.Done():
		return false
	}
}

// published waits until store holds a snapshot; false if ctx ended
// first.
func published(ctx context.Context, store *catalog.Store) bool {
	for {
		ch := store.Changed()
		if store.Load() != nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// toolsSource returns the reload source for the tools tree dir, and the
// directory to watch ("" for the embedded tree, which never changes). A
// directory keeps its listing under the state directory, so a restart
// reads only the files that changed while the daemon was down.
func toolsSource(embedded *host.Paths, dir, state string, log *slog.Logger) (reload.Source, string, error) {
	if dir == host.Embedded {
		t, err := embedded.EmbeddedTree()
		if err != nil {
			return nil, "", err
		}
		return staticSource{t}, "", nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, "", fmt.Errorf("tools tree: %w", err)
	}
	if !fi.IsDir() {
		return nil, "", fmt.Errorf("tools tree %s: not a directory", dir)
	}
	return &localSource{dir: &repo.LocalDir{
		Path:        dir,
		ListingFile: host.ListingFile(state),
		Logger:      log.With(slog.String("log", "reload")),
		// The definitions a Sync read to hash them are parsed from that
		// read, not opened again.
		KeepRead: func(name string) bool { return path.Base(name) == hldp.FileName },
	}}, dir, nil
}

// localSource adapts repo.LocalDir, whose Sync returns the concrete
// *repo.Tree, to reload.Source.
type localSource struct{ dir *repo.LocalDir }

func (s *localSource) Sync(ctx context.Context) (scan.Tree, error) {
	t, err := s.dir.Sync(ctx)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// staticSource serves one tree forever (the embedded tools).
type staticSource struct{ tree scan.Tree }

func (s staticSource) Sync(context.Context) (scan.Tree, error) { return s.tree, nil }

// AuditVerify checks the hash chain of cfg's audit trail: the shared
// store's rows (store postgres), or the file store's STATE/audit lines.
func AuditVerify(ctx context.Context, cfg Config) (audit.VerifyResult, error) {
	if cfg.Store == "files" {
		dir, err := auditDir(cfg)
		if err != nil {
			return audit.VerifyResult{}, err
		}
		return audit.VerifyFile(dir)
	}
	db, err := OpenStore(cfg)
	if err != nil {
		return audit.VerifyResult{}, err
	}
	defer db.Close()
	return audit.Verify(ctx, db)
}

// auditDump writes cfg's audit trail to w as JSON lines (audit.Row),
// oldest first, from either store.
func auditDump(ctx context.Context, cfg Config, w io.Writer) error {
	if cfg.Store == "files" {
		dir, err := auditDir(cfg)
		if err == nil {
			_, err = audit.ExportFile(dir, w)
		}
		return err
	}
	db, err := OpenStore(cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = audit.Export(ctx, db, w)
	return err
}

// auditDir is STATE/audit of cfg, which must exist: a trail nobody wrote
// is not an empty one that verifies.
func auditDir(cfg Config) (string, error) {
	p := host.Paths{State: cfg.State, Tools: host.Embedded}
	if err := p.Resolve(cfg.getenv); err != nil {
		return "", err
	}
	dir := host.AuditDir(p.State)
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("no audit trail in the state directory %s: %w (a daemon of store files writes it)", p.State, err)
	}
	return dir, nil
}
