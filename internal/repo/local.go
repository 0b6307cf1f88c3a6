package repo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// LocalDir is a source that serves a directory on the local file system.
//
// It opens the directory once, with os.OpenRoot, and reads every Tree
// through that one handle; Close releases it. Sync may be called from any
// goroutine. A LocalDir must not be copied after first use.
//
// Between Syncs it keeps a listing of the directory: every file's and
// folder's stat, and each file's git blob hash. A Sync reads only the
// files whose stat differs from the listing, and the folders whose
// entries may have changed; with ListingFile set the listing also
// outlives the process, so the first Sync after a restart reads only what
// changed while the daemon was down.
type LocalDir struct {
	// Path is the directory to serve; its contents are the tree's root.
	Path string
	// ListingFile, when not empty, is the file where Sync keeps the
	// listing between runs (written atomically, after a Sync that changed
	// it); it belongs outside Path, in the daemon's state directory. A
	// missing file costs the first Sync reading every file; a file that
	// is damaged, of another format or of another directory is ignored
	// with a line on Logger, with the same cost and nothing else.
	ListingFile string
	// Logger receives a line when ListingFile cannot be used or written
	// (nil: discard).
	Logger *slog.Logger
	// Now returns the time a Sync judges stats against (nil: time.Now).
	// Tests set it.
	Now func() time.Time
	// KeepRead, when set, names the files (slash paths) whose content a
	// Sync that reads them to hash them keeps for the Tree: the Tree's FS
	// serves the first read of such a file from that content, the file as
	// the Sync found it, instead of opening it again (the daemon keeps
	// its definition files: a start with no listing reads each once).
	KeepRead func(name string) bool

	mu   sync.Mutex
	root *os.Root // nil until the first Sync, and after Close
	// tracked says a watcher reports every change below the directory
	// (Track); changed names the top-level entries it reported since the
	// last Sync, and lost says it may have missed one.
	tracked bool
	changed map[string]bool
	lost    bool
	abs     string   // absolute Path at the time root was opened
	last    *listing // the listing of the last Sync (nil before the first)
	loaded  bool     // ListingFile was read (or tried)
	saved   *listing // what ListingFile holds, or will once written (nil: unknown)
	stats   SyncStats

	// A watched Sync's listing is written off the Sync by one goroutine
	// (see saveLocked): queued is the latest to write, writing says the
	// goroutine runs, writers lets Close wait for it. writeMu orders the
	// writes, and seq numbers them, so a write that a newer one
	// superseded is skipped.
	queued  *queuedListing
	writing bool
	written sync.Cond // on mu; broadcast when writing ends
	writers sync.WaitGroup
	writeMu sync.Mutex
	seq     atomic.Uint64
}

// queuedListing is a listing to write to ListingFile.
type queuedListing struct {
	l    *listing
	file string
	dir  string
	seq  uint64
}

// SyncStats says what the last Sync of a LocalDir read.
type SyncStats struct {
	Files    int  // regular files and symbolic links listed
	Hashed   int  // files read to hash them: new, changed, or not yet trusted
	Dirs     int  // folders listed, the directory itself included
	ReadDirs int  // folders whose entries were read; the others' came from the listing
	Loaded   bool // the listing came from ListingFile (the first Sync of a process)
	// Watched says the Sync took the watcher's word (Track, Changed): it
	// statted only the top-level entries reported changed, and new ones.
	Watched bool
}

// Track says whether a watcher now reports, through Changed, every change
// below the directory: on, once its watches are in place on the
// directory and every folder in it; off when it stops or cannot watch
// them all. While on, a Sync after reported changes stats only the
// top-level entries reported, without reading the directory's names (the
// watcher reports an entry that appears or goes): a reload after one
// edited file of 100,000 costs that file's folder. Its Tree says which
// names it listed again (Tree.Delta). A Sync with
// nothing reported (a scheduled one, one asked for over HTTP), the first
// after Track(true), and any after a lost event (Changed("")) stat
// everything, as without a watcher, so changes a watcher cannot see (a
// network file system) are still found on schedule.
func (d *LocalDir) Track(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tracked, d.changed, d.lost = on, nil, true
}

