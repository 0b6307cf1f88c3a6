package repo

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// ErrNoHistory is returned by Tree.LastChanged when the history it needs
// is not in the clone: a local tree, or a clone kept one commit deep (set
// Git.History).
var ErrNoHistory = errors.New("repo: no commit history")

// Commit is a commit as a signature check needs it.
type Commit struct {
	Hash string
	// When is the committer's time.
	When time.Time
	// Signature is the gpgsig header (an armored SSH or OpenPGP
	// signature), "" when the commit is unsigned.
	Signature string
	// Payload is the commit object without its signature: the bytes that
	// were signed.
	Payload []byte
}

// LastChanged walks the first-parent history of the tree's commit, newest
// first, and returns for each of names (top-level folders of the
// sub-tree) the newest commit that changed it: the commit whose sub-tree
// entry for the name differs from its first parent's. A merge commit is
// compared with its first parent only, so the merge, not the merged
// branch's commits, is what changed the folders it brought in.
//
// The walk stops when every name is found, at the root commit, or at the
// commit stop ("" for none) before looking at it; reached says it stopped
// there, and then the names not found did not change after stop. It
// returns an error matching ErrNoHistory when a commit it needs is not in
// the clone.
func (t *Tree) LastChanged(names []string, stop string) (found map[string]string, reached bool, err error) {
	f, ok := t.fsys.(*gitFS)
	if !ok {
		return nil, false, fmt.Errorf("%w: a local directory has no commits", ErrNoHistory)
	}
	h := newHistory(f.o.path)
	defer h.close()
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	found = make(map[string]string, len(names))
	w := &firstParents{h: h, sub: t.sub, cur: plumbing.NewHash(t.rev), curSub: f.root}
	for len(found) < len(want) {
		if w.cur.String() == stop {
			return found, true, nil
		}
		c, curDir, parentDir, err := w.step()
		if err != nil {
			return nil, false, err
		}
		for _, name := range changedDirs(curDir, parentDir) {
			if want[name] && found[name] == "" {
				found[name] = c.Hash.String()
			}
		}
		if w.cur.IsZero() {
			break // past the root
		}
	}
	return found, false, nil
}

// firstParents walks a first-parent history newest first, a commit a
// step, comparing each commit's sub-tree with its first parent's.
type firstParents struct {
	h      *history
	sub    string
	cur    plumbing.Hash      // the commit the next step looks at; zero past a root commit
	curSub plumbing.Hash      // its sub-tree
	curDir []object.TreeEntry // curSub's entries, decoded when needed
}

// step looks at w.cur and moves w to its first parent. It returns the
// commit and, when its sub-tree differs from its first parent's (a root
// commit's: from none), the entries of both; nil and nil when they are
// the same. A parent not in the clone is an error matching ErrNoHistory.
func (w *firstParents) step() (c *object.Commit, curDir, parentDir []object.TreeEntry, err error) {
	if c, err = w.h.commit(w.cur); err != nil {
		return nil, nil, nil, err
	}
	var parent, parentSub plumbing.Hash
	if len(c.ParentHashes) > 0 {
		parent = c.ParentHashes[0]
		pc, err := w.h.commit(parent)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: parent %s of %s is not in the clone (a shallow clone?): %v", ErrNoHistory, parent, w.cur, err)
		}
		if parentSub, err = w.h.subTree(pc.TreeHash, w.sub); err != nil {
			return nil, nil, nil, err
		}
	}
	next := w.curDir // the parent's entries, when its sub-tree is this one's
	if parentSub != w.curSub {
		if w.curDir == nil {
			if w.curDir, err = w.h.entries(w.curSub); err != nil {
				return nil, nil, nil, err
			}
		}
		if parentDir, err = w.h.entries(parentSub); err != nil {
			return nil, nil, nil, err
		}
		curDir, next = w.curDir, parentDir
	}
	w.cur, w.curSub, w.curDir = parent, parentSub, next
	return c, curDir, parentDir, nil
}

// MaxDescent bounds the commits Descends walks.
const MaxDescent = 100

