package repo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"golang.org/x/sys/unix"
)

// errNoPath reports that the configured sub-path is not a directory in the
// commit. It is a content problem, not a broken clone, so it never causes a
// re-clone.
var errNoPath = errors.New("sub-path is not a directory in the commit")

// errSymlink is returned when a path crosses a symbolic link in a git tree;
// links in git trees are never followed.
var errSymlink = errors.New("symbolic link not followed")

// objects reads git objects of one clone directory. Each Tree gets its own
// go-git storage instance, so its reads share no memory with a Sync that
// fetches into the same directory (fetches only add pack files; the ones a
// Tree indexed stay in place). The mutex serializes the storage, which is
// not safe for concurrent use.
type objects struct {
	path string // the clone's directory
	mu   sync.Mutex
	s    *filesystem.Storage
	dirs map[plumbing.Hash]*gitDir // decoded trees; guarded by mu
	// fetched holds the objects the fetch that made this Tree received,
	// as it resolved them: read from memory, not back from the pack file
	// they were just written to. Never changed once the Tree is made.
	fetched map[plumbing.Hash]plumbing.EncodedObject

	// blobReads counts blob contents read, so tests can check that listing
	// and hashing read none; treeReads counts the tree objects read from
	// the clone's files (not from fetched), so tests can check what a
	// fetch's Tree reads again.
	blobReads, treeReads atomic.Int64
}

// gitDir is a decoded tree object, its entries sorted by name as fs.ReadDir
// requires. It is immutable once built.
type gitDir struct {
	entries []object.TreeEntry
}

// find returns the index of the entry called name.
func (d *gitDir) find(name string) (int, bool) {
	return slices.BinarySearchFunc(d.entries, name, func(e object.TreeEntry, n string) int { return strings.Compare(e.Name, n) })
}

// openObjects opens the clone at clonePath. fetched are objects a fetch
// just received (see objects.fetched); nil for none.
func openObjects(clonePath string, fetched map[plumbing.Hash]plumbing.EncodedObject) *objects {
	// The object cache only needs to hold tree objects between decoding
	// steps; decoded trees are kept in dirs. Pack files stay open once
	// read: opening one per object made a 1,000-tool walk 40x slower. They
	// are closed when the objects value becomes unreachable, as os.File
	// closes its descriptor; an open pack also stays readable if a later
	// re-clone deletes its directory.
	s := filesystem.NewStorageWithOptions(packsMapped{osfs.New(clonePath), clonePath}, cache.NewObjectLRU(256*cache.KiByte),
		filesystem.Options{KeepDescriptors: true})
	o := &objects{path: clonePath, s: s, dirs: make(map[plumbing.Hash]*gitDir), fetched: fetched}
	runtime.AddCleanup(o, func(s *filesystem.Storage) { s.Close() }, s)
	return o
}

// adopt decodes tree h (the sub-tree a Tree serves) unless seed, an
// earlier Tree's objects, has, and takes from seed the decoded trees below
// it: a tree object's content is fixed by its hash, so after a commit that
// changes one tool only the trees on the path to it are decoded again.
// Trees seed decoded that h does not reach are left behind, so a
// long-running source holds the trees of its current commit, not of every
// commit it served. Below a tree seed had not decoded (a changed tool
// folder), nothing is read here.
func (o *objects) adopt(seed *objects, h plumbing.Hash) error {
	seed.mu.Lock()
	d, ok := seed.dirs[h]
	seed.mu.Unlock()
	if !ok {
		var err error
		if d, err = o.dir(h); err != nil {
			return err
		}
	}
	seed.mu.Lock()
	defer seed.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dirs[h] = d
	var walk func(d *gitDir)
	walk = func(d *gitDir) {
		for _, e := range d.entries {
			// Below a tree seed has, seed has what it decoded; below one it
			// has not (a changed folder), nothing is taken.
			if c, ok := seed.dirs[e.Hash]; ok && e.Mode == filemode.Dir {
				o.dirs[e.Hash] = c
				walk(c)
			}
		}
	}
	walk(d)
	return nil
}