// Changed reports a change to the top-level entry name of the directory
// (a tool folder, or a file beside them); "" says changes may have been
// missed, so the next Sync stats everything.
func (d *LocalDir) Changed(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if name == "" || name == "." {
		d.lost = true
		return
	}
	if d.changed == nil {
		d.changed = map[string]bool{}
	}
	d.changed[name] = true
}

// takeHintsLocked returns the top-level names to stat, or nil when the
// Sync must stat everything (see Track), and starts the next round.
func (d *LocalDir) takeHintsLocked() map[string]bool {
	hints := d.changed
	if !d.tracked || d.lost || len(hints) == 0 {
		hints = nil
	}
	d.changed, d.lost = nil, false
	return hints
}

// Sync returns a Tree over the directory's current contents.
//
// The tree's FS is rooted with os.OpenRoot: a path or symbolic link that
// leads out of the directory fails to open, while links that stay inside
// it work. Sync stats every file and folder and computes the revision from
// every file's blob hash; it reads a file to hash it only when its stat
// differs from the listing (see LocalDir), and a folder's entries only
// when the folder's stat does. The tree is the directory as this Sync
// found it: its blob hashes, and the entries its FS lists in a folder,
// are those of the Sync; its FS reads a file's content from disk when
// asked, so it sees later edits (which a new Sync then reports with a new
// revision, and which scan, hashing what it parses, never confuses with
// the content the Sync hashed).
//
// A stat is trusted to stand for the content only when the file's change
// time (ctime) is older than the moment Sync began by more than the
// granularity of the file system's clock (see settled): the ctime changes
// on every write and every change of the modification time, and cannot be
// set back, so a file rewritten with the same size and its old
// modification time is still read again. A file or folder changed just
// before the Sync is read again by the next one.
//
// Every Sync reuses the handle the first one opened, so reloading never
// opens more descriptors. When Path has come to name another directory
// (removed and created again, or a symbolic link pointed elsewhere), Sync
// closes the old handle and opens the new directory; Trees returned before
// then fail to read, as they would after Close.
func (d *LocalDir) Sync(ctx context.Context) (*Tree, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	root, err := d.rootLocked()
	if err != nil {
		return nil, err
	}
	fsys := root.FS()
	prev := d.last
	loaded := false
	if prev == nil && !d.loaded {
		d.loaded = true
		prev, loaded = d.loadLocked(), true
	}
	var l *listing
	var stats SyncStats
	var delta []string // the names a watched Sync listed again
	// The walk's descriptor of the directory, opened through the root so
	// that it is the root's directory even when the path now names another.
	top, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("scan local dir %s: %w", d.Path, err)
	}
	defer top.Close()
	w := &lister{ctx: ctx, fsys: root.FS(), abs: d.abs, prev: prev, now: d.clock(), keep: d.KeepRead, dirFD: int(top.Fd())}
	if hints := d.takeHintsLocked(); hints != nil && prev != nil {
		l, delta, stats, err = w.listChanged(hints)
		stats.Watched = true
	} else {
		l, stats, err = w.list()
	}
	if err != nil {
		d.lost = true // the changes reported for this Sync are not listed: the next stats everything
		return nil, fmt.Errorf("scan local dir %s: %w", d.Path, err)
	}
	stats.Loaded = loaded && prev != nil
	l.id = l.rev()
	d.last, d.stats = l, stats
	d.saveLocked(l, stats.Watched)
	if rfs, ok := fsys.(rootFS); ok {
		fsys = listedFS{rootFS: rfs, l: l, kept: &keptFiles{m: w.kept}}
	}
	t := &Tree{
		fsys: fsys,
		rev:  l.id,
		hash: func(name string) (string, error) {
			if e, ok := l.find(name); ok && e.Kind != kindDir && e.hashed {
				return hex.EncodeToString(e.Blob[:]), nil
			}
			return localBlobHash(fsys, name)
		},
	}
	if stats.Watched && prev.id != "" {
		t.base, t.delta, t.hasDelta = prev.id, delta, true
	}
	return t, nil
}

// rootFS is what the FS of an os.Root implements.
type rootFS interface {
	fs.ReadDirFS
	fs.ReadFileFS
	fs.StatFS
	fs.ReadLinkFS
}

// listedFS is the FS of a local tree: the root's, except that a folder the
// Sync listed is listed as the Sync found it (the tree is the directory
// at one revision; reading a folder through a Root also stats each of its
// entries, which the listing already did). Files are read from disk.
type listedFS struct {
	rootFS
	l    *listing
	kept *keptFiles
}

