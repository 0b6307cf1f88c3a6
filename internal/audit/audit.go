// Package audit keeps the audit trail on this node: an append-only file of
// JSON lines in the state directory, one record per audit event (the same
// fields as the daemon's audit log line), rotated by size, and read back
// newest first for the console's history page. PG (pg.go), the store
// shared by replicas, implements the same Store interface in PostgreSQL,
// as a hash chain.
//
// Imports: internal/pgstore only (docs/architecture.md). Imported by the
// daemon (internal/daemon), internal/console and cmd/toolagent (audit).
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Record is one audit event as it was written: "msg" is call or approval,
// with caller, tool, status, exit_code, duration_ms, revision, approval_id
// and the rest of the audit line's fields.
type Record map[string]any

// Str returns the string field k ("" when absent or not a string).
func (r Record) Str(k string) string {
	s, _ := r[k].(string)
	return s
}

// Filter selects records: every non-empty field must equal the record's.
type Filter struct {
	Tool, Caller, Status string
}

func (f Filter) match(r Record) bool {
	return (f.Tool == "" || r.Str("tool") == f.Tool) &&
		(f.Caller == "" || r.Str("caller") == f.Caller || r.Str("asked_by") == f.Caller || r.Str("decided_by") == f.Caller) &&
		(f.Status == "" || r.Str("status") == f.Status || r.Str("event") == f.Status)
}

// Store is where audit records are kept and read back.
type Store interface {
	// Handler receives the audit log's records (slog, as the daemon logs
	// them) and keeps them.
	Handler() slog.Handler
	// Recent returns at most limit records that match f, newest first.
	Recent(f Filter, limit int) ([]Record, error)
}

// File is the single-node Store: DIR/audit.jsonl, rotated to
// audit.jsonl.1 … audit.jsonl.N when it passes MaxBytes.
type File struct {
	dir      string
	maxBytes int64
	keep     int

	mu   sync.Mutex
	f    *os.File
	size int64
	// seq is the last record's "seq": every record the file store writes
	// is numbered, in order, for the export's cursor (export.go).
	seq  int64
	prev string // the hash of the last line written (chain.go)
}

// Defaults of Open.
const (
	DefaultMaxBytes = 16 << 20
	DefaultKeep     = 4
	fileName        = "audit.jsonl"
)

// Open opens (creating) the audit file under dir (0700) for appending.
// maxBytes and keep default to DefaultMaxBytes and DefaultKeep.
func Open(dir string, maxBytes int64, keep int) (*File, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if keep <= 0 {
		keep = DefaultKeep
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	a := &File{dir: dir, maxBytes: maxBytes, keep: keep}
	a.prev = a.lastHash()
	if err := a.open(); err != nil {
		return nil, err
	}
	a.seq, a.prev = lastSeq(dir, keep), a.lastHash()
	return a, nil
}

func (a *File) path(i int) string {
	if i == 0 {
		return filepath.Join(a.dir, fileName)
	}
	return filepath.Join(a.dir, fmt.Sprintf("%s.%d", fileName, i))
}

func (a *File) open() error {
	f, err := os.OpenFile(a.path(0), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: %w", err)
	}
	a.f, a.size = f, fi.Size()
	return nil
}

// Write appends one record (slog's JSON handler writes a record with one
// Write), numbered with the next "seq" and linked into the hash chain
// (chain.go), rotating first when the file would pass maxBytes.
func (a *File) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return 0, errors.New("audit: closed")
	}
	rec := bytes.TrimRight(p, "\n")
	if len(rec) < 2 || rec[0] != '{' || rec[len(rec)-1] != '}' || bytes.IndexByte(rec, '\n') >= 0 {
		return 0, errors.New("audit: want one JSON object a line")
	}
	if fi, err := a.f.Stat(); err == nil && fi.Size() != a.size {
		// Another process (toolagent mcp beside the daemon) appended:
		// number and chain on from its last record.
		a.size, a.seq, a.prev = fi.Size(), max(a.seq, lastSeq(a.dir, a.keep)), a.lastHash()
	}
	// {"seq":N, then the record's own fields.
	numbered := fmt.Appendf(nil, `{"seq":%d`, a.seq+1)
	if len(rec) > 2 {
		numbered = append(numbered, ',')
	}
	numbered = append(numbered, rec[1:]...)
	line, hash := chained(a.prev, numbered)
	if a.size > 0 && a.size+int64(len(line)) > a.maxBytes {
		if err := a.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := a.f.Write(line)
	a.size += int64(n)
	if err != nil {
		return 0, err
	}
	a.seq++
	a.prev = hash
	return len(p), nil
}

// rotate shifts audit.jsonl.i to .i+1 (dropping the oldest) and starts a
// new file.
func (a *File) rotate() error {
	a.f.Close()
	os.Remove(a.path(a.keep))
	for i := a.keep - 1; i >= 0; i-- {
		if err := os.Rename(a.path(i), a.path(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("audit: rotate: %w", err)
		}
	}
	return a.open()
}

// Close closes the file.
func (a *File) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}

// Handler returns a JSON handler that writes every record to the file.
func (a *File) Handler() slog.Handler { return slog.NewJSONHandler(a, nil) }

// Recent reads the current file and then the rotated ones, and returns at
// most limit matching records, newest first. A line that does not parse
// (a torn last write) is skipped.
func (a *File) Recent(f Filter, limit int) ([]Record, error) {
	if limit <= 0 {
		limit = 100
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Record
	for i := 0; i <= a.keep && len(out) < limit; i++ {
		data, err := os.ReadFile(a.path(i))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		var recs []Record
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var r Record
			rec, _, _, _ := unchain(sc.Bytes()) // the record as written, without its link
			if json.Unmarshal(rec, &r) == nil && f.match(r) {
				recs = append(recs, r)
			}
		}
		slices.Reverse(recs)
		out = append(out, recs[:min(len(recs), limit-len(out))]...)
	}
	return out, nil
}
