// Package scan turns a tree of tool folders at one revision into a new
// catalog.Snapshot: it walks <tree>/<name>/TOOL.hdlp, parses what changed
// (through the cache, keyed by git blob hash), carries the last good
// definition of a broken file over from the previous snapshot (stale), and
// reports every problem without letting one file stop the others.
//
// Functions here are safe for concurrent use when given distinct inputs;
// a cache may be shared. Imports: hldp, cache, catalog. Imported by
// reload, health, host, lint and the daemon.
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
	// Vet, when set, is called with the tree and its entries after Check,
	// to narrow them further (the daemon's signature check: an untrusted
	// tool becomes catalog.Untrusted) and record their provenance
	// (Entry.Signed). It may change the entries' Status, Reason and Signed
	// only. A Build with Vet scans the whole tree unless VetDelta lets it
	// start from prev.
	Vet func(t Tree, entries []catalog.Entry)
	// VetDelta, when set beside Vet, is asked before a Build starts from
	// prev's snapshot and scans only the folders t's Delta names (see
	// buildDelta): ok says Vet's verdicts on prev's entries hold for every
	// folder t did not change, and then vet is called, instead of Vet,
	// with the entries of the folders scanned again (after Check), under
	// the same rules. !ok: the Build scans the whole tree and calls Vet.
	VetDelta func(t Tree, prev *catalog.Snapshot) (vet func(fresh []catalog.Entry), ok bool)
}

// Report says what a Build did.
type Report struct {
	Parsed   int     // files parsed (cache misses)
	Reused   int     // files whose outcome came from the previous snapshot or the cache
	Scanned  int     // tool folders looked at: all, or those a delta named (see buildDelta)
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
	if snap, rep, ok := buildDelta(prev, t, c, opts); ok {
		return snap, rep, nil
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
	slots := make([]folder, 0, len(dirents))
	for _, d := range dirents {
		if f, ok := slotOf(fsys, d.Name(), d.Type(), opts.Prefix); ok {
			slots = append(slots, f)
		}
	}
	parallel(len(slots), func(i int) {
		if !slots[i].done {
			slots[i].res = scanOne(prev, t, blobHash, c, opts, slots[i].name, rev, carry)
		}
	})
	rep.Scanned = len(slots)
	seen := make(map[cache.Key]bool, len(slots))
	entries := make([]catalog.Entry, 0, len(slots))
	var notes []note
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
		if r.e.Name != "" {
			entries = append(entries, r.e)
		}
		if !r.clean() {
			notes = append(notes, note{name: f.name, key: r.key, decl: r.decl, problem: r.problem})
		}
	}
	// The slots are in the order of fs.ReadDir: sorted by name.
	declared := declaredBy(notes, func(name string) bool {
		i, ok := slices.BinarySearchFunc(slots, name, func(f folder, n string) int { return strings.Compare(f.name, n) })
		return ok && slots[i].res.clean()
	})
	rep.Problems = append(rep.Problems, duplicates(declared, opts.Prefix)...)
	check(entries, opts.Check)
	if opts.Vet != nil {
		opts.Vet(t, entries)
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
		if isGit(t) {
			c.SetHead(rev)
		}
	}
	return snapshot(prev, rev, entries, notes, opts), rep, nil
}

// snapshot is the snapshot a Build of rev gives: entries, with notes kept
// for the next Build (see built).
func snapshot(prev *catalog.Snapshot, rev string, entries []catalog.Entry, notes []note, opts Options) *catalog.Snapshot {
	co := opts.Catalog
	if co.Prev == nil {
		co.Prev = prev
	}
	co.Builder = &built{prefix: opts.Prefix, notes: notes}
	return catalog.New(rev, entries, co)
}

// isGit reports whether t is a git commit's tree.
func isGit(t Tree) bool {
	pt, ok := t.(interface{ Parents() ([]string, bool) })
	if !ok {
		return false
	}
	_, git := pt.Parents()
	return git
}

