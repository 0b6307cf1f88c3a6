// The walk of one Sync of a LocalDir: the lister reads folders and stats
// entries through descriptors, in parallel by top-level folder, and
// hashes the files whose stat the previous listing cannot vouch for; and
// git's blob hash of local content.

package repo

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

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
	// Room for one byte more than the stat said: a read that returns the
	// whole size and leaves that byte unfilled found the end, so the
	// common file takes one read, not a second one that returns 0 (10,000
	// fewer system calls in a cold start of 10,000 tools). A read that
	// returns less (a file system that reads in pieces, a file cut short
	// since) or fills the room (it grew since) reads on to the end.
	data := make([]byte, 0, st.Size+1)
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
		if int64(len(data)) == st.Size { // the room's last byte is unfilled
			return data, nil
		}
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