// keptFiles is the content of the files a Sync read and LocalDir.KeepRead
// kept, until the Tree's FS serves each once.
type keptFiles struct {
	mu sync.Mutex
	m  map[string][]byte
}

// take returns and forgets the kept content of name.
func (k *keptFiles) take(name string) ([]byte, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	data, ok := k.m[name]
	delete(k.m, name)
	return data, ok
}

// Open serves a kept file from its content, once; any other from disk.
func (f listedFS) Open(name string) (fs.File, error) {
	if data, ok := f.kept.take(name); ok {
		if e, ok := f.l.find(name); ok {
			return &keptFile{Reader: bytes.NewReader(data), name: path.Base(name), e: e}, nil
		}
	}
	return f.rootFS.Open(name)
}

// ReadFile is Open's, for fs.ReadFile.
func (f listedFS) ReadFile(name string) ([]byte, error) {
	if data, ok := f.kept.take(name); ok {
		return data, nil
	}
	return f.rootFS.ReadFile(name)
}

// keptFile is an open kept file.
type keptFile struct {
	*bytes.Reader
	name string
	e    entry
}

func (f *keptFile) Stat() (fs.FileInfo, error) { return keptInfo{f}, nil }
func (f *keptFile) Close() error               { return nil }

// keptInfo describes a kept file as the Sync's stat found it.
type keptInfo struct{ f *keptFile }

func (i keptInfo) Name() string       { return i.f.name }
func (i keptInfo) Size() int64        { return i.f.Reader.Size() }
func (i keptInfo) Mode() fs.FileMode  { return fs.FileMode(i.f.e.Stat.Mode & 0o777) }
func (i keptInfo) ModTime() time.Time { return time.Unix(0, i.f.e.Stat.MTime) }
func (i keptInfo) IsDir() bool        { return false }
func (i keptInfo) Sys() any           { return nil }

// ReadDir lists the folder name as the Sync did; a folder it did not list
// (one reached through a symbolic link) is read from disk.
func (f listedFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if e, ok := f.l.find(name); !ok || e.Kind != kindDir {
		return f.rootFS.ReadDir(name)
	}
	if name == "." {
		out := make([]fs.DirEntry, len(f.l.groups))
		for k := range f.l.groups {
			e := f.l.groups[k].entries[0]
			out[k] = listedEntry{name: e.Path, e: e, fsys: f.rootFS}
		}
		return out, nil
	}
	prefix := name + "/"
	names := f.l.children(name)
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		e, _ := f.l.find(prefix + n)
		out = append(out, listedEntry{name: n, e: e, fsys: f.rootFS})
	}
	return out, nil
}

// listedEntry is an entry of a folder as the Sync listed it.
type listedEntry struct {
	name string
	e    entry
	fsys fs.FS
}

func (d listedEntry) Name() string { return d.name }
func (d listedEntry) IsDir() bool  { return d.e.Kind == kindDir }
func (d listedEntry) Type() fs.FileMode {
	switch d.e.Kind {
	case kindDir:
		return fs.ModeDir
	case kindLink:
		return fs.ModeSymlink
	}
	return 0
}

// Info stats the entry now (without following a symbolic link).
func (d listedEntry) Info() (fs.FileInfo, error) { return fs.Lstat(d.fsys, d.e.Path) }
func (d listedEntry) String() string             { return fs.FormatDirEntry(d) }

// LastSync returns what the last successful Sync read.
func (d *LocalDir) LastSync() SyncStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

func (d *LocalDir) clock() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *LocalDir) logger() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// rootLocked returns the open handle of Path, opening it on first use and
// again when Path no longer names the directory it was opened on.
func (d *LocalDir) rootLocked() (*os.Root, error) {
	fi, err := os.Stat(d.Path)
	if err != nil {
		return nil, fmt.Errorf("open local dir: %w", err)
	}
	if d.root != nil {
		if cur, err := d.root.Stat("."); err == nil && os.SameFile(fi, cur) {
			return d.root, nil
		}
		d.root.Close()
		d.root = nil
	}
	abs, err := filepath.Abs(d.Path)
	if err != nil {
		return nil, fmt.Errorf("open local dir: %w", err)
	}
	root, err := os.OpenRoot(d.Path)
	if err != nil {
		return nil, fmt.Errorf("open local dir: %w", err)
	}
	d.root, d.abs = root, abs
	return root, nil
}