// Descends reports whether the commit base is on the first-parent history
// of the tree's commit, at most MaxDescent commits below it, with every
// commit between them in the clone: the branch moved forward from base by
// those commits. It is false for a clone kept one commit deep, whose
// parents are hashes only, and for a local tree. It reads commits only,
// through the tree's own objects (no storage of its own is opened: a
// shallow clone answers at its first missing parent).
func (t *Tree) Descends(base string) bool {
	f, isGit := t.fsys.(*gitFS)
	if !isGit || base == "" {
		return false
	}
	cur := plumbing.NewHash(t.rev)
	for range MaxDescent {
		c, err := f.o.commit(cur)
		if err != nil || len(c.ParentHashes) == 0 {
			return false
		}
		if cur = c.ParentHashes[0]; cur.String() == base {
			return true
		}
	}
	return false
}

// ChangedSince walks the first-parent history of the tree's commit back to
// the commit base, newest first, and returns the top-level folders of the
// sub-tree that any commit on the way changed against its first parent
// (added, removed, or held with another hash), each with the newest
// commit that changed it: for a folder the tree holds, what LastChanged
// gives. A folder changed by one commit and changed back by a later one
// is listed, though the tree and base hold it alike. ok is false when
// base is not among the first limit commits of that history (base not an
// ancestor by first parents, a merge pushed whose first parent is another
// branch, or more commits than limit); changed is then nil. A commit the
// walk needs that is not in the clone gives an error matching
// ErrNoHistory.
func (t *Tree) ChangedSince(base string, limit int) (changed map[string]string, ok bool, err error) {
	f, isGit := t.fsys.(*gitFS)
	if !isGit {
		return nil, false, fmt.Errorf("%w: a local directory has no commits", ErrNoHistory)
	}
	h := newHistory(f.o.path)
	defer h.close()
	changed = map[string]string{}
	w := &firstParents{h: h, sub: t.sub, cur: plumbing.NewHash(t.rev), curSub: f.root}
	for walked := 0; ; walked++ {
		if w.cur.IsZero() {
			return nil, false, nil // past the root: base is not on this history
		}
		if w.cur.String() == base {
			return changed, true, nil
		}
		if walked == limit {
			return nil, false, nil
		}
		c, curDir, parentDir, err := w.step()
		if err != nil {
			return nil, false, err
		}
		for _, names := range [][]string{changedDirs(curDir, parentDir), changedDirs(parentDir, curDir)} {
			for _, n := range names {
				if changed[n] == "" {
					changed[n] = c.Hash.String()
				}
			}
		}
	}
}

// changedDirs returns the names of the folders of a (tree entries in git's
// order) that b lacks or holds with another hash.
func changedDirs(a, b []object.TreeEntry) []string {
	var out []string
	j := 0
	for _, e := range a {
		for j < len(b) && compareEntries(b[j], e) < 0 {
			j++
		}
		if e.Mode != filemode.Dir {
			continue
		}
		if j < len(b) && compareEntries(b[j], e) == 0 && b[j].Hash == e.Hash {
			continue
		}
		out = append(out, e.Name)
	}
	return out
}

// compareEntries orders tree entries as git does: by name, a folder's
// name read with a slash after it.
func compareEntries(a, b object.TreeEntry) int {
	n := min(len(a.Name), len(b.Name))
	if c := strings.Compare(a.Name[:n], b.Name[:n]); c != 0 {
		return c
	}
	ca, cb := entryByte(a, n), entryByte(b, n)
	switch {
	case ca < cb:
		return -1
	case ca > cb:
		return 1
	}
	return 0
}

// entryByte is the byte at i of e's git ordering key (its name, a slash
// after a folder's), 0 past its end.
func entryByte(e object.TreeEntry, i int) int {
	switch {
	case i < len(e.Name):
		return int(e.Name[i])
	case i == len(e.Name) && e.Mode == filemode.Dir:
		return '/'
	}
	return 0
}

// history reads the commits and trees of a clone for a walk back through
// its history, with a storage of its own whose object cache holds the
// trees just read: a pack stores an older tree as a delta of a newer one,
// and without them every tree read would apply its whole delta chain
// again (a 10,000-commit walk took 520 s with the 256 KiB cache of a
// Tree's storage). The storage is dropped after the walk.
type history struct {
	s *filesystem.Storage
}

// historyCache is the object cache of a walk: about a hundred trees of
// 10,000 entries.
const historyCache = 64 * cache.MiByte

