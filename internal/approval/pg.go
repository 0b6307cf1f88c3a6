package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolagent/toolagent/internal/pgstore"
)

// PGStore keeps the requests in PostgreSQL (table toolagent_approvals,
// pgstore's migration 1), shared by every replica on the database: a call
// held on one replica is listed on another and approved on a third, and
// the caller fetches its result from any of them.
//
// The rules are the file Store's (decided, claimed, expired); what is
// shared is made safe by conditional updates: every change names the
// version of the row it read (UPDATE ... WHERE id = $1 AND version = $2
// AND status = $3 RETURNING), so of two replicas deciding or claiming one
// request at once exactly one changes it, and the other reads the row
// again and answers from what it finds (already decided, already used).
//
// A replica that claims a request holds a lease on it (LeaseTTL), renewed
// while the call runs. A replica that dies while running an approved call
// stops renewing; once the lease is past, whoever reads the request marks
// it interrupted (with when and why), as the file Store does at Open: it
// never stays running, and never runs again by itself.
type PGStore struct {
	db      *pgstore.DB
	opts    Options
	replica string // this store's name in claimed_by
	lease   time.Duration

	mu      sync.Mutex
	running map[string]bool // ids this store claimed and has not completed
	// owed are the results of calls that ended while the database did
	// not answer, by id: stored once it answers (storeOwed).
	owed     map[string]json.RawMessage
	kick     chan struct{} // cap 1: a result is owed
	stop     chan struct{}
	done     chan struct{}
	stored   chan struct{} // closed when storeOwed has returned
	stopOnce sync.Once
	// watch wakes the callers waiting on a request when any replica
	// changes it: every change NOTIFYs approvalChannel with the id, and a
	// listener of this store's hears it (listened is closed once it does).
	watch    watchers
	listened chan struct{}
	heard    chan struct{}
}

// approvalChannel is the LISTEN/NOTIFY channel of changed requests; the
// payload is the id (a wake-up only: the row is read again).
const approvalChannel = "toolagent_approvals"

// DefaultLeaseTTL is how long a claim holds without renewal; it is renewed
// every third of it.
const DefaultLeaseTTL = 30 * time.Second

// PGOptions configure a PGStore beyond Options (whose Dir is unused).
type PGOptions struct {
	Options
	// LeaseTTL is the life of a claim's lease (0: DefaultLeaseTTL).
	LeaseTTL time.Duration
	// Replica names this store in claimed_by (""): host name, pid and a
	// random suffix).
	Replica string
}

// OpenPG returns the approval store of the database db.
func OpenPG(db *pgstore.DB, opts PGOptions) (*PGStore, error) {
	o := opts.Options.withDefaults()
	lease := opts.LeaseTTL
	if lease <= 0 {
		lease = DefaultLeaseTTL
	}
	replica := opts.Replica
	if replica == "" {
		host, _ := os.Hostname()
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("approval: random replica name: %w", err)
		}
		replica = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	s := &PGStore{db: db, opts: o, replica: replica, lease: lease, running: map[string]bool{}, owed: map[string]json.RawMessage{}, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), stored: make(chan struct{}), listened: make(chan struct{}), heard: make(chan struct{})}
	go s.renew()
	go s.storeOwed()
	go func() {
		defer close(s.heard)
		first := true
		pgstore.Listen(s.stop, db, approvalChannel, o.Logger, s.watch.changed, func() {
			// (Re)connected: a change may have been missed meanwhile.
			s.watch.changed("")
			if first {
				close(s.listened)
				first = false
			}
		})
	}()
	return s, nil
}

// Watch returns a channel closed at the next change of request id on any
// replica (approval.Watcher).
func (s *PGStore) Watch(id string) (<-chan struct{}, func()) { return s.watch.add(id) }

// Listening is closed once the store hears other replicas' changes.
func (s *PGStore) Listening() <-chan struct{} { return s.listened }

// notify tells every replica's watchers that id changed.
func (s *PGStore) notify(ctx context.Context, id string) {
	if _, err := s.db.Pool.Exec(ctx, `SELECT pg_notify($1, $2)`, approvalChannel, id); err != nil {
		s.opts.Logger.Warn("tell the replicas an approval changed", "id", id, "err", err)
	}
}