// dir returns the decoded tree object h.
func (o *objects) dir(h plumbing.Hash) (*gitDir, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d, ok := o.dirs[h]; ok {
		return d, nil
	}
	data, err := o.readLocked(plumbing.TreeObject, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	d, err := decodeTree(data)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	o.dirs[h] = d
	return d, nil
}

// objectLocked returns object h of type t, from fetched when it is there.
func (o *objects) objectLocked(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if obj, ok := o.fetched[h]; ok && obj.Type() == t {
		return obj, nil
	}
	if t == plumbing.TreeObject {
		o.treeReads.Add(1)
	}
	return o.s.EncodedObject(t, h)
}

// readLocked returns the content of object h of type t (objectLocked).
func (o *objects) readLocked(t plumbing.ObjectType, h plumbing.Hash) ([]byte, error) {
	obj, err := o.objectLocked(t, h)
	if err != nil {
		return nil, err
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// The object's header gave its size: read that much, and check that
	// nothing follows. A size past maxPrealloc is not taken on trust (an
	// object's header may lie): read what there is.
	if obj.Size() < 0 || obj.Size() > maxPrealloc {
		return io.ReadAll(r)
	}
	data := make([]byte, obj.Size())
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("object %s is shorter than its header says: %w", h, err)
	}
	if n, _ := r.Read(make([]byte, 1)); n != 0 {
		return nil, fmt.Errorf("object %s is longer than its header says", h)
	}
	return data, nil
}

// decodeTree decodes the content of a tree object: entries of an octal
// mode, a space, a name, a NUL and a 20-byte hash. Each name is a string
// of its own: a catalog entry may keep one long after the tree is gone,
// and must not keep the whole tree's bytes with it. Entries come sorted by
// name (git orders a folder as if its name ended in "/", which differs
// from that only for a name that is a prefix of another).
func decodeTree(all []byte) (*gitDir, error) {
	n := bytes.Count(all, []byte{0})
	entries := make([]object.TreeEntry, 0, n)
	for i := 0; i < len(all); {
		var mode uint32
		j := i
		for ; j < len(all) && all[j] != ' '; j++ {
			c := all[j]
			if c < '0' || c > '7' || j-i >= 7 {
				return nil, fmt.Errorf("malformed tree: bad mode at byte %d", i)
			}
			mode = mode<<3 | uint32(c-'0')
		}
		if j == i || j == len(all) {
			return nil, fmt.Errorf("malformed tree: bad mode at byte %d", i)
		}
		k := bytes.IndexByte(all[j+1:], 0)
		if k < 0 || j+1+k+1+hashSize > len(all) {
			return nil, fmt.Errorf("malformed tree: entry at byte %d is cut short", i)
		}
		if k == 0 {
			return nil, fmt.Errorf("malformed tree: empty name at byte %d", i)
		}
		name := string(all[j+1 : j+1+k])
		var h plumbing.Hash
		copy(h[:], all[j+1+k+1:])
		entries = append(entries, object.TreeEntry{Name: name, Mode: canonicalMode(mode), Hash: h})
		i = j + 1 + k + 1 + hashSize
	}
	cmpName := func(a, b object.TreeEntry) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(entries, cmpName) {
		slices.SortFunc(entries, cmpName)
	}
	return &gitDir{entries: entries}, nil
}

// canonicalMode is the mode git reads a tree entry's mode as (as go-git's
// decoder does): the type bits decide, and a regular file is executable
// when any execute bit is set.
func canonicalMode(m uint32) filemode.FileMode {
	switch m & 0o170000 {
	case 0o040000:
		return filemode.Dir
	case 0o100000:
		if m&0o111 != 0 {
			return filemode.Executable
		}
		return filemode.Regular
	case 0o120000:
		return filemode.Symlink
	default:
		return filemode.Submodule
	}
}

// maxPrealloc bounds the buffer readLocked sizes from an object's header.
const maxPrealloc = 16 << 20

// hashSize is the length of an object hash in a tree entry.
const hashSize = len(plumbing.Hash{})

// blob returns the content of blob h.
func (o *objects) blob(h plumbing.Hash) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.blobReads.Add(1)
	data, err := o.readLocked(plumbing.BlobObject, h)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	return data, nil
}

// blobSize returns the size of blob h from the object header.
func (o *objects) blobSize(h plumbing.Hash) (int64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obj, err := o.objectLocked(plumbing.BlobObject, h)
	if err != nil {
		return 0, fmt.Errorf("read blob %s: %w", h, err)
	}
	return obj.Size(), nil
}