func newHistory(clonePath string) *history {
	// Not packsMapped: a walk reads objects from the packs many times
	// over, and that wrapper maps a pack again at every open.
	s := filesystem.NewStorageWithOptions(osfs.New(clonePath), cache.NewObjectLRU(historyCache),
		filesystem.Options{KeepDescriptors: true})
	return &history{s: s}
}

func (h *history) close() { h.s.Close() }

func (h *history) commit(c plumbing.Hash) (*object.Commit, error) {
	cm, err := object.GetCommit(h.s, c)
	if err != nil {
		return nil, fmt.Errorf("%w: read commit %s: %v", ErrNoHistory, c, err)
	}
	return cm, nil
}

// subTree returns the hash of the tree at sub in root, or the zero hash
// when there is none.
func (h *history) subTree(root plumbing.Hash, sub string) (plumbing.Hash, error) {
	if sub == "" {
		return root, nil
	}
	cur := root
	for _, part := range strings.Split(sub, "/") {
		es, err := h.entries(cur)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		i := slices.IndexFunc(es, func(e object.TreeEntry) bool { return e.Name == part && e.Mode == filemode.Dir })
		if i < 0 {
			return plumbing.ZeroHash, nil
		}
		cur = es[i].Hash
	}
	return cur, nil
}

// entries returns the entries of tree t in git's order (the zero hash:
// an empty tree).
func (h *history) entries(t plumbing.Hash) ([]object.TreeEntry, error) {
	if t.IsZero() {
		return nil, nil
	}
	tr, err := object.GetTree(h.s, t)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", t, err)
	}
	return tr.Entries, nil
}

// Commit reads the commit hash from the tree's clone.
func (t *Tree) Commit(hash string) (Commit, error) {
	f, ok := t.fsys.(*gitFS)
	if !ok {
		return Commit{}, fmt.Errorf("%w: a local directory has no commits", ErrNoHistory)
	}
	c, err := f.o.commit(plumbing.NewHash(hash))
	if err != nil {
		return Commit{}, err
	}
	data, err := commitPayload(c)
	if err != nil {
		return Commit{}, err
	}
	return Commit{Hash: hash, When: c.Committer.When, Signature: c.PGPSignature, Payload: data}, nil
}

// commitPayload is c without its signature: the bytes that were signed.
func commitPayload(c *object.Commit) ([]byte, error) {
	payload := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(payload); err != nil {
		return nil, fmt.Errorf("encode commit %s: %w", c.Hash, err)
	}
	r, err := payload.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("encode commit %s: %w", c.Hash, err)
	}
	return data, nil
}

// OpenCheckout returns the tree of dir, a folder of a git work tree, at
// the work tree's HEAD commit (what is committed, not what is on disk),
// and dir's slash-separated path from the work tree's root ("" for the
// root). Its history is the checkout's: a shallow checkout has little.
func OpenCheckout(dir string) (*Tree, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, "", err
	}
	r, err := git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return nil, "", fmt.Errorf("%s is not in a git work tree: %w", dir, err)
	}
	wt, err := r.Worktree()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", dir, err)
	}
	root, err := filepath.EvalSymlinks(wt.Filesystem.Root())
	if err != nil {
		return nil, "", err
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, "", fmt.Errorf("%s is outside the work tree %s", dir, root)
	}
	sub := filepath.ToSlash(rel)
	if sub == "." {
		sub = ""
	}
	head, err := r.Head()
	if err != nil {
		return nil, "", fmt.Errorf("%s: no HEAD commit: %w", root, err)
	}
	fsStore, ok := r.Storer.(*filesystem.Storage)
	if !ok {
		return nil, "", fmt.Errorf("%s: the repository is not stored on disk", root)
	}
	t, err := newGitTree(fsStore.Filesystem().Root(), head.Hash(), sub, nil, nil)
	if err != nil {
		return nil, "", err
	}
	return t, sub, nil
}

// commit reads commit h.
func (o *objects) commit(h plumbing.Hash) (*object.Commit, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, err := object.GetCommit(o.s, h)
	if err != nil {
		return nil, fmt.Errorf("%w: read commit %s: %v", ErrNoHistory, h, err)
	}
	return c, nil
}