// slotOf is the folder to scan for the entry name of the tools tree, of
// type typ (fs.FileMode type bits): a folder, or a symbolic link to one,
// or (done) a symbolic link that cannot be followed. ok is false for
// what is not a tool folder: a file beside them, a name starting with a
// dot.
func slotOf(fsys fs.FS, name string, typ fs.FileMode, prefix string) (f folder, ok bool) {
	if strings.HasPrefix(name, ".") {
		return folder{}, false
	}
	isDir := typ.IsDir()
	if typ&fs.ModeSymlink != 0 {
		fi, err := fs.Stat(fsys, name)
		if err != nil {
			err = fmt.Errorf("%s%s: %w", prefix, name, symlinkErr(err))
			e := catalog.Entry{Name: name, File: name + "/" + hldp.FileName, Status: catalog.Failed, Reason: err.Error(), LoadErr: err}
			return folder{name: name, done: true, res: folderResult{e: e, problem: err}}, true
		}
		isDir = fi.IsDir()
	}
	if !isDir {
		return folder{}, false // README.md and other files beside the tool folders
	}
	return folder{name: name}, true
}

// declaredBy maps each tool name the notes declare to the folders that
// declare it, with the folder of that name when clean says it scanned
// clean. Only those names can be declared twice: a clean folder declares
// its own name, and folder names differ. So a build needs no map of every
// folder's name (1.7 MB at 10,000 tools), and a delta build looks up only
// the names its notes declare.
func declaredBy(notes []note, clean func(name string) bool) map[string][]string {
	declared := map[string][]string{} // declared tool name -> folders
	for _, n := range notes {
		if n.decl != "" {
			declared[n.decl] = append(declared[n.decl], n.name)
		}
	}
	for decl, folders := range declared {
		if clean(decl) {
			declared[decl] = append(folders, decl)
		}
	}
	return declared
}

// duplicates reports every file of two or more folders declaring one tool
// name (declared maps a name to the folders declaring it).
func duplicates(declared map[string][]string, prefix string) []error {
	var problems []error
	for decl, folders := range declared {
		if len(folders) < 2 {
			continue
		}
		slices.Sort(folders)
		var files []string
		for _, f := range folders {
			files = append(files, prefix+f+"/"+hldp.FileName)
		}
		for _, f := range files {
			problems = append(problems, fmt.Errorf("%s: duplicate tool name %q (declared by %s); tool names must be unique", f, decl, strings.Join(files, ", ")))
		}
	}
	return problems
}

// check narrows the callable entries by check (nil: all stay).
func check(entries []catalog.Entry, check Checker) {
	if check == nil {
		return
	}
	for i := range entries {
		e := &entries[i]
		if e.Tool == nil || !e.Status.Callable() {
			continue
		}
		st, reason := check(e.Tool)
		if st != catalog.Enabled {
			e.Status, e.Reason = st, reason
		}
	}
}

// built is what a Build keeps in its snapshot (catalog.Options.Builder)
// for the next Build to start from: the folders that did not scan clean,
// with what scanning them gave. A clean folder (its own definition
// loaded, parsed or reused; clean reports whether) needs no note: its
// entry says it all, and it declares its own name.
type built struct {
	prefix string // Options.Prefix
	notes  []note // sorted by name
}

// note is what scanning a folder that did not scan clean gave.
type note struct {
	name    string
	key     cache.Key // the key of its outcome in the cache, if it has one
	decl    string    // the tool name its file declares, if known
	problem error
}

// clean reports whether the folder loaded its own definition without a
// problem: its entry then holds all a later Build needs (see built).
func (r *folderResult) clean() bool {
	return r.problem == nil && r.e.Tool != nil && r.e.LoadErr == nil
}

// deltaTree is a Tree that knows which top-level names differ from the
// tree of another revision (internal/repo's Tree after a watched Sync).
type deltaTree interface {
	Delta() (base string, names []string, ok bool)
}

