// Package catalog owns the immutable index that readers hold: a Snapshot of
// every tool folder at one revision, with each tool's status, and the Store
// that publishes snapshots atomically.
//
// A Snapshot is never mutated after it is published; a reader calls
// Store.Load once per request and uses that pointer to the end, so it never
// sees half an index. Snapshots and the Store are safe for concurrent use.
//
// Imports: hldp, match. Imported by scan, dispatch, api, mcpserver, reload.
package catalog

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/match"
)

// Status says whether a tool can be called here.
type Status uint8

// The statuses of a catalog entry.
const (
	// Enabled: parsed, its executor is available; offered and callable.
	Enabled Status = iota
	// Disabled: parsed, but its executor is not configured or cannot run it
	// here; not offered, and a call says why.
	Disabled
	// Failed: the definition does not parse (and no earlier good one
	// exists), or its executor's health check fails.
	Failed
	// Stale: the current file does not parse; the last good definition
	// keeps serving and the error is shown next to it.
	Stale
	// Untrusted: trusted signers are set, and the commit that last
	// changed the tool's folder is not signed by an allowed key valid at
	// its time for that path; not offered, and a call says why.
	Untrusted
)

// Statuses lists every status, in order.
var Statuses = []Status{Enabled, Disabled, Failed, Stale, Untrusted}

var statusWords = [...]string{Enabled: "enabled", Disabled: "disabled", Failed: "failed", Stale: "stale", Untrusted: "untrusted"}

