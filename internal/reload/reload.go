// Package reload keeps a catalog.Store current: it turns triggers (fsnotify
// events, and later cron, webhooks and POST /v1/sync) into syncs of a
// source, builds each new snapshot off to the side with scan, and publishes
// it with one atomic Store.Swap. When a sync or a build fails, the last good
// snapshot keeps serving and the loop retries with exponential backoff.
//
// The package owns when to reload (coalescing, debouncing, backoff) and the
// report of how reloading goes (Status); it does not own where trees come
// from (internal/repo, reached through the Source interface) or how a tree
// becomes a snapshot (internal/scan, reached through Loop.Build).
//
// Concurrency: a Loop's Status method is safe to call from any goroutine
// while Run is running; Once serialises with itself and with Run, so at
// most one build is in flight. A Trigger is safe for concurrent use by any
// number of senders. Watch runs in its own goroutine and only sends.
//
// Imports: catalog, scan (sources enter through Source). Imported by api
// and console (for Status only) and the daemon (internal/daemon).
package reload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/scan"
)

// Source produces the current tools tree. internal/repo's LocalDir and Git
// satisfy it through a small adapter in internal/daemon (their Sync returns
// the concrete *repo.Tree). Sync must be safe to call repeatedly; it is
// called from one goroutine at a time.
type Source interface {
	Sync(ctx context.Context) (scan.Tree, error)
}

// BuildFunc turns a tree into a new snapshot, given the previous one (nil
// at first) for last-good carry-over. It is scan.Build with its cache and
// options bound; the daemon closes over them so that reload needs no
// import of the cache package.
type BuildFunc func(prev *catalog.Snapshot, t scan.Tree) (*catalog.Snapshot, scan.Report, error)

// Defaults for the zero fields of Debounce and Backoff.
const (
	DefaultDebounceMin = 100 * time.Millisecond
	DefaultDebounceMax = time.Second
	DefaultBackoffMin  = time.Second
	DefaultBackoffMax  = time.Minute
)

// Debounce is how Run coalesces a burst of triggers: it reloads once no
// trigger has arrived for Min, and at the latest Max after the first
// trigger of the burst, so a steady stream of events cannot starve it.
type Debounce struct {
	Min, Max time.Duration
}

// Backoff spaces the retries after failed reloads: Min after the first
// failure, doubling with each further failure up to Max, plus up to
// Jitter (a fraction, 0.2 = 20 %) of that at random, so that replicas
// failing together do not retry together.
type Backoff struct {
	Min, Max time.Duration
	Jitter   float64
}

// Wait is Delay(n) plus the jitter r (in [0, 1)) of it.
func (b Backoff) Wait(n int, r float64) time.Duration {
	d := b.Delay(n)
	return d + time.Duration(float64(d)*b.Jitter*r)
}

