package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolagent/toolagent/internal/pgstore"
)

// PG is the Store shared by replicas: every audit record is a row of
// toolagent_audit (pgstore's migration 2), append-only, and each row
// carries the hash of the one before it, so that a row removed or edited
// by hand breaks the chain (Verify finds where).
//
//	hash = sha256(prev_hash + "\n" + record)   (hex; the first prev_hash is "")
//
// Records are written off the call path: Handler queues the record's JSON
// line and a writer appends the queue in batches, one transaction each,
// under a transaction advisory lock, so the chain has one order across
// replicas. Close writes what is queued before it returns: nothing is lost
// on a clean shutdown. While the database is down, records wait in the
// queue (at most PGQueue; beyond that the oldest are dropped and counted
// in Dropped, and the daemon's own audit log line, which is always
// written, is the record); the writer retries.
type PG struct {
	db     *pgstore.DB
	log    *slog.Logger
	mu     sync.Mutex
	queue  []string
	wake   chan struct{}
	closed bool
	done   chan struct{}
	// dropped counts records dropped because the queue was full.
	dropped int64
	// replica names this node in its rows.
	replica string
}

// PGQueue bounds the records waiting for the database.
const PGQueue = 100_000

// auditLock is the transaction advisory lock of appends ("audit" in ASCII).
const auditLock = 0x6175646974

// OpenPG returns the audit store of db; replica names this node in its rows.
func OpenPG(db *pgstore.DB, replica string, log *slog.Logger) *PG {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &PG{db: db, log: log, wake: make(chan struct{}, 1), done: make(chan struct{}), replica: replica}
	go p.writer()
	return p
}

// Handler returns a JSON handler whose every record is queued for the
// database.
func (p *PG) Handler() slog.Handler { return slog.NewJSONHandler(pgQueueWriter{p}, nil) }

type pgQueueWriter struct{ p *PG }

// Write queues one record (slog's JSON handler writes one per Write).
func (w pgQueueWriter) Write(b []byte) (int, error) {
	line := strings.TrimSuffix(string(b), "\n")
	p := w.p
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0, errors.New("audit: closed")
	}
	if len(p.queue) >= PGQueue {
		p.queue = p.queue[1:]
		p.dropped++
	}
	p.queue = append(p.queue, line)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return len(b), nil
}

var _ io.Writer = pgQueueWriter{}

// Dropped is how many records the full queue dropped.
func (p *PG) Dropped() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// pgBatch is the most records one transaction appends.
const pgBatch = 500

// writer appends the queue until Close, and then what is left.
func (p *PG) writer() {
	defer close(p.done)
	backoff := 100 * time.Millisecond
	for {
		p.mu.Lock()
		n := min(len(p.queue), pgBatch)
		batch := append([]string(nil), p.queue[:n]...)
		closed := p.closed
		dropped := p.dropped
		p.mu.Unlock()
		if n == 0 {
			if closed {
				return
			}
			<-p.wake
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.append(ctx, batch)
		cancel()
		if err != nil {
			p.log.Warn("audit records not written to the database yet; retrying", "n", len(batch), "err", err)
			if closed {
				return // shutting down with the database gone: the log lines remain
			}
			select {
			case <-time.After(backoff):
			case <-p.wake:
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		p.mu.Lock()
		// A full queue drops from its head, which is where the batch
		// was: what it dropped meanwhile is written already.
		written := max(0, n-int(p.dropped-dropped))
		p.queue = p.queue[min(written, len(p.queue)):]
		p.mu.Unlock()
	}
}

// append writes batch in one transaction, chained to the last row.
func (p *PG) append(ctx context.Context, batch []string) error {
	return pgx.BeginFunc(ctx, p.db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(auditLock)); err != nil {
			return err
		}
		prev := ""
		err := tx.QueryRow(ctx, `SELECT hash FROM toolagent_audit ORDER BY seq DESC LIMIT 1`).Scan(&prev)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		rows := make([][]any, len(batch))
		for i, rec := range batch {
			h := chainHash(prev, rec)
			rows[i] = []any{p.replica, rec, prev, h}
			prev = h
		}
		_, err = tx.CopyFrom(ctx, pgx.Identifier{"toolagent_audit"}, []string{"replica", "record", "prev_hash", "hash"}, pgx.CopyFromRows(rows))
		return err
	})
}

// chainHash is the hash of a row: sha256 of the previous row's hash, a
// newline and the record's JSON, in hex.
func chainHash(prev, record string) string {
	h := sha256.Sum256([]byte(prev + "\n" + record))
	return hex.EncodeToString(h[:])
}

// Close writes what is queued, then stops the writer.
func (p *PG) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	<-p.done
	return nil
}

