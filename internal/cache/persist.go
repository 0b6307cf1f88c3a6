package cache

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolagent/toolagent/internal/hldp"
)

// fileFormat names the on-disk layout; with hldp.FormatVersion it decides
// whether a persisted memo may be used. Layout 2 kept the outcomes in
// chunks, each a gob stream of its own, so that Open decodes and Save
// encodes them on several goroutines. Layout 3 framed them itself, so
// that a Save copies the chunks that did not change from the file before
// without reading them into memory. Layout 4 writes the chunks and the
// tail in a form of its own, not gob (codec.go):
//
//	fileFormat, "\n", uvarint hldp.FormatVersion, uvarint n,
//	n × uvarint (each chunk's length), the n chunks, the tail.
const fileFormat = "toolagent-parse-cache-4"

// errNotCache says a file is not a parse cache of any layout.
var errNotCache = errors.New("not a parse cache")

// errShort says a cache file ends before its header says it does.
var errShort = errors.New("cut short")

// span is where one chunk lies in the file.
type span struct{ off, n int64 }

// appendHeader appends the file's bytes before its chunks, of the lengths
// given.
func appendHeader(b []byte, lens []int64) []byte {
	b = append(b, fileFormat+"\n"...)
	b = binary.AppendUvarint(b, uint64(hldp.FormatVersion))
	b = binary.AppendUvarint(b, uint64(len(lens)))
	for _, n := range lens {
		b = binary.AppendUvarint(b, uint64(n))
	}
	return b
}

// errFormat says the file is a cache of another layout or format version.
type errFormat struct{ format string }

func (e errFormat) Error() string { return "written for format " + e.format }

// layout returns where the chunks of a cache file of size bytes lie and
// where its tail begins, from head, the file's first bytes; when the
// header may go on past head, more returns the n bytes after it.
func layout(head []byte, size int64, more func(n int64) ([]byte, error)) (spans []span, tail int64, err error) {
	rest, ok := bytes.CutPrefix(head, []byte(fileFormat+"\n"))
	if !ok {
		if f := formatOf(head); f != "" {
			return nil, 0, errFormat{f}
		}
		// Layout 1 and 2 began with a gob-encoded fileHeader.
		var h fileHeader
		if gob.NewDecoder(bytes.NewReader(head)).Decode(&h) == nil && strings.HasPrefix(h.Format, "toolagent-parse-cache-") {
			return nil, 0, errFormat{fmt.Sprintf("%s/%d", h.Format, h.FormatVersion)}
		}
		return nil, 0, errNotCache
	}
	uvarint := func() uint64 {
		v, k := binary.Uvarint(rest)
		if k <= 0 {
			err = errShort
			rest = nil
			return 0
		}
		rest = rest[k:]
		return v
	}
	if v := uvarint(); err == nil && v != uint64(hldp.FormatVersion) {
		return nil, 0, errFormat{fmt.Sprintf("%s/%d", fileFormat, v)}
	}
	n := uvarint()
	if err != nil {
		return nil, 0, err
	}
	if n > uint64(size) { // every length takes a byte
		return nil, 0, errors.New("corrupt")
	}
	read := int64(len(head)) // the bytes of the file rest ends
	if want := int64(n) * binary.MaxVarintLen64; int64(len(rest)) < want && read < size {
		m, err := more(min(size-read, want-int64(len(rest))))
		if err != nil {
			return nil, 0, err
		}
		rest = append(slices.Clip(rest), m...)
		read += int64(len(m))
	}
	lens := make([]uint64, n)
	for i := range lens {
		lens[i] = uvarint()
	}
	if err != nil {
		return nil, 0, err
	}
	off := read - int64(len(rest))
	spans = make([]span, n)
	for i, l := range lens {
		if l > uint64(size-off) {
			return nil, 0, errShort
		}
		spans[i] = span{off, int64(l)}
		off += int64(l)
	}
	return spans, off, nil
}