// Delay is the wait before retry number n (1 for the first retry).
func (b Backoff) Delay(n int) time.Duration {
	b = b.withDefaults()
	d := b.Min
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

func (b Backoff) withDefaults() Backoff {
	if b.Min <= 0 {
		b.Min = DefaultBackoffMin
	}
	if b.Max < b.Min {
		b.Max = max(DefaultBackoffMax, b.Min)
	}
	return b
}

func (d Debounce) withDefaults() Debounce {
	if d.Min <= 0 {
		d.Min = DefaultDebounceMin
	}
	if d.Max < d.Min {
		d.Max = max(DefaultDebounceMax, d.Min)
	}
	return d
}

// Status reports how reloading goes. It is a copy; reading it never blocks
// a reload for long.
type Status struct {
	// Rev is the revision of the snapshot in the store after the last
	// successful reload ("" before the first).
	Rev string `json:"revision"`
	// Gen is that snapshot's generation.
	Gen uint64 `json:"generation"`
	// LastOK is when a sync and build last succeeded (zero: never).
	LastOK time.Time `json:"last_ok,omitzero"`
	// LastErr is the error of the last attempt when it failed, "" when the
	// last attempt succeeded. The last good snapshot keeps serving.
	LastErr string `json:"last_error,omitempty"`
	// LastErrAt is when LastErr happened.
	LastErrAt time.Time `json:"last_error_at,omitzero"`
	// Next is when the next retry is scheduled after a failure (zero: none
	// scheduled; the next trigger reloads).
	Next time.Time `json:"next_retry,omitzero"`
	// Failures counts consecutive failed attempts (0 after a success).
	Failures int `json:"consecutive_failures"`
	// Reloads counts snapshots published since start.
	Reloads uint64 `json:"reloads"`
	// ReloadFailures counts failed attempts since start.
	ReloadFailures uint64 `json:"reload_failures"`
	// Problems is the number of files that did not load in the last build.
	Problems int `json:"problems"`
	// Parsed and Reused are the files the last build parsed, and took from
	// the previous snapshot or the parse cache; a restart at an unchanged
	// commit parses none.
	Parsed int `json:"parsed"`
	Reused int `json:"reused"`
	// ParsedTotal counts files parsed since start.
	ParsedTotal uint64 `json:"parsed_total"`
	// NextSync is when the schedule syncs next (zero: no schedule).
	NextSync time.Time `json:"next_sync,omitzero"`
	// Source describes where trees come from (a URL with its branch, or a
	// directory), without secrets.
	Source string `json:"source,omitempty"`
	// SyncingSince is when the sync in progress began (zero: none runs).
	SyncingSince time.Time `json:"syncing_since,omitzero"`
}

// Loop syncs Source into Store. Set the fields, then call Run (or Once);
// do not change them afterwards, and do not copy a Loop after first use.
type Loop struct {
	// Source produces trees. Required.
	Source Source
	// Build turns a tree into a snapshot (nil: scan.Build without a cache
	// and with default options).
	Build BuildFunc
	// Store receives every new snapshot. Required.
	Store *catalog.Store
	// Logger gets one line per reload, problem and failure (nil: discard).
	Logger *slog.Logger
	// Backoff spaces retries after failures (zero: 1s doubling to 1m).
	Backoff Backoff
	// Debounce coalesces bursts of triggers (zero: 100ms quiet, 1s at most).
	Debounce Debounce
	// Now returns the time (nil: time.Now). Tests set it.
	Now func() time.Time
	// OnPublish, when set, is called with each snapshot the loop
	// publishes, after the swap (from the loop's goroutine: it must not
	// block for long).
	OnPublish func(snap *catalog.Snapshot)
	// Dirty, when set, reports whether something Build reads besides the
	// tree (the daemon's trusted signers files) changed since the last
	// build: a sync that finds the revision it serves then builds anyway.
	Dirty func() bool
	// Scheduled returns when the next scheduled sync is due, for Status
	// (nil: no schedule).
	Scheduled func() time.Time
	// Ticks are the schedule's triggers (Trigger.Ticks). Unlike the
	// others (webhooks, POST /v1/sync, file events), a tick that comes
	// while Run backs off after a failure is dropped: the retry is the
	// next attempt. nil: no schedule.
	Ticks <-chan struct{}
	// CompactAfter is how long Run waits, after publishing a snapshot
	// whose match index was updated rather than built anew (see
	// catalog.Options.Prev), with no other reload, before it builds that
	// index anew (catalog.Store.Compact): an update keeps copies of the
	// posting lists it changed and the first build's field lengths, and a
	// quiet moment is when a full build costs nobody a wait. Zero: one
	// minute; negative: never.
	CompactAfter time.Duration
	// Quiet, when set, is called on Run's goroutine after its first sync
	// attempt ended (the start's builds, successful or not, are done) and
	// after each compaction that built an index anew: moments when a big
	// build just left its garbage and no other build runs. The daemon
	// returns the memory then free to the OS there (daemon.returnMemory).
	Quiet func()
	// BeforeIndex, when set, is called on the goroutine that published a
	// snapshot, before it builds the snapshot's match index (which the
	// daemon's readiness does not wait for): the daemon waits there
	// until its other doors (the MCP tool lists) list the snapshot, so
	// that the index build, the start's biggest job after the publish,
	// does not take a core from them before the daemon is ready. It must
	// return when the loop's context ends.
	BeforeIndex func()

	// quietNext asks Run to call Quiet after its next attempt that
	// begins after the asking (QuietAfterNext).
	quietNext atomic.Bool

	onceMu sync.Mutex // held by Once: one build at a time

	mu     sync.Mutex
	status Status
	tree   scan.Tree // the tree of the snapshot Once last published or kept (rebuild.go)
	expect string    // the commit a push named (Expect), until Run takes it
}

// QuietAfterNext asks Run to call Quiet again after its next sync
// attempt that begins after this call: the daemon's watcher asks it when
// its watches are placed, since the sync it then pokes for reads the
// whole tree (at 100,000 tools the watches and that sync come after the
// first attempt's Quiet and left 357 MiB resident). Safe for concurrent
// use.
func (l *Loop) QuietAfterNext() { l.quietNext.Store(true) }

// Status returns a copy of the loop's current status. Safe for concurrent
// use.
func (l *Loop) Status() Status {
	l.mu.Lock()
	st := l.status
	l.mu.Unlock()
	if l.Scheduled != nil {
		st.NextSync = l.Scheduled()
	}
	if s, ok := l.Source.(fmt.Stringer); ok {
		st.Source = s.String()
	}
	return st
}

func (l *Loop) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Loop) logger() *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// tracer makes the spans of a reload (reload, sync, build): the global
// provider's as it is now, a no-op one unless the daemon turned tracing on.
func tracer() trace.Tracer { return otel.Tracer("github.com/toolagent/toolagent") }

