// Exporting the audit trail: records after a cursor, read from either
// store (Source), handed to a sink (syslog, OTLP logs, JSON lines on a
// stream), the cursor persisted once the sink took them (Cursor). Sent at
// least once: a crash between a send and the cursor's save sends that
// batch again (at most ExportBatch records); nothing is skipped.

package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolagent/toolagent/internal/pgstore"
)

// ExportBatch is the most records one send carries: the most a restart
// can send twice.
const ExportBatch = 500

// Entry is one record to export: its place in the trail and its JSON
// (one line, without the newline, holding "seq" as its first field).
type Entry struct {
	Seq  int64
	Line []byte
}

// Time is the record's "time" (the zero time when it has none).
func (e Entry) Time() time.Time {
	var r struct {
		Time time.Time `json:"time"`
	}
	json.Unmarshal(e.Line, &r)
	return r.Time
}

// Source reads the trail in order.
type Source interface {
	// After returns at most n records whose seq is above seq, oldest
	// first.
	After(ctx context.Context, seq int64, n int) ([]Entry, error)
}

// FileSource reads the file store's trail, DIR/audit.jsonl and its
// rotated files, as another process writes it. It remembers where the
// last read ended, so following the trail reads each byte once; a
// rotation sends it back over the files by seq. Not safe for concurrent
// use.
type FileSource struct {
	Dir  string
	Keep int // rotated files kept (0: DefaultKeep)

	at struct {
		fi  os.FileInfo // the file the last read ended in
		off int64
		seq int64
	}
}

// After implements Source.
func (s *FileSource) After(ctx context.Context, seq int64, n int) ([]Entry, error) {
	keep := s.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	type file struct {
		path string
		fi   os.FileInfo
	}
	var files []file // oldest first
	for i := keep; i >= 0; i-- {
		p := filepath.Join(s.Dir, fileName)
		if i > 0 {
			p = fmt.Sprintf("%s.%d", p, i)
		}
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		files = append(files, file{p, fi})
	}
	start, off := 0, int64(0)
	if s.at.fi != nil && s.at.seq == seq {
		for i, f := range files {
			if os.SameFile(f.fi, s.at.fi) && f.fi.Size() >= s.at.off {
				start, off = i, s.at.off
			}
		}
	}
	var out []Entry
	for i := start; i < len(files) && len(out) < n; i++ {
		if i > start {
			off = 0
		}
		end, err := readEntries(files[i].path, off, seq, n, &out)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 {
			s.at.fi, s.at.off, s.at.seq = files[i].fi, end, out[len(out)-1].Seq
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return out, nil
}

// readEntries appends the complete lines of path from off whose seq is
// above after to out, until out holds n; it returns the offset after the
// last line it appended (or off).
func readEntries(path string, off, after int64, n int, out *[]Entry) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return off, nil // rotated away meanwhile: the next read finds it
	}
	if err != nil {
		return off, fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return off, fmt.Errorf("audit: %w", err)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	pos, end := off, off
	for len(*out) < n {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // EOF; a last line without its newline is still being written
		}
		pos += int64(len(line))
		line = bytes.TrimSuffix(line, []byte("\n"))
		seq, ok := lineSeq(line)
		if !ok || seq <= after || !json.Valid(line) {
			end = pos
			continue // a record of an older version (no seq), or torn
		}
		*out = append(*out, Entry{Seq: seq, Line: line})
		end = pos
	}
	return end, nil
}

