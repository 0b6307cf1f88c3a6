package repo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Defaults for the Git fields left empty.
const (
	DefaultBranch = "main"
	DefaultPath   = "tools"
)

// ErrNoClone is returned by Git.Offline when Dir holds no clone yet.
var ErrNoClone = errors.New("repo: no clone in state dir")

// Layout of Git.Dir: currentLink is a symbolic link naming the clone in
// use; each clone is a bare repository in a directory named clonePrefix
// plus a random suffix. Swapping the link by rename is atomic, so a crash
// never leaves Dir without a whole clone.
const (
	currentLink = "current"
	// maxPacks is how many pack files a clone may gather (about one per
	// fetch that brought changes) before Sync re-clones to compact it.
	maxPacks    = 50
	clonePrefix = "clone-"
	remoteName  = "origin"
)

// Git is a source that serves one branch of a git repository through a
// shallow bare clone kept under Dir.
//
// The first Sync clones (depth 1, one branch, no tags), or opens a clone
// an earlier process left in Dir and fetches into it. Later Syncs fetch the
// branch with a forced refspec and serve exactly the fetched remote head,
// so a force-push or rewritten history never wedges the clone. A fetch asks
// for a thin pack against the clone's head, so a one-file change transfers
// a handful of objects rather than every tree on the changed path; if that
// fails for any reason, Sync fetches again with go-git's own fetch. If fetching
// into the clone fails for any reason other than the network, the
// credentials or the context, Sync clones afresh into a new directory and
// swaps it in; the old clone stays in use until the new one is complete.
// When the server cannot be reached, Sync returns an error and leaves the
// clone as it was, so Offline still serves the last synced head. go-git
// never repacks, so once fetches have left more than 50 pack files Sync
// also re-clones, to keep opening a Tree cheap.
//
// Sync and Offline serialize on a mutex, because go-git repositories are not
// safe for concurrent use; a slow fetch therefore delays Offline. A Git must
// not be copied after first use, and only one Git may use a Dir at a time.
//
// A Tree returned earlier stays readable after later Syncs: fetches only add
// objects, and when Sync re-clones, the replaced clone is kept on disk until
// the next re-clone (or the next process start), so a Tree survives one
// re-clone.
type Git struct {
	// URL is the repository address: https://, http://, ssh:// or
	// scp-style user@host:path. A password in the URL is never logged.
	URL string
	// Branch is the branch to serve; DefaultBranch if empty.
	Branch string
	// Path is the slash-separated sub-tree that trees show, relative to the
	// repository root; DefaultPath if empty, "." for the whole repository.
	Path string
	// Dir is the state directory that holds the clone. It is created if
	// missing and must not be shared with anything else.
	Dir string
	// Auth holds the credentials; the zero value means anonymous access.
	Auth Auth
	// Logger receives clone, fetch and re-clone events; nil discards them.
	Logger *slog.Logger
	// History keeps the branch's whole history in the clone instead of
	// its head commit alone, so that Tree.LastChanged can walk it (to
	// check who signed the commit that last changed a tool). A clone an
	// earlier process kept one commit deep is cloned again.
	History bool

	mu      sync.Mutex
	cur     *clone // the clone Dir/current names; nil until opened
	prev    string // the clone replaced by the last re-clone, kept for old Trees
	last    *Tree  // the tree returned last, handed out again while unchanged
	lastKey treeKey

	maxPacks  int        // tests lower the compaction threshold; 0 means maxPacks
	lastFetch fetchStats // what the last thin fetch received, for tests
	// fetched are the objects the current thin fetch received, resolved,
	// for the Tree made of them to read from memory; set only during
	// fetchLocked.
	fetched map[plumbing.Hash]plumbing.EncodedObject
}

// treeKey identifies the content of a Tree of a Git.
type treeKey struct {
	clone string
	head  plumbing.Hash
	path  string
}

// clone is an opened bare clone.
type clone struct {
	path string
	repo *git.Repository
}

// String describes the source for logs and status pages: the URL with any
// embedded password hidden, and the branch and path.
func (g *Git) String() string {
	return fmt.Sprintf("git %s branch %s path %s", redactURL(g.URL), cmp.Or(g.Branch, DefaultBranch), cmp.Or(g.Path, DefaultPath))
}

// gitSettings is a Git's configuration with defaults filled in.
type gitSettings struct {
	url, branch, path, dir string
	log                    *slog.Logger
	secrets                []string // never to appear in errors or logs
}

