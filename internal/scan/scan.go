// Package scan turns a tree of tool folders at one revision into a new
// catalog.Snapshot: it walks <tree>/<name>/TOOL.hdlp, parses what changed
// (through the cache, keyed by git blob hash), carries the last good
// definition of a broken file over from the previous snapshot (stale), and
// reports every problem without letting one file stop the others.
//
// Functions here are safe for concurrent use when given distinct inputs;
// a cache may be shared. Imports: hldp, cache, catalog. Imported by reload
// and cmd/toolagent.
package scan

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"go.yaml.in/yaml/v3"

	"github.com/toolagent/toolagent/internal/cache"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/hldp"
)

// Tree is a tools tree at one revision. Sources (internal/repo) satisfy it
// without importing scan; it is built from standard types only. Build
// calls its methods, and reads its FS, from several goroutines at once.
type Tree interface {
	// FS is a read-only view of the tools tree: "<name>/TOOL.hdlp".
	FS() fs.FS
	// Rev names the revision (a commit hash, or a content hash).
	Rev() string
	// BlobHash is the git blob hash of the file at path in FS.
	BlobHash(path string) (string, error)
}

// treeHasher is a Tree that names its content, as internal/repo's git
// trees do with the sub-tree's git tree hash ("" when it cannot).
//
// Build records, in the cache, the listing of such a tree: each definition
// file's path and blob hash. A later Build of a tree with the same hash
// takes the blob hashes from that listing instead of asking the tree, so a
// restart at an unchanged commit reads the top folder only, and no tool
// folder and no file; with every outcome in the cache it parses nothing.
// A tree hash fixes every path and blob below it, so the listing is exact
// for any commit with that tree. Without one (another tree, none saved, a
// damaged cache file) Build asks the tree, as it always does for a path
// the listing lacks (a folder without a definition file).
type treeHasher interface {
	TreeHash() string
}

// Checker tells whether a parsed tool can run here: its executor is
// available and healthy, and its prerequisites (hldp.Requires) are met.
// It returns catalog.Enabled, or another status with the reason. Build
// calls it once per callable entry, one entry at a time.
type Checker func(t *hldp.Tool) (catalog.Status, string)

// Options configure Build.
type Options struct {
	// Prefix is put before paths in messages, e.g. "tools/" (the default).
	Prefix string
	// Check narrows parsed tools by executor availability and
	// prerequisites (nil: all enabled).
	Check Checker
	// Catalog is passed to catalog.New.
	Catalog catalog.Options
}

// Report says what a Build did.
type Report struct {
	Parsed   int     // files parsed (cache misses)
	Reused   int     // files whose outcome came from the previous snapshot or the cache
	Problems []error // one per problem, each naming its file
	// FromListing says the blob hashes came from the cache's listing of
	// this tree (see treeHasher): no tool folder of the tree was read.
	FromListing bool
}

// ErrSymlinkEscape marks a path that is a symlink leaving the tools tree.
var ErrSymlinkEscape = errors.New("symlink leaves the tools tree")

// ErrSymlinkLoop marks a path whose symlinks point at each other.
var ErrSymlinkLoop = errors.New("symlink loop")

// ErrSymlinkDangling marks a symlink to something that does not exist.
var ErrSymlinkDangling = errors.New("symlink to nothing")

// symlinkErr says what is wrong with a symlink that cannot be followed:
// a loop, a target that does not exist, or (what os.Root refuses) a
// target outside the tools tree.
func symlinkErr(err error) error {
	switch {
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%w (refused: %v)", ErrSymlinkLoop, unwrapPathErr(err))
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w (%v)", ErrSymlinkDangling, unwrapPathErr(err))
	}
	return fmt.Errorf("%w (refused: %v)", ErrSymlinkEscape, unwrapPathErr(err))
}

