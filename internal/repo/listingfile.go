// LocalDir's ListingFile: the listing's encoding and decoding, and
// loading it at the first Sync and writing it (atomically, and off the
// Sync for a watched one) after a Sync that changed it.

package repo

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ListingFile's layout: listingMagic, then uvarints and bytes —
//
//	version, len(dir), dir, count,
//	count × (len(path), path, kind, trusted, size, mtime, ctime, ino, mode,
//	         20-byte blob hash if trusted and a file)
//
// with the entries in listing order: the directory ("."), then each
// top-level entry by name, each followed by the entries below it by path.
//
// (size and the times as zig-zag varints), then a CRC-32C of all that,
// little-endian. A file that fails the checksum is dropped whole: a wrong
// blob hash would stand for a file it does not hash.
const (
	listingMagic   = "toolagent local listing\n"
	listingVersion = 2 // 1 sorted every entry by path, not by group
)

// encodeListing writes the ListingFile bytes of l, a listing of dir, to
// w, a few kilobytes at a time: at 100,000 tools they are 12 MB, and a
// watched Sync's listing is written after every edit.
func encodeListing(w io.Writer, dir string, l *listing) error {
	files, dirs := l.counts()
	sum := crc32.New(crcTable)
	out := bufio.NewWriterSize(io.MultiWriter(w, sum), 64<<10)
	b := make([]byte, 0, 512)
	b = append(b, listingMagic...)
	b = binary.AppendUvarint(b, listingVersion)
	b = binary.AppendUvarint(b, uint64(len(dir)))
	b = append(b, dir...)
	b = binary.AppendUvarint(b, uint64(files+dirs))
	for e := range l.all() {
		if len(b) > 4<<10 {
			out.Write(b)
			b = b[:0]
		}
		b = binary.AppendUvarint(b, uint64(len(e.Path)))
		b = append(b, e.Path...)
		trusted := byte(0)
		if e.Trusted {
			trusted = 1
		}
		b = append(b, byte(e.Kind), trusted)
		b = binary.AppendVarint(b, e.Stat.Size)
		b = binary.AppendVarint(b, e.Stat.MTime)
		b = binary.AppendVarint(b, e.Stat.CTime)
		b = binary.AppendUvarint(b, e.Stat.Ino)
		b = binary.AppendUvarint(b, uint64(e.Stat.Mode))
		if e.Trusted && e.Kind == kindFile {
			b = append(b, e.Blob[:]...)
		}
	}
	out.Write(b)
	if err := out.Flush(); err != nil {
		return err
	}
	_, err := w.Write(binary.LittleEndian.AppendUint32(nil, sum.Sum32()))
	return err
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errListing says why a ListingFile cannot be used.
type errListing string

func (e errListing) Error() string { return string(e) }

// decodeListing parses ListingFile bytes written for dir.
func decodeListing(data []byte, dir string) (*listing, error) {
	rest, ok := bytes.CutPrefix(data, []byte(listingMagic))
	if !ok {
		return nil, errListing("not a listing")
	}
	if len(rest) < 4 || crc32.Checksum(data[:len(data)-4], crcTable) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return nil, errListing("fails its checksum (damaged or cut short)")
	}
	r := listingReader{b: rest[:len(rest)-4]}
	if v := r.uvarint(); v != listingVersion {
		return nil, errListing(fmt.Sprintf("written as version %d, want %d", v, listingVersion))
	}
	if got := string(r.bytes(int(r.uvarint()))); got != dir {
		return nil, errListing("a listing of another directory, " + got)
	}
	n := r.uvarint()
	if n > uint64(len(r.b)) { // every entry takes bytes
		return nil, errListing("corrupt")
	}
	l := &listing{}
	var cur []entry // the group being read
	prev := ""      // the path read before
	for k := range n {
		e := entry{Path: string(r.bytes(int(r.uvarint())))}
		kt := r.bytes(2)
		if len(kt) == 2 {
			e.Kind, e.Trusted = entryKind(kt[0]), kt[1] == 1
		}
		e.Stat = fileStat{Size: r.varint(), MTime: r.varint(), CTime: r.varint(), Ino: r.uvarint(), Mode: uint32(r.uvarint())}
		if e.Trusted && e.Kind == kindFile {
			copy(e.Blob[:], r.bytes(sha1.Size))
		}
		if r.bad || e.Kind < kindFile || e.Kind > kindLink || !fs.ValidPath(e.Path) {
			return nil, errListing("corrupt")
		}
		// The directory first, then each group: its top-level entry, and
		// the entries below it by path; the groups by name.
		top, _, below := strings.Cut(e.Path, "/")
		switch {
		case k == 0:
			if e.Path != "." || e.Kind != kindDir {
				return nil, errListing("corrupt")
			}
			l.self = e
			continue
		case below && (len(cur) == 0 || top != cur[0].Path || e.Path <= prev):
			return nil, errListing("corrupt")
		case !below:
			if len(cur) > 0 && e.Path <= cur[0].Path || e.Path == "." {
				return nil, errListing("corrupt")
			}
			if len(cur) > 0 {
				l.groups = append(l.groups, newGroup(cur))
			}
			// Most groups are a tool's folder and its TOOL.hdlp: room
			// for two at once, not one and then two.
			cur = make([]entry, 0, 2)
		}
		cur = append(cur, e)
		prev = e.Path
	}
	if len(cur) > 0 {
		l.groups = append(l.groups, newGroup(cur))
	}
	if r.bad || len(r.b) != 0 || n == 0 {
		return nil, errListing("corrupt")
	}
	return l, nil
}