// dbErr is the error of a database round trip that failed: ErrUnavailable
// with the cause when the database cannot serve now (pgstore's Outage,
// which names no URL, host, user or password), else err wrapped in what
// was being done.
func (s *PGStore) dbErr(err error, format string, args ...any) error {
	if cause, ok := s.db.Outage(err); ok {
		return fmt.Errorf("%w: %s", ErrUnavailable, cause)
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// checkWait bounds Check's ping.
const checkWait = 5 * time.Second

// Check asks the database to answer: nil when it does, else
// ErrUnavailable with the cause (the readiness of the store).
func (s *PGStore) Check(ctx context.Context) error {
	if err := s.db.Ping(ctx, checkWait); err != nil {
		return fmt.Errorf("%w: %s", ErrUnavailable, err.Error())
	}
	return nil
}

// Replica is this store's name in the claims it makes.
func (s *PGStore) Replica() string { return s.replica }

// Close stops renewing leases. Calls still running keep their claims
// until the lease runs out; then they read as interrupted. Results still
// owed (their calls ended while the database did not answer) are tried
// once more, for at most closeWait; each one left is logged, and its
// request reads interrupted once its lease has passed.
func (s *PGStore) Close() error {
	s.stopOnce.Do(func() {
		close(s.stop)
		<-s.done
		<-s.stored
		<-s.heard
		ctx, cancel := context.WithTimeout(context.Background(), closeWait)
		defer cancel()
		if s.completeOwed(ctx) {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for id := range s.owed {
			s.opts.Logger.Warn("the result of an approved call is not stored: the call ended while the approval store did not answer, and it still does not at shutdown; the approval will read interrupted", "id", id)
		}
	})
	return nil
}

// closeWait bounds Close's last try of the owed results.
const closeWait = 5 * time.Second

// completeRetryMin and completeRetryMax bound the wait between tries of
// the owed results (it doubles from min to max).
const (
	completeRetryMin = 100 * time.Millisecond
	completeRetryMax = time.Second
)

// storeOwed stores the owed results once the database answers, trying
// every completeRetryMin doubling to completeRetryMax, until Close.
func (s *PGStore) storeOwed() {
	defer close(s.stored)
	pgstore.RetryOwed(s.stop, s.kick, completeRetryMin, completeRetryMax, func() bool { return s.completeOwed(context.Background()) })
}

// completeOwed tries to store every owed result once, stopping at the
// first outage; true when none is owed after. A result the store refuses
// for another reason (the claim was lost: the lease passed during the
// outage and another replica marked the call interrupted) is dropped and
// logged.
func (s *PGStore) completeOwed(ctx context.Context) bool {
	s.mu.Lock()
	ids := make([]string, 0, len(s.owed))
	for id := range s.owed {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		s.mu.Lock()
		result := s.owed[id]
		s.mu.Unlock()
		_, err := s.complete(id, result)
		if errors.Is(err, ErrUnavailable) {
			break // still away: the next round tries again
		}
		if err != nil {
			s.opts.Logger.Warn("the result of an approved call that ended during an outage could not be stored once the store answered", "id", id, "err", err)
		} else {
			s.opts.Logger.Info("stored the result of an approved call that ended during an outage", "id", id)
		}
		s.mu.Lock()
		delete(s.owed, id)
		delete(s.running, id)
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.owed) == 0
}

// pgOp bounds one database round trip.
const pgOp = 30 * time.Second

func (s *PGStore) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), pgOp)
}

// row is a request as read, with what the conditional updates need.
type row struct {
	r          Request
	version    int64
	leaseUntil *time.Time
	claimedBy  *string
	// lapsed: the lease is past, by the database's clock (the one clock
	// every replica shares; theirs may drift apart).
	lapsed bool
}