// lineSeq reads the seq a record line starts with ({"seq":N,...).
func lineSeq(line []byte) (int64, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"seq":`))
	if !ok {
		return 0, false
	}
	i := bytes.IndexByte(rest, ',')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rest[:i]), 10, 64)
	return n, err == nil
}

// lastSeq is the seq of the last record in dir's trail (0: none).
func lastSeq(dir string, keep int) int64 {
	for i := 0; i <= keep; i++ {
		p := filepath.Join(dir, fileName)
		if i > 0 {
			p = fmt.Sprintf("%s.%d", p, i)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for len(data) > 0 {
			data = bytes.TrimRight(data, "\n")
			j := bytes.LastIndexByte(data, '\n')
			if seq, ok := lineSeq(data[j+1:]); ok {
				return seq
			}
			if j < 0 {
				break
			}
			data = data[:j]
		}
	}
	return 0
}

// PGSource reads the shared store's trail (toolagent_audit), in seq
// order. Appends hold one lock (PG's writer), so a row becomes visible
// only after every row of a lower seq: following by seq skips none.
type PGSource struct{ DB *pgstore.DB }

// After implements Source.
func (s PGSource) After(ctx context.Context, seq int64, n int) ([]Entry, error) {
	rows, err := s.DB.Pool.Query(ctx, `SELECT seq, record FROM toolagent_audit WHERE seq > $1 ORDER BY seq LIMIT $2`, seq, n)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var out []Entry
	for rows.Next() {
		var e Entry
		var rec string
		if err := rows.Scan(&e.Seq, &rec); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		e.Line = withSeq(e.Seq, []byte(rec))
		out = append(out, e)
	}
	return out, rows.Err()
}

// withSeq puts "seq" first in a record's JSON object.
func withSeq(seq int64, rec []byte) []byte {
	rec = bytes.TrimSpace(rec)
	if len(rec) < 2 || rec[0] != '{' {
		return rec
	}
	b := fmt.Appendf(nil, `{"seq":%d`, seq)
	if body := bytes.TrimSpace(rec[1:]); len(body) > 0 && body[0] != '}' {
		b = append(b, ',')
	}
	return append(b, rec[1:]...)
}

// Cursor keeps how far a sink got.
type Cursor interface {
	// Advance calls send with the seq of the last record sent, and keeps
	// the seq it returns once it returns no error. It reports false,
	// without calling send, when another process holds the cursor now.
	Advance(ctx context.Context, send func(seq int64) (int64, error)) (bool, error)
}

// FileCursor is a cursor in a file (JSON {"seq": N}), replaced whole on
// every save.
type FileCursor struct{ Path string }

// Load reads the cursor (0 when the file does not exist).
func (c FileCursor) Load() (int64, error) {
	b, err := os.ReadFile(c.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("audit export cursor: %w", err)
	}
	var v struct{ Seq int64 }
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, fmt.Errorf("audit export cursor %s: %v; want {\"seq\": N} (remove it to export from the start)", c.Path, err)
	}
	return v.Seq, nil
}

// Save writes the cursor (to a new file renamed over the old one).
func (c FileCursor) Save(seq int64) error {
	if err := os.MkdirAll(filepath.Dir(c.Path), 0o700); err != nil {
		return fmt.Errorf("audit export cursor: %w", err)
	}
	tmp := c.Path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "{\"seq\": %d}\n", seq), 0o600); err != nil {
		return fmt.Errorf("audit export cursor: %w", err)
	}
	if err := os.Rename(tmp, c.Path); err != nil {
		return fmt.Errorf("audit export cursor: %w", err)
	}
	return nil
}

// Advance implements Cursor.
func (c FileCursor) Advance(ctx context.Context, send func(int64) (int64, error)) (bool, error) {
	seq, err := c.Load()
	if err != nil {
		return true, err
	}
	next, err := send(seq)
	if err != nil {
		return true, err
	}
	if next != seq {
		return true, c.Save(next)
	}
	return true, nil
}

// PGCursor is a sink's row in toolagent_audit_export (pgstore's
// migration 7). Advance holds the row while it sends: another replica
// skips the round instead of sending the same records.
type PGCursor struct {
	DB   *pgstore.DB
	Sink string
}

// Advance implements Cursor.
func (c PGCursor) Advance(ctx context.Context, send func(int64) (int64, error)) (bool, error) {
	if _, err := c.DB.Pool.Exec(ctx, `INSERT INTO toolagent_audit_export (sink) VALUES ($1) ON CONFLICT DO NOTHING`, c.Sink); err != nil {
		return true, fmt.Errorf("audit export cursor: %w", err)
	}
	held := true
	err := pgx.BeginFunc(ctx, c.DB.Pool, func(tx pgx.Tx) error {
		var seq int64
		err := tx.QueryRow(ctx, `SELECT seq FROM toolagent_audit_export WHERE sink = $1 FOR UPDATE SKIP LOCKED`, c.Sink).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			held = false
			return nil
		}
		if err != nil {
			return err
		}
		next, err := send(seq)
		if err != nil || next == seq {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE toolagent_audit_export SET seq = $2, updated_at = now() WHERE sink = $1`, c.Sink, next)
		return err
	})
	if err != nil {
		return held, fmt.Errorf("audit export: %w", err)
	}
	return held, nil
}

// Sink is where exported records go.
type Sink interface {
	// Send delivers the entries, in order; an error means some may not
	// have arrived (they are sent again).
	Send(ctx context.Context, es []Entry) error
	Close() error
}

// Exporter sends the trail to one sink from its cursor on, as records
// come.
type Exporter struct {
	Name   string // the sink's name in logs and its cursor
	Source Source
	Cursor Cursor
	Sink   Sink
	Log    *slog.Logger
	// Poll is how often the trail is read when it had nothing new
	// (default 500ms).
	Poll time.Duration
}

// Step sends the next batch, if any: it reports how many records went.
func (x *Exporter) Step(ctx context.Context) (int, error) {
	sent := 0
	_, err := x.Cursor.Advance(ctx, func(seq int64) (int64, error) {
		es, err := x.Source.After(ctx, seq, ExportBatch)
		if err != nil || len(es) == 0 {
			return seq, err
		}
		if err := x.Sink.Send(ctx, es); err != nil {
			return seq, err
		}
		sent = len(es)
		return es[len(es)-1].Seq, nil
	})
	return sent, err
}

// Run sends until ctx ends, retrying failures with a growing wait; it
// closes the sink when it returns.
func (x *Exporter) Run(ctx context.Context) {
	defer x.Sink.Close()
	log := x.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	poll := x.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	backoff, failing := poll, false
	for ctx.Err() == nil {
		n, err := x.Step(ctx)
		wait := time.Duration(0)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("audit export: records not sent yet; retrying", "sink", x.Name, "err", err, "retry_in", backoff)
			wait, backoff, failing = backoff, min(2*backoff, 30*time.Second), true
		case err == nil && failing:
			log.Info("audit export: sending again", "sink", x.Name)
			backoff, failing = poll, false
		}
		if err == nil && n == 0 {
			wait = poll
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}

// Follow writes the trail as JSON lines to w from the cursor on (0
// without one), and keeps cur after each batch w took, until ctx ends;
// with follow false it stops when it has caught up. It is `toolagent
// audit export --follow`.
func Follow(ctx context.Context, src Source, cur *FileCursor, w io.Writer, follow bool, poll time.Duration) error {
	seq := int64(0)
	if cur != nil {
		var err error
		if seq, err = cur.Load(); err != nil {
			return err
		}
	}
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	for {
		es, err := src.After(ctx, seq, ExportBatch)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if len(es) > 0 {
			var b bytes.Buffer
			for _, e := range es {
				b.Write(e.Line)
				b.WriteByte('\n')
			}
			if _, err := w.Write(b.Bytes()); err != nil {
				return err
			}
			seq = es[len(es)-1].Seq
			if cur != nil {
				if err := cur.Save(seq); err != nil {
					return err
				}
			}
			continue
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}