// newGitTree returns the Tree of sub (a slash-separated path, "" for the
// whole tree) in commit, reading objects from the bare clone at clonePath.
// prev, if not nil, is an earlier git Tree whose decoded trees are reused.
func newGitTree(clonePath string, commit plumbing.Hash, sub string, prev *Tree, fetched map[plumbing.Hash]plumbing.EncodedObject) (*Tree, error) {
	var seed *objects
	if prev != nil {
		if f, ok := prev.fsys.(*gitFS); ok {
			seed = f.o
		}
	}
	o := openObjects(clonePath, fetched)
	o.mu.Lock()
	var c *object.Commit
	data, err := o.readLocked(plumbing.CommitObject, commit)
	if err == nil {
		obj := &plumbing.MemoryObject{}
		obj.SetType(plumbing.CommitObject)
		obj.Write(data)
		c, err = object.DecodeCommit(o.s, obj)
	}
	o.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", commit, err)
	}
	root := c.TreeHash
	if sub != "" {
		for _, part := range strings.Split(sub, "/") {
			d, err := o.dir(root)
			if err != nil {
				return nil, err
			}
			i, ok := d.find(part)
			if !ok || d.entries[i].Mode != filemode.Dir {
				return nil, fmt.Errorf("%q at %s: %w", sub, commit, errNoPath)
			}
			root = d.entries[i].Hash
		}
	}
	// Read the sub-tree's own object now, so a clone missing it is found
	// during Sync rather than by a reader later.
	if seed != nil {
		if err := o.adopt(seed, root); err != nil {
			return nil, err
		}
	} else if _, err := o.dir(root); err != nil {
		return nil, err
	}
	fsys := &gitFS{o: o, root: root}
	parents := make([]string, len(c.ParentHashes))
	for i, h := range c.ParentHashes {
		parents[i] = h.String()
	}
	t := &Tree{fsys: fsys, rev: commit.String(), treeHash: root.String(), hash: fsys.blobHash, parents: parents, isGit: true, sub: sub}
	if seed != nil && prev.isGit && prev.sub == sub {
		if base, ok := seed.decoded(prev.fsys.(*gitFS).root); ok {
			d, _ := o.dir(root) // decoded above
			t.base, t.baseTree, t.delta, t.hasDelta = prev.rev, prev.treeHash, changedNames(base, d), true
		}
	}
	return t, nil
}

// decoded returns tree h if it is decoded.
func (o *objects) decoded(h plumbing.Hash) (*gitDir, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d, ok := o.dirs[h]
	return d, ok
}

// changedNames returns the names of the entries of a and b (both sorted by
// name) that are in one alone or differ in mode or hash, sorted: what a
// scan of b must look at again after a scan of a.
func changedNames(a, b *gitDir) []string {
	var names []string
	i, j := 0, 0
	for i < len(a.entries) || j < len(b.entries) {
		switch {
		case j == len(b.entries) || i < len(a.entries) && a.entries[i].Name < b.entries[j].Name:
			names = append(names, a.entries[i].Name)
			i++
		case i == len(a.entries) || b.entries[j].Name < a.entries[i].Name:
			names = append(names, b.entries[j].Name)
			j++
		default:
			if a.entries[i].Hash != b.entries[j].Hash || a.entries[i].Mode != b.entries[j].Mode {
				names = append(names, b.entries[j].Name)
			}
			i, j = i+1, j+1
		}
	}
	return names
}

// gitFS is an fs.FS over a tree object. Directories are decoded when opened
// or listed; file contents are read on the first Read, ReadFile or Size.
// Symbolic links are listed but never followed, and submodules are listed
// as irregular files that cannot be opened.
type gitFS struct {
	o    *objects
	root plumbing.Hash
}

var (
	_ fs.FS         = (*gitFS)(nil)
	_ fs.ReadDirFS  = (*gitFS)(nil)
	_ fs.ReadFileFS = (*gitFS)(nil)
	_ fs.StatFS     = (*gitFS)(nil)
)

