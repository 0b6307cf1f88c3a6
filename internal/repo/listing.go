// The listing of a local directory: the stats, kinds and blob hashes of
// its entries, grouped by top-level entry; when a stat can stand for the
// content (settled); lookups, the revision, and iteration in path order.

package repo

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"iter"
	"slices"
	"strings"
	"time"
)

// fileStat is what a stat says of a file or folder: enough to tell that it
// changed without reading it. Times are nanoseconds since the Unix epoch.
type fileStat struct {
	Size, MTime, CTime int64
	Ino                uint64
	Mode               uint32 // type and permission bits, as the system reports them
}

// Settling windows (see settled). Linux stamps files from a clock that
// advances once per scheduler tick (at most 10 ms); file systems that keep
// whole seconds (ext3, and FAT with 2 s) show no sub-second part.
const (
	settleFine   = 100 * time.Millisecond
	settleCoarse = 2 * time.Second
)

// settled reports whether a stat taken at or after now can stand for the
// content: its ctime is older than now by more than the file system's
// clock granularity, so that any later change (which sets the ctime to
// the time of the change) makes the ctime differ. A ctime that is zero
// (a file system that keeps none) is never trusted.
func settled(st fileStat, now time.Time) bool {
	if st.CTime == 0 {
		return false
	}
	w := settleFine
	if st.CTime%int64(time.Second) == 0 || st.MTime%int64(time.Second) == 0 {
		w = settleCoarse
	}
	return st.CTime < now.Add(-w).UnixNano()
}

// entryKind is the type of a listing entry.
type entryKind uint8

const (
	kindFile entryKind = iota + 1
	kindDir
	kindLink // a symbolic link: always read through the root, never trusted
)

// entry is one file, symbolic link or folder of a listing. The exported
// fields are what ListingFile keeps (see encodeListing).
type entry struct {
	Path string // slash-separated, relative to the directory; "." for itself
	Stat fileStat
	Kind entryKind
	// Trusted says the stat was settled when taken: for a file, Blob is
	// the hash of the content that stat stands for; for a folder, the
	// listing's entries directly below it are all of its entries.
	Trusted bool
	Blob    [sha1.Size]byte

	hashed bool // Blob holds this Sync's hash (false: unreadable)
}

// listing is every entry of the directory: the directory itself, and each
// top-level entry with everything below it (a group). It is never changed
// once built; a Tree and the next Sync share it, and a watched Sync's
// listing shares the groups it did not list again (see listChanged).
type listing struct {
	self   entry   // the directory, Path "."
	groups []group // sorted by name
	id     string  // rev(), for a listing a Sync made ("" for one read from ListingFile)
}

// group is a top-level entry and every entry below it: entries[0] is the
// top-level entry, the rest are sorted by path.
type group struct {
	entries []entry
	// whole says a watched Sync may take the group as it is: every entry
	// is trusted and every file hashed by a Sync, and no folder is below
	// the top one (reload.Watch watches the top-level folders, not theirs).
	whole bool
}

func (g *group) name() string { return g.entries[0].Path }

// newGroup returns the group of top and the entries below it (sorted by
// path), marking whether a watched Sync may take it whole.
func newGroup(entries []entry) group {
	g := group{entries: entries, whole: true}
	for k, e := range entries {
		if !e.Trusted || k > 0 && e.Kind == kindDir || e.Kind == kindFile && !e.hashed {
			g.whole = false
			break
		}
	}
	return g
}

func comparePath(e entry, p string) int { return strings.Compare(e.Path, p) }

// group returns the index of the group named name.
func (l *listing) group(name string) (int, bool) {
	return slices.BinarySearchFunc(l.groups, name, func(g group, n string) int { return strings.Compare(g.name(), n) })
}

func (l *listing) find(p string) (entry, bool) {
	if l == nil {
		return entry{}, false
	}
	if p == "." {
		return l.self, true
	}
	top, _, below := strings.Cut(p, "/")
	i, ok := l.group(top)
	if !ok {
		return entry{}, false
	}
	es := l.groups[i].entries
	if !below {
		return es[0], true
	}
	j, ok := slices.BinarySearchFunc(es[1:], p, comparePath)
	if !ok {
		return entry{}, false
	}
	return es[1+j], true
}

// children returns the names of the entries directly below dir.
func (l *listing) children(dir string) []string {
	var names []string
	if dir == "." {
		names = make([]string, 0, len(l.groups))
		for k := range l.groups {
			names = append(names, l.groups[k].name())
		}
		return names
	}
	top, _, _ := strings.Cut(dir, "/")
	i, ok := l.group(top)
	if !ok {
		return nil
	}
	es := l.groups[i].entries[1:]
	prefix := dir + "/"
	j, _ := slices.BinarySearchFunc(es, prefix, comparePath)
	for ; j < len(es) && strings.HasPrefix(es[j].Path, prefix); j++ {
		if rest := es[j].Path[len(prefix):]; !strings.Contains(rest, "/") {
			names = append(names, rest)
		}
	}
	return names
}

// rev hashes the sorted (path, blob hash) pairs of every file; a file that
// could not be read (a link that escapes, a link to a folder, a file
// removed during the Sync) contributes its path with a marker, so adding
// or fixing it still changes the revision. Sorted by path, which sorts
// the "path\x00hash\n" lines too: a path that is a prefix of another is
// followed by \x00, which sorts first. (So a listing that lists the
// directory by group hashes what a sorted walk of it hashes.)
func (l *listing) rev() string {
	sum := sha256.New()
	var line []byte
	l.byPath(func(e entry) {
		if e.Kind == kindDir {
			return
		}
		line = append(append(line[:0], e.Path...), 0)
		if e.hashed {
			line = hex.AppendEncode(line, e.Blob[:])
		} else {
			line = append(line, "unreadable"...)
		}
		sum.Write(append(line, '\n'))
	})
	return "local:" + hex.EncodeToString(sum.Sum(nil))[:16]
}

// byPath calls f with every entry below the directory, sorted by path. A
// group's top-level entry comes first, then the groups whose names
// extend its name with a byte that sorts before '/' ("a-b" and "a.b" after
// "a"), then the entries below it ("a/x").
func (l *listing) byPath(f func(entry)) {
	var walk func(i int) int // walks group i and those that sort inside it; returns the next
	walk = func(i int) int {
		es := l.groups[i].entries
		name := es[0].Path
		f(es[0])
		j := i + 1
		for j < len(l.groups) {
			n := l.groups[j].name()
			if len(n) <= len(name) || n[:len(name)] != name || n[len(name)] >= '/' {
				break
			}
			j = walk(j)
		}
		for _, e := range es[1:] {
			f(e)
		}
		return j
	}
	for i := 0; i < len(l.groups); {
		i = walk(i)
	}
}

// all yields the directory's entry, then each group's entries in order.
func (l *listing) all() iter.Seq[entry] {
	return func(yield func(entry) bool) {
		if !yield(l.self) {
			return
		}
		for k := range l.groups {
			for _, e := range l.groups[k].entries {
				if !yield(e) {
					return
				}
			}
		}
	}
}

// counts returns how many files (and links) and folders l lists, the
// directory itself included.
func (l *listing) counts() (files, dirs int) {
	dirs = 1
	for k := range l.groups {
		for _, e := range l.groups[k].entries {
			if e.Kind == kindDir {
				dirs++
			} else {
				files++
			}
		}
	}
	return files, dirs
}
