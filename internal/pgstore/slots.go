package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Slots holds constraints.max_concurrency for the whole deployment: a
// tool with max_concurrency N has N rows in toolagent_slots, and a call
// runs only while it holds one. Taking one is one statement: the first
// free slot, locked with FOR UPDATE SKIP LOCKED (so replicas taking slots
// at once never wait on each other, and never take the same one), is
// given this holder and a lease. A held slot's lease is renewed every
// third of it while the call runs; a replica that dies stops renewing,
// and its slots are free once their leases are past.
type Slots struct {
	db     *DB
	holder string
	lease  time.Duration

	mu   sync.Mutex
	held map[slotKey]int // slots held, with the count of holds (one per call)
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

type slotKey struct {
	tool string
	slot int
}

// DefaultSlotLease is the life of a slot's lease without renewal.
const DefaultSlotLease = 30 * time.Second

// NewSlots returns the slots of db, held as holder (unique per replica).
func NewSlots(db *DB, holder string, lease time.Duration) *Slots {
	if lease <= 0 {
		lease = DefaultSlotLease
	}
	s := &Slots{db: db, holder: holder, lease: lease, held: map[slotKey]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go s.renew()
	return s
}

// Acquire takes one of tool's n slots. ok is false when all n are held
// (the call is busy); the error is for a database that cannot say.
func (s *Slots) Acquire(ctx context.Context, tool string, n int) (release func(), ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.db.Pool.Exec(ctx, `INSERT INTO toolagent_slots (tool, slot) SELECT $1, g FROM generate_series(1, $2::int) g ON CONFLICT DO NOTHING`, tool, n); err != nil {
		return nil, false, fmt.Errorf("shared concurrency slots of %s: %w", tool, err)
	}
	var slot int
	err = s.db.Pool.QueryRow(ctx, `UPDATE toolagent_slots SET holder = $3, lease_until = now() + $4::interval
		WHERE (tool, slot) = (
			SELECT tool, slot FROM toolagent_slots
			WHERE tool = $1 AND slot <= $2 AND (holder IS NULL OR lease_until < now())
			ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING slot`, tool, n, s.holder, s.lease.String()).Scan(&slot)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("shared concurrency slots of %s: %w", tool, err)
	}
	k := slotKey{tool, slot}
	s.mu.Lock()
	s.held[k]++
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { s.release(k) }) }, true, nil
}

func (s *Slots) release(k slotKey) {
	s.mu.Lock()
	s.held[k]--
	if s.held[k] <= 0 {
		delete(s.held, k)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A failed release leaves the slot to its lease.
	_, _ = s.db.Pool.Exec(ctx, `UPDATE toolagent_slots SET holder = NULL, lease_until = NULL WHERE tool = $1 AND slot = $2 AND holder = $3`, k.tool, k.slot, s.holder)
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

// Close stops renewing; slots still held go free when their leases pass.
func (s *Slots) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

func (s *Slots) renew() {
	defer close(s.done)
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