func (g *Git) settings() (gitSettings, error) {
	s := gitSettings{
		url:    g.URL,
		branch: cmp.Or(g.Branch, DefaultBranch),
		path:   strings.Trim(cmp.Or(g.Path, DefaultPath), "/"),
		dir:    g.Dir,
		log:    g.Logger,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.path == "." {
		s.path = ""
	}
	switch {
	case s.url == "":
		return s, errors.New("repo: Git.URL is empty")
	case s.dir == "":
		return s, errors.New("repo: Git.Dir is empty")
	case s.path != "" && !fs.ValidPath(s.path):
		return s, fmt.Errorf("repo: Git.Path %q is not a valid slash-separated relative path", g.Path)
	case plumbing.NewBranchReferenceName(s.branch).Validate() != nil:
		return s, fmt.Errorf("repo: Git.Branch %q is not a valid branch name", s.branch)
	}
	return s, nil
}

// Sync brings the clone up to date with the branch on the server and
// returns the tree of Path at its head; when nothing changed since the last
// call it returns the same *Tree. On error the clone and every Tree
// returned before are left as they were, and the error holds no secret.
// The context bounds the network work (clone and fetch) only.
func (g *Git) Sync(ctx context.Context) (_ *Tree, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()

	s, err := g.settings()
	if err != nil {
		return nil, err
	}
	auth, secrets, err := g.Auth.method()
	s.secrets = append(secrets, urlSecret(s.url))
	defer func() { err = redact(err, s.secrets...) }()
	if err != nil {
		return nil, err
	}

	if g.cur == nil {
		g.cur, err = g.openLocked(s)
		if err != nil {
			s.log.Warn("git clone in state dir unusable, cloning again",
				"dir", s.dir, "err", redact(err, s.secrets...))
			g.cur = nil
		}
	}
	if g.cur != nil && g.History {
		if sh, err := g.cur.repo.Storer.Shallow(); err != nil || len(sh) > 0 {
			s.log.Info("git clone in state dir is shallow; cloning again with the whole history", "dir", s.dir)
			g.cur = nil
		}
	}
	if g.cur == nil {
		return g.recloneLocked(ctx, s, auth)
	}

	t, err := g.fetchLocked(ctx, s, auth)
	if err == nil {
		return g.compactLocked(ctx, s, auth, t), nil
	}
	if !needsReclone(ctx, err) {
		return nil, err
	}
	s.log.Warn("git fetch could not update clone, cloning again",
		"url", redactURL(s.url), "branch", s.branch, "err", redact(err, s.secrets...))
	t, rerr := g.recloneLocked(ctx, s, auth)
	if rerr != nil {
		return nil, fmt.Errorf("%w; then %w", err, rerr)
	}
	return t, nil
}

// Offline returns the tree of Path at the head of the last successful Sync,
// without using the network; in a new process it opens the clone an earlier
// one left in Dir. It returns an error matching ErrNoClone if there is none.
func (g *Git) Offline() (*Tree, error) {
	g.mu.Lock()
	defer g.mu.Unlock()

	s, err := g.settings()
	if err != nil {
		return nil, err
	}
	if g.cur == nil {
		c, err := g.openLocked(s)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, fmt.Errorf("%w %s", ErrNoClone, s.dir)
		}
		g.cur = c
	}
	ref, err := g.cur.repo.Reference(plumbing.NewBranchReferenceName(s.branch), true)
	if err != nil {
		return nil, fmt.Errorf("repo: no synced head for branch %s in %s: %w", s.branch, s.dir, err)
	}
	return g.treeLocked(g.cur, ref.Hash(), s.path)
}

// treeLocked returns the tree of path at head in c, reusing the last one
// if it matches, so that a Sync without changes keeps its decoded tree
// objects and open pack files.
func (g *Git) treeLocked(c *clone, head plumbing.Hash, path string) (*Tree, error) {
	key := treeKey{clone: c.path, head: head, path: path}
	if g.last != nil && g.lastKey == key {
		return g.last, nil
	}
	t, err := newGitTree(c.path, head, path, g.last, g.fetched)
	if err != nil {
		return nil, err
	}
	g.last, g.lastKey = t, key
	return t, nil
}

