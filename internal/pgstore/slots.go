package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Slots holds constraints.max_concurrency for the whole deployment: a
// tool with max_concurrency N has N rows in toolagent_slots, and a call
// runs only while it holds one. Taking one is one statement: the first
// free slot, locked with FOR UPDATE SKIP LOCKED (so replicas taking slots
// at once never wait on each other, and never take the same one), is
// given this holder, a new lease id and a lease. A held slot's lease is
// renewed every third of it while the call runs; a replica that dies
// stops renewing, and its slots are free once their leases are past.
//
// A call that ends while the database does not answer cannot free its
// slot then. The release is kept and tried again, every RetryMax at
// most, until the database answers: the slot is free within about a
// second of the database's return, not at its lease's end. A retried
// release names the lease id its Acquire took, so it never frees a later
// hold of the same slot. Close tries the releases still owed once more;
// those the database does not take then are logged, and go free when
// their leases pass.
type Slots struct {
	db     *DB
	holder string
	lease  time.Duration
	log    *slog.Logger

	mu   sync.Mutex
	held map[slotKey]int        // slots held, with the count of holds (one per call)
	owed map[slotLease]struct{} // releases the database has not taken yet
	kick chan struct{}          // cap 1: a release is owed
	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

type slotKey struct {
	tool string
	slot int
}

// slotLease is one Acquire's hold of a slot: the slot and its lease id.
type slotLease struct {
	slotKey
	id string
}

// DefaultSlotLease is the life of a slot's lease without renewal.
const DefaultSlotLease = 30 * time.Second

// ReleaseRetryMin and ReleaseRetryMax bound the wait between tries of a
// release the database did not take (it doubles from min to max).
const (
	ReleaseRetryMin = 100 * time.Millisecond
	ReleaseRetryMax = time.Second
)

// slotOp bounds one statement of Acquire or of a release.
const slotOp = 10 * time.Second

// ErrUnavailable is the error of Acquire when the database cannot say
// (Outage): the message is "shared store unavailable: " and the cause.
var ErrUnavailable = errors.New("shared store unavailable")

// NewSlots returns the slots of db, held as holder (unique per replica).
// log (nil: discard) hears of releases owed at Close.
func NewSlots(db *DB, holder string, lease time.Duration, log *slog.Logger) *Slots {
	if lease <= 0 {
		lease = DefaultSlotLease
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Slots{db: db, holder: holder, lease: lease, log: log, held: map[slotKey]int{}, owed: map[slotLease]struct{}{},
		kick: make(chan struct{}, 1), stop: make(chan struct{})}
	s.done.Add(2)
	go s.renew()
	go s.retry()
	return s
}

// Acquire takes one of tool's n slots. ok is false when all n are held
// (the call is busy); the error is for a database that cannot say
// (ErrUnavailable with the cause, never the URL or a secret).
func (s *Slots) Acquire(ctx context.Context, tool string, n int) (release func(), ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, slotOp)
	defer cancel()
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, false, fmt.Errorf("shared concurrency slots of %s: random lease id: %w", tool, err)
	}
	id := hex.EncodeToString(b[:])
	if _, err := s.db.Pool.Exec(ctx, `INSERT INTO toolagent_slots (tool, slot) SELECT $1, g FROM generate_series(1, $2::int) g ON CONFLICT DO NOTHING`, tool, n); err != nil {
		return nil, false, s.fail(tool, err)
	}
	var slot int
	err = s.db.Pool.QueryRow(ctx, `UPDATE toolagent_slots SET holder = $3, lease_id = $5, lease_until = now() + $4::interval
		WHERE (tool, slot) = (
			SELECT tool, slot FROM toolagent_slots
			WHERE tool = $1 AND slot <= $2 AND (holder IS NULL OR lease_until < now())
			ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING slot`, tool, n, s.holder, s.lease.String(), id).Scan(&slot)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, nil
		}
		return nil, false, s.fail(tool, err)
	}
	k := slotLease{slotKey{tool, slot}, id}
	s.mu.Lock()
	s.held[k.slotKey]++
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { s.release(k) }) }, true, nil
}

// fail is the error of Acquire for err: ErrUnavailable with the cause
// when the database cannot serve, else what it refused (its message,
// which names no secret).
func (s *Slots) fail(tool string, err error) error {
	if cause, ok := s.db.Outage(err); ok {
		return fmt.Errorf("%w: %s", ErrUnavailable, cause)
	}
	return fmt.Errorf("shared concurrency slots of %s: %s", tool, s.db.Describe(err))
}