// chunkLen is about the number of outcomes one chunk holds: enough that
// each chunk's own type description is small beside it, few enough that a
// catalog of a few thousand tools spreads over every processor, and that
// a Save after one changed file encodes 1/chunkLen of the outcomes of a
// big catalog. An outcome's chunk is its path's hash modulo the number of
// chunks (chunkOf), a power of two chosen for the number of outcomes and
// kept while that number stays within a factor of four of it.
const chunkLen = 512

// chunkOf is the chunk of the n (a power of two) that holds k's outcome.
func chunkOf(k Key, n int) int {
	h := fnv.New32a()
	io.WriteString(h, k.Path)
	return int(h.Sum32() & uint32(n-1))
}

// chunkCount is the number of chunks for n outcomes.
func chunkCount(n int) int {
	c := 1
	for c*chunkLen < n {
		c *= 2
	}
	return c
}

type fileHeader struct {
	Format        string
	FormatVersion int
}

type fileEntry struct {
	Key   Key
	Tool  *hldp.Tool
	Diags []*hldp.Diagnostic // the parse error, when it is made of diagnostics
	Err   string             // the parse error's text otherwise
	Rev   string             // Outcome.Rev
}

// fileListing is Cache's listing on disk, after the entries; fileLast
// follows it. Files written before either
// existed end earlier; they load without them.
type fileListing struct {
	Tree string
	Keys []Key  // sorted by path
	Sum  uint32 // listingSum of Tree and Keys
}

// listingSum is a CRC-32C of a listing: a listing that decodes but was
// damaged on disk is dropped, since a wrong blob hash would pair a path
// with another file's outcome.
func listingSum(tree string, keys []Key) uint32 {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	io.WriteString(h, tree)
	for _, k := range keys {
		io.WriteString(h, "\x00"+k.Path+"\x00"+k.Blob)
	}
	return h.Sum32()
}

// parallel calls f(w, 0) … f(w, n-1) on up to GOMAXPROCS goroutines and
// returns when all have returned; w numbers the goroutine that calls (0 ≤
// w < GOMAXPROCS), for what each keeps of its own.
func parallel(n int, f func(w, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(w, i)
			}
		})
	}
	wg.Wait()
}