// openLocked opens the clone Dir/current names, or returns nil and no error
// if there is none. It removes clones and temporary files that earlier
// processes left behind; no Tree of this process can refer to them yet.
func (g *Git) openLocked(s gitSettings) (*clone, error) {
	target, err := os.Readlink(filepath.Join(s.dir, currentLink))
	if errors.Is(err, fs.ErrNotExist) {
		removeStale(s.dir, "")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("repo: read current clone link: %w", err)
	}
	if filepath.Base(target) != target || !strings.HasPrefix(target, clonePrefix) {
		return nil, fmt.Errorf("repo: current clone link points to %q, not a clone in %s", target, s.dir)
	}
	removeStale(s.dir, target)
	// Open the resolved directory, not the link, so that storage opened
	// here never follows the link to a later clone.
	path := filepath.Join(s.dir, target)
	r, err := git.Open(filesystem.NewStorage(osfs.New(path), cache.NewObjectLRUDefault()), nil)
	if err != nil {
		return nil, fmt.Errorf("repo: open clone %s: %w", path, err)
	}
	return &clone{path: path, repo: r}, nil
}

// removeStale deletes everything in dir that looks like an abandoned clone
// or link, except keep. Failures are ignored: leftovers cost only space.
func removeStale(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if name == keep {
			continue
		}
		if strings.HasPrefix(name, clonePrefix) || name == currentLink+".tmp" {
			os.RemoveAll(filepath.Join(dir, name))
		}
	}
}

// fetchLocked fetches the branch into the current clone and points the
// local branch at the fetched head. It tries a thin-pack fetch first and
// falls back to go-git's fetch on any error but the context's.
func (g *Git) fetchLocked(ctx context.Context, s gitSettings, auth transport.AuthMethod) (*Tree, error) {
	st, fetched, err := g.thinFetchLocked(ctx, s, auth)
	g.lastFetch = st
	if err == nil {
		head, err := pointLocal(g.cur, s.branch)
		if err == nil {
			g.fetched = fetched
			t, err := g.treeLocked(g.cur, head, s.path)
			g.fetched = nil
			if err == nil {
				s.log.Debug("git fetch", "url", redactURL(s.url), "branch", s.branch, "rev", t.Rev(),
					"objects", st.objects, "bytes", st.bytes)
				return t, nil
			}
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("fetch %s branch %s: %w", redactURL(s.url), s.branch, ctx.Err())
	}
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		err = fmt.Errorf("%w: %s (the repository has no branch at all)", ErrNoBranch, s.branch)
	}
	if errors.Is(err, ErrNoBranch) {
		// The server answered: the branch is not there. Another fetch, or
		// a re-clone, would only ask again.
		return nil, fmt.Errorf("fetch %s: %w", redactURL(s.url), err)
	}
	s.log.Debug("git thin fetch failed, fetching with go-git", "err", redact(err, s.secrets...))
	return g.plainFetchLocked(ctx, s, auth)
}

// plainFetchLocked is fetchLocked with go-git's own fetch, which never
// asks for a thin pack.
func (g *Git) plainFetchLocked(ctx context.Context, s gitSettings, auth transport.AuthMethod) (*Tree, error) {
	remoteRef := plumbing.NewRemoteReferenceName(remoteName, s.branch)
	spec := config.RefSpec(fmt.Sprintf("+%s:%s", plumbing.NewBranchReferenceName(s.branch), remoteRef))
	err := g.cur.repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: remoteName,
		RemoteURL:  s.url,
		RefSpecs:   []config.RefSpec{spec},
		Depth:      g.depth(),
		Auth:       auth,
		Tags:       git.NoTags,
		Force:      true,
	})
	var noRef git.NoMatchingRefSpecError
	if errors.As(err, &noRef) {
		return nil, fmt.Errorf("fetch %s: %w: %s", redactURL(s.url), ErrNoBranch, s.branch)
	}
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil, fmt.Errorf("fetch %s branch %s: %w", redactURL(s.url), s.branch, err)
	}
	head, err := pointLocal(g.cur, s.branch)
	if err != nil {
		return nil, err
	}
	t, err := g.treeLocked(g.cur, head, s.path)
	if err != nil {
		return nil, err
	}
	s.log.Debug("git fetch", "url", redactURL(s.url), "branch", s.branch, "rev", t.Rev())
	return t, nil
}

// compactLocked re-clones when fetches have left more than maxPacks pack
// files: go-git never repacks, and every new Tree loads each pack's index.
// It returns the new clone's tree, or t if re-cloning fails (the fetched
// clone is still good).
func (g *Git) compactLocked(ctx context.Context, s gitSettings, auth transport.AuthMethod, t *Tree) *Tree {
	limit := cmp.Or(g.maxPacks, maxPacks)
	packs, _ := filepath.Glob(filepath.Join(g.cur.path, "objects", "pack", "*.pack"))
	if len(packs) <= limit {
		return t
	}
	s.log.Info("git clone has many packs, cloning again to compact", "packs", len(packs), "limit", limit)
	nt, err := g.recloneLocked(ctx, s, auth)
	if err != nil {
		s.log.Warn("compacting git clone", "err", redact(err, s.secrets...))
		return t
	}
	return nt
}

