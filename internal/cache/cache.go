// Package cache is a parse memo: it remembers, for the bytes of a
// TOOL.hdlp at a path (keyed by git blob hash), the parsed tool or the
// parse error, so the same bytes are never parsed twice. It is not the live
// index (that is catalog.Snapshot); dropping the cache only costs parsing.
//
// Beside the outcomes it keeps one listing: which definition files the
// last build found in a tree named by its git tree hash, with their blob
// hashes. A tree hash fixes every path and blob below it, so the listing
// never goes stale; it only lets a build of the same tree (a restart at an
// unchanged commit) skip reading the tree's folders. Dropping it only
// costs that reading.
//
// A Cache is safe for concurrent use. Imports: hldp. Imported by scan.
package cache

import (
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolagent/toolagent/internal/hldp"
)

// Key identifies the bytes of one definition file at one path. The path is
// part of the key because parsing depends on it (the name must equal the
// folder, and diagnostics name the file).
type Key struct {
	Path string // relative to the tools tree, e.g. "shell-exec/TOOL.hdlp"
	Blob string // git blob hash of the content
}

// Outcome is what parsing the bytes gave: a tool or an error.
type Outcome struct {
	Tool *hldp.Tool
	Err  error
	// Rev is the revision the bytes were first parsed at: the commit the
	// definition came from, kept across restarts for provenance ("" if
	// unknown).
	Rev string
}

// Cache maps keys to parse outcomes. The zero value is not usable; call New.
type Cache struct {
	mu sync.RWMutex
	m  map[Key]stored
	// revs holds the rest of the outcomes with no error, one per revision.
	revs  map[string]*outcomeRest
	dirty bool   // changed since opened or saved
	path  string // file of Open; "" for a memory-only cache
	// gen counts changes; a Save clears dirty only if none came while it
	// encoded.
	gen uint64
	// stale marks, for the file Open read or the last Save wrote, the
	// chunks of outcomes changed since (see chunkOf): the next Save
	// encodes those and copies the others from that file. Nil until Open
	// read or a Save wrote the file, and after a Save failed: the next
	// Save encodes all.
	stale []bool
	// spans are where the chunks lie in disk, the file the cache read or
	// wrote last (nil: none to copy from).
	spans []span
	disk  os.FileInfo
	// encoded is how many chunks the last Save encoded (for tests).
	encoded int
	saveMu  sync.Mutex // held by Save

	// listTree names the tree the listing is of ("" for none); listing
	// maps a definition file's path to its blob hash. Both are replaced
	// whole, never changed in place, so Listing may hand the map out.
	listTree string
	listing  map[string]string

	// lastGood holds, for each definition file's path, the version of it
	// the last build served: its blob hash (the last version that loaded,
	// for a stale one) and the revision it cited, so a file that breaks
	// serves its last good definition across a restart too, citing what it
	// did. Sorted by path, one per path: a slice takes half a map's room.
	lastGood []fileServed
	// head is the revision of the last build of a git tree (SetHead), so
	// a restart knows whether the branch moved on from it.
	head string

	hits, misses atomic.Int64
}

// New returns an empty, memory-only cache.
func New() *Cache { return &Cache{m: make(map[Key]stored)} }

// stored is an Outcome as the cache keeps it: in 16 bytes, not 40, as a
// catalog of 100,000 tools has an outcome each, almost every one with no
// error and one of a few revisions.
type stored struct {
	tool *hldp.Tool
	rest *outcomeRest // nil: no error, no revision
}

type outcomeRest struct {
	err error
	rev string
}

func (s stored) outcome() Outcome {
	o := Outcome{Tool: s.tool}
	if s.rest != nil {
		o.Err, o.Rev = s.rest.err, s.rest.rev
	}
	return o
}

