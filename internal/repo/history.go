package repo

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
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
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	found = make(map[string]string, len(names))
	h := plumbing.NewHash(t.rev)
	cur := f.root
	var curDir map[string]plumbing.Hash // cur's entries, decoded when needed
	for len(found) < len(want) {
		if h.String() == stop {
			return found, true, nil
		}
		c, err := f.o.commit(h)
		if err != nil {
			return nil, false, err
		}
		var parent, parentSub plumbing.Hash
		if len(c.ParentHashes) > 0 {
			parent = c.ParentHashes[0]
			pc, err := f.o.commit(parent)
			if err != nil {
				return nil, false, fmt.Errorf("%w: parent %s of %s is not in the clone (a shallow clone?): %v", ErrNoHistory, parent, h, err)
			}
			if parentSub, err = f.o.subTree(pc.TreeHash, t.sub); err != nil {
				return nil, false, err
			}
		}
		var parentDir map[string]plumbing.Hash
		if parentSub != cur {
			if curDir == nil {
				if curDir, err = f.o.entries(cur); err != nil {
					return nil, false, err
				}
			}
			if parentDir, err = f.o.entries(parentSub); err != nil {
				return nil, false, err
			}
			for key, eh := range curDir {
				name, dir := strings.CutSuffix(key, "/")
				if dir && want[name] && found[name] == "" && parentDir[key] != eh {
					found[name] = h.String()
				}
			}
		} else {
			parentDir = curDir
		}
		if parent.IsZero() {
			break
		}
		h, cur, curDir = parent, parentSub, parentDir
	}
	return found, false, nil
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
	payload := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(payload); err != nil {
		return Commit{}, fmt.Errorf("encode commit %s: %w", hash, err)
	}
	r, err := payload.Reader()
	if err != nil {
		return Commit{}, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return Commit{}, fmt.Errorf("encode commit %s: %w", hash, err)
	}
	return Commit{Hash: hash, When: c.Committer.When, Signature: c.PGPSignature, Payload: data}, nil
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
	t, err := newGitTree(fsStore.Filesystem().Root(), head.Hash(), sub, nil)
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

// subTree returns the hash of the tree at sub in root, or the zero hash
// when there is none. Tree objects on the way are decoded without keeping
// them: the history holds far more than one Tree's.
func (o *objects) subTree(root plumbing.Hash, sub string) (plumbing.Hash, error) {
	if sub == "" {
		return root, nil
	}
	cur := root
	for _, part := range strings.Split(sub, "/") {
		d, err := o.entries(cur)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		h, ok := d[part+"/"]
		if !ok {
			return plumbing.ZeroHash, nil
		}
		cur = h
	}
	return cur, nil
}

// entries decodes tree h (the zero hash: an empty tree) into its entries'
// hashes by name; folders' names end in a slash, so a folder replaced by
// a file of its name counts as a change.
func (o *objects) entries(h plumbing.Hash) (map[string]plumbing.Hash, error) {
	if h.IsZero() {
		return nil, nil
	}
	o.mu.Lock()
	t, err := object.GetTree(o.s, h)
	o.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	m := make(map[string]plumbing.Hash, len(t.Entries))
	for _, e := range t.Entries {
		name := e.Name
		if e.Mode == filemode.Dir {
			name += "/"
		}
		m[name] = e.Hash
	}
	return m, nil
}
