package cache

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"

	"github.com/toolagent/toolagent/internal/hldp"
)

// Layout 4 writes the outcomes, the listing and the last good versions in
// a form of its own instead of gob: a warm start of 10,000 tools spent a
// third of its CPU in gob's reflection and in the copy it makes of each
// message, and a new process pays for every page that copy touches (see
// docs/operations.md, "Start time").
//
// A chunk is its entries, then a CRC-32C of them:
//
//	uvarint n, n × entry, uint32 (little-endian) CRC-32C of what precedes
//
// an entry:
//
//	byte flags (flagTool, flagDiags, flagErr), str path, str blob, str rev,
//	[bytes tool (hldp.Tool.MarshalBinary)], [uvarint n, n × diagnostic],
//	[str err]
//
// a diagnostic: str file, uvarint line, uvarint col, str field, str
// problem, str want, str got, str hint. A str or bytes is a uvarint
// length and the bytes.
//
// The tail after the chunks is two sections, each a uvarint length, the
// bytes and their CRC-32C: the listing (str tree, uvarint n, n × (str
// path, str blob), uint32 listingSum) and the last good versions (uvarint
// n, n × (str path, str blob, str rev), str head).
const (
	flagTool byte = 1 << iota
	flagDiags
	flagErr
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCut says the bytes end inside a value or disagree with their CRC.
var errCut = errors.New("corrupt (cut short or damaged)")

type writer struct{ b []byte }

func (w *writer) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *writer) str(s string)  { w.uint(uint64(len(s))); w.b = append(w.b, s...) }

// sum appends the CRC-32C of b[from:].
func (w *writer) sum(from int) {
	w.b = binary.LittleEndian.AppendUint32(w.b, crc32.Checksum(w.b[from:], castagnoli))
}

// appendChunk appends the chunk of es to b.
func appendChunk(b []byte, es []fileEntry) ([]byte, error) {
	w := &writer{b: b}
	from := len(b)
	w.uint(uint64(len(es)))
	for _, e := range es {
		var flags byte
		if e.Tool != nil {
			flags |= flagTool
		}
		if len(e.Diags) > 0 {
			flags |= flagDiags
		}
		if e.Err != "" {
			flags |= flagErr
		}
		w.b = append(w.b, flags)
		w.str(e.Key.Path)
		w.str(e.Key.Blob)
		w.str(e.Rev)
		if e.Tool != nil {
			// The tool's length first: room for it, filled in after.
			at := len(w.b)
			w.b = append(w.b, make([]byte, binary.MaxVarintLen32)...)
			start := len(w.b)
			var err error
			if w.b, err = e.Tool.AppendBinary(w.b); err != nil {
				return b, err
			}
			n := len(w.b) - start
			l := binary.PutUvarint(w.b[at:], uint64(n))
			// Close the gap the length did not fill.
			copy(w.b[at+l:], w.b[start:])
			w.b = w.b[:at+l+n]
		}
		if len(e.Diags) > 0 {
			w.uint(uint64(len(e.Diags)))
			for _, d := range e.Diags {
				w.str(d.File)
				w.uint(uint64(max(d.Line, 0)))
				w.uint(uint64(max(d.Col, 0)))
				w.str(d.Field)
				w.str(d.Problem)
				w.str(d.Want)
				w.str(d.Got)
				w.str(d.Hint)
			}
		}
		if e.Err != "" {
			w.str(e.Err)
		}
	}
	w.sum(from)
	return w.b, nil
}

// reader reads what writer wrote; after the first error every read
// returns zero values and bad stays set.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uint() uint64 {
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[k:]
	return v
}

// view returns the next str's bytes, a view of the data.
func (r *reader) view() []byte {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.bad, r.b = true, nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string { return string(r.view()) }

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// checked returns data without its trailing CRC-32C, or errCut if the
// CRC does not match.
func checked(data []byte) ([]byte, error) {
	if len(data) < 4 {
		return nil, errCut
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(body):]) {
		return nil, errCut
	}
	return body, nil
}