// Build scans t into a new snapshot. prev (may be nil) supplies the last
// good definitions of files that no longer parse, and parse results for
// unchanged blobs; c (may be nil) memoises parse outcomes across builds.
// The error is for a tree that cannot be read at all; then no snapshot is
// returned and the caller keeps serving the one it has.
//
// The tool folders are scanned (hashed, looked up, read and parsed) on up
// to GOMAXPROCS goroutines; the snapshot and the report are the same as
// scanning them one by one, in the tree's order.
func Build(prev *catalog.Snapshot, t Tree, c *cache.Cache, opts Options) (*catalog.Snapshot, Report, error) {
	if opts.Prefix == "" {
		opts.Prefix = "tools/"
	}
	var rep Report
	fsys := t.FS()
	dirents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, rep, fmt.Errorf("scan: read tools tree at %s: %w", t.Rev(), err)
	}
	rev := t.Rev()
	var treeHash string
	if th, ok := t.(treeHasher); ok {
		treeHash = th.TreeHash()
	}
	blobHash := t.BlobHash
	if c != nil {
		if blobs, ok := c.Listing(treeHash); ok {
			rep.FromListing = true
			blobHash = func(p string) (string, error) {
				if b, ok := blobs[p]; ok {
					return b, nil
				}
				return t.BlobHash(p)
			}
		}
	}
	carry := carries(t, prev, c, rev)
	// One slot per folder, in the tree's order: folders are scanned in
	// parallel, and their results taken in this order, so the snapshot
	// and the report do not depend on the scheduling.
	var slots []folder
	for _, d := range dirents {
		name := d.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		isDir := d.IsDir()
		if d.Type()&fs.ModeSymlink != 0 {
			fi, err := fs.Stat(fsys, name)
			if err != nil {
				err = fmt.Errorf("%s%s: %w", opts.Prefix, name, symlinkErr(err))
				e := catalog.Entry{Name: name, File: name + "/" + hldp.FileName, Status: catalog.Failed, Reason: err.Error(), LoadErr: err}
				slots = append(slots, folder{done: true, res: folderResult{e: e, problem: err}})
				continue
			}
			isDir = fi.IsDir()
		}
		if !isDir {
			continue // README.md and other files beside the tool folders
		}
		slots = append(slots, folder{name: name})
	}
	parallel(len(slots), func(i int) {
		if !slots[i].done {
			slots[i].res = scanOne(prev, t, blobHash, c, opts, slots[i].name, rev, carry)
		}
	})
	seen := make(map[cache.Key]bool, len(slots))
	entries := make([]catalog.Entry, 0, len(slots))
	declared := map[string][]string{} // declared tool name -> folders
	for _, f := range slots {
		r := f.res
		if r.parsed {
			rep.Parsed++
		}
		if r.reused {
			rep.Reused++
		}
		if r.problem != nil {
			rep.Problems = append(rep.Problems, r.problem)
		}
		if r.key != (cache.Key{}) {
			seen[r.key] = true
		}
		if r.decl != "" {
			declared[r.decl] = append(declared[r.decl], f.name)
		}
		if r.e.Name != "" {
			entries = append(entries, r.e)
		}
	}
	// Two folders declaring one name: report every file involved.
	for decl, folders := range declared {
		if len(folders) < 2 {
			continue
		}
		slices.Sort(folders)
		var files []string
		for _, f := range folders {
			files = append(files, opts.Prefix+f+"/"+hldp.FileName)
		}
		for _, f := range files {
			rep.Problems = append(rep.Problems, fmt.Errorf("%s: duplicate tool name %q (declared by %s); tool names must be unique", f, decl, strings.Join(files, ", ")))
		}
	}
	if opts.Check != nil {
		for i := range entries {
			e := &entries[i]
			if e.Tool == nil || !e.Status.Callable() {
				continue
			}
			st, reason := opts.Check(e.Tool)
			if st != catalog.Enabled {
				e.Status, e.Reason = st, reason
			}
		}
	}
	if c != nil {
		// The definition each entry serves (a stale one's last good
		// version) outlives this build in the cache, for a restart.
		good := make(map[string]cache.Served, len(entries))
		for _, e := range entries {
			if e.Tool != nil && e.File != "" && e.Blob != "" {
				good[e.File] = cache.Served{Blob: e.Blob, Rev: e.Rev}
			}
		}
		c.SetLastGood(good)
		c.Retain(seen)
		c.SetListing(treeHash, seen)
		if pt, ok := t.(interface{ Parents() ([]string, bool) }); ok {
			if _, isGit := pt.Parents(); isGit {
				c.SetHead(rev)
			}
		}
	}
	co := opts.Catalog
	if co.Prev == nil {
		co.Prev = prev
	}
	return catalog.New(rev, entries, co), rep, nil
}

// folder is one tool folder of a Build: its name, and what scanning it
// gave (done: known before scanning, a symlink that cannot be followed).
type folder struct {
	name string
	done bool
	res  folderResult
}

// folderResult is what scanning one folder gave: the entry (Name empty
// for none), the cache key used, the tool name the file declares, a
// problem, and whether the definition was parsed or reused.
type folderResult struct {
	e       catalog.Entry
	key     cache.Key
	decl    string
	problem error
	parsed  bool
	reused  bool
}