// Close releases the directory handle, after a listing being written to
// ListingFile is written. Trees returned by Sync fail to read afterwards;
// a later Sync opens the directory again.
func (d *LocalDir) Close() error {
	defer d.writers.Wait() // a listing being written lands first
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.root == nil {
		return nil
	}
	err := d.root.Close()
	d.root = nil
	return err
}

// fileStat is what a stat says of a file or folder: enough to tell that it
// changed without reading it. Times are nanoseconds since the Unix epoch.
type fileStat struct {
	Size, MTime, CTime int64
	Ino                uint64
	Mode               uint32 // type and permission bits, as the system reports them
}

// Settling windows (see settled). Linux stamps files from a clock that
// advances once per scheduler tick (at most 10 ms); file systems that keep
// whole seconds (ext3, and FAT with 2 s) show no sub-second part.
const (
	settleFine   = 100 * time.Millisecond
	settleCoarse = 2 * time.Second
)

// settled reports whether a stat taken at or after now can stand for the
// content: its ctime is older than now by more than the file system's
// clock granularity, so that any later change (which sets the ctime to
// the time of the change) makes the ctime differ. A ctime that is zero
// (a file system that keeps none) is never trusted.
func settled(st fileStat, now time.Time) bool {
	if st.CTime == 0 {
		return false
	}
	w := settleFine
	if st.CTime%int64(time.Second) == 0 || st.MTime%int64(time.Second) == 0 {
		w = settleCoarse
	}
	return st.CTime < now.Add(-w).UnixNano()
}

// entryKind is the type of a listing entry.
type entryKind uint8

const (
	kindFile entryKind = iota + 1
	kindDir
	kindLink // a symbolic link: always read through the root, never trusted
)

// entry is one file, symbolic link or folder of a listing. The exported
// fields are what ListingFile keeps (see encodeListing).
type entry struct {
	Path string // slash-separated, relative to the directory; "." for itself
	Stat fileStat
	Kind entryKind
	// Trusted says the stat was settled when taken: for a file, Blob is
	// the hash of the content that stat stands for; for a folder, the
	// listing's entries directly below it are all of its entries.
	Trusted bool
	Blob    [sha1.Size]byte

	hashed bool // Blob holds this Sync's hash (false: unreadable)
}

// listing is every entry of the directory: the directory itself, and each
// top-level entry with everything below it (a group). It is never changed
// once built; a Tree and the next Sync share it, and a watched Sync's
// listing shares the groups it did not list again (see listChanged).
type listing struct {
	self   entry   // the directory, Path "."
	groups []group // sorted by name
	id     string  // rev(), for a listing a Sync made ("" for one read from ListingFile)
}

// group is a top-level entry and every entry below it: entries[0] is the
// top-level entry, the rest are sorted by path.
type group struct {
	entries []entry
	// whole says a watched Sync may take the group as it is: every entry
	// is trusted and every file hashed by a Sync, and no folder is below
	// the top one (reload.Watch watches the top-level folders, not theirs).
	whole bool
}

func (g *group) name() string { return g.entries[0].Path }

// newGroup returns the group of top and the entries below it (sorted by
// path), marking whether a watched Sync may take it whole.
func newGroup(entries []entry) group {
	g := group{entries: entries, whole: true}
	for k, e := range entries {
		if !e.Trusted || k > 0 && e.Kind == kindDir || e.Kind == kindFile && !e.hashed {
			g.whole = false
			break
		}
	}
	return g
}

func comparePath(e entry, p string) int { return strings.Compare(e.Path, p) }

// group returns the index of the group named name.
func (l *listing) group(name string) (int, bool) {
	return slices.BinarySearchFunc(l.groups, name, func(g group, n string) int { return strings.Compare(g.name(), n) })
}

func (l *listing) find(p string) (entry, bool) {
	if l == nil {
		return entry{}, false
	}
	if p == "." {
		return l.self, true
	}
	top, _, below := strings.Cut(p, "/")
	i, ok := l.group(top)
	if !ok {
		return entry{}, false
	}
	es := l.groups[i].entries
	if !below {
		return es[0], true
	}
	j, ok := slices.BinarySearchFunc(es[1:], p, comparePath)
	if !ok {
		return entry{}, false
	}
	return es[1+j], true
}