// lookup returns the tree entry for name, which must be a valid fs path.
func (f *gitFS) lookup(op, name string) (object.TreeEntry, error) {
	if !fs.ValidPath(name) {
		return object.TreeEntry{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return object.TreeEntry{Name: ".", Mode: filemode.Dir, Hash: f.root}, nil
	}
	cur := f.root
	parts := strings.Split(name, "/")
	for i, part := range parts {
		d, err := f.o.dir(cur)
		if err != nil {
			return object.TreeEntry{}, &fs.PathError{Op: op, Path: name, Err: err}
		}
		j, ok := d.find(part)
		if !ok {
			return object.TreeEntry{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		e := d.entries[j]
		if i == len(parts)-1 {
			return e, nil
		}
		switch e.Mode {
		case filemode.Dir:
			cur = e.Hash
		case filemode.Symlink:
			return object.TreeEntry{}, &fs.PathError{Op: op, Path: name, Err: errSymlink}
		default:
			return object.TreeEntry{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
	}
	panic("unreachable")
}

func (f *gitFS) blobHash(name string) (string, error) {
	e, err := f.lookup("blobhash", name)
	if err != nil {
		return "", err
	}
	if !isFile(e.Mode) {
		return "", &fs.PathError{Op: "blobhash", Path: name, Err: notFileErr(e.Mode)}
	}
	return e.Hash.String(), nil
}

// Open opens name. Directories and regular files open; symbolic links and
// submodules do not.
func (f *gitFS) Open(name string) (fs.File, error) {
	e, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	fi := f.info(baseName(name), e)
	switch {
	case e.Mode == filemode.Dir:
		return &gitDirFile{fs: f, fi: fi}, nil
	case isFile(e.Mode):
		return &gitFile{o: f.o, fi: fi}, nil
	default:
		return nil, &fs.PathError{Op: "open", Path: name, Err: notFileErr(e.Mode)}
	}
}

// ReadDir lists the directory name sorted by file name, without reading any
// file contents.
func (f *gitFS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := f.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if e.Mode != filemode.Dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return f.entries(name, e.Hash)
}

func (f *gitFS) entries(name string, h plumbing.Hash) ([]fs.DirEntry, error) {
	d, err := f.o.dir(h)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	list := make([]fs.DirEntry, len(d.entries))
	for i, e := range d.entries {
		list[i] = fs.FileInfoToDirEntry(f.info(e.Name, e))
	}
	return list, nil
}

// ReadFile returns the content of the regular file name.
func (f *gitFS) ReadFile(name string) ([]byte, error) {
	e, err := f.lookup("readfile", name)
	if err != nil {
		return nil, err
	}
	if !isFile(e.Mode) {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: notFileErr(e.Mode)}
	}
	data, err := f.o.blob(e.Hash)
	if err != nil {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: err}
	}
	return data, nil
}

// Stat describes name without reading its content; a file's size is read
// from the object header when Size is first called.
func (f *gitFS) Stat(name string) (fs.FileInfo, error) {
	e, err := f.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return f.info(baseName(name), e), nil
}

func (f *gitFS) info(base string, e object.TreeEntry) *gitInfo {
	return &gitInfo{o: f.o, name: base, entry: e}
}

// baseName returns the last element of a valid fs path.
func baseName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[i+1:]
	}
	return name
}

func isFile(m filemode.FileMode) bool {
	return m == filemode.Regular || m == filemode.Executable || m == filemode.Deprecated
}

func notFileErr(m filemode.FileMode) error {
	switch m {
	case filemode.Dir:
		return errors.New("is a directory")
	case filemode.Symlink:
		return errSymlink
	default:
		return fs.ErrInvalid
	}
}

// gitInfo is the fs.FileInfo of a tree entry.
type gitInfo struct {
	o     *objects
	name  string
	entry object.TreeEntry

	sizeOnce sync.Once
	size     int64
}

func (i *gitInfo) Name() string       { return i.name }
func (i *gitInfo) ModTime() time.Time { return time.Time{} }
func (i *gitInfo) IsDir() bool        { return i.entry.Mode == filemode.Dir }
func (i *gitInfo) Sys() any           { return nil }

// Size returns the blob size for files (0 if it cannot be read) and 0
// otherwise.
func (i *gitInfo) Size() int64 {
	if !isFile(i.entry.Mode) {
		return 0
	}
	i.sizeOnce.Do(func() {
		i.size, _ = i.o.blobSize(i.entry.Hash)
	})
	return i.size
}

func (i *gitInfo) Mode() fs.FileMode {
	switch i.entry.Mode {
	case filemode.Dir:
		return fs.ModeDir | 0o555
	case filemode.Executable:
		return 0o555
	case filemode.Regular, filemode.Deprecated:
		return 0o444
	case filemode.Symlink:
		return fs.ModeSymlink | 0o777
	default:
		return fs.ModeIrregular
	}
}

// gitFile is an open regular file; its content is read on the first Read.
type gitFile struct {
	o  *objects
	fi *gitInfo

	r      *bytes.Reader
	closed bool
}

func (f *gitFile) Stat() (fs.FileInfo, error) { return f.fi, nil }

func (f *gitFile) Read(p []byte) (int, error) {
	if f.closed {
		return 0, &fs.PathError{Op: "read", Path: f.fi.name, Err: fs.ErrClosed}
	}
	if f.r == nil {
		data, err := f.o.blob(f.fi.entry.Hash)
		if err != nil {
			return 0, &fs.PathError{Op: "read", Path: f.fi.name, Err: err}
		}
		f.r = bytes.NewReader(data)
	}
	return f.r.Read(p)
}

func (f *gitFile) Close() error {
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.fi.name, Err: fs.ErrClosed}
	}
	f.closed = true
	f.r = nil
	return nil
}