// parallel calls f(0) … f(n-1) on up to GOMAXPROCS goroutines and returns
// when all have returned. Parsing is CPU-bound, so more goroutines than
// processors would only add switching.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		})
	}
	wg.Wait()
}

// scanOne scans the folder name, asking blobHash (t's, or the cache's
// listing of t) for its definition's blob hash. Build calls it for
// several folders at once.
func scanOne(prev *catalog.Snapshot, t Tree, blobHash func(string) (string, error), c *cache.Cache, opts Options, name, rev string, carry bool) folderResult {
	fsys := t.FS()
	rel := name + "/" + hldp.FileName
	display := opts.Prefix + rel
	e := catalog.Entry{Name: name, File: rel}
	blob, err := blobHash(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return folderResult{problem: missingFile(fsys, name, display)}
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", display, escapeErr(fsys, rel, err))
		return folderResult{e: failOrStale(prev, c, e, err), problem: err}
	}
	key := cache.Key{Path: rel, Blob: blob}
	e.Blob = blob

	// Unchanged since the previous snapshot: keep its definition and the
	// revision it came from.
	if p, ok := lookupPrev(prev, name); ok && p.Blob == blob && p.LoadErr == nil && p.Tool != nil {
		e.Tool, e.Rev, e.Status = p.Tool, cited(carry, p.Rev, rev), catalog.Enabled
		return folderResult{e: e, key: key, decl: p.Tool.Name, reused: true}
	}
	var out cache.Outcome
	var cached bool
	if c != nil {
		out, cached = c.Get(key)
	}
	var declName string
	if !cached {
		data, err := readLimited(fsys, rel)
		if err != nil {
			err = fmt.Errorf("%s: %w", display, escapeErr(fsys, rel, err))
			return folderResult{e: failOrStale(prev, c, e, err), problem: err}
		}
		// A local file can change between the tree's hashing and this
		// read: key the outcome by the bytes parsed, so the cache never
		// pairs a hash with another content's tool. (A file over the limit
		// was read in part; it fails to parse whatever it holds.)
		if len(data) <= hldp.MaxFileSize {
			if got := BlobHash(data); got != blob {
				key.Blob, e.Blob = got, got
			}
		}
		tool, perr := hldp.Parse(display, data)
		out = cache.Outcome{Tool: tool, Err: perr, Rev: rev}
		if perr != nil {
			declName = declaredName(data)
		}
		if c != nil {
			c.Put(key, out)
		}
	}
	res := folderResult{key: key, decl: declName, parsed: !cached, reused: cached}
	if out.Err != nil {
		res.e, res.problem = failOrStale(prev, c, e, out.Err), out.Err
		return res
	}
	// A cached outcome keeps the revision its bytes were first parsed at,
	// so provenance survives a restart (prev is nil then).
	// Provenance across a restart (no prev): what the last build cited for
	// these very bytes, else the revision they were first parsed at.
	was := cmp.Or(out.Rev, rev)
	if c != nil && prev == nil {
		if v, _, ok := c.LastGood(rel); ok && v.Blob == blob && v.Rev != "" {
			was = v.Rev
		}
	}
	e.Tool, e.Rev, e.Status = out.Tool, cited(carry, was, rev), catalog.Enabled
	res.e, res.decl = e, out.Tool.Name
	return res
}

// cited is the revision an unchanged definition cites: the one it was
// first served at (was) while the branch only moved forward (carry), else
// the head. See Build.
func cited(carry bool, was, head string) string {
	if carry {
		return was
	}
	return head
}

// carries reports whether the revisions definitions cite may carry over
// to the build of t (see Build): always for trees that are not git
// commits; for a git commit, when it is the previous build's head or that
// head's child.
func carries(t Tree, prev *catalog.Snapshot, c *cache.Cache, rev string) bool {
	pt, ok := t.(interface{ Parents() ([]string, bool) })
	if !ok {
		return true
	}
	parents, isGit := pt.Parents()
	if !isGit {
		return true
	}
	last := ""
	switch {
	case prev != nil:
		last = prev.Rev()
	case c != nil:
		last = c.Head()
	}
	return last != "" && (last == rev || slices.Contains(parents, last))
}

func lookupPrev(prev *catalog.Snapshot, name string) (catalog.Entry, bool) {
	if prev == nil {
		return catalog.Entry{}, false
	}
	return prev.Lookup(name)
}