// Open returns a cache backed by the file at path, loading what it holds.
// A missing file gives an empty cache. A file that cannot be decoded, or
// was written for another format version, is ignored: the cache starts
// empty and the error says why (the caller logs it; the memo only saves
// work). Save writes the cache back.
func Open(path string) (*Cache, error) {
	c := New()
	c.path = path
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("cache: read %s: %w", path, err)
	}
	defer f.Close()
	decoded, spans, tail, disk, err := readChunks(f)
	var ef errFormat
	switch {
	case errors.As(err, &ef):
		return c, fmt.Errorf("cache: %s was %v, want %s/%d (ignored; it will be rebuilt)", path, ef, fileFormat, hldp.FormatVersion)
	case errors.As(err, new(*os.PathError)):
		return c, fmt.Errorf("cache: read %s: %w", path, err)
	case errors.Is(err, errNotCache):
		return c, fmt.Errorf("cache: %s is not a parse cache (ignored): %w", path, err)
	case err != nil:
		return c, fmt.Errorf("cache: %s is corrupt (ignored): %w", path, err)
	}
	// The next Save copies from this file the chunks nothing changed.
	if disk != nil {
		c.stale, c.spans, c.disk = make([]bool, len(spans)), spans, disk
	}
	// The file repeats each path and blob hash in the listing and the last
	// good versions, each tool's path in its File, and a revision (one
	// commit) for many outcomes: those are kept once, in the outcomes'
	// keys, as a cache that parsed them holds them.
	total := 0
	for _, d := range decoded {
		total += len(d)
	}
	// Sized at once: growing maps of 10,000 keys rehashes each several
	// times, a tenth of a warm start.
	c.m = make(map[Key]stored, total)
	byPath := make(map[string]Key, total)
	rev := func(r string) string { // the outcomes' (storedLocked)
		if x := c.revs[r]; x != nil {
			return x.rev
		}
		return r
	}
	canon := func(path, blob string) (string, string) {
		k, ok := byPath[path]
		switch {
		case !ok:
			return path, blob
		case k.Blob == blob:
			return k.Path, k.Blob
		}
		return k.Path, blob
	}
	// An entry's tool is decoded as Parse returns it
	// (hldp.Tool.UnmarshalBinary), its file's path packed with its own
	// strings: the key shares it (decodeChunk; the tool's is the key's
	// behind the prefix of messages, "tools/").
	for _, es := range decoded { // in order; not joined first (1 MB at 10,000 tools)
		for k := range es {
			e := &es[k]
			o := Outcome{Tool: e.Tool, Rev: e.Rev}
			switch {
			case len(e.Diags) > 0:
				errs := make([]error, len(e.Diags))
				for i, d := range e.Diags {
					errs[i] = d
				}
				o.Err = errors.Join(errs...)
			case e.Err != "":
				o.Err = errors.New(e.Err)
			}
			if o.Tool == nil && o.Err == nil {
				continue
			}
			c.m[e.Key] = c.storedLocked(o)
			byPath[e.Key.Path] = e.Key
		}
	}
	l, last, listErr, lastErr := tail.l, tail.last, tail.listErr, tail.lastErr
	switch {
	case errors.Is(listErr, errListingSum):
		return c, fmt.Errorf("cache: the tree listing in %s fails its checksum (ignored; the next build reads the tree)", path)
	case listErr != nil:
		return c, fmt.Errorf("cache: the tree listing in %s is corrupt (ignored; the next build reads the tree): %w", path, listErr)
	case l.Sum != listingSum(l.Tree, l.Keys):
		return c, fmt.Errorf("cache: the tree listing in %s fails its checksum (ignored; the next build reads the tree)", path)
	case l.Tree != "":
		c.listTree = l.Tree
		c.listing = make(map[string]string, len(l.Keys))
		for _, k := range l.Keys {
			p, b := canon(k.Path, k.Blob)
			c.listing[p] = b
		}
	}
	switch {
	case lastErr != nil:
		return c, fmt.Errorf("cache: the last good versions in %s are corrupt (ignored): %w", path, lastErr)
	default:
		for i := range last.Good {
			g := &last.Good[i]
			g.Path, g.Blob = canon(g.Path, g.Blob)
			g.Rev = rev(g.Rev)
		}
		// Save wrote them sorted, one per path; a file that says otherwise
		// is made so.
		slices.SortStableFunc(last.Good, compareServed)
		c.lastGood = slices.Clip(slices.CompactFunc(last.Good, func(a, b fileServed) bool { return a.Path == b.Path }))
		c.head = last.Head
	}
	return c, nil
}

// fileLast follows the listing: the last good version of each definition
// file, sorted by path, and the head of the last build of a git tree.
type fileLast struct {
	Good []fileServed
	Head string
}

type fileServed struct {
	Path, Blob, Rev string
}

// headLen is how much of a cache file is read to find its layout: the
// header of a catalog of 100,000 tools (256 chunks, three bytes a length)
// fits; a longer one is read on (layout).
const headLen = 4 << 10

// decodedTail is the tail of a cache file, decoded (decodeTail).
type decodedTail struct {
	l                fileListing
	last             fileLast
	listErr, lastErr error
}