func (s *PGStore) read(ctx context.Context, id string) (row, error) {
	var doc string
	var rw row
	err := s.db.Pool.QueryRow(ctx, `SELECT doc, version, lease_until, claimed_by, coalesce(lease_until < now(), false) FROM toolagent_approvals WHERE id = $1`, id).
		Scan(&doc, &rw.version, &rw.leaseUntil, &rw.claimedBy, &rw.lapsed)
	if errors.Is(err, pgx.ErrNoRows) {
		return row{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return row{}, s.dbErr(err, "approval: read %s", id)
	}
	r, err := decode([]byte(doc))
	if err != nil {
		return row{}, fmt.Errorf("approval: decode %s: %w", id, err)
	}
	rw.r = *r
	return rw, nil
}

// write replaces the row read as from with next, if nobody changed it
// since: ok is false when another replica did (read it again).
func (s *PGStore) write(ctx context.Context, from row, next Request, claim bool) (bool, error) {
	doc, err := json.Marshal(next)
	if err != nil {
		return false, fmt.Errorf("approval: encode %s: %w", next.ID, err)
	}
	// The lease runs on the database's clock: a claim starts one, a
	// running request keeps its own, any other status has none.
	var by *string
	if claim {
		by = &s.replica
	} else if next.Status == Running {
		by = from.claimedBy
	}
	tag, err := s.db.Pool.Exec(ctx, `UPDATE toolagent_approvals
		SET doc = $1, status = $2, version = version + 1, expires_at = $3, claimed_by = $4,
			lease_until = CASE WHEN $5 THEN now() + $6::interval WHEN $7 THEN lease_until END
		WHERE id = $8 AND version = $9 AND status = $10`,
		string(doc), string(next.Status), next.ExpiresAt, by, claim, s.lease.String(), !claim && next.Status == Running,
		next.ID, from.version, string(from.r.Status))
	if err != nil {
		return false, s.dbErr(err, "approval: save %s", next.ID)
	}
	if tag.RowsAffected() != 1 {
		return false, nil
	}
	s.notify(ctx, next.ID)
	return true, nil
}

// current reads id and brings it up to date: expired when its time is
// up, interrupted when it runs under a lease nobody renewed.
func (s *PGStore) current(ctx context.Context, id string) (row, error) {
	for {
		rw, err := s.read(ctx, id)
		if err != nil {
			return row{}, err
		}
		now := s.opts.Now()
		next, changed := expired(rw.r, now)
		if !changed && rw.r.Status == Running && rw.lapsed {
			next, changed = rw.r, true
			next.Status, next.InterruptedAt = Interrupted, now
			by := "a replica"
			if rw.claimedBy != nil {
				by = "replica " + *rw.claimedBy
			}
			next.Note = fmt.Sprintf("interrupted: %s started this call at %s and stopped renewing its claim (it crashed or lost the database) before the call finished, so its result is unknown; it does not run again by itself: call the tool again for a new approval", by, rw.r.ClaimedAt.UTC().Format(time.RFC3339))
		}
		if !changed {
			return rw, nil
		}
		ok, err := s.write(ctx, rw, next, false)
		if err != nil {
			return row{}, err
		}
		if ok {
			rw.r, rw.version = next, rw.version+1
			return rw, nil
		}
		// Changed by another replica meanwhile: read it again.
	}
}

// CreateWith records a new pending request (see Store.CreateWith).
func (s *PGStore) CreateWith(in Request) (Request, error) {
	r, err := newRequest(in, s.opts.Now(), s.opts.TTL)
	if err != nil {
		return Request{}, err
	}
	doc, err := json.Marshal(r)
	if err != nil {
		return Request{}, fmt.Errorf("approval: encode %s: %w", r.ID, err)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	if _, err := s.db.Pool.Exec(ctx, `INSERT INTO toolagent_approvals (id, status, version, created_at, expires_at, doc) VALUES ($1, $2, 1, $3, $4, $5)`,
		r.ID, string(r.Status), r.CreatedAt, r.ExpiresAt, string(doc)); err != nil {
		return Request{}, s.dbErr(err, "approval: save %s", r.ID)
	}
	return r.copy(), nil
}

// Hold returns the pending request of the same caller for the same call
// when there is one (again), else records a new one (see Store.Hold). A
// unique index on the pending rows' hold key (migration 5) makes two
// replicas holding the same call at once agree on one request.
func (s *PGStore) Hold(in Request) (r Request, again bool, err error) {
	n, err := newRequest(in, s.opts.Now(), s.opts.TTL)
	if err != nil {
		return Request{}, false, err
	}
	doc, err := json.Marshal(n)
	if err != nil {
		return Request{}, false, fmt.Errorf("approval: encode %s: %w", n.ID, err)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	key := n.holdKey()
	for range 8 { // a held request that expires meanwhile frees the key
		tag, err := s.db.Pool.Exec(ctx, `INSERT INTO toolagent_approvals (id, status, version, created_at, expires_at, doc, hold_key) VALUES ($1, $2, 1, $3, $4, $5, $6)
			ON CONFLICT (hold_key) WHERE status = 'pending' DO NOTHING`,
			n.ID, string(n.Status), n.CreatedAt, n.ExpiresAt, string(doc), key)
		if err != nil {
			return Request{}, false, s.dbErr(err, "approval: save %s", n.ID)
		}
		if tag.RowsAffected() == 1 {
			return n.copy(), false, nil
		}
		var id string
		err = s.db.Pool.QueryRow(ctx, `SELECT id FROM toolagent_approvals WHERE hold_key = $1 AND status = 'pending'`, key).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // decided meanwhile: insert again
		}
		if err != nil {
			return Request{}, false, s.dbErr(err, "approval: hold")
		}
		rw, err := s.current(ctx, id) // marks it expired when its time is up
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Request{}, false, err
		}
		if err == nil && rw.r.Status == Pending {
			return rw.r.copy(), true, nil
		}
	}
	return Request{}, false, fmt.Errorf("approval: hold %s: the pending request of this call kept changing", in.Tool)
}

// Collect returns what a retry of the call in gets instead of a new
// hold (see Store.Collect), on any replica: the newest request held for
// that call (its hold key, set when it was held) that is approved,
// running, or executed and uncollected; marking it collected is a
// conditional update, so of two replicas' retries exactly one gets the
// result.
func (s *PGStore) Collect(in Request) (r Request, ok bool, err error) {
	key, err := askedKey(in)
	if err != nil {
		return Request{}, false, err
	}
	ctx, cancel := s.ctx()
	defer cancel()
	var id string
	err = s.db.Pool.QueryRow(ctx, `SELECT id FROM toolagent_approvals WHERE hold_key = $1 ORDER BY created_at DESC, id DESC LIMIT 1`, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Request{}, false, nil
	}
	if err != nil {
		return Request{}, false, fmt.Errorf("approval: collect: %w", err)
	}
	errNone := errors.New("nothing to collect")
	got, err := s.change(id, false, false, func(rw row) (Request, error) {
		next, ok := collected(rw.r, s.opts.Now(), s.opts.TTL)
		if !ok {
			return Request{}, errNone
		}
		if next.Status != Executed {
			return Request{}, nil // as it is: nothing to write
		}
		return next, nil
	})
	if errors.Is(err, errNone) {
		return Request{}, false, nil
	}
	if err != nil {
		return Request{}, false, err
	}
	if got.ID == "" { // approved or running: read as it is
		rw, err := s.current(ctx, id)
		if err != nil {
			return Request{}, false, err
		}
		if rw.r.Status != Approved && rw.r.Status != Running {
			return Request{}, false, nil
		}
		return rw.r.copy(), true, nil
	}
	return got, true, nil
}

// Get returns the request with id, brought up to date.
func (s *PGStore) Get(id string) (Request, error) {
	if !validID(id) {
		return Request{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	rw, err := s.current(ctx, id)
	if err != nil {
		return Request{}, err
	}
	return rw.r.copy(), nil
}

// ListRequests returns the requests, oldest first; with pendingOnly only
// those still waiting for a decision.
func (s *PGStore) ListRequests(pendingOnly bool) ([]Request, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	q := `SELECT id FROM toolagent_approvals ORDER BY created_at, id`
	if pendingOnly {
		q = `SELECT id FROM toolagent_approvals WHERE status = 'pending' ORDER BY created_at, id`
	}
	rows, err := s.db.Pool.Query(ctx, q)
	if err != nil {
		return nil, s.dbErr(err, "approval: list")
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.dbErr(err, "approval: list")
	}
	out := make([]Request, 0, len(ids))
	for _, id := range ids {
		rw, err := s.current(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if pendingOnly && rw.r.Status != Pending {
			continue // it expired just now
		}
		out = append(out, rw.r.copy())
	}
	return out, nil
}

// Decide records a decision (see Store.Decide). Of two replicas deciding
// at once, one wins and the other gets ErrAlreadyDecided.
func (s *PGStore) Decide(id string, by Decider, approve bool, editedParams map[string]any, validate func(map[string]any) (map[string]any, error)) (Request, error) {
	edited, editedHash, err := checkEdit(by.Name, approve, editedParams, validate)
	if err != nil {
		return Request{}, err
	}
	return s.change(id, false, false, func(rw row) (Request, error) {
		return decided(rw.r, decision{by: by, approve: approve, edited: edited, editedHash: editedHash, allowSelf: s.opts.AllowSelfApproval, now: s.opts.Now(), ttl: s.opts.TTL})
	})
}

// MayApprove is Store.MayApprove.
func (s *PGStore) MayApprove(r Request, by Decider) error { return mayApprove(r, by, s.opts) }

// Claim marks an approved request running under this store's lease,
// exactly once across replicas (see Store.Claim).
func (s *PGStore) Claim(id, tool, rev, paramsHash string) (Request, error) {
	// Hold the id before the row says so: the renewer must not miss a
	// lease this store holds.
	s.mu.Lock()
	s.running[id] = true
	s.mu.Unlock()
	r, err := s.change(id, false, true, func(rw row) (Request, error) {
		return claimed(rw.r, tool, rev, paramsHash, s.opts.Now())
	})
	if err != nil {
		s.mu.Lock()
		delete(s.running, id)
		s.mu.Unlock()
	}
	return r, err
}

// Complete stores the result of a call this store claimed and marks it
// executed (see Store.Complete). A request whose claim was lost (its
// lease ran out, and another replica marked it interrupted) stays so:
// ErrNotRunning.
//
// When the database does not answer, the error is ErrUnavailable and the
// result is kept: this store keeps renewing the claim and stores the
// result as soon as the database answers again (within about a second),
// so the caller's GET finds it executed. Should the outage outlast the
// lease, another replica may read the call interrupted first; the kept
// result is then dropped and logged.
func (s *PGStore) Complete(id string, result json.RawMessage) (Request, error) {
	if result != nil && !json.Valid(result) {
		return Request{}, fmt.Errorf("approval: result of %s is not valid JSON", id)
	}
	r, err := s.complete(id, result)
	if errors.Is(err, ErrUnavailable) {
		s.mu.Lock()
		s.owed[id] = slices.Clone(result)
		s.mu.Unlock()
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return Request{}, fmt.Errorf("%w (the result is kept, and stored once the store answers)", err)
	}
	s.mu.Lock()
	delete(s.running, id)
	s.mu.Unlock()
	return r, err
}

// complete marks id executed with result, if this store's claim holds.
func (s *PGStore) complete(id string, result json.RawMessage) (Request, error) {
	return s.change(id, true, false, func(rw row) (Request, error) {
		if rw.r.Status != Running || rw.claimedBy == nil || *rw.claimedBy != s.replica {
			return Request{}, fmt.Errorf("%w: %s is %s", ErrNotRunning, id, rw.r.Status)
		}
		next := rw.r
		next.Status, next.CompletedAt, next.Result = Executed, s.opts.Now(), slices.Clone(result)
		return next, nil
	})
}

// change reads id (brought up to date, or as stored when raw), gives it
// to step for its next state and writes that, again from the read until
// no other replica changed the row in between. A step error with no next
// state changes nothing; one with a next state (a claim that voids the
// approval) is written, then returned. claim starts this store's lease
// on a successful step.
func (s *PGStore) change(id string, raw, claim bool, step func(row) (Request, error)) (Request, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	for {
		read := s.current
		if raw {
			read = s.read
		}
		rw, err := read(ctx, id)
		if err != nil {
			return Request{}, err
		}
		next, serr := step(rw)
		if next.ID == "" {
			return Request{}, serr
		}
		ok, err := s.write(ctx, rw, next, claim && serr == nil)
		if err != nil {
			return Request{}, err
		}
		if !ok {
			continue
		}
		if serr != nil {
			return Request{}, serr
		}
		return next.copy(), nil
	}
}

// renew extends the leases of the calls this store runs, every third of
// the lease, until Close.
func (s *PGStore) renew() {
	defer close(s.done)
	pgstore.Every(s.stop, s.lease/3, func() {
		s.mu.Lock()
		ids := make([]string, 0, len(s.running))
		for id, held := range s.running {
			if held {
				ids = append(ids, id)
			}
		}
		s.mu.Unlock()
		if len(ids) == 0 {
			return
		}
		ctx, cancel := s.ctx()
		_, err := s.db.Pool.Exec(ctx, `UPDATE toolagent_approvals SET lease_until = now() + $1::interval
			WHERE id = ANY($2) AND status = 'running' AND claimed_by = $3`, s.lease.String(), ids, s.replica)
		cancel()
		if err != nil {
			s.opts.Logger.Warn("renew the leases of running approved calls", "n", len(ids), "err", err)
		}
	})
}
