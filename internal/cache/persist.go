package cache

import (
	"bufio"
	"bytes"
	"cmp"
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
// whether a persisted memo may be used. Layout 2 keeps the outcomes in
// chunks, each a gob stream of its own, so that Open decodes and Save
// encodes them on several goroutines.
const fileFormat = "toolagent-parse-cache-2"

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

var registerOnce sync.Once

// parallel calls f(0) … f(n-1) on up to GOMAXPROCS goroutines and returns
// when all have returned.
func parallel(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		})
	}
	wg.Wait()
}

// registerValueTypes tells gob the dynamic types that hldp stores in
// Param.Default and Param.Enum (string, int64, float64 and bool are
// built in).
func registerValueTypes() {
	registerOnce.Do(func() {
		gob.Register([]any{})
		gob.Register(map[string]any{})
	})
}

// readChunks returns the encoded chunks of outcomes of the cache file at
// path, undecoded.
func readChunks(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := gob.NewDecoder(bufio.NewReader(f))
	var h fileHeader
	if err := dec.Decode(&h); err != nil {
		return nil, err
	}
	if h.Format != fileFormat || h.FormatVersion != hldp.FormatVersion {
		return nil, errors.New("another format")
	}
	var chunks [][]byte
	if err := dec.Decode(&chunks); err != nil {
		return nil, err
	}
	return chunks, nil
}

// Open returns a cache backed by the file at path, loading what it holds.
// A missing file gives an empty cache. A file that cannot be decoded, or
// was written for another format version, is ignored: the cache starts
// empty and the error says why (the caller logs it; the memo only saves
// work). Save writes the cache back.
func Open(path string) (*Cache, error) {
	c := New()
	c.path = path
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("cache: read %s: %w", path, err)
	}
	registerValueTypes()
	dec := gob.NewDecoder(bytes.NewReader(data))
	var h fileHeader
	if err := dec.Decode(&h); err != nil {
		return c, fmt.Errorf("cache: %s is not a parse cache (ignored): %w", path, err)
	}
	if h.Format != fileFormat || h.FormatVersion != hldp.FormatVersion {
		return c, fmt.Errorf("cache: %s was written for format %s/%d, want %s/%d (ignored; it will be rebuilt)", path, h.Format, h.FormatVersion, fileFormat, hldp.FormatVersion)
	}
	var chunks [][]byte
	if err := dec.Decode(&chunks); err != nil {
		return c, fmt.Errorf("cache: %s is corrupt (ignored): %w", path, err)
	}
	decoded := make([][]fileEntry, len(chunks))
	errs := make([]error, len(chunks))
	parallel(len(chunks), func(i int) {
		errs[i] = gob.NewDecoder(bytes.NewReader(chunks[i])).Decode(&decoded[i])
	})
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("cache: %s is corrupt (ignored): %w", path, err)
	}
	// The file repeats each path and blob hash in the listing and the last
	// good versions, each tool's path in its File, and a revision (one
	// commit) for many outcomes: those are kept once, in the outcomes'
	// keys, as a cache that parsed them holds them.
	byPath := make(map[string]Key, len(c.m))
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
	for _, e := range slices.Concat(decoded...) {
		if e.Tool != nil {
			e.Tool.Intern() // as Parse returns it
			if e.Tool.File == e.Key.Path {
				e.Tool.File = e.Key.Path
			}
		}
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
	var l fileListing
	switch err := dec.Decode(&l); {
	case errors.Is(err, io.EOF):
		// Written before listings: the next build reads the tree.
	case err != nil:
		return c, fmt.Errorf("cache: the tree listing in %s is corrupt (ignored; the next build reads the tree): %w", path, err)
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
	var last fileLast
	switch err := dec.Decode(&last); {
	case errors.Is(err, io.EOF):
		// Written before last good versions were kept.
	case err != nil:
		return c, fmt.Errorf("cache: the last good versions in %s are corrupt (ignored): %w", path, err)
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

// Save writes the cache to the file it was opened from, atomically (a
// temporary file renamed over the old one), when it changed since it was
// opened or last saved. A cache made with New has no file; Save is then a
// no-op.
func (c *Cache) Save() error {
	if c.path == "" {
		return nil
	}
	// The chunks of the file the last Save wrote, read before the lock is
	// taken; unusable (nil) when another process or layout wrote it.
	c.mu.RLock()
	layout := len(c.stale)
	c.mu.RUnlock()
	var onDisk [][]byte
	if layout > 0 {
		if old, err := readChunks(c.path); err == nil && len(old) == layout {
			onDisk = old
		}
	}
	c.mu.Lock()
	if !c.dirty {
		c.encoded = 0
		c.mu.Unlock()
		return nil
	}
	gen := c.gen
	// The chunks to encode: the stale ones, or all when the file on disk
	// cannot give the others or the number of outcomes moved too far from
	// what its layout was made for.
	n := len(c.stale)
	stale := c.stale
	if onDisk == nil || n != layout || len(c.m) > 4*n*chunkLen || n > 1 && len(c.m) < n*chunkLen/4 {
		n = chunkCount(len(c.m))
		stale = make([]bool, n)
		for i := range stale {
			stale[i] = true
		}
		onDisk = make([][]byte, n)
	}
	// Changes from here on are stale in the file this Save writes; if it
	// fails, the next Save encodes all.
	c.stale = make([]bool, n)
	saved := false
	defer func() {
		if !saved {
			c.mu.Lock()
			c.stale = nil
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
	chunks := onDisk
	l := fileListing{Tree: c.listTree, Keys: make([]Key, 0, len(c.listing))}
	for p, b := range c.listing {
		l.Keys = append(l.Keys, Key{Path: p, Blob: b})
	}
	last := fileLast{Good: slices.Clone(c.lastGood), Head: c.head} // sorted
	c.mu.Unlock()
	slices.SortFunc(l.Keys, func(a, b Key) int { return strings.Compare(a.Path, b.Path) })
	l.Sum = listingSum(l.Tree, l.Keys)

	registerValueTypes()
	errs := make([]error, n)
	encoded := 0
	for _, st := range stale {
		if st {
			encoded++
		}
	}
	parallel(n, func(i int) {
		if !stale[i] {
			return
		}
		// Sorted, so that a chunk's bytes depend on its outcomes alone.
		slices.SortFunc(todo[i], func(a, b fileEntry) int {
			return cmp.Or(strings.Compare(a.Key.Path, b.Key.Path), strings.Compare(a.Key.Blob, b.Key.Blob))
		})
		var b bytes.Buffer
		errs[i] = gob.NewEncoder(&b).Encode(todo[i])
		chunks[i] = b.Bytes()
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cache: encode: %w", err)
	}
	var buf bytes.Buffer
	enc := gob.NewEncoder(&buf)
	if err := enc.Encode(fileHeader{Format: fileFormat, FormatVersion: hldp.FormatVersion}); err != nil {
		return fmt.Errorf("cache: encode: %w", err)
	}
	if err := enc.Encode(chunks); err != nil {
		return fmt.Errorf("cache: encode: %w", err)
	}
	if err := enc.Encode(l); err != nil {
		return fmt.Errorf("cache: encode: %w", err)
	}
	if err := enc.Encode(last); err != nil {
		return fmt.Errorf("cache: encode: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o750); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".parse-cache-*")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	_, werr := tmp.Write(buf.Bytes())
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cache: write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cache: %w", err)
	}
	saved = true
	c.mu.Lock()
	c.encoded = encoded
	if c.gen == gen {
		c.dirty = false
	}
	c.mu.Unlock()
	return nil
}