// readChunks decodes the chunks and the tail of the cache file f on
// several goroutines, each reading what it decodes into a buffer of its
// own that it reuses: never the whole file into memory, whose pages a
// start would first touch only to drop them (5 MB at 10,000 tools). It
// returns where the chunks lie, and f's stat, nil when f changed while it
// was read.
func readChunks(f *os.File) (decoded [][]fileEntry, spans []span, tail decodedTail, disk os.FileInfo, err error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, tail, nil, err
	}
	size := fi.Size()
	head := make([]byte, min(size, headLen))
	if _, err := f.ReadAt(head, 0); err != nil {
		if errors.Is(err, io.EOF) { // it shrank since the stat
			err = errShort
		}
		return nil, nil, tail, nil, err
	}
	spans, tailAt, err := layout(head, size, func(n int64) ([]byte, error) {
		b := make([]byte, n)
		_, err := f.ReadAt(b, int64(len(head)))
		return b, err
	})
	if err != nil {
		return nil, nil, tail, nil, err
	}
	decoded = make([][]fileEntry, len(spans))
	errs := make([]error, len(spans)+1)
	bufs := make([][]byte, runtime.GOMAXPROCS(0))
	// The tail is one more job, taken after the chunks: it decodes beside
	// the last of them, not once all have ended.
	parallel(len(spans)+1, func(w, i int) {
		sp := span{tailAt, size - tailAt}
		if i < len(spans) {
			sp = spans[i]
		}
		b := slices.Grow(bufs[w][:0], int(sp.n))[:sp.n]
		bufs[w] = b
		if _, err := f.ReadAt(b, sp.off); err != nil {
			errs[i] = err
			return
		}
		if i < len(spans) {
			decoded[i], errs[i] = decodeChunk(b)
			return
		}
		tail.l, tail.last, tail.listErr, tail.lastErr = decodeTail(b)
	})
	if err := errors.Join(errs...); err != nil {
		if errors.Is(err, io.EOF) {
			err = errShort
		}
		return nil, nil, tail, nil, err
	}
	if after, err := f.Stat(); err == nil && sameFile(after, fi) {
		disk = fi
	}
	return decoded, spans, tail, disk, nil
}