// recloneLocked clones the branch into a new directory, checks it, and
// swaps it in as the current clone.
func (g *Git) recloneLocked(ctx context.Context, s gitSettings, auth transport.AuthMethod) (*Tree, error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("repo: create state dir: %w", err)
	}
	tmp, err := os.MkdirTemp(s.dir, clonePrefix)
	if err != nil {
		return nil, fmt.Errorf("repo: create clone dir: %w", err)
	}
	swapped := false
	defer func() {
		if !swapped {
			os.RemoveAll(tmp)
		}
	}()
	r, err := git.PlainCloneContext(ctx, tmp, true, &git.CloneOptions{
		URL:           s.url,
		Auth:          auth,
		RemoteName:    remoteName,
		ReferenceName: plumbing.NewBranchReferenceName(s.branch),
		SingleBranch:  true,
		Depth:         g.depth(),
		Tags:          git.NoTags,
		NoCheckout:    true,
	})
	if err != nil {
		return nil, fmt.Errorf("clone %s branch %s: %w", redactURL(s.url), s.branch, err)
	}
	c := &clone{path: tmp, repo: r}
	head, err := pointLocal(c, s.branch)
	if err != nil {
		return nil, err
	}
	if err := g.swapLocked(s, c); err != nil {
		return nil, err
	}
	swapped = true
	s.log.Info("git clone", "url", redactURL(s.url), "branch", s.branch, "rev", head.String())
	// A missing sub-path is reported, but the clone is good and stays.
	return g.treeLocked(c, head, s.path)
}

// swapLocked makes c the current clone, on disk and in g.
func (g *Git) swapLocked(s gitSettings, c *clone) error {
	link := filepath.Join(s.dir, currentLink)
	tmp := link + ".tmp"
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(c.path), tmp); err != nil {
		return fmt.Errorf("repo: swap in clone: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("repo: swap in clone: %w", err)
	}
	if g.prev != "" {
		os.RemoveAll(g.prev)
	}
	g.prev = ""
	if g.cur != nil {
		g.prev = g.cur.path
	}
	g.cur = c
	return nil
}

// pointLocal checks that the fetched remote head's commit and root tree are
// in the clone, then points the local branch and HEAD at it: the bare
// clone's equivalent of a hard reset. Offline serves the local branch, so
// it only ever sees heads that passed this check.
func pointLocal(c *clone, branch string) (plumbing.Hash, error) {
	ref, err := c.repo.Reference(plumbing.NewRemoteReferenceName(remoteName, branch), true)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("resolve fetched head of %s: %w", branch, err)
	}
	head := ref.Hash()
	commit, err := object.GetCommit(c.repo.Storer, head)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read fetched commit %s: %w", head, err)
	}
	if _, err := object.GetTree(c.repo.Storer, commit.TreeHash); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read tree of fetched commit %s: %w", head, err)
	}
	local := plumbing.NewBranchReferenceName(branch)
	if err := c.repo.Storer.SetReference(plumbing.NewHashReference(local, head)); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("point %s at %s: %w", local, head, err)
	}
	if err := c.repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, local)); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("point HEAD at %s: %w", local, err)
	}
	return head, nil
}

// ErrNoBranch is the error of a Sync whose server has no branch of that
// name (deleted, or misspelt): the clone is fine, and re-cloning cannot
// help.
var ErrNoBranch = errors.New("repo: the remote has no such branch")

// depth is how many commits a clone or fetch asks for: 0 (all) with
// History, else 1.
func (g *Git) depth() int {
	if g.History {
		return 0
	}
	return 1
}

// needsReclone reports whether err, from fetching into the clone and
// reading the result, means the clone itself is unusable (objects missing
// after a shallow fetch across a rewrite, a damaged store) rather than the
// server, the network, the credentials, the caller's context or the
// commit's content being the problem. Unknown errors count as a broken
// clone: re-cloning into a side directory is safe even when it fails.
func needsReclone(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrRepositoryNotFound),
		errors.Is(err, transport.ErrEmptyRemoteRepository),
		errors.Is(err, transport.ErrInvalidAuthMethod),
		errors.Is(err, errNoPath),
		errors.Is(err, ErrNoBranch),
		errors.As(err, &netErr):
		return false
	}
	return true
}
