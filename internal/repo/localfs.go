// The FS of a local Tree: the root's, with folders listed as the Sync
// listed them and the files KeepRead kept served from memory.

package repo

import (
	"bytes"
	"io/fs"
	"path"
	"sync"
	"time"
)

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
		// One array of entries, not one allocation each: a build lists
		// the top of 10,000 tools at every start.
		out, des := make([]fs.DirEntry, len(f.l.groups)), make([]listedEntry, len(f.l.groups))
		for k := range f.l.groups {
			e := &f.l.groups[k].entries[0]
			des[k] = listedEntry{name: e.Path, path: e.Path, kind: e.Kind, fsys: f.rootFS}
			out[k] = &des[k]
		}
		return out, nil
	}
	prefix := name + "/"
	names := f.l.children(name)
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		e, _ := f.l.find(prefix + n)
		out = append(out, listedEntry{name: n, path: e.Path, kind: e.Kind, fsys: f.rootFS})
	}
	return out, nil
}

// listedEntry is an entry of a folder as the Sync listed it.
type listedEntry struct {
	name string
	path string // below the directory
	kind entryKind
	fsys fs.FS
}

func (d listedEntry) Name() string { return d.name }
func (d listedEntry) IsDir() bool  { return d.kind == kindDir }
func (d listedEntry) Type() fs.FileMode {
	switch d.kind {
	case kindDir:
		return fs.ModeDir
	case kindLink:
		return fs.ModeSymlink
	}
	return 0
}

// Info stats the entry now (without following a symbolic link).
func (d listedEntry) Info() (fs.FileInfo, error) { return fs.Lstat(d.fsys, d.path) }
func (d listedEntry) String() string             { return fs.FormatDirEntry(d) }