// Once syncs the source, and when the tree's revision differs from the
// snapshot in the store, builds a new snapshot and swaps it in. changed
// reports a swap. On error nothing is published, the previous snapshot
// keeps serving, and the status records the failure (the caller decides
// when to retry; Run backs off).
func (l *Loop) Once(ctx context.Context) (changed bool, err error) {
	if l.Source == nil || l.Store == nil {
		panic("reload: Loop needs a Source and a Store")
	}
	l.onceMu.Lock()
	defer l.onceMu.Unlock()
	log := l.logger()
	ctx, span := tracer().Start(ctx, "reload")
	defer func() {
		span.SetAttributes(attribute.Bool("toolagent.changed", changed))
		if err != nil {
			span.SetStatus(codes.Error, "reload failed") // the error may name the source's URL: not recorded
		}
		span.End()
	}()
	start := l.now()
	l.mu.Lock()
	l.status.SyncingSince = start
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.status.SyncingSince = time.Time{}
		l.mu.Unlock()
	}()
	log.Info("sync started")

	sctx, sspan := tracer().Start(ctx, "sync")
	t, err := l.Source.Sync(sctx)
	if err == nil {
		sspan.SetAttributes(attribute.String("toolagent.revision", t.Rev()))
	}
	sspan.End()
	if err != nil {
		log.Info("sync ended", "ok", false, "took_ms", l.now().Sub(start).Milliseconds())
		return false, l.fail(fmt.Errorf("sync: %w", err))
	}
	log.Info("sync ended", "ok", true, "revision", t.Rev(), "took_ms", l.now().Sub(start).Milliseconds())
	prev := l.Store.Load()
	rev := t.Rev()
	if prev != nil && prev.Rev() == rev && (l.Dirty == nil || !l.Dirty()) {
		l.setTree(t)
		l.succeed(prev, false, 0)
		return false, nil
	}
	build := l.Build
	if build == nil {
		build = func(prev *catalog.Snapshot, t scan.Tree) (*catalog.Snapshot, scan.Report, error) {
			return scan.Build(prev, t, nil, scan.Options{})
		}
	}
	_, bspan := tracer().Start(ctx, "build", trace.WithAttributes(attribute.String("toolagent.revision", rev)))
	next, rep, err := build(prev, t)
	bspan.SetAttributes(attribute.Int("toolagent.parsed", rep.Parsed), attribute.Int("toolagent.reused", rep.Reused),
		attribute.Int("toolagent.scanned", rep.Scanned))
	bspan.End()
	if err != nil {
		return false, l.fail(fmt.Errorf("build %s: %w", rev, err))
	}
	if next == nil {
		return false, l.fail(fmt.Errorf("build %s: %w", rev, errors.New("no snapshot")))
	}
	l.Store.Swap(next)
	l.setTree(t)
	for _, p := range rep.Problems {
		log.Warn("tool does not load", "revision", rev, "err", p)
	}
	counts := next.Counts()
	log.Info("reloaded", "revision", rev, "generation", next.Gen(),
		"tools", next.Len(), "enabled", counts[catalog.Enabled], "stale", counts[catalog.Stale],
		"failed", counts[catalog.Failed], "disabled", counts[catalog.Disabled], "untrusted", counts[catalog.Untrusted],
		"scanned", rep.Scanned, "parsed", rep.Parsed, "reused", rep.Reused, "took_ms", l.now().Sub(start).Milliseconds())
	l.recordBuild(rep)
	l.succeed(next, true, len(rep.Problems))
	l.indexAfterPublish(next)
	if l.OnPublish != nil {
		l.OnPublish(next)
	}
	return true, nil
}

// succeed records a successful attempt. swapped says a new snapshot was
// published, with problems files that did not load.
func (l *Loop) succeed(snap *catalog.Snapshot, swapped bool, problems int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.status
	if swapped {
		s.Reloads++
		s.Problems = problems
	}
	s.Rev, s.Gen = snap.Rev(), snap.Gen()
	s.LastOK = l.now()
	s.LastErr, s.LastErrAt, s.Next = "", time.Time{}, time.Time{}
	s.Failures = 0
}

// fail records a failed attempt and returns err wrapped for the caller.
func (l *Loop) fail(err error) error {
	err = fmt.Errorf("reload: %w", err)
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.status
	s.LastErr, s.LastErrAt = err.Error(), l.now()
	s.Failures++
	s.ReloadFailures++
	return err
}