// sameFile reports whether a and b are stats of one file, unchanged.
func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// Save writes the cache to the file it was opened from, atomically (a
// temporary file renamed over the old one), when it changed since it was
// opened or last saved. A cache made with New has no file; Save is then a
// no-op. The chunks of outcomes nothing changed since the file was read
// or written are copied from it (by the kernel, not through memory), when
// it is still that file; the others are encoded.
func (c *Cache) Save() error {
	if c.path == "" {
		return nil
	}
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	c.mu.Lock()
	if !c.dirty {
		c.encoded = 0
		c.mu.Unlock()
		return nil
	}
	gen := c.gen
	spans, disk := c.spans, c.disk // set and cleared with c.stale
	c.mu.Unlock()

	// The file the chunks not stale are copied from: the one the cache
	// read or wrote last, unchanged since.
	var old *os.File
	if disk != nil {
		if f, err := os.Open(c.path); err == nil {
			if fi, err := f.Stat(); err == nil && sameFile(fi, disk) {
				old = f
			} else {
				f.Close()
			}
		}
	}
	if old != nil {
		defer old.Close()
	}

	c.mu.Lock()
	// The chunks to encode: the stale ones, or all when the file on disk
	// cannot give the others or the number of outcomes moved too far from
	// what its layout was made for.
	n := len(c.stale)
	stale := c.stale
	if old == nil || n != len(spans) || len(c.m) > 4*n*chunkLen || n > 1 && len(c.m) < n*chunkLen/4 {
		n = chunkCount(len(c.m))
		stale = make([]bool, n)
		for i := range stale {
			stale[i] = true
		}
	}
	// Changes from here on are stale in the file this Save writes; if it
	// fails, the next Save encodes all.
	c.stale = make([]bool, n)
	saved := false
	defer func() {
		if !saved {
			c.mu.Lock()
			c.stale, c.spans, c.disk = nil, nil, nil
			c.mu.Unlock()
		}
	}()
	todo := make([][]fileEntry, n)
	for k, s := range c.m {
		i := chunkOf(k, n)
		if !stale[i] {
			continue
		}
		o := s.outcome()
		e := fileEntry{Key: k, Tool: o.Tool, Rev: o.Rev}
		if o.Err != nil {
			if ds := hldp.Diagnostics(o.Err); len(ds) > 0 {
				e.Diags = ds
			} else {
				e.Err = o.Err.Error()
			}
		}
		todo[i] = append(todo[i], e)
	}
	l := fileListing{Tree: c.listTree, Keys: make([]Key, 0, len(c.listing))}
	for p, b := range c.listing {
		l.Keys = append(l.Keys, Key{Path: p, Blob: b})
	}
	last := fileLast{Good: slices.Clone(c.lastGood), Head: c.head} // sorted
	c.mu.Unlock()
	slices.SortFunc(l.Keys, func(a, b Key) int { return strings.Compare(a.Path, b.Path) })
	l.Sum = listingSum(l.Tree, l.Keys)

	chunks := make([][]byte, n)
	errs := make([]error, n)
	encoded := 0
	for _, st := range stale {
		if st {
			encoded++
		}
	}
	parallel(n, func(_, i int) {
		if !stale[i] {
			return
		}
		// Sorted, so that a chunk's bytes depend on its outcomes alone.
		slices.SortFunc(todo[i], func(a, b fileEntry) int {
			return cmp.Or(strings.Compare(a.Key.Path, b.Key.Path), strings.Compare(a.Key.Blob, b.Key.Blob))
		})
		chunks[i], errs[i] = appendChunk(nil, todo[i])
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cache: encode: %w", err)
	}
	lens := make([]int64, n)
	for i := range lens {
		if stale[i] {
			lens[i] = int64(len(chunks[i]))
		} else {
			lens[i] = spans[i].n
		}
	}

	if err := os.MkdirAll(filepath.Dir(c.path), 0o750); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".parse-cache-*")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	next, werr := writeFile(tmp, lens, chunks, stale, spans, old, l, last)
	serr := tmp.Sync()
	fi, ferr := tmp.Stat()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, ferr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cache: write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cache: %w", err)
	}
	saved = true
	c.mu.Lock()
	c.encoded, c.spans, c.disk = encoded, next, fi
	if c.gen == gen {
		c.dirty = false
	}
	c.mu.Unlock()
	return nil
}

// writeFile writes the cache file to f: the header, the chunks (the stale
// ones from chunks, the others copied from old at spans), then the
// listing and the last good versions. It returns where each chunk lies.
func writeFile(f *os.File, lens []int64, chunks [][]byte, stale []bool, spans []span, old *os.File, l fileListing, last fileLast) ([]span, error) {
	w := bufio.NewWriterSize(f, 256<<10)
	hdr := appendHeader(nil, lens)
	if _, err := w.Write(hdr); err != nil {
		return nil, err
	}
	next := make([]span, len(lens))
	off := int64(len(hdr))
	for i := 0; i < len(lens); {
		if stale[i] {
			if _, err := w.Write(chunks[i]); err != nil {
				return nil, err
			}
			next[i] = span{off, lens[i]}
			off += lens[i]
			i++
			continue
		}
		// A run of chunks that did not change lies whole in old.
		j, size := i, int64(0)
		for ; j < len(lens) && !stale[j]; j++ {
			next[j] = span{off + size, lens[j]}
			size += lens[j]
		}
		if err := w.Flush(); err != nil {
			return nil, err
		}
		if _, err := old.Seek(spans[i].off, io.SeekStart); err != nil {
			return nil, err
		}
		if n, err := io.Copy(f, io.LimitReader(old, size)); err != nil || n != size {
			return nil, cmp.Or(err, io.ErrUnexpectedEOF)
		}
		off += size
		i = j
	}
	if _, err := w.Write(appendTail(nil, l, last)); err != nil {
		return nil, err
	}
	return next, w.Flush()
}