// String returns the wire word of s.
func (s Status) String() string {
	if int(s) < len(statusWords) {
		return statusWords[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// MarshalText encodes s as its wire word.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes a wire word.
func (s *Status) UnmarshalText(b []byte) error {
	for i, w := range statusWords {
		if w == string(b) {
			*s = Status(i)
			return nil
		}
	}
	return fmt.Errorf("catalog: unknown status %q", b)
}

// Callable reports whether a tool with this status is offered and runs.
func (s Status) Callable() bool { return s == Enabled || s == Stale }

// Entry is one tool folder in a snapshot.
type Entry struct {
	// Name is the folder name (equal to the tool's name when it parses).
	Name string
	// File is the definition's path relative to the tools tree.
	File string
	// Tool is the definition that serves: the current one, or for a Stale
	// entry the last good one. Nil when no definition ever parsed.
	Tool *hldp.Tool
	// Rev is the revision the serving definition came from.
	Rev string
	// Blob is the git blob hash of the serving definition's file.
	Blob string
	// Status says whether the tool is callable here.
	Status Status
	// Reason says why a tool is not Enabled, in words for a person.
	Reason string
	// LoadErr is the error of the current file when it does not parse.
	LoadErr error
	// Signed is who signed the commit that last changed the tool's
	// folder, when trusted signers are set and it is trusted; nil
	// otherwise. Entries of one commit share it.
	Signed *Signature
}

// Signature is the provenance of a trusted definition: the commit that
// last changed its folder and the key that signed it.
type Signature struct {
	Commit      string `json:"commit"`
	Method      string `json:"method"`      // ssh or openpgp
	Principal   string `json:"principal"`   // the signer, as the operator's trusted_signers or keyring names them
	Fingerprint string `json:"fingerprint"` // the key's: SHA256:… (ssh), hex (openpgp)
}

// Snapshot is the catalog at one revision. It is immutable once built.
type Snapshot struct {
	rev     string
	gen     uint64
	builtAt time.Time
	// entries are sorted by name, one per name; never mutated after New.
	// A slice, not a map: a map of 100,000 entries took twice the room.
	entries []Entry
	enabled []int32 // indexes in entries of the callable ones
	// counts is how many entries have each status (Counts), counted once:
	// /v1/status, /readyz and the metrics read it on every request.
	counts map[Status]int

	vocab     *match.Vocab
	learned   func(name, intent string) []Learned
	indexOnce sync.Once
	index     *match.Index
	// built is set once index is: another snapshot's BuildIndex may then
	// read it (see Options.Prev).
	built atomic.Bool
	// prev is Options.Prev while this snapshot's index is not built.
	prev *Snapshot
	// learnedAt holds the learned requests the index holds, by tool, for
	// the tools that have some: the next snapshot's update compares them.
	learnedAt map[string][]Learned
	// builder is Options.Builder.
	builder any
	// gone names the tools recent snapshots had and this one has not,
	// with the revision of the first snapshot without them (Gone).
	gone map[string]string
}

// maxGone bounds how many deleted tools a snapshot remembers (Gone).
const maxGone = 1024

// Gone reports whether a tool named name was in an earlier snapshot of
// this process and was deleted since, and the revision of the first
// snapshot without it.
func (s *Snapshot) Gone(name string) (rev string, ok bool) {
	rev, ok = s.gone[name]
	return rev, ok
}

// goneSince is the gone set of a snapshot of entries after prev: prev's
// own (but for names that came back), and prev's names not in entries,
// at rev. Both lists are sorted by name: one merge.
func goneSince(prev *Snapshot, entries []Entry, rev string) map[string]string {
	if prev == nil {
		return nil
	}
	gone := make(map[string]string, len(prev.gone))
	for name, r := range prev.gone {
		gone[name] = r
	}
	i := 0
	for _, p := range prev.entries {
		for i < len(entries) && entries[i].Name < p.Name {
			i++
		}
		if i >= len(entries) || entries[i].Name != p.Name {
			gone[p.Name] = rev
		}
	}
	for name := range prev.gone { // came back?
		if _, found := slices.BinarySearchFunc(entries, name, func(e Entry, n string) int { return strings.Compare(e.Name, n) }); found {
			delete(gone, name)
		}
	}
	for name := range gone {
		if len(gone) <= maxGone {
			break
		}
		delete(gone, name) // which is dropped does not matter: it is a hint
	}
	return gone
}

// Options configure a snapshot.
type Options struct {
	// Vocab is the bilingual vocabulary for intent matching (nil: default).
	Vocab *match.Vocab
	// Now is the build time (zero: time.Now()).
	Now time.Time
	// LazyIndex defers building the match index to BuildIndex or the
	// first Match, whichever comes first. Commands that never match (call,
	// list) set it. So does the daemon: its reload loop publishes a
	// snapshot and then calls BuildIndex at once, so calls, listings and
	// readiness do not wait for the index, while a Match that comes before
	// it is built waits for it. Either way the index is built once per
	// snapshot, never per query.
	LazyIndex bool
	// Learned, when set, gives the requests learned from use for a tool
	// (internal/feedback), indexed apart from its text (match.Field's
	// Learned), each weighing as its Weight says (decayed with age).
	Learned func(name, intent string) []Learned
	// Prev is the snapshot this one follows. When its match index is built
	// and few tools differ (another definition, other learned requests,
	// added or gone), this snapshot's index is Prev's updated for them
	// (match.Index.Update) instead of built anew: a reload that changes one
	// tool of 100,000 costs that tool. See updateLimit.
	Prev *Snapshot
	// Builder is what the builder of the snapshot (internal/scan) keeps
	// in it for building the next one from it (see Snapshot.Builder).
	// catalog does not look at it.
	Builder any
}

// Bounds of an updated index (see Options.Prev): catalogs of fewer than
// updateMinTools tools are indexed anew (it is quick, and exact), and so
// is one whose index would drift (match.Index.Drift) past updateMaxDrift:
// an update keeps the mean field lengths of the index's first build and
// its typo corrections, which a new build measures again.
const (
	updateMinTools = 256
	updateMaxDrift = 0.125
)

// New builds a snapshot at rev from entries, and its match index over the
// callable tools. Entries with an empty Name are ignored; a later entry
// with the same name replaces an earlier one. Entries sorted by name, one
// per name, are kept as they are: the caller must not change them after.
func New(rev string, entries []Entry, opts Options) *Snapshot {
	s := &Snapshot{rev: rev, builtAt: opts.Now, vocab: opts.Vocab, learned: opts.Learned, builder: opts.Builder}
	if p := opts.Prev; p != nil && p.built.Load() && p.vocab == opts.Vocab {
		s.prev = p
	}
	if s.builtAt.IsZero() {
		s.builtAt = time.Now()
	}
	s.entries = sortedEntries(entries)
	s.gone = goneSince(opts.Prev, s.entries, rev)
	s.counts = make(map[Status]int, 4)
	for i, e := range s.entries {
		s.counts[e.Status]++
		if e.Status.Callable() && e.Tool != nil {
			s.enabled = append(s.enabled, int32(i))
		}
	}
	if !opts.LazyIndex {
		s.BuildIndex()
	}
	return s
}

// sortedEntries returns entries sorted by name, without those with no name,
// the last given of those with one name: entries itself when it is so.
func sortedEntries(entries []Entry) []Entry {
	sorted := true
	for i, e := range entries {
		if e.Name == "" || i > 0 && entries[i-1].Name >= e.Name {
			sorted = false
			break
		}
	}
	if sorted {
		return slices.Clip(entries)
	}
	out := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if e.Name != "" {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	// Of entries with one name, the last given wins.
	kept := out[:0]
	for i, e := range out {
		if i+1 < len(out) && out[i+1].Name == e.Name {
			continue
		}
		kept = append(kept, e)
	}
	return slices.Clip(kept)
}

// Builder returns Options.Builder.
func (s *Snapshot) Builder() any { return s.builder }

// BuildIndex builds the snapshot's match index unless it is built
// already; when another goroutine is building it, BuildIndex waits for it.
// It does not change what the snapshot holds, only when the index is
// computed (see Options.LazyIndex). Safe for concurrent use.
func (s *Snapshot) BuildIndex() {
	s.indexOnce.Do(func() {
		prev := s.prev
		s.prev = nil
		if prev != nil {
			s.learnedAt = map[string][]Learned{}
			s.index = s.updated(prev)
		}
		if s.index == nil {
			s.learnedAt = map[string][]Learned{} // what updated recorded is not indexed
			for _, k := range s.enabled {
				e := &s.entries[k]
				s.requests(e.Name, e.Tool)
			}
			// The documents are made when the build reads them, not held
			// all through it (10,000 tools: 3.5 MB).
			doc := func(i int) match.Doc {
				e := &s.entries[s.enabled[i]]
				return s.doc(e.Name, e.Tool, s.learnedAt[e.Name])
			}
			n := len(s.enabled)
			s.index = match.CalibrateFunc(match.NewFunc(n, doc, s.vocab), n, doc, s.vocab)
		}
		s.built.Store(true)
	})
}

// IndexDrift is the share of the match index's documents that updates
// changed since it was last built anew (match.Index.Drift): 0 for an
// index built anew. It builds the index if it is not built yet.
func (s *Snapshot) IndexDrift() float64 {
	s.BuildIndex()
	return s.index.Drift()
}

// requests returns the learned requests of tool name for the index and
// records them in learnedAt.
func (s *Snapshot) requests(name string, t *hldp.Tool) []Learned {
	if s.learned == nil {
		return nil
	}
	qs := s.learned(name, t.Intent)
	if len(qs) > 0 {
		s.learnedAt[name] = qs
	}
	return qs
}

// doc is the match document of tool name with its learned requests.
func (s *Snapshot) doc(name string, t *hldp.Tool, learned []Learned) match.Doc {
	d := ToolDoc(t)
	for _, q := range learned {
		if q.Weight > 0 {
			d.Fields = append(d.Fields, match.Field{Name: LearnedField, Text: q.Request, Weight: q.Weight, Learned: true})
		}
	}
	return d
}

// Learned is a request learned from use for a tool, and its weight in
// (0, 1]: 1 when new, less as it ages (see Options.Learned).
type Learned struct {
	Request string
	Weight  float64
}

// updated returns prev's index updated for the tools that differ between
// prev and s, recording in learnedAt the learned requests it holds, or nil
// when a new build is due (see updateMinTools and updateMaxDrift).
func (s *Snapshot) updated(prev *Snapshot) *match.Index {
	if len(s.enabled) < updateMinTools {
		return nil
	}
	var removed, added []match.Doc
	limit := int(updateMaxDrift*float64(len(s.enabled))) - int(prev.index.Drift()*float64(prev.index.Len()))
	i, j := 0, 0
	for i < len(prev.enabled) || j < len(s.enabled) {
		var p, c *Entry // the entries of prev and s, in name order
		if i < len(prev.enabled) {
			p = &prev.entries[prev.enabled[i]]
		}
		if j < len(s.enabled) {
			c = &s.entries[s.enabled[j]]
		}
		switch {
		case c == nil || p != nil && p.Name < c.Name:
			i++
			removed = append(removed, prev.doc(p.Name, p.Tool, prev.learnedAt[p.Name]))
		case p == nil || c.Name < p.Name:
			j++
			added = append(added, s.doc(c.Name, c.Tool, s.requests(c.Name, c.Tool)))
		default:
			name := c.Name
			i, j = i+1, j+1
			was, t := p.Tool, c.Tool
			qs := s.requests(name, t)
			if was == t && slices.Equal(prev.learnedAt[name], qs) {
				continue
			}
			removed = append(removed, prev.doc(name, was, prev.learnedAt[name]))
			added = append(added, s.doc(name, t, qs))
		}
		if len(removed)+len(added) > limit {
			return nil
		}
	}
	return prev.index.Update(removed, added)
}

// Rev is the revision of the tree this snapshot was built from.
func (s *Snapshot) Rev() string { return s.rev }

// Gen is the snapshot's generation, increasing with every Store.Swap.
func (s *Snapshot) Gen() uint64 { return s.gen }

// BuiltAt is when the snapshot was built.
func (s *Snapshot) BuiltAt() time.Time { return s.builtAt }

// Lookup returns the entry of the named tool.
func (s *Snapshot) Lookup(name string) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(s.entries, name, func(e Entry, name string) int { return strings.Compare(e.Name, name) })
	if !ok {
		return Entry{}, false
	}
	return s.entries[i], true
}

// Enabled returns the callable entries (Enabled and Stale), sorted by name.
// The slice is a fresh copy.
func (s *Snapshot) Enabled() []Entry {
	out := make([]Entry, 0, len(s.enabled))
	for _, k := range s.enabled {
		out = append(out, s.entries[k])
	}
	return out
}

// Each yields every entry, whatever its status, sorted by name, without
// copying them all as All does.
func (s *Snapshot) Each() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		for _, e := range s.entries {
			if !yield(e) {
				return
			}
		}
	}
}

// All returns every entry, whatever its status, sorted by name.
func (s *Snapshot) All() []Entry { return slices.Clone(s.entries) }

// Len is the number of entries of any status.
func (s *Snapshot) Len() int { return len(s.entries) }

// Counts returns how many entries have each status, in a map of the
// caller's own.
func (s *Snapshot) Counts() map[Status]int { return maps.Clone(s.counts) }

// Match ranks the callable tools for an intent in words and returns at most
// k candidates (Found is false when nothing fits well enough).
// A snapshot built with Options.LazyIndex builds its index on the first
// call unless BuildIndex did; concurrent calls wait for that one build.
func (s *Snapshot) Match(q string, k int) match.Result {
	s.BuildIndex()
	return s.index.Match(q, k)
}

// Store publishes the current snapshot. The zero value is ready to use and
// holds no snapshot.
type Store struct {
	cur atomic.Pointer[Snapshot]

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every Swap
}

// Reindex publishes the current snapshot again with a new match index
// (built lazily), so that what the index reads beside the tools (the
// requests learned from use) is read again. A Swap in between wins: it
// publishes a newer snapshot, whose index is new anyway.
func (st *Store) Reindex() { st.reindex(true) }

// Compact publishes the current snapshot again with its match index built
// anew, when updates made it drift from a new build (see Options.Prev and
// Snapshot.IndexDrift), and reports whether it did. A Swap in between
// wins, as for Reindex.
func (st *Store) Compact() bool {
	cur := st.Load()
	if cur == nil || !cur.built.Load() || cur.index.Drift() == 0 {
		return false
	}
	return st.reindex(false)
}

// reindex is Reindex, updating the current index when update is set and
// building it anew otherwise; it reports whether it published.
func (st *Store) reindex(update bool) bool {
	st.mu.Lock()
	cur := st.cur.Load()
	st.mu.Unlock()
	if cur == nil {
		return false
	}
	next := &Snapshot{rev: cur.rev, gen: cur.gen, builtAt: cur.builtAt, entries: cur.entries, enabled: cur.enabled, counts: cur.counts, vocab: cur.vocab, learned: cur.learned, builder: cur.builder}
	if update && cur.built.Load() {
		next.prev = cur // the tools whose learned requests changed are updated
	}
	next.BuildIndex() // off the lock: a query keeps the old index meanwhile
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cur.Load() != cur {
		return false
	}
	st.cur.Store(next) // the same tools: no change to announce
	return true
}

// Load returns the current snapshot, or nil before the first Swap.
func (st *Store) Load() *Snapshot { return st.cur.Load() }

// Swap publishes next (which must not be published anywhere else) and
// returns the snapshot it replaces. Every channel returned by Changed
// before the Swap is closed.
func (st *Store) Swap(next *Snapshot) (prev *Snapshot) {
	st.mu.Lock()
	defer st.mu.Unlock()
	prev = st.cur.Load()
	if prev != nil {
		next.gen = prev.gen + 1
	} else {
		next.gen = 1
	}
	st.cur.Store(next)
	if st.changed != nil {
		close(st.changed)
		st.changed = nil
	}
	return prev
}

// Changed returns a channel that is closed at the next Swap. Take the
// channel before Load to never miss a change:
//
//	ch := st.Changed()
//	snap := st.Load()
//	... <-ch
func (st *Store) Changed() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.changed == nil {
		st.changed = make(chan struct{})
	}
	return st.changed
}
