// LocalDir, the local-directory source: its fields, Sync (which lists the
// directory through a lister and returns a Tree over the listing), the
// directory handle and Close. The watcher's reports are in localwatch.go, the
// Tree's FS in localfs.go, the listing in listing.go, the walk in
// localwalk.go and the listing's file in listingfile.go.

package repo

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
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
	primed  bool     // Offline served the listing; the next Sync reports it Loaded
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
	loaded := d.primed
	d.primed = false
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

// Offline returns the Tree of the listing ListingFile holds, the directory
// as the last Sync of an earlier run found it, without a stat of any file:
// a restarted daemon publishes it at once and verifies it with its first
// Sync (which stats everything, as after any load of the listing, and
// reports a new revision when something changed while the daemon was
// down). Files the listing cannot vouch for (changed just before that
// Sync, or links) are read and hashed now, as a Sync would. It returns
// ErrNoListing when there is no usable listing (the first run, or a
// damaged file: logged), and must be called before the first Sync.
//
// The Tree's files are read from disk when asked: a file edited while the
// daemon was down is read as it is now, under the blob hash of the
// listing, which scan never confuses with it (it hashes what it parses);
// the first Sync then reports the edit.
func (d *LocalDir) Offline() (*Tree, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last != nil || d.loaded {
		return nil, errors.New("repo: LocalDir.Offline after a Sync")
	}
	root, err := d.rootLocked()
	if err != nil {
		return nil, err
	}
	d.loaded = true
	l := d.loadLocked()
	if l == nil {
		return nil, ErrNoListing
	}
	fsys := root.FS()
	for i := range l.groups {
		es := l.groups[i].entries
		for k := range es {
			e := &es[k]
			switch {
			case e.Kind == kindFile && e.Trusted:
				e.hashed = true
			case e.Kind != kindDir:
				if data, err := fs.ReadFile(fsys, e.Path); err == nil {
					e.Blob, e.hashed = blobSum(data), true
				}
			}
		}
		l.groups[i] = newGroup(es)
	}
	l.id = l.rev()
	d.last, d.primed = l, true
	if rfs, ok := fsys.(rootFS); ok {
		fsys = listedFS{rootFS: rfs, l: l, kept: &keptFiles{}}
	}
	return &Tree{
		fsys: fsys,
		rev:  l.id,
		hash: func(name string) (string, error) {
			if e, ok := l.find(name); ok && e.Kind != kindDir && e.hashed {
				return hex.EncodeToString(e.Blob[:]), nil
			}
			return localBlobHash(fsys, name)
		},
	}, nil
}

// ErrNoListing says LocalDir.Offline found no listing to serve.
var ErrNoListing = errors.New("repo: no listing of an earlier run")
