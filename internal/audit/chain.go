package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"time"
)

// The file store's lines are a hash chain like the shared store's rows:
// each record slog writes gets, before its closing brace,
// ,"prev_hash":"…","hash":"…" where hash is chainHash(prev_hash, the
// record as slog wrote it). Rotation keeps the chain going from file to
// file; the oldest file's first line names a prev_hash of a dropped file.

// chainTail matches the chain fields File.Write appends to a record.
var chainTail = regexp.MustCompile(`,"prev_hash":"([0-9a-f]*)","hash":"([0-9a-f]{64})"\}$`)

// chained returns record (one JSON object, no newline) with its link
// after prev, and its hash.
func chained(prev string, record []byte) ([]byte, string) {
	h := chainHash(prev, string(record))
	out := make([]byte, 0, len(record)+len(prev)+96)
	out = append(out, record[:len(record)-1]...)
	out = fmt.Appendf(out, `,"prev_hash":%q,"hash":%q}`, prev, h)
	return append(out, '\n'), h
}

// unchain splits a line into the record as written and its link; ok is
// false for a line without one.
func unchain(line []byte) (record []byte, prev, hash string, ok bool) {
	m := chainTail.FindSubmatchIndex(line)
	if m == nil {
		return line, "", "", false
	}
	record = append(append([]byte{}, line[:m[0]]...), '}')
	return record, string(line[m[2]:m[3]]), string(line[m[4]:m[5]]), true
}

// lastHash is the hash of the last chained line of the files in dir
// (the current one, else the newest rotated), "" when there is none.
func (a *File) lastHash() string {
	for i := 0; i <= a.keep; i++ {
		data, err := os.ReadFile(a.path(i))
		if err != nil {
			continue
		}
		lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
		for j := len(lines) - 1; j >= 0; j-- {
			if _, _, h, ok := unchain(lines[j]); ok {
				return h
			}
		}
	}
	return ""
}

// FileRow is one line of the file store as VerifyFile and ExportFile see
// it: its place (file, line), the record and its link.
type fileRow struct {
	Row
	file string
	line int
}

// eachLine calls f on every line of the audit files under dir, oldest
// first; an error stops the walk.
func eachLine(dir string, keep int, f func(r fileRow, chained bool) error) error {
	a := &File{dir: dir, keep: keep}
	for { // every rotated file there is, whatever keep the daemon had
		if _, err := os.Stat(a.path(a.keep + 1)); err != nil {
			break
		}
		a.keep++
	}
	var seq int64
	for i := a.keep; i >= 0; i-- {
		fh, err := os.Open(a.path(i))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		n := 0
		for sc.Scan() {
			n++
			seq++
			rec, prev, hash, ok := unchain(sc.Bytes())
			var at struct {
				Time time.Time `json:"time"`
			}
			json.Unmarshal(rec, &at)
			r := fileRow{Row: Row{Seq: seq, At: at.Time, Record: json.RawMessage(rec), PrevHash: prev, Hash: hash}, file: a.path(i), line: n}
			if err := f(r, ok); err != nil {
				fh.Close()
				return err
			}
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return fmt.Errorf("audit: %s: %w", a.path(i), err)
		}
	}
	return nil
}

// errStop ends a walk early without an error.
var errStop = errors.New("stop")

// VerifyFile checks the hash chain of the file store's trail under dir
// (STATE/audit), as Verify does the shared store's: every line's hash,
// and its link to the line before. Lines written before the file was
// chained (no link) may only come first; the first chained line's
// prev_hash is taken as it is (its file may have rotated away).
func VerifyFile(dir string) (VerifyResult, error) {
	var res VerifyResult
	prev, started := "", false
	err := eachLine(dir, 0, func(r fileRow, ok bool) error {
		where := fmt.Sprintf("%s:%d", r.file, r.line)
		switch {
		case !json.Valid(r.Record):
			res.Broken = where + ": not a JSON record (a torn or edited line)"
		case !ok && started:
			res.Broken = where + ": no hash link, after chained lines: a line was inserted or its link removed"
		case !ok:
			return nil // written before the trail was chained
		case started && r.PrevHash != prev:
			res.Broken = fmt.Sprintf("%s: prev_hash %.12s… does not match the hash of the line before it (%.12s…): a line was removed or edited", where, r.PrevHash, prev)
		case chainHash(r.PrevHash, string(r.Record)) != r.Hash:
			res.Broken = where + ": its hash does not match its record: the record or the hash was edited"
		}
		if res.Broken != "" {
			return errStop
		}
		started = true
		res.Rows++
		prev = r.Hash
		return nil
	})
	res.Head = prev
	if errors.Is(err, errStop) {
		err = nil
	}
	return res, err
}

// ExportFile writes every line of the file store's trail under dir,
// oldest first, as JSON lines in Export's form (seq counts lines from
// the oldest file kept; replica is empty).
func ExportFile(dir string, w io.Writer) (int64, error) {
	enc := json.NewEncoder(w)
	var n int64
	err := eachLine(dir, 0, func(r fileRow, _ bool) error {
		if !json.Valid(r.Record) {
			return fmt.Errorf("audit: %s:%d: not a JSON record (a torn or edited line)", r.file, r.line)
		}
		n++
		return enc.Encode(r.Row)
	})
	return n, err
}