// storedLocked is o as the cache keeps it; outcomes with no error and one
// revision share their rest.
func (c *Cache) storedLocked(o Outcome) stored {
	s := stored{tool: o.Tool}
	switch {
	case o.Err != nil:
		s.rest = &outcomeRest{err: o.Err, rev: o.Rev}
	case o.Rev != "":
		if s.rest = c.revs[o.Rev]; s.rest == nil {
			if c.revs == nil {
				c.revs = map[string]*outcomeRest{}
			}
			s.rest = &outcomeRest{rev: o.Rev}
			c.revs[o.Rev] = s.rest
		}
	}
	return s
}

// Get returns the outcome stored for k.
func (c *Cache) Get(k Key) (Outcome, bool) {
	c.mu.RLock()
	s, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return s.outcome(), ok
}

// Put stores the outcome for k.
func (c *Cache) Put(k Key, o Outcome) {
	c.mu.Lock()
	c.m[k] = c.storedLocked(o)
	c.changedLocked(k)
	c.mu.Unlock()
}

// Retain drops every key not in keep, except the last good versions
// (SetLastGood), so the cache does not grow without bound as definitions
// change.
func (c *Cache) Retain(keep map[Key]bool) {
	c.mu.Lock()
	revs := map[string]*outcomeRest{}
	for k, s := range c.m {
		if !keep[k] && !c.isLastGoodLocked(k) {
			delete(c.m, k)
			c.changedLocked(k)
		} else if s.rest != nil && s.rest.err == nil {
			revs[s.rest.rev] = s.rest
		}
	}
	c.revs = revs // those of the outcomes kept
	c.mu.Unlock()
}

// Forget drops the outcomes of keys, except the last good versions, as
// Retain drops those it is not given: a build that scanned a few folders
// again forgets what they held before instead of retaining all the rest.
func (c *Cache) Forget(keys []Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if _, ok := c.m[k]; ok && !c.isLastGoodLocked(k) {
			delete(c.m, k)
			c.changedLocked(k)
		}
	}
}

// changedLocked records a change to the outcome of k.
func (c *Cache) changedLocked(k Key) {
	c.dirty = true
	c.gen++
	if c.stale != nil {
		c.stale[chunkOf(k, len(c.stale))] = true
	}
}