// Flush waits until every record queued before it is written (or ctx
// ends).
func (p *PG) Flush(ctx context.Context) error {
	for {
		p.mu.Lock()
		n := len(p.queue)
		p.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("audit: %d records not written yet: %w", n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Recent returns at most limit records that match f, newest first.
func (p *PG) Recent(f Filter, limit int) ([]Record, error) {
	if limit <= 0 {
		limit = 100
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := p.db.Pool.Query(ctx, `SELECT record FROM toolagent_audit
		WHERE ($1 = '' OR record::jsonb->>'tool' = $1)
		  AND ($2 = '' OR record::jsonb->>'caller' = $2 OR record::jsonb->>'asked_by' = $2 OR record::jsonb->>'decided_by' = $2)
		  AND ($3 = '' OR record::jsonb->>'status' = $3 OR record::jsonb->>'event' = $3)
		ORDER BY seq DESC LIMIT $4`, f.Tool, f.Caller, f.Status, limit)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	out := make([]Record, 0, len(lines))
	for _, l := range lines {
		var r Record
		if json.Unmarshal([]byte(l), &r) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// Row is one audit row as Export writes it.
type Row struct {
	Seq      int64           `json:"seq"`
	At       time.Time       `json:"at"`
	Replica  string          `json:"replica"`
	Record   json.RawMessage `json:"record"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// VerifyResult is what Verify found.
type VerifyResult struct {
	Rows int64 `json:"rows"`
	// Head is the last row's hash: keep it elsewhere (a ticket, a log) to
	// detect later that rows were removed from the end, which the chain
	// alone cannot show.
	Head string `json:"head"`
	// Broken, when set, says where the chain breaks and how.
	Broken string `json:"broken,omitempty"`
}

// Verify walks the rows in order and checks every row's hash and its link
// to the row before; it stops at the first break.
func Verify(ctx context.Context, db *pgstore.DB) (VerifyResult, error) {
	var res VerifyResult
	prev, prevSeq := "", int64(0)
	err := eachRow(ctx, db, func(r Row) bool {
		switch {
		case r.PrevHash != prev:
			res.Broken = fmt.Sprintf("row %d: prev_hash %.12s… does not match the hash of the row before it (%s, %.12s…): a row was removed or edited between seq %d and %d", r.Seq, r.PrevHash, describeSeq(prevSeq), prev, prevSeq, r.Seq)
		case chainHash(r.PrevHash, string(r.Record)) != r.Hash:
			res.Broken = fmt.Sprintf("row %d: its hash does not match its record: the record or the hash was edited", r.Seq)
		}
		if res.Broken != "" {
			return false
		}
		res.Rows++
		prev, prevSeq = r.Hash, r.Seq
		return true
	})
	res.Head = prev
	return res, err
}

func describeSeq(seq int64) string {
	if seq == 0 {
		return "none: it is the first"
	}
	return fmt.Sprintf("row %d", seq)
}

// Export writes every row, oldest first, as JSON lines.
func Export(ctx context.Context, db *pgstore.DB, w io.Writer) (int64, error) {
	enc := json.NewEncoder(w)
	var n int64
	var werr error
	err := eachRow(ctx, db, func(r Row) bool {
		if werr = enc.Encode(r); werr != nil {
			return false
		}
		n++
		return true
	})
	if werr != nil {
		return n, werr
	}
	return n, err
}

// eachRow calls f on every row in order until f returns false.
func eachRow(ctx context.Context, db *pgstore.DB, f func(Row) bool) error {
	rows, err := db.Pool.Query(ctx, `SELECT seq, at, replica, record, prev_hash, hash FROM toolagent_audit ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r Row
		var rec string
		if err := rows.Scan(&r.Seq, &r.At, &r.Replica, &rec, &r.PrevHash, &r.Hash); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		r.Record = json.RawMessage(rec)
		if !f(r) {
			return nil
		}
	}
	return rows.Err()
}
