package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// pushChannel is the LISTEN/NOTIFY channel of pushes.
const pushChannel = "toolagent_push"

// Broadcast tells the other replicas on the database that the tools
// source moved (a verified push webhook, or POST /v1/sync, reached this
// one), so that they sync at once instead of at their next scheduled
// tick: Announce NOTIFYs, and each replica's listener, on a connection of
// its own, calls OnPush for every announcement of another replica. The
// payload is never trusted: the replica that hears it syncs from the
// source itself; the payload only names who announced.
//
// It also records the revision each replica serves (Serving) and reads
// the newest any replica has seen (Newest), for /v1/status.
type Broadcast struct {
	db      *DB
	replica string
	onPush  func(from string)
	log     *slog.Logger

	stop chan struct{}
	done chan struct{}
	once sync.Once
	// listening is closed once the listener's first LISTEN is in place.
	listening chan struct{}
}

// NewBroadcast starts listening for other replicas' pushes; onPush is
// called, from the listener's goroutine, with the announcing replica.
func NewBroadcast(db *DB, replica string, onPush func(from string), log *slog.Logger) *Broadcast {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Broadcast{db: db, replica: replica, onPush: onPush, log: log, stop: make(chan struct{}), done: make(chan struct{}), listening: make(chan struct{})}
	go b.listen()
	return b
}

// Listening is closed once the listener is in place (for tests and
// start-up logs).
func (b *Broadcast) Listening() <-chan struct{} { return b.listening }

type pushNote struct {
	Replica string `json:"replica"`
}

// Announce tells the other replicas to sync now.
func (b *Broadcast) Announce(ctx context.Context) error {
	payload, _ := json.Marshal(pushNote{Replica: b.replica})
	if _, err := b.db.Pool.Exec(ctx, `SELECT pg_notify($1, $2)`, pushChannel, string(payload)); err != nil {
		return fmt.Errorf("announce the push to the other replicas: %w", err)
	}
	return nil
}

// listen hears the other replicas' announcements until Close.
func (b *Broadcast) listen() {
	defer close(b.done)
	first := true
	Listen(b.stop, b.db, pushChannel, b.log, func(payload string) {
		var note pushNote
		if json.Unmarshal([]byte(payload), &note) != nil || note.Replica == b.replica {
			return // not ours to act on: malformed, or our own
		}
		b.onPush(note.Replica)
	}, func() {
		if first {
			close(b.listening)
			first = false
		}
	})
}

// Listen holds a connection of its own with LISTEN channel until stop is
// closed, calling note with each notification's payload and listening
// after each (re)connection, and connecting again with a growing pause
// when the connection breaks (notifications sent meanwhile are missed:
// listening says when to read again what may have changed).
func Listen(stop <-chan struct{}, db *DB, channel string, log *slog.Logger, note func(payload string), listening func()) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := listenOnce(ctx, db, channel, note, listening)
		if ctx.Err() != nil {
			return
		}
		log.Warn("listening on the shared database failed; trying again", "channel", channel, "err", err, "in", pause)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return
		}
		pause = min(2*pause, 30*time.Second)
	}
}

func listenOnce(ctx context.Context, db *DB, channel string, note func(string), listening func()) error {
	conn, err := pgx.ConnectConfig(ctx, db.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		note(n.Payload)
	}
}

// Close stops listening.
func (b *Broadcast) Close() {
	b.once.Do(func() { close(b.stop) })
	<-b.done
}

// Serving records the revision this replica serves now.
func (b *Broadcast) Serving(ctx context.Context, rev string) error {
	_, err := b.db.Pool.Exec(ctx, `INSERT INTO toolagent_replicas (replica, revision, seen_at) VALUES ($1, $2, now())
		ON CONFLICT (replica) DO UPDATE SET revision = excluded.revision, seen_at = excluded.seen_at`, b.replica, rev)
	return err
}

// ReplicaRevision is what one replica last said it serves.
type ReplicaRevision struct {
	Replica  string    `json:"replica"`
	Revision string    `json:"revision"`
	SeenAt   time.Time `json:"seen_at"`
}

// Newest returns the revision the most recent replica to publish one
// serves, and who: "the newest revision any replica has seen".
func (b *Broadcast) Newest(ctx context.Context) (ReplicaRevision, error) {
	var r ReplicaRevision
	err := b.db.Pool.QueryRow(ctx, `SELECT replica, revision, seen_at FROM toolagent_replicas ORDER BY seen_at DESC LIMIT 1`).Scan(&r.Replica, &r.Revision, &r.SeenAt)
	if err == pgx.ErrNoRows {
		return ReplicaRevision{}, nil
	}
	return r, err
}
