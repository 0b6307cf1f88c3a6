package repo

import "io/fs"

// Tree is a read-only view of a source's sub-tree at one revision.
// It is immutable, safe for concurrent use, and stays readable after later
// Syncs of the source that produced it.
type Tree struct {
	fsys     fs.FS
	rev      string
	treeHash string // git tree hash of the sub-tree; "" for local trees
	hash     func(name string) (string, error)
	parents  []string // the commit's parents, for git trees
	isGit    bool
	sub      string // the sub-tree's path in the commit, for git trees
	// base, delta and hasDelta are Delta's; baseTree is BaseTreeHash's.
	base     string
	baseTree string
	delta    []string
	hasDelta bool
}

// Delta reports, for a local tree listed by a watched Sync (see
// LocalDir.Track), the revision of the tree the Sync started from and the
// top-level names it listed again, sorted: every other top-level entry,
// and everything below it, is as in that tree. For a git tree, base is
// the commit of the source's previous Tree and names the top-level entries
// whose tree entry differs from that commit's (added, removed, or another
// hash or mode). ok is false for any other tree (the first of a source,
// one after a change of sub-path). A scan of the tree may then start from
// its scan of base and look at those names alone.
func (t *Tree) Delta() (base string, names []string, ok bool) {
	return t.base, t.delta, t.hasDelta
}

// BaseTreeHash returns, for a git tree with a Delta, the TreeHash of the
// tree its base names; "" otherwise.
func (t *Tree) BaseTreeHash() string { return t.baseTree }

// Parents returns the parent commits of a git tree's commit, and true; for
// a local tree nil and false. The clone is one commit deep, so these are
// hashes only: nothing older is there to read.
func (t *Tree) Parents() ([]string, bool) { return t.parents, t.isGit }

// FS returns the files of the sub-tree. Paths are relative to the sub-tree
// root and slash-separated, as fs.FS requires (e.g. "shell-exec/TOOL.hdlp").
// Git trees read a file's content only when it is read, not when it is
// listed or its hash is asked for.
func (t *Tree) FS() fs.FS { return t.fsys }

// Rev returns the revision the tree was taken at: the commit hash for git
// sources, and "local:" followed by a short hash of the sorted (path, blob
// hash) pairs for local directories, so an unchanged directory keeps its
// revision.
func (t *Tree) Rev() string { return t.rev }

// TreeHash returns the git tree hash of the sub-tree for git sources: it
// names the sub-tree's whole content (every path, mode and blob below it),
// so two trees with one TreeHash list the same files with the same blob
// hashes, whatever their commits. It is known without reading the
// sub-tree's folders. Local trees return "": their content has no name
// short of hashing every file.
func (t *Tree) TreeHash() string { return t.treeHash }

// BlobHash returns the git blob hash (hex SHA-1 of "blob <len>\x00" + content)
// of the regular file at name, a path relative to the sub-tree like those of
// FS. Git trees take it from the tree entry without reading the blob; local
// trees give the hash the Sync found (reading the file only when the Sync
// did not hash it, such as through a symbolic link). A missing file gives an error that
// matches fs.ErrNotExist.
func (t *Tree) BlobHash(name string) (string, error) {
	if !fs.ValidPath(name) || name == "." {
		return "", &fs.PathError{Op: "blobhash", Path: name, Err: fs.ErrInvalid}
	}
	return t.hash(name)
}
