package repo

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Change is one commit that changed a folder, as a history page shows
// it.
type Change struct {
	Hash string
	// Parent is the commit's first parent ("" for a root commit): what
	// the commit changed the folder from.
	Parent        string
	Author        string
	AuthorEmail   string
	When          time.Time // the author's time
	Message       string
	CommitterWhen time.Time
	// Signature is the commit's gpgsig header ("" when unsigned); Payload
	// what was signed, for a signature check.
	Signature string
	Payload   []byte
}

// maxLogWalk bounds how many commits FolderLog looks at: a page view must
// not walk a huge history.
const maxLogWalk = 5000

// FolderLog returns the commits of the first-parent history of the
// tree's commit that changed the folder name (a top-level folder of the
// sub-tree, e.g. a tool's), newest first, at most limit. complete is
// false when the walk ended before the history did: at limit, at
// maxLogWalk commits, or at a commit whose parent is not in the clone (a
// clone kept one commit deep); the commits listed are then the newest
// ones. A local tree has no commits: the error matches ErrNoHistory.
func (t *Tree) FolderLog(name string, limit int) (changes []Change, complete bool, err error) {
	f, ok := t.fsys.(*gitFS)
	if !ok {
		return nil, false, fmt.Errorf("%w: a local directory has no commits", ErrNoHistory)
	}
	if name == "" || strings.Contains(name, "/") {
		return nil, false, fmt.Errorf("repo: folder %q: want one folder name", name)
	}
	h := newHistory(f.o.path)
	defer h.close()
	cur := plumbing.NewHash(t.rev)
	c, err := h.commit(cur)
	if err != nil {
		return nil, false, err
	}
	curDir, err := h.folder(c.TreeHash, t.sub, name)
	if err != nil {
		return nil, false, err
	}
	for walked := 0; ; walked++ {
		if len(changes) >= limit || walked >= maxLogWalk {
			return changes, false, nil
		}
		var parent *object.Commit
		var parentDir plumbing.Hash
		if len(c.ParentHashes) > 0 {
			if parent, err = h.commit(c.ParentHashes[0]); err != nil {
				return changes, false, nil // a shallow clone: history ends here
			}
			if parentDir, err = h.folder(parent.TreeHash, t.sub, name); err != nil {
				return nil, false, err
			}
		}
		if parentDir != curDir {
			ch, err := change(c)
			if err != nil {
				return nil, false, err
			}
			changes = append(changes, ch)
		}
		if parent == nil {
			return changes, true, nil
		}
		c, curDir = parent, parentDir
	}
}

func change(c *object.Commit) (Change, error) {
	payload, err := commitPayload(c)
	if err != nil {
		return Change{}, err
	}
	ch := Change{Hash: c.Hash.String(), Author: c.Author.Name, AuthorEmail: c.Author.Email, When: c.Author.When,
		Message: strings.TrimSpace(c.Message), CommitterWhen: c.Committer.When, Signature: c.PGPSignature, Payload: payload}
	if len(c.ParentHashes) > 0 {
		ch.Parent = c.ParentHashes[0].String()
	}
	return ch, nil
}

// folder returns the hash of the tree sub/name in the commit tree root,
// the zero hash when there is none.
func (h *history) folder(root plumbing.Hash, sub, name string) (plumbing.Hash, error) {
	p := name
	if sub != "" {
		p = sub + "/" + name
	}
	return h.subTree(root, p)
}

var commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// FolderDiff returns the unified diff (git's format, by go-git) of the
// folder name between commits from and to (full hashes; from "" for an
// empty folder, as before a root commit). Paths in the diff are relative
// to the folder. Both commits must be in the clone.
func (t *Tree) FolderDiff(ctx context.Context, name, from, to string) (string, error) {
	f, ok := t.fsys.(*gitFS)
	if !ok {
		return "", fmt.Errorf("%w: a local directory has no commits", ErrNoHistory)
	}
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("repo: folder %q: want one folder name", name)
	}
	h := newHistory(f.o.path)
	defer h.close()
	tree := func(rev string) (*object.Tree, error) {
		if rev == "" {
			return nil, nil
		}
		if !commitHash.MatchString(rev) {
			return nil, fmt.Errorf("repo: revision %q: want a full commit hash (40 hex digits)", rev)
		}
		c, err := h.commit(plumbing.NewHash(rev))
		if err != nil {
			return nil, err
		}
		th, err := h.folder(c.TreeHash, t.sub, name)
		if err != nil || th.IsZero() {
			return nil, err
		}
		return object.GetTree(h.s, th)
	}
	a, err := tree(from)
	if err != nil {
		return "", err
	}
	b, err := tree(to)
	if err != nil {
		return "", err
	}
	changes, err := object.DiffTreeWithOptions(ctx, a, b, object.DefaultDiffTreeOptions)
	if err != nil {
		return "", fmt.Errorf("repo: diff %s..%s: %w", from, to, err)
	}
	p, err := changes.PatchContext(ctx)
	if err != nil {
		return "", fmt.Errorf("repo: diff %s..%s: %w", from, to, err)
	}
	return p.String(), nil
}