func (s *Slots) release(k slotLease) {
	s.mu.Lock()
	s.held[k.slotKey]--
	if s.held[k.slotKey] <= 0 {
		delete(s.held, k.slotKey)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), slotOp)
	defer cancel()
	if err := s.free(ctx, k); err != nil {
		s.mu.Lock()
		s.owed[k] = struct{}{}
		s.mu.Unlock()
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// free clears the slot of k when this holder still holds it under k's
// lease id. A slot another replica took meanwhile (the lease passed) is
// left alone.
func (s *Slots) free(ctx context.Context, k slotLease) error {
	_, err := s.db.Pool.Exec(ctx, `UPDATE toolagent_slots SET holder = NULL, lease_until = NULL, lease_id = NULL
		WHERE tool = $1 AND slot = $2 AND holder = $3 AND lease_id = $4`, k.tool, k.slot, s.holder, k.id)
	return err
}

// retry tries the owed releases until the database takes them, waiting
// ReleaseRetryMin, doubling to ReleaseRetryMax, between rounds.
func (s *Slots) retry() {
	defer s.done.Done()
	RetryOwed(s.stop, s.kick, ReleaseRetryMin, ReleaseRetryMax, func() bool { return s.freeOwed(context.Background()) })
}

// RetryOwed runs try each time kick fires, and again after minWait,
// doubling to maxWait, while try reports that work is still owed (the
// database does not answer), until stop is closed. A kick resets the wait.
// It is the one retry loop of what a replica owes the database after an
// outage (slot releases here, approved calls' results in approval).
func RetryOwed(stop, kick <-chan struct{}, minWait, maxWait time.Duration, try func() (done bool)) {
	wait := minWait
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		select {
		case <-stop:
			return
		case <-kick:
			wait = minWait
		case <-t.C:
		}
		if try() {
			continue // nothing owed: wait for the next kick
		}
		t.Reset(wait)
		wait = min(2*wait, maxWait)
	}
}

// freeOwed tries every owed release once; true when none is owed after.
func (s *Slots) freeOwed(ctx context.Context) bool {
	s.mu.Lock()
	owed := make([]slotLease, 0, len(s.owed))
	for k := range s.owed {
		owed = append(owed, k)
	}
	s.mu.Unlock()
	for _, k := range owed {
		ctx, cancel := context.WithTimeout(ctx, slotOp)
		err := s.free(ctx, k)
		cancel()
		if err != nil {
			break // the database still does not answer: the next round tries again
		}
		s.mu.Lock()
		delete(s.owed, k)
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.owed) == 0
}

// Owed is the number of releases the database has not taken yet (calls
// that ended while it did not answer), for /v1/status.
func (s *Slots) Owed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.owed)
}

// Every calls f every interval until stop is closed: the renewal of the
// leases a replica holds.
func Every(stop <-chan struct{}, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			f()
		}
	}
}

// closeWait bounds Close's last try of the owed releases.
const closeWait = 5 * time.Second

// Close stops renewing; slots still held go free when their leases
// pass. The releases still owed are tried once more, for at most
// closeWait; those the database does not take are logged (tool and
// slot) and go free when their leases pass.
func (s *Slots) Close() {
	s.once.Do(func() {
		close(s.stop)
		s.done.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), closeWait)
		defer cancel()
		if s.freeOwed(ctx) {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for k := range s.owed {
			s.log.Warn("a concurrency slot stays held until its lease passes: the call ended while the shared store did not answer, and it still does not at shutdown",
				"tool", k.tool, "slot", k.slot, "lease", s.lease.String())
		}
	})
}

func (s *Slots) renew() {
	defer s.done.Done()
	Every(s.stop, s.lease/3, func() {
		s.mu.Lock()
		tools := make([]string, 0, len(s.held))
		slots := make([]int32, 0, len(s.held))
		for k := range s.held {
			tools = append(tools, k.tool)
			slots = append(slots, int32(k.slot))
		}
		s.mu.Unlock()
		if len(tools) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, _ = s.db.Pool.Exec(ctx, `UPDATE toolagent_slots SET lease_until = now() + $3::interval
			WHERE holder = $4 AND (tool, slot) IN (SELECT * FROM unnest($1::text[], $2::int[]))`, tools, slots, s.lease.String(), s.holder)
		cancel()
	})
}