// listingReader reads the fields of a ListingFile; bad is set once one
// does not fit, and every later read gives zeros.
type listingReader struct {
	b   []byte
	bad bool
}

func (r *listingReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *listingReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *listingReader) bytes(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.bad, r.b = true, nil
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// loadLocked reads ListingFile; nil when there is none or it cannot be
// used (logged).
func (d *LocalDir) loadLocked() *listing {
	if d.ListingFile == "" {
		return nil
	}
	data, err := os.ReadFile(d.ListingFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		var l *listing
		if l, err = decodeListing(data, d.abs); err == nil {
			d.saved = l
			return l
		}
	}
	d.logger().Warn("local dir listing ignored: every file is read once", "file", d.ListingFile, "dir", d.abs, "why", err)
	return nil
}

// saveLocked writes l to ListingFile when it differs from what the file
// holds: before it returns, or, for a watched Sync (async), on another
// goroutine, so that the Sync after one edited file of 100,000 does not
// encode and write all of them. A listing the file lacks only costs
// reading: a start from an older listing reads the files whose stat
// changed since. A failure is logged, for the same reason.
func (d *LocalDir) saveLocked(l *listing, async bool) {
	if d.ListingFile == "" {
		return
	}
	if d.saved != nil && samePersisted(d.saved, l) {
		d.saved = l
		return
	}
	d.saved = l
	q := &queuedListing{l: l, file: d.ListingFile, dir: d.abs, seq: d.seq.Add(1)}
	if async {
		d.queued = q
		if !d.writing {
			d.writing = true
			d.written.L = &d.mu
			d.writers.Add(1)
			go d.writeQueued()
		}
		return
	}
	d.queued = nil
	d.writeMu.Lock()
	err := d.write(q)
	d.writeMu.Unlock()
	if err != nil {
		d.saved = nil
	}
}

// Flush waits until the listings watched Syncs left to write (see
// saveLocked) are in ListingFile, or failed to be (logged).
func (d *LocalDir) Flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.writing {
		d.written.Wait()
	}
}

// writeQueued writes the queued listings until none is left.
func (d *LocalDir) writeQueued() {
	defer d.writers.Done()
	for {
		d.mu.Lock()
		q := d.queued
		d.queued = nil
		if q == nil {
			d.writing = false
			d.written.Broadcast()
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
		d.writeMu.Lock()
		var err error
		if q.seq == d.seq.Load() { // else a newer listing was, or is to be, written
			err = d.write(q)
		}
		d.writeMu.Unlock()
		if err != nil {
			d.mu.Lock()
			if d.saved == q.l {
				d.saved = nil
			}
			d.mu.Unlock()
		}
	}
}

// write writes q's listing, logging a failure.
func (d *LocalDir) write(q *queuedListing) error {
	err := writeListing(q.file, func(w io.Writer) error { return encodeListing(w, q.dir, q.l) })
	if err != nil {
		d.logger().Warn("local dir listing not saved: the next start reads every file", "file", q.file, "err", err)
	}
	return err
}

// samePersisted reports whether ListingFile would hold the same for a and
// b (see encodeListing).
func samePersisted(a, b *listing) bool {
	if !samePersistedEntry(a.self, b.self) || len(a.groups) != len(b.groups) {
		return false
	}
	for k := range a.groups {
		x, y := a.groups[k].entries, b.groups[k].entries
		if len(x) == len(y) && &x[0] == &y[0] {
			continue // a group a watched Sync took whole
		}
		if !slices.EqualFunc(x, y, samePersistedEntry) {
			return false
		}
	}
	return true
}

func samePersistedEntry(x, y entry) bool {
	return x.Path == y.Path && x.Stat == y.Stat && x.Kind == y.Kind && x.Trusted == y.Trusted &&
		(!x.Trusted || x.Kind != kindFile || x.Blob == y.Blob)
}

// writeListing writes the file atomically: a temporary file renamed over
// the old one. It is not synced to disk: a file torn by a crash fails its
// checksum and costs one full read.
func writeListing(file string, encode func(io.Writer) error) error {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".local-listing-*")
	if err != nil {
		return err
	}
	werr := encode(tmp)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