// children returns the names of the entries directly below dir.
func (l *listing) children(dir string) []string {
	var names []string
	if dir == "." {
		names = make([]string, 0, len(l.groups))
		for k := range l.groups {
			names = append(names, l.groups[k].name())
		}
		return names
	}
	top, _, _ := strings.Cut(dir, "/")
	i, ok := l.group(top)
	if !ok {
		return nil
	}
	es := l.groups[i].entries[1:]
	prefix := dir + "/"
	j, _ := slices.BinarySearchFunc(es, prefix, comparePath)
	for ; j < len(es) && strings.HasPrefix(es[j].Path, prefix); j++ {
		if rest := es[j].Path[len(prefix):]; !strings.Contains(rest, "/") {
			names = append(names, rest)
		}
	}
	return names
}

// rev hashes the sorted (path, blob hash) pairs of every file; a file that
// could not be read (a link that escapes, a link to a folder, a file
// removed during the Sync) contributes its path with a marker, so adding
// or fixing it still changes the revision. Sorted by path, which sorts
// the "path\x00hash\n" lines too: a path that is a prefix of another is
// followed by \x00, which sorts first. (So a listing that lists the
// directory by group hashes what a sorted walk of it hashes.)
func (l *listing) rev() string {
	sum := sha256.New()
	var line []byte
	l.byPath(func(e entry) {
		if e.Kind == kindDir {
			return
		}
		line = append(append(line[:0], e.Path...), 0)
		if e.hashed {
			line = hex.AppendEncode(line, e.Blob[:])
		} else {
			line = append(line, "unreadable"...)
		}
		sum.Write(append(line, '\n'))
	})
	return "local:" + hex.EncodeToString(sum.Sum(nil))[:16]
}

// byPath calls f with every entry below the directory, sorted by path. A
// group's top-level entry comes first, then the groups whose names
// extend its name with a byte that sorts before '/' ("a-b" and "a.b" after
// "a"), then the entries below it ("a/x").
func (l *listing) byPath(f func(entry)) {
	var walk func(i int) int // walks group i and those that sort inside it; returns the next
	walk = func(i int) int {
		es := l.groups[i].entries
		name := es[0].Path
		f(es[0])
		j := i + 1
		for j < len(l.groups) {
			n := l.groups[j].name()
			if len(n) <= len(name) || n[:len(name)] != name || n[len(name)] >= '/' {
				break
			}
			j = walk(j)
		}
		for _, e := range es[1:] {
			f(e)
		}
		return j
	}
	for i := 0; i < len(l.groups); {
		i = walk(i)
	}
}

// all yields the directory's entry, then each group's entries in order.
func (l *listing) all() iter.Seq[entry] {
	return func(yield func(entry) bool) {
		if !yield(l.self) {
			return
		}
		for k := range l.groups {
			for _, e := range l.groups[k].entries {
				if !yield(e) {
					return
				}
			}
		}
	}
}

// counts returns how many files (and links) and folders l lists, the
// directory itself included.
func (l *listing) counts() (files, dirs int) {
	dirs = 1
	for k := range l.groups {
		for _, e := range l.groups[k].entries {
			if e.Kind == kindDir {
				dirs++
			} else {
				files++
			}
		}
	}
	return files, dirs
}

// lister is one Sync's walk: it lists folders and hashes files, taking
// what it can from prev.
type lister struct {
	ctx  context.Context
	fsys fs.FS    // the root's, for links
	abs  string   // the directory, for errors
	prev *listing // may be nil
	// dirFD is a descriptor of the directory, opened through the root.
	dirFD int
	now   time.Time
	keep  func(name string) bool // LocalDir.KeepRead

	hashed, readDirs atomic.Int64
	mu               sync.Mutex
	kept             map[string][]byte // what keep accepted of the files read
}

