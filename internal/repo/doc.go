// Package repo gets a tree of files from a source: a local directory
// ([LocalDir]) or a git branch ([Git], via go-git). A Sync returns a
// [*Tree], a read-only view of one sub-tree at one revision with git blob
// hashes for its files, so callers can tell what changed without reading
// file contents.
//
// The package owns the source side only: cloning, fetching, recovering a
// clone that a force-push wedged, credentials, and the on-disk state under
// [Git.Dir]. It knows nothing about tools or their file format beyond the
// sub-path it is told to serve. When to sync (cron, webhook, fsnotify),
// parsing and publishing snapshots belong to other packages.
//
// Concurrency: a [*Tree] is immutable and safe for concurrent use; it stays
// readable after later Syncs. [Git.Sync] and [Git.Offline] serialize on a
// mutex inside the [Git] value, because go-git repositories are not safe
// for concurrent use; a Git must not be copied after first use, and only one
// Git may use a given Dir at a time. [LocalDir] keeps a listing of its
// directory between Syncs (and, with ListingFile, across restarts), so a
// Sync reads only what changed.
//
// Import rules: repo is a leaf; it imports no toolagent packages. The
// daemon (internal/daemon) and host import it, and connect a *Tree to the
// scanner through the scan.Tree interface (fs.FS, Rev, BlobHash), which
// *Tree satisfies without either package importing the other.
package repo