// failOrStale marks e as not loading because of err: Stale with the last
// good definition when prev has one, or, after a restart (no prev), when
// the cache recorded one; Failed otherwise.
func failOrStale(prev *catalog.Snapshot, c *cache.Cache, e catalog.Entry, err error) catalog.Entry {
	e.LoadErr = err
	p, ok := lookupPrev(prev, e.Name)
	if (!ok || p.Tool == nil) && c != nil {
		if v, o, found := c.LastGood(e.File); found {
			p, ok = catalog.Entry{Tool: o.Tool, Rev: v.Rev, Blob: v.Blob}, true
		}
	}
	if ok && p.Tool != nil {
		e.Tool, e.Rev, e.Blob = p.Tool, p.Rev, p.Blob
		e.Status = catalog.Stale
		e.Reason = fmt.Sprintf("the current %s does not load; serving the last good definition from revision %s", hldp.FileName, p.Rev)
		return e
	}
	e.Status = catalog.Failed
	e.Reason = firstLine(err.Error())
	return e
}

func missingFile(fsys fs.FS, name, display string) error {
	ents, _ := fs.ReadDir(fsys, name)
	for _, d := range ents {
		if strings.EqualFold(d.Name(), hldp.FileName) || strings.EqualFold(path.Ext(d.Name()), path.Ext(hldp.FileName)) {
			return fmt.Errorf("%s: no %s in folder %s (found %q: the file name is exactly %s)", display, hldp.FileName, name, d.Name(), hldp.FileName)
		}
	}
	return fmt.Errorf("%s: folder %s has no %s; it is not a tool", display, name, hldp.FileName)
}

// readLimited reads at most hldp.MaxFileSize+1 bytes, so a huge file is
// reported by Parse without being loaded whole.
func readLimited(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, hldp.MaxFileSize+1))
}

// escapeErr turns an open error caused by a symlink into ErrSymlinkEscape,
// ErrSymlinkLoop or ErrSymlinkDangling, so the message says what happened.
func escapeErr(fsys fs.FS, rel string, err error) error {
	if errors.Is(err, ErrSymlinkEscape) || errors.Is(err, ErrSymlinkLoop) || errors.Is(err, ErrSymlinkDangling) {
		return err
	}
	if fi, lerr := fs.Lstat(fsys, rel); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return symlinkErr(err)
	}
	if strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%w (refused: %v)", ErrSymlinkEscape, unwrapPathErr(err))
	}
	return err
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// declaredName peeks at the name a file declares, for duplicate reports,
// without validating anything else.
func declaredName(data []byte) string {
	var v struct {
		Name string `yaml:"name"`
	}
	if yaml.Unmarshal(data, &v) != nil {
		return ""
	}
	return v.Name
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " (and more)"
	}
	return s
}

// BlobHash returns the git blob hash of data: hex sha1 of
// "blob <len>\x00" + data, as `git hash-object` prints it. Local trees use
// it so that git and local sources share one cache key.
func BlobHash(data []byte) string {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// FromFS returns a Tree over fsys. Blob hashes are computed from content.
// When rev is empty, the revision is "local:" plus a hash of every
// definition's path and blob hash, so an unchanged tree keeps its rev.
func FromFS(fsys fs.FS, rev string) Tree {
	return &fsTree{fsys: fsys, rev: rev}
}

type fsTree struct {
	fsys    fs.FS
	rev     string
	revOnce sync.Once
	mu      sync.Mutex
	hashes  map[string]string
}

func (t *fsTree) FS() fs.FS { return t.fsys }

func (t *fsTree) BlobHash(name string) (string, error) {
	t.mu.Lock()
	h, ok := t.hashes[name]
	t.mu.Unlock()
	if ok {
		return h, nil
	}
	data, err := readLimited(t.fsys, name)
	if err != nil {
		return "", err
	}
	// A file over the limit hashes its first MaxFileSize+1 bytes; it fails
	// to parse whatever its tail holds, so the key stays correct.
	h = BlobHash(data)
	t.mu.Lock()
	if t.hashes == nil {
		t.hashes = make(map[string]string)
	}
	t.hashes[name] = h
	t.mu.Unlock()
	return h, nil
}

func (t *fsTree) Rev() string {
	t.revOnce.Do(func() {
		if t.rev != "" {
			return
		}
		h := sha1.New()
		ents, _ := fs.ReadDir(t.fsys, ".")
		for _, d := range ents {
			rel := d.Name() + "/" + hldp.FileName
			b, err := t.BlobHash(rel)
			if err != nil {
				continue
			}
			fmt.Fprintf(h, "%s %s\n", rel, b)
		}
		t.rev = "local:" + hex.EncodeToString(h.Sum(nil))[:12]
	})
	return t.rev
}