// gitDirFile is an open directory.
type gitDirFile struct {
	fs *gitFS
	fi *gitInfo

	list   []fs.DirEntry // nil until the first ReadDir
	off    int
	closed bool
}

func (d *gitDirFile) Stat() (fs.FileInfo, error) { return d.fi, nil }

func (d *gitDirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.fi.name, Err: errors.New("is a directory")}
}

func (d *gitDirFile) Close() error {
	if d.closed {
		return &fs.PathError{Op: "close", Path: d.fi.name, Err: fs.ErrClosed}
	}
	d.closed = true
	return nil
}

// ReadDir follows fs.ReadDirFile: with n > 0 it returns at most n entries
// and io.EOF at the end; with n <= 0 it returns the rest and a nil error.
func (d *gitDirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if d.closed {
		return nil, &fs.PathError{Op: "readdir", Path: d.fi.name, Err: fs.ErrClosed}
	}
	if d.list == nil {
		list, err := d.fs.entries(d.fi.name, d.fi.entry.Hash)
		if err != nil {
			return nil, err
		}
		d.list = list
	}
	rest := d.list[d.off:]
	if n <= 0 {
		d.off = len(d.list)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return rest[:n], nil
}

// packsMapped wraps a clone's file system so that pack index and pack
// files are read from a read-only mapping of the file. go-git decodes
// index files with many tiny unbuffered reads, and each new Tree loads
// every index of the clone: that cost about 1 ms per pack. It seeks and
// reads for every object, and listing 10,000 tool folders reads 10,000
// tree objects, so a read from memory instead of two system calls each
// took about a third off a cold listing. The mapping, unlike the copy on
// the heap it replaces, costs the resident set only the pages read: a
// restart that takes the tools' blob hashes from the parse cache's
// listing reads two tree objects of the pack, not its megabytes. Pack
// files are written once and never changed in place (a fetch adds a new
// one, a re-clone makes a new directory), so a mapping never sees its
// file shrink.
type packsMapped struct {
	billy.Filesystem
	root string // the directory Filesystem is over
}

func (f packsMapped) Open(name string) (billy.File, error) {
	if !strings.HasSuffix(name, ".idx") && !strings.HasSuffix(name, ".pack") || !filepath.IsLocal(name) {
		return f.Filesystem.Open(name)
	}
	osf, err := os.Open(filepath.Join(f.root, filepath.FromSlash(name)))
	if err != nil {
		return f.Filesystem.Open(name) // its error, as go-git expects it
	}
	defer osf.Close() // the mapping stays
	fi, err := osf.Stat()
	if err != nil || fi.Size() <= 0 || fi.Size() != int64(int(fi.Size())) {
		return f.Filesystem.Open(name) // nothing to map: read as a file
	}
	data, err := unix.Mmap(int(osf.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return f.Filesystem.Open(name)
	}
	return &memFile{name: name, Reader: bytes.NewReader(data), data: data}, nil
}

// memFile is a read-only billy.File over a mapped file; Close unmaps it.
type memFile struct {
	name string
	*bytes.Reader
	data []byte
	once sync.Once
}

func (m *memFile) Name() string              { return m.name }
func (m *memFile) Write([]byte) (int, error) { return 0, errors.ErrUnsupported }
func (m *memFile) Lock() error               { return nil }
func (m *memFile) Unlock() error             { return nil }
func (m *memFile) Truncate(int64) error      { return errors.ErrUnsupported }

// Close unmaps the file. go-git closes a pack once it is done with it: what
// it read from it is copied out (inflated) by then.
func (m *memFile) Close() error {
	var err error
	m.once.Do(func() {
		m.Reader = bytes.NewReader(nil)
		err = unix.Munmap(m.data)
		m.data = nil
	})
	return err
}
