package repo

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"sync"
)

// LocalDir is a source that serves a directory on the local file system.
//
// It opens the directory once, with os.OpenRoot, and reads every Tree
// through that one handle; Close releases it. Sync may be called from any
// goroutine. A LocalDir must not be copied after first use.
type LocalDir struct {
	// Path is the directory to serve; its contents are the tree's root.
	Path string

	mu   sync.Mutex
	root *os.Root // nil until the first Sync, and after Close
}

// Sync returns a Tree over the directory's current contents.
//
// The tree's FS is rooted with os.OpenRoot: a path or symbolic link that
// leads out of the directory fails to open, while links that stay inside
// it work. Sync reads every file once to compute the revision; the
// returned tree reads files from disk when asked, so it sees later edits
// (which a new Sync will then report with a new revision).
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
	rev, err := localRev(ctx, fsys)
	if err != nil {
		return nil, fmt.Errorf("scan local dir %s: %w", d.Path, err)
	}
	return &Tree{
		fsys: fsys,
		rev:  rev,
		hash: func(name string) (string, error) { return localBlobHash(fsys, name) },
	}, nil
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
	root, err := os.OpenRoot(d.Path)
	if err != nil {
		return nil, fmt.Errorf("open local dir: %w", err)
	}
	d.root = root
	return root, nil
}

// Close releases the directory handle. Trees returned by Sync fail to read
// afterwards; a later Sync opens the directory again.
func (d *LocalDir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.root == nil {
		return nil
	}
	err := d.root.Close()
	d.root = nil
	return err
}

// localRev hashes the sorted (path, blob hash) pairs of every file in fsys.
// A file that cannot be read (a link that escapes, a link to a directory,
// a file removed during the walk) contributes its path with a marker, so
// adding or fixing it still changes the revision.
func localRev(ctx context.Context, fsys fs.FS) (string, error) {
	var pairs []string
	err := fs.WalkDir(fsys, ".", func(name string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if de.IsDir() || !(de.Type().IsRegular() || de.Type()&fs.ModeSymlink != 0) {
			return nil
		}
		h, err := localBlobHash(fsys, name)
		if err != nil {
			h = "unreadable"
		}
		pairs = append(pairs, name+"\x00"+h+"\n")
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(pairs)
	sum := sha256.New()
	for _, p := range pairs {
		sum.Write([]byte(p))
	}
	return "local:" + hex.EncodeToString(sum.Sum(nil))[:16], nil
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
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// errSymlink is returned when a path crosses a symbolic link in a git tree;
// links in git trees are never followed.
var errSymlink = errors.New("symbolic link not followed")