// Run reloads once at start, then once per burst of triggers (debounced;
// a trigger that follows Expect reloads at once), and retries with
// backoff after a failure, until ctx is done; then it
// returns nil. Errors of single attempts are logged and kept in Status,
// never returned: the last good snapshot keeps serving.
func (l *Loop) Run(ctx context.Context, trigger <-chan struct{}) error {
	deb := l.Debounce.withDefaults()
	log := l.logger()
	var retry *time.Timer
	stopRetry := func() {
		if retry != nil {
			retry.Stop()
			retry = nil
		}
	}
	defer stopRetry()
	// compact fires CompactAfter after the last publish whose index drifted.
	compact := time.NewTimer(time.Hour)
	compact.Stop()
	defer compact.Stop()
	compactAfter := l.CompactAfter
	if compactAfter == 0 {
		compactAfter = time.Minute
	}
	published := l.Store.Load()
	// scheduleCompact starts the compaction's wait when a snapshot with
	// an updated index was just published.
	scheduleCompact := func() {
		if cur := l.Store.Load(); cur != published {
			published = cur
			compact.Stop()
			if compactAfter > 0 && cur != nil && cur.IndexDrift() > 0 {
				compact.Reset(compactAfter)
			}
		}
	}
	quiet := func() {
		if l.Quiet != nil {
			l.Quiet()
		}
	}
	attempt := func() {
		stopRetry()
		defer scheduleCompact()
		if l.quietNext.Swap(false) {
			defer quiet()
		}
		if _, err := l.Once(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			st := l.Status()
			wait := l.Backoff.Wait(st.Failures, rand.Float64())
			l.mu.Lock()
			l.status.Next = l.now().Add(wait)
			l.mu.Unlock()
			msg := "reload failed; the last good snapshot keeps serving"
			if l.Store.Load() == nil {
				msg = "reload failed; no snapshot was ever loaded, so no tool is served yet"
			}
			log.Error(msg, "err", err, "failures", st.Failures, "retry_in", wait)
			retry = time.NewTimer(wait)
		}
	}
	l.quietNext.Store(true) // the start's builds end with the first attempt
	attempt()
	for {
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-compact.C:
			if l.Store.Compact() {
				log.Debug("match index built anew after updates", "revision", l.Store.Load().Rev())
				quiet()
			}
			published = l.Store.Load()
			continue
		case <-retryC:
			retry = nil
			attempt()
		case <-trigger:
			if rev := l.takeExpected(); rev != "" {
				log.Debug("sync at once: a push named its commit", "expected", rev)
			} else if !l.quiesce(ctx, trigger, deb) {
				return nil
			}
			attempt()
		case <-l.Ticks:
			if retry != nil {
				log.Debug("scheduled sync skipped: backing off after a failure", "retry_at", l.Status().Next)
				continue
			}
			attempt()
		}
	}
}

// quiesce waits until no trigger has arrived for d.Min, or d.Max has passed
// since it was called, or a trigger comes with an expected commit
// (Expect). It returns false when ctx ended first.
func (l *Loop) quiesce(ctx context.Context, trigger <-chan struct{}, d Debounce) bool {
	deadline := time.NewTimer(d.Max)
	defer deadline.Stop()
	quiet := time.NewTimer(d.Min)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return true
		case <-quiet.C:
			return true
		case <-trigger:
			if rev := l.takeExpected(); rev != "" {
				l.logger().Debug("sync at once: a push named its commit", "expected", rev)
				return true
			}
			quiet.Reset(d.Min)
		}
	}
}

// Expect tells Run that the source's branch now points at rev, because a
// push webhook named that commit: the trigger that follows (the caller
// pokes right after) syncs at once instead of waiting out the debounce,
// which is there to let a burst of file events settle, not to wait for a
// commit already known. Safe for concurrent use.
func (l *Loop) Expect(rev string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expect = rev
}

// takeExpected returns and clears the commit Expect recorded ("" none).
func (l *Loop) takeExpected() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	rev := l.expect
	l.expect = ""
	return rev
}

// Trigger is the capacity-1 channel every reload trigger shares
// (fsnotify, POST /v1/sync, webhooks), and one for the schedule's ticks. A send never
// blocks: when a reload is already pending, another signal adds nothing,
// because the reload reads the latest state anyway. Safe for concurrent
// use; the zero value is not usable, call NewTrigger.
type Trigger struct {
	ch   chan struct{}
	tick chan struct{}
}

// NewTrigger returns a Trigger with empty channels.
func NewTrigger() *Trigger {
	return &Trigger{ch: make(chan struct{}, 1), tick: make(chan struct{}, 1)}
}

// Tick is Poke for the schedule: Run drops a tick while it backs off.
func (t *Trigger) Tick() {
	select {
	case t.tick <- struct{}{}:
	default:
	}
}

// Ticks is the channel of Tick, for Loop.Ticks.
func (t *Trigger) Ticks() <-chan struct{} { return t.tick }

// Poke asks for a reload without blocking.
func (t *Trigger) Poke() {
	select {
	case t.ch <- struct{}{}:
	default:
	}
}

// C is the channel Run receives from.
func (t *Trigger) C() <-chan struct{} { return t.ch }