// decodeChunk returns the entries of a chunk appendChunk wrote. The
// tools keep nothing of data (hldp.Tool.UnmarshalBinary copies); an
// entry's path is the end of its tool's File when the tool has one, as
// a cache that parsed the file holds it.
func decodeChunk(data []byte) ([]fileEntry, error) {
	body, err := checked(data)
	if err != nil {
		return nil, err
	}
	r := &reader{b: body}
	n := r.uint()
	if n > uint64(len(r.b)) { // every entry takes bytes
		return nil, errCut
	}
	es := make([]fileEntry, n)
	// A revision is one commit for many outcomes: kept once.
	revs := map[string]string{}
	for i := range es {
		e := &es[i]
		flags := r.byte()
		path := r.view()
		e.Key.Blob = r.str()
		if rev := r.view(); len(rev) > 0 {
			s, ok := revs[string(rev)]
			if !ok {
				s = string(rev)
				revs[s] = s
			}
			e.Rev = s
		}
		if flags&flagTool != 0 {
			t := new(hldp.Tool)
			if err := t.UnmarshalBinary(r.view()); err != nil || r.bad {
				return nil, errors.Join(errCut, err)
			}
			e.Tool = t
		}
		if f := toolFile(e.Tool); len(f) >= len(path) && f[len(f)-len(path):] == string(path) {
			e.Key.Path = f[len(f)-len(path):]
		} else {
			e.Key.Path = string(path)
		}
		if flags&flagDiags != 0 {
			k := r.uint()
			if k > uint64(len(r.b)) {
				return nil, errCut
			}
			e.Diags = make([]*hldp.Diagnostic, k)
			for j := range e.Diags {
				e.Diags[j] = &hldp.Diagnostic{File: r.str(), Line: int(r.uint()), Col: int(r.uint()),
					Field: r.str(), Problem: r.str(), Want: r.str(), Got: r.str(), Hint: r.str()}
			}
		}
		if flags&flagErr != 0 {
			e.Err = r.str()
		}
		if r.bad || flags&^(flagTool|flagDiags|flagErr) != 0 {
			return nil, errCut
		}
	}
	if len(r.b) != 0 {
		return nil, errCut
	}
	return es, nil
}

func toolFile(t *hldp.Tool) string {
	if t == nil {
		return ""
	}
	return t.File
}

// appendTail appends the listing and the last good versions to b.
func appendTail(b []byte, l fileListing, last fileLast) []byte {
	w := &writer{b: b}
	section := func(body func()) {
		inner := &writer{}
		w, inner = inner, w
		body()
		w, inner = inner, w
		w.uint(uint64(len(inner.b)))
		from := len(w.b)
		w.b = append(w.b, inner.b...)
		w.sum(from)
	}
	section(func() {
		w.str(l.Tree)
		w.uint(uint64(len(l.Keys)))
		for _, k := range l.Keys {
			w.str(k.Path)
			w.str(k.Blob)
		}
		w.b = binary.LittleEndian.AppendUint32(w.b, l.Sum)
	})
	section(func() {
		w.uint(uint64(len(last.Good)))
		for _, g := range last.Good {
			w.str(g.Path)
			w.str(g.Blob)
			w.str(g.Rev)
		}
		w.str(last.Head)
	})
	return w.b
}

// errListingSum says the listing's section disagrees with its CRC.
var errListingSum = errors.New("fails its checksum")

// decodeTail returns the listing and the last good versions appendTail
// wrote. A tail that ends before the listing (a file written with no
// tail) gives none of either and no error; listErr is about the listing,
// lastErr about the last good versions.
func decodeTail(data []byte) (l fileListing, last fileLast, listErr, lastErr error) {
	if len(data) == 0 {
		return l, last, nil, nil
	}
	r := &reader{b: data}
	section := func() (*reader, error) {
		n := r.uint()
		if r.bad || n > uint64(len(r.b)) || len(r.b)-int(n) < 4 {
			return nil, errCut
		}
		body, sum := r.b[:n], r.b[n:n+4]
		r.b = r.b[n+4:]
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(sum) {
			return nil, errListingSum
		}
		return &reader{b: body}, nil
	}
	s, err := section()
	if err != nil {
		return l, last, err, nil
	}
	l.Tree = s.str()
	n := s.uint()
	if n > uint64(len(s.b)) {
		return fileListing{}, last, errCut, nil
	}
	l.Keys = make([]Key, n)
	for i := range l.Keys {
		l.Keys[i] = Key{Path: s.str(), Blob: s.str()}
	}
	if len(s.b) != 4 || s.bad {
		return fileListing{}, last, errCut, nil
	}
	l.Sum = binary.LittleEndian.Uint32(s.b)
	if len(r.b) == 0 {
		return l, last, nil, nil // written before the last good versions
	}
	if s, err = section(); err != nil {
		return l, last, nil, err
	}
	n = s.uint()
	if n > uint64(len(s.b)) {
		return l, fileLast{}, nil, errCut
	}
	last.Good = make([]fileServed, n)
	for i := range last.Good {
		last.Good[i] = fileServed{Path: s.str(), Blob: s.str(), Rev: s.str()}
	}
	last.Head = s.str()
	if s.bad || len(s.b) != 0 || len(r.b) != 0 {
		return l, fileLast{}, nil, errCut
	}
	return l, last, nil, nil
}

// formatOf returns the layout a cache file's first line names
// ("toolagent-parse-cache-3"), or "".
func formatOf(data []byte) string {
	line, _, ok := strings.Cut(string(data[:min(len(data), 64)]), "\n")
	if !ok || !strings.HasPrefix(line, "toolagent-parse-cache-") {
		return ""
	}
	return line
}