// SetListing records which definition files a build found in the tree
// named tree (a git tree hash): keys are the path and blob hash of each.
// Only the latest listing is kept; Save persists it with the outcomes. An
// empty tree name records nothing.
func (c *Cache) SetListing(tree string, keys map[Key]bool) {
	if tree == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if tree == c.listTree && len(keys) == len(c.listing) {
		same := true
		for k := range keys {
			if c.listing[k.Path] != k.Blob {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	m := make(map[string]string, len(keys))
	for k := range keys {
		m[k.Path] = k.Blob
	}
	c.listTree, c.listing = tree, m
	c.dirty = true
	c.gen++
}

// Listing returns the blob hash of each definition file, by path, that the
// last recorded build of the tree named tree found; ok is false when the
// listing on record is of another tree, or there is none. The map must not
// be modified.
func (c *Cache) Listing(tree string) (blobs map[string]string, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if tree == "" || tree != c.listTree {
		return nil, false
	}
	return c.listing, true
}

// MoveListing changes the listing SetListing recorded for tree from into
// the listing of tree to: the paths of gone leave it, then the keys of
// set enter it. It does nothing unless the listing is from's: a build that
// scanned a few folders of to, knowing the rest are as in from, calls it
// instead of SetListing.
func (c *Cache) MoveListing(from, to string, gone []string, set []Key) {
	if from == "" || to == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listTree != from {
		return
	}
	// The map is shared with readers of Listing: change a copy.
	m := maps.Clone(c.listing)
	for _, p := range gone {
		delete(m, p)
	}
	for _, k := range set {
		m[k.Path] = k.Blob
	}
	c.listTree, c.listing = to, m
	c.dirty = true
	c.gen++
}

// Served is the version of a definition file a build served: its blob
// hash and the revision it cited.
type Served struct {
	Blob, Rev string
}

// SetLastGood records, for each definition file's path, the version the
// last build served (replacing what was recorded). Retain keeps their
// outcomes.
func (c *Cache) SetLastGood(served map[string]Served) {
	c.mu.Lock()
	same := len(served) == len(c.lastGood)
	for _, g := range c.lastGood {
		if !same {
			break
		}
		v, ok := served[g.Path]
		same = ok && v.Blob == g.Blob && v.Rev == g.Rev
	}
	c.mu.Unlock()
	if same {
		return // a restart's first build: spare sorting every path again
	}
	next := make([]fileServed, 0, len(served))
	for p, v := range served {
		next = append(next, fileServed{Path: p, Blob: v.Blob, Rev: v.Rev})
	}
	slices.SortFunc(next, compareServed)
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Equal(next, c.lastGood) {
		return // and keep the strings held now (see Open)
	}
	c.lastGood = next
	c.dirty = true
	c.gen++
}

func compareServed(a, b fileServed) int { return strings.Compare(a.Path, b.Path) }

// findLastGood returns the index in lastGood of path's version, or where
// it would be.
func findLastGood(lastGood []fileServed, path string) (int, bool) {
	return slices.BinarySearchFunc(lastGood, path, func(g fileServed, p string) int { return strings.Compare(g.Path, p) })
}

// lastGoodLocked returns the version of path SetLastGood recorded.
func (c *Cache) lastGoodLocked(path string) (Served, bool) {
	if i, ok := findLastGood(c.lastGood, path); ok {
		return Served{Blob: c.lastGood[i].Blob, Rev: c.lastGood[i].Rev}, true
	}
	return Served{}, false
}

// isLastGoodLocked reports whether k is the last good version of its path.
func (c *Cache) isLastGoodLocked(k Key) bool {
	v, ok := c.lastGoodLocked(k.Path)
	return ok && v.Blob == k.Blob
}

// UpdateLastGood changes what SetLastGood recorded for some paths alone:
// served gives a path's version, gone forgets a path's. A build that
// scanned a few folders again calls it instead of SetLastGood.
func (c *Cache) UpdateLastGood(served map[string]Served, gone []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	sorted := len(c.lastGood) // paths new to it are appended, then sorted in
	for p, v := range served {
		i, ok := findLastGood(c.lastGood[:sorted], p)
		switch {
		case !ok:
			c.lastGood = append(c.lastGood, fileServed{Path: p, Blob: v.Blob, Rev: v.Rev})
			changed = true
		case c.lastGood[i].Blob != v.Blob || c.lastGood[i].Rev != v.Rev:
			c.lastGood[i].Blob, c.lastGood[i].Rev = v.Blob, v.Rev
			changed = true
		}
	}
	if len(c.lastGood) > sorted {
		slices.SortFunc(c.lastGood, compareServed)
	}
	var drop map[string]bool
	for _, p := range gone {
		if _, ok := findLastGood(c.lastGood, p); ok {
			if drop == nil {
				drop = map[string]bool{}
			}
			drop[p] = true
		}
	}
	if drop != nil {
		c.lastGood = slices.DeleteFunc(c.lastGood, func(g fileServed) bool { return drop[g.Path] })
		changed = true
	}
	if changed {
		c.dirty = true
		c.gen++
	}
}

// LastGood returns the version of the file at path the last build served,
// with its outcome; ok is false when none is recorded (or its outcome is
// gone).
func (c *Cache) LastGood(path string) (Served, Outcome, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.lastGoodLocked(path)
	if !ok {
		return Served{}, Outcome{}, false
	}
	s, ok := c.m[Key{Path: path, Blob: v.Blob}]
	if !ok || s.tool == nil {
		return Served{}, Outcome{}, false
	}
	return v, s.outcome(), true
}

// SetHead records the revision the last build of a git tree was of.
func (c *Cache) SetHead(rev string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev != c.head {
		c.head, c.dirty = rev, true
		c.gen++
	}
}

// Head returns what SetHead recorded ("" for nothing).
func (c *Cache) Head() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.head
}

// Len is the number of stored outcomes.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// Stats returns how many Gets found and missed an outcome.
func (c *Cache) Stats() (hits, misses int64) { return c.hits.Load(), c.misses.Load() }