// buildDelta is Build for a tree that says which top-level names differ
// (see deltaTree) from the tree prev was built from: it scans those
// folders alone and takes every other entry, note and status from prev,
// so a reload after one edited file of 100,000 costs that file. It gives
// the snapshot and the report a whole Build gives, but for the health
// check (Options.Check), which it asks of the folders it scans only:
// what changes a verdict without changing a file rebuilds in full
// (reload.Loop.Rebuild, with the tree prev was built from). ok is false
// when it does not apply: no delta, a delta from another revision, a
// git tree (whose revisions cite differently), a folder it cannot stat.
func buildDelta(prev *catalog.Snapshot, t Tree, c *cache.Cache, opts Options) (_ *catalog.Snapshot, _ Report, ok bool) {
	dt, isDelta := t.(deltaTree)
	if !isDelta || prev == nil {
		return nil, Report{}, false
	}
	base, names, isDelta := dt.Delta()
	was, _ := prev.Builder().(*built)
	if !isDelta || was == nil || base != prev.Rev() || was.prefix != opts.Prefix {
		return nil, Report{}, false
	}
	fsys, rev := t.FS(), t.Rev()
	// A git tree: the cited revisions carry only along a fast-forward
	// (see carries), and the cache's listing (the blob hashes a
	// restart takes, by tree hash) moves from the base's tree to this one
	// only if it is the base's.
	var treeHash, baseTree string
	if th, ok := t.(treeHasher); ok {
		treeHash = th.TreeHash()
	}
	if treeHash != "" {
		bt, ok := t.(interface{ BaseTreeHash() string })
		if !ok || !carries(t, prev, c, rev) {
			return nil, Report{}, false
		}
		baseTree = bt.BaseTreeHash()
		if c != nil {
			if _, ok := c.Listing(baseTree); !ok {
				return nil, Report{}, false
			}
		}
	}
	var vet func([]catalog.Entry)
	if opts.Vet != nil {
		ok := false
		if opts.VetDelta != nil {
			vet, ok = opts.VetDelta(t, prev)
		}
		if !ok {
			return nil, Report{}, false
		}
	}
	var slots []folder // in names' order
	for _, name := range names {
		fi, err := fs.Lstat(fsys, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone
		}
		if err != nil {
			return nil, Report{}, false
		}
		if f, ok := slotOf(fsys, name, fi.Mode().Type(), opts.Prefix); ok {
			slots = append(slots, f)
		}
	}
	parallel(len(slots), func(i int) {
		if !slots[i].done {
			slots[i].res = scanOne(prev, t, t.BlobHash, c, opts, slots[i].name, rev, true)
		}
	})
	rep := Report{Scanned: len(slots)}
	var fresh []catalog.Entry
	var added []note
	for _, f := range slots {
		r := f.res
		if r.parsed {
			rep.Parsed++
		}
		if r.reused {
			rep.Reused++
		}
		if r.e.Name != "" {
			fresh = append(fresh, r.e)
		}
		if !r.clean() {
			added = append(added, note{name: f.name, key: r.key, decl: r.decl, problem: r.problem})
		}
	}
	check(fresh, opts.Check)
	if vet != nil {
		vet(fresh)
	}

	// The entries: prev's but for names, merged with the fresh ones (both
	// sorted by name); what the folders of names held before is forgotten.
	var forget []cache.Key
	entries := make([]catalog.Entry, 0, prev.Len()+len(fresh))
	ni, fi := 0, 0
	for e := range prev.Each() {
		for ni < len(names) && names[ni] < e.Name {
			ni++
		}
		if ni < len(names) && names[ni] == e.Name {
			if e.Tool != nil && e.Blob != "" { // its definition, or a stale one's last good
				forget = append(forget, cache.Key{Path: e.File, Blob: e.Blob})
			}
			continue
		}
		for fi < len(fresh) && fresh[fi].Name < e.Name {
			entries, fi = append(entries, fresh[fi]), fi+1
		}
		if e.Tool != nil && e.LoadErr == nil {
			rep.Reused++
		}
		entries = append(entries, e)
	}
	entries = append(entries, fresh[fi:]...)

	// The notes likewise, and from them the problems, in the order of
	// the folders, as Build reports them.
	notes := make([]note, 0, len(was.notes)+len(added))
	ni, ai := 0, 0
	for _, n := range was.notes {
		for ni < len(names) && names[ni] < n.name {
			ni++
		}
		if ni < len(names) && names[ni] == n.name {
			if n.key != (cache.Key{}) {
				forget = append(forget, n.key)
			}
			continue
		}
		for ai < len(added) && added[ai].name < n.name {
			notes, ai = append(notes, added[ai]), ai+1
		}
		if n.key != (cache.Key{}) {
			rep.Reused++ // its outcome is in the cache
		}
		notes = append(notes, n)
	}
	notes = append(notes, added[ai:]...)
	for _, n := range notes {
		if n.problem != nil {
			rep.Problems = append(rep.Problems, n.problem)
		}
	}
	declared := declaredBy(notes, func(name string) bool {
		i, found := slices.BinarySearchFunc(entries, name, func(e catalog.Entry, n string) int { return strings.Compare(e.Name, n) })
		return found && entries[i].Tool != nil && entries[i].LoadErr == nil
	})
	rep.Problems = append(rep.Problems, duplicates(declared, opts.Prefix)...)

	if c != nil {
		served := map[string]cache.Served{}
		var gone []string
		kept := map[cache.Key]bool{}
		for _, f := range slots {
			if k := f.res.key; k != (cache.Key{}) {
				kept[k] = true
			}
		}
		fi = 0
		for _, name := range names {
			file := name + "/" + hldp.FileName
			for fi < len(fresh) && fresh[fi].Name < name {
				fi++
			}
			if fi < len(fresh) && fresh[fi].Name == name && fresh[fi].Tool != nil && fresh[fi].Blob != "" {
				served[file] = cache.Served{Blob: fresh[fi].Blob, Rev: fresh[fi].Rev}
			} else {
				gone = append(gone, file)
			}
		}
		c.UpdateLastGood(served, gone)
		forget = slices.DeleteFunc(forget, func(k cache.Key) bool { return kept[k] })
		c.Forget(forget)
		if treeHash != "" {
			// The listing: the files of names go, the keys their folders
			// scanned to come.
			unset := make([]string, len(names))
			for i, name := range names {
				unset[i] = name + "/" + hldp.FileName
			}
			var set []cache.Key
			for _, f := range slots {
				if f.res.key != (cache.Key{}) {
					set = append(set, f.res.key)
				}
			}
			c.MoveListing(baseTree, treeHash, unset, set)
			c.SetHead(rev)
		}
	}
	return snapshot(prev, rev, entries, notes, opts), rep, true
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
		// prev's strings, not this build's copies: the cache's key holds them.
		e.Name, e.File, e.Blob = p.Name, p.File, p.Blob
		key = cache.Key{Path: p.File, Blob: p.Blob}
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
		} else {
			key.Path = sharePath(tool, rel)
		}
		if c != nil {
			c.Put(key, out)
		}
	}
	if cached && out.Err != nil {
		// The name it declares, for duplicates: read again, as the
		// outcome does not keep it (files that fail are few).
		if data, err := readLimited(fsys, rel); err == nil {
			declName = declaredName(data)
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
		if v, _, ok := c.LastGood(rel); ok && v.Blob == e.Blob {
			// The cache's strings, not this build's copies (a restart
			// holds every tool's).
			e.Blob = v.Blob
			if v.Rev != "" {
				was = v.Rev
			}
		}
	}
	// The tool's strings, not this build's copies (a restart holds every
	// tool's): its name is where its file's path begins.
	e.File = sharePath(out.Tool, rel)
	e.Name, res.key.Path = e.File[:len(name)], e.File
	e.Tool, e.Rev, e.Status = out.Tool, cited(carry, was, rev), catalog.Enabled
	res.e, res.decl = e, out.Tool.Name
	return res
}

// sharePath returns rel, the path of t's file in the tools tree, as the
// end of t.File when that is where it lies (t.File is the path with the
// prefix of messages), so that the catalog and the cache keep one copy.
func sharePath(t *hldp.Tool, rel string) string {
	if f := t.File; strings.HasSuffix(f, rel) {
		return f[len(f)-len(rel):]
	}
	return rel
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
// head's child, or when that head is below it on its first-parent history
// and the commits between are in the clone (several commits pushed at
// once to a clone that keeps its history: Descends).
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
	if last == "" {
		return false
	}
	if last == rev || slices.Contains(parents, last) {
		return true
	}
	d, ok := t.(interface{ Descends(base string) bool })
	return ok && d.Descends(last)
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