// list walks fsys, the root of the directory abs. The top level's entries
// are shared among GOMAXPROCS goroutines, each walking whole sub-trees.
func (w *lister) list() (*listing, SyncStats, error) {
	var top []entry
	st, err := statDir(w.abs)
	if err != nil {
		return nil, SyncStats{}, err
	}
	self := entry{Path: ".", Stat: st, Kind: kindDir, Trusted: settled(st, w.now)}
	root := w.top()
	if err := w.dir(&self, root, &top); err != nil {
		return nil, SyncStats{}, err
	}

	// Walk the top level's folders in parallel; files there are done. Each
	// top-level entry's group starts with it.
	below := make([][]entry, len(top))
	var dirs []int
	for i, e := range top {
		below[i] = []entry{e}
		if e.Kind == kindDir {
			dirs = append(dirs, i)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(dirs))
	errs := make([]error, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for n := range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(dirs) || errs[n] != nil {
					return
				}
				k := dirs[i]
				errs[n] = w.dir(&top[k], root, &below[k])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, SyncStats{}, err
	}
	groups := make([]group, len(top))
	for i, es := range below {
		groups[i] = sortedGroup(es)
	}
	slices.SortFunc(groups, func(a, b group) int { return strings.Compare(a.name(), b.name()) })
	return w.finish(self, groups)
}

// sortedGroup sorts the entries below es[0] by path and returns their group.
func sortedGroup(es []entry) group {
	slices.SortFunc(es[1:], func(a, b entry) int { return strings.Compare(a.Path, b.Path) })
	return newGroup(slices.Clip(es))
}

// finish makes the listing of a walk and counts it.
func (w *lister) finish(self entry, groups []group) (*listing, SyncStats, error) {
	l := &listing{self: self, groups: groups}
	stats := SyncStats{Hashed: int(w.hashed.Load()), ReadDirs: int(w.readDirs.Load())}
	stats.Files, stats.Dirs = l.counts()
	return l, stats, nil
}

// listChanged is list when a watcher reported the top-level entries that
// changed since prev (see LocalDir.Track): it lists again the entries
// reported, and those prev cannot give whole (see group.whole); every
// other top-level entry, and all below it, is prev's. It does not read
// the directory's names (100,000 of them cost more than the rest): the
// watcher reports an entry that appears or goes. It returns the names it
// listed again, sorted.
func (w *lister) listChanged(changed map[string]bool) (*listing, []string, SyncStats, error) {
	st, err := statDir(w.abs)
	if err != nil {
		return nil, nil, SyncStats{}, err
	}
	// Untrusted: its names were not read, so the next full Sync reads them.
	self := entry{Path: ".", Stat: st, Kind: kindDir}
	prev := w.prev.groups
	var redo []string
	for name := range changed {
		if name != "." && !strings.Contains(name, "/") {
			redo = append(redo, name)
		}
	}
	for k := range prev {
		if name := prev[k].name(); !prev[k].whole && !changed[name] {
			redo = append(redo, name)
		}
	}
	slices.Sort(redo)
	groups := make([]group, 0, len(prev)+len(redo))
	i := 0
	for _, name := range redo {
		j, found := slices.BinarySearchFunc(prev[i:], name, func(g group, n string) int { return strings.Compare(g.name(), n) })
		groups = append(groups, prev[i:i+j]...)
		if i += j; found {
			i++
		}
		var es []entry
		if _, err := w.entries(w.top(), []string{name}, false, &es); err != nil {
			return nil, nil, SyncStats{}, err
		}
		if len(es) == 0 {
			continue // gone, or not part of the tree
		}
		if es[0].Kind == kindDir {
			top := es[0]
			if err := w.dir(&top, w.top(), &es); err != nil {
				return nil, nil, SyncStats{}, err
			}
		}
		groups = append(groups, sortedGroup(es))
	}
	groups = append(groups, prev[i:]...)
	l, stats, err := w.finish(self, groups)
	return l, redo, stats, err
}

// dir lists the folder of e (stat already taken), an entry of the folder
// up, into out: each entry below it, hashing files, then walking its
// sub-folders, except at the top level, whose folders list leaves to the
// goroutines. The entry names come from the previous listing when e is
// trusted there with the same stat, and from reading the folder
// otherwise. A folder that changed after the previous listing was taken,
// yet kept its stat (a change the settling window should have caught),
// shows as a missing or retyped entry; the folder is then read after all.
func (w *lister) dir(e *entry, up *folder, out *[]entry) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	f := up
	if e.Path != "." {
		f = &folder{path: e.Path, up: up, fd: -1}
		defer f.close()
	}
	fromPrev := false
	var names []string
	if p, ok := w.prev.find(e.Path); ok && p.Kind == kindDir && p.Trusted && p.Stat == e.Stat {
		names, fromPrev = w.prev.children(e.Path), true
	}
	start := len(*out)
	for {
		if !fromPrev {
			var err error
			if names, err = w.readNames(f); err != nil {
				return err
			}
		}
		ok, err := w.entries(f, names, fromPrev, out)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		*out = (*out)[:start]
		fromPrev = false
	}
	if e.Path == "." {
		return nil
	}
	// The sub-folders are out[start:end]'s folders; walking them appends
	// to out, so copy each entry out, never hold a pointer into it.
	end := len(*out)
	for i := start; i < end; i++ {
		if sub := (*out)[i]; sub.Kind == kindDir {
			if err := w.dir(&sub, f, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// folder is a folder a walk is in, and a descriptor of it once one of its
// files is read or its names are (a walk that reads nothing opens
// nothing). Each folder is opened relative to the one above it, its name
// not followed if it is a link, so that what a walk reads stays below the
// directory, as reads through the root do, without the root's walk of
// every component and its poller set-up for each file.
type folder struct {
	path string  // below the directory; "." for the directory
	up   *folder // nil for the directory
	fd   int     // -1 until opened
	err  error   // why it could not be opened
	read bool    // its names were read (through fd, at its end)
}

// top is the folder of the directory itself, open as dirFD.
func (w *lister) top() *folder { return &folder{path: ".", fd: w.dirFD} }

// open returns f's descriptor, opening f and the folders above it.
func (f *folder) open() (int, error) {
	if f.fd >= 0 || f.err != nil {
		return f.fd, f.err
	}
	pfd, err := f.up.open()
	if err == nil {
		f.fd, err = openAt(pfd, path.Base(f.path), unix.O_RDONLY|unix.O_DIRECTORY)
	}
	if err != nil {
		f.err = &fs.PathError{Op: "openat", Path: f.path, Err: err}
	}
	return f.fd, f.err
}

// close closes f's descriptor, unless f is the directory's.
func (f *folder) close() {
	if f.up != nil && f.fd >= 0 {
		unix.Close(f.fd)
		f.fd = -1
	}
}

// openAt opens the entry name of the folder open as dir, never following
// a link there, and never blocking on a pipe swapped in for a file.
func openAt(dir int, name string, flags int) (int, error) {
	if !plainName(name) {
		return -1, fs.ErrInvalid
	}
	for {
		fd, err := unix.Openat(dir, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// plainName reports whether name names an entry of a folder: not empty,
// not "." or "..", no slash. A listing read from disk is checked before it
// is used, and this once more before a name is opened.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.Contains(name, "/")
}

// direntBufs are the buffers readNames reads folders into.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// readNames reads the names in folder f. Names alone: a Root's ReadDir
// would stat each entry, and entries stats them anyway.
func (w *lister) readNames(f *folder) ([]string, error) {
	fd, err := f.open()
	if err != nil {
		return nil, err
	}
	if f.read {
		if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
			return nil, &fs.PathError{Op: "seek", Path: f.path, Err: err}
		}
	}
	f.read = true
	w.readDirs.Add(1)
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	var names []string
	for {
		n, err := unix.Getdents(fd, *bp)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "readdirent", Path: f.path, Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent((*bp)[:n], -1, names)
	}
}

// entries stats names (the entries of folder f) into out, hashing the
// files whose stat is not trusted in the previous listing. With fromPrev
// (the names came from the previous listing), ok is false when one is
// gone or changed type, and the caller reads the folder instead.
func (w *lister) entries(f *folder, names []string, fromPrev bool, out *[]entry) (ok bool, err error) {
	for _, name := range names {
		rel := name
		if f.path != "." {
			rel = f.path + "/" + name
		}
		st, kind, err := w.lstat(f, name, rel)
		if errors.Is(err, fs.ErrNotExist) {
			if fromPrev {
				return false, nil
			}
			continue // removed since the folder was read
		}
		if err != nil {
			return false, err
		}
		if kind == 0 {
			continue // a socket, device or pipe: not part of the tree
		}
		p, had := w.prev.find(rel)
		if fromPrev && (!had || p.Kind != kind) {
			return false, nil
		}
		e := entry{Path: rel, Stat: st, Kind: kind}
		switch kind {
		case kindDir:
			e.Trusted = settled(st, w.now)
		case kindFile:
			if had && p.Kind == kindFile && p.Trusted && p.Stat == st {
				e.Blob, e.hashed, e.Trusted = p.Blob, true, true
				break
			}
			w.hash(f, name, &e)
			e.Trusted = e.hashed && settled(st, w.now)
		case kindLink:
			w.hash(f, name, &e)
		}
		*out = append(*out, e)
	}
	return true, nil
}

// hash reads the file of e, the entry name of folder f, and records its
// blob hash: a regular file through f's descriptor, a link through the
// root, which follows it as far as it stays in the directory.
func (w *lister) hash(f *folder, name string, e *entry) {
	w.hashed.Add(1)
	var data []byte
	var err error
	if e.Kind == kindFile {
		data, err = readAt(f, name)
	} else {
		data, err = fs.ReadFile(w.fsys, e.Path)
	}
	if err != nil {
		return
	}
	e.Blob, e.hashed = blobSum(data), true
	if e.Kind == kindFile && w.keep != nil && w.keep(e.Path) {
		w.mu.Lock()
		if w.kept == nil {
			w.kept = map[string][]byte{}
		}
		w.kept[e.Path] = data
		w.mu.Unlock()
	}
}

// readAt reads the regular file name of folder f whole.
func readAt(f *folder, name string) ([]byte, error) {
	dfd, err := f.open()
	if err != nil {
		return nil, err
	}
	fd, err := openAt(dfd, name, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fs.ErrInvalid // swapped for something else since its stat
	}
	data := make([]byte, 0, st.Size+1) // +1: the read that finds the end
	for {
		n, err := unix.Read(fd, data[len(data):cap(data)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return data, nil
		}
		data = data[:len(data)+n]
		if len(data) == cap(data) {
			data = slices.Grow(data, len(data)) // it grew since
		}
	}
}

// lstat stats the entry name of folder f, at rel below the directory,
// without following a final symbolic link: relative to f's descriptor
// when the walk opened it, else relative to the directory's (dirFD),
// which spares the kernel walking the directory's own path for each of
// 100,000 files. The stats only decide whether content read before may
// be reused; every read goes through a folder opened as folder.open does,
// or through the root.
func (w *lister) lstat(f *folder, name, rel string) (fileStat, entryKind, error) {
	var st unix.Stat_t
	var err error
	if f.fd >= 0 && plainName(name) {
		err = unix.Fstatat(f.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	} else {
		err = unix.Fstatat(w.dirFD, rel, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return fileStat{}, 0, &fs.PathError{Op: "lstat", Path: w.abs + "/" + rel, Err: err}
	}
	var kind entryKind
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		kind = kindFile
	case unix.S_IFDIR:
		kind = kindDir
	case unix.S_IFLNK:
		kind = kindLink
	}
	return toFileStat(&st), kind, nil
}

// statDir stats the directory itself, following a symbolic link as
// os.OpenRoot does.
func statDir(p string) (fileStat, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return fileStat{}, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	return toFileStat(&st), nil
}

func toFileStat(st *unix.Stat_t) fileStat {
	return fileStat{
		Size:  st.Size,
		MTime: st.Mtim.Nano(),
		CTime: st.Ctim.Nano(),
		Ino:   uint64(st.Ino),
		Mode:  uint32(st.Mode),
	}
}

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
			cur = nil
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

// localBlobHash reads the file at name and returns its git blob hash.
// The whole file is read at once so that a concurrent writer cannot make
// the length and the hashed bytes disagree.
func localBlobHash(fsys fs.FS, name string) (string, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", err
	}
	return blobHash(data), nil
}

// blobHash returns git's object hash of data as a blob.
func blobHash(data []byte) string {
	sum := blobSum(data)
	return hex.EncodeToString(sum[:])
}

func blobSum(data []byte) [sha1.Size]byte {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	var sum [sha1.Size]byte
	h.Sum(sum[:0])
	return sum
}

// errSymlink is returned when a path crosses a symbolic link in a git tree;
// links in git trees are never followed.
var errSymlink = errors.New("symbolic link not followed")
