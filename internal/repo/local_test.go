package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// writeFiles creates files (slash paths relative to dir) with content.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		writeFilesTB(t, dir, name, content)
	}
}

func writeFilesTB(tb testing.TB, dir, name, content string) {
	tb.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func mustSyncLocal(t *testing.T, d *LocalDir) *Tree {
	t.Helper()
	tree, err := d.Sync(t.Context())
	if err != nil {
		t.Fatalf("LocalDir.Sync() error = %v", err)
	}
	return tree
}

func TestLocalDir(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"shell-exec/TOOL.hdlp": "hello\n",
		"disk-space/TOOL.hdlp": "name: disk-space\n",
	})
	d := &LocalDir{Path: dir}
	t.Cleanup(func() { d.Close() })
	tree := mustSyncLocal(t, d)

	if err := fstest.TestFS(tree.FS(), "shell-exec/TOOL.hdlp", "disk-space/TOOL.hdlp"); err != nil {
		t.Fatal(err)
	}
	// `printf 'hello\n' | git hash-object --stdin`
	if got, want := mustBlobHash(t, tree, "shell-exec/TOOL.hdlp"), "ce013625030ba8dba906f756967f9e9ca394464a"; got != want {
		t.Errorf("BlobHash(shell-exec/TOOL.hdlp) = %s, want %s", got, want)
	}
	if _, err := tree.BlobHash("gone/TOOL.hdlp"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("BlobHash(missing) error = %v, want fs.ErrNotExist", err)
	}
	rev := tree.Rev()
	if !strings.HasPrefix(rev, "local:") {
		t.Errorf("Rev() = %q, want a local: prefix", rev)
	}
	if h := tree.TreeHash(); h != "" {
		t.Errorf("TreeHash() = %q, want none for a local directory", h)
	}

	steps := []struct {
		name    string
		change  func()
		sameRev bool // the contents equal the original again
	}{
		{"unchanged", func() {}, true},
		{"empty dir added", func() { os.Mkdir(filepath.Join(dir, "empty"), 0o755) }, true},
		{"file modified", func() { writeFiles(t, dir, map[string]string{"shell-exec/TOOL.hdlp": "changed\n"}) }, false},
		{"file restored", func() { writeFiles(t, dir, map[string]string{"shell-exec/TOOL.hdlp": "hello\n"}) }, true},
		{"file added", func() { writeFiles(t, dir, map[string]string{"new/TOOL.hdlp": "new\n"}) }, false},
		{"file renamed", func() {
			os.Rename(filepath.Join(dir, "new"), filepath.Join(dir, "newer"))
		}, false},
	}
	prev := rev
	for _, step := range steps {
		step.change()
		got := mustSyncLocal(t, d).Rev()
		t.Run(step.name, func(t *testing.T) {
			if step.sameRev && got != rev {
				t.Errorf("Rev() = %s, want the original %s", got, rev)
			}
			if !step.sameRev && (got == prev || got == rev) {
				t.Errorf("Rev() = %s, want a new revision (previous %s, original %s)", got, prev, rev)
			}
		})
		prev = got
	}
}

func TestLocalDirSymlinks(t *testing.T) {
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret": "outside\n"})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "inside\n"})
	links := map[string]string{
		"a/escape-abs": filepath.Join(outside, "secret"),
		"a/escape-rel": filepath.Join("..", "..", filepath.Base(outside), "secret"),
		"a/inside":     "TOOL.hdlp",
		"linkdir":      "a",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	tree := mustSyncLocal(t, &LocalDir{Path: dir})

	tests := []struct {
		name   string
		wantOK bool
	}{
		{"a/TOOL.hdlp", true},
		{"a/inside", true},
		{"linkdir/TOOL.hdlp", true},
		{"a/escape-abs", false},
		{"a/escape-rel", false},
		{"linkdir/escape-abs", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := fs.ReadFile(tree.FS(), tt.name)
			if tt.wantOK {
				if err != nil || string(data) != "inside\n" {
					t.Errorf("ReadFile(%q) = %q, %v; want %q, nil", tt.name, data, err, "inside\n")
				}
				if _, err := tree.BlobHash(tt.name); err != nil {
					t.Errorf("BlobHash(%q) error = %v", tt.name, err)
				}
				return
			}
			if err == nil {
				t.Errorf("ReadFile(%q) = %q, nil; want an error (the link leaves the directory)", tt.name, data)
			}
			if _, err := tree.BlobHash(tt.name); err == nil {
				t.Errorf("BlobHash(%q) error = nil, want an error", tt.name)
			}
		})
	}
}

func TestLocalDirMissing(t *testing.T) {
	_, err := (&LocalDir{Path: filepath.Join(t.TempDir(), "none")}).Sync(t.Context())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Sync() of a missing dir: error = %v, want fs.ErrNotExist", err)
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open descriptors: %v", err)
	}
	return len(ents)
}

// TestLocalDirHandleLifetime: Syncs reuse one directory handle (they used
// to open one per Sync and leave it to the garbage collector), a replaced
// directory is reopened, and Close releases the handle.
func TestLocalDirHandleLifetime(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "tools")
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "a\n"})
	d := &LocalDir{Path: dir}
	mustSyncLocal(t, d)
	before := openFDs(t)
	for range 200 {
		mustSyncLocal(t, d)
	}
	if after := openFDs(t); after > before {
		t.Errorf("open descriptors after 200 Syncs = %d, want at most %d (one handle, reused)", after, before)
	}

	// The directory is replaced: Sync serves the new one.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"b/TOOL.hdlp": "b\n"})
	checkTreeFiles(t, mustSyncLocal(t, d), map[string]string{"b/TOOL.hdlp": "b\n"})
	if after := openFDs(t); after > before {
		t.Errorf("open descriptors after the directory was replaced = %d, want at most %d (the old handle closed)", after, before)
	}

	if err := d.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if after := openFDs(t); after >= before {
		t.Errorf("open descriptors after Close = %d, want fewer than %d", after, before)
	}
	// Sync after Close opens the directory again.
	checkTreeFiles(t, mustSyncLocal(t, d), map[string]string{"b/TOOL.hdlp": "b\n"})
	d.Close()
}

// later is a clock an hour ahead: every file a test wrote is settled.
func later() time.Time { return time.Now().Add(time.Hour) }

// listed is a LocalDir on dir that keeps its listing in file, with every
// file settled.
func listed(t *testing.T, dir, file string, log *slog.Logger) *LocalDir {
	t.Helper()
	d := &LocalDir{Path: dir, ListingFile: file, Logger: log, Now: later}
	t.Cleanup(func() { d.Close() })
	return d
}

// checkSameAsFresh: the tree a listing gave lists the same revision and
// blob hashes as a Sync that reads every file.
func checkSameAsFresh(t *testing.T, dir string, tree *Tree, files ...string) {
	t.Helper()
	fresh := &LocalDir{Path: dir}
	defer fresh.Close()
	want := mustSyncLocal(t, fresh)
	if tree.Rev() != want.Rev() {
		t.Errorf("Rev() = %s, want %s (what reading every file gives)", tree.Rev(), want.Rev())
	}
	for _, f := range files {
		got, err := tree.BlobHash(f)
		if w, werr := want.BlobHash(f); got != w || (err == nil) != (werr == nil) {
			t.Errorf("BlobHash(%s) = %s, %v; want %s, %v", f, got, err, w, werr)
		}
	}
}

// TestLocalDirListing: a Sync reads only the files whose stat changed and
// the folders whose stat changed, from the listing of the Sync before in
// the same process and, across a restart, from ListingFile; what changed
// while no process ran is read again, whatever the modification time
// says; and the tree is always the one reading every file gives.
func TestLocalDirListing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "state", "local.listing")
	writeFiles(t, dir, map[string]string{
		"a/TOOL.hdlp": "name: a\n",
		"b/TOOL.hdlp": "name: b\n",
		"b/run.sh":    "echo b\n",
		"README.md":   "tools\n",
	})
	all := []string{"a/TOOL.hdlp", "b/TOOL.hdlp", "b/run.sh", "README.md"}

	d := listed(t, dir, file, nil)
	first := mustSyncLocal(t, d)
	if got, want := d.LastSync(), (SyncStats{Files: 4, Hashed: 4, Dirs: 3, ReadDirs: 3}); got != want {
		t.Errorf("first Sync: %+v, want %+v", got, want)
	}
	checkSameAsFresh(t, dir, first, all...)
	written, err := os.Stat(file)
	if err != nil {
		t.Fatalf("the listing file was not written: %v", err)
	}
	again := mustSyncLocal(t, d)
	if fi, err := os.Stat(file); err != nil || !os.SameFile(fi, written) {
		t.Errorf("a Sync that changed nothing rewrote the listing file (%v)", err)
	}
	if got, want := d.LastSync(), (SyncStats{Files: 4, Dirs: 3}); got != want {
		t.Errorf("second Sync, nothing changed: %+v, want %+v (nothing read)", got, want)
	}
	if again.Rev() != first.Rev() {
		t.Errorf("second Sync: Rev() = %s, want %s", again.Rev(), first.Rev())
	}

	// Each step changes the directory while no process runs, then a new
	// LocalDir (a restarted daemon) syncs it from the listing file.
	mtime := func(name string) time.Time {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.ModTime()
	}
	steps := []struct {
		name   string
		change func()
		want   SyncStats // Loaded is always true
	}{
		{"nothing changed", func() {}, SyncStats{Files: 4, Dirs: 3}},
		{"same size, modification time set back", func() {
			was := mtime("a/TOOL.hdlp")
			writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "name: A\n"})
			if err := os.Chtimes(filepath.Join(dir, "a", "TOOL.hdlp"), was, was); err != nil {
				t.Fatal(err)
			}
		}, SyncStats{Files: 4, Hashed: 1, Dirs: 3}},
		{"replaced by a rename, same size and time", func() {
			was := mtime("b/run.sh")
			writeFiles(t, dir, map[string]string{"b/run.tmp": "echo B\n"})
			os.Chtimes(filepath.Join(dir, "b", "run.tmp"), was, was)
			if err := os.Rename(filepath.Join(dir, "b", "run.tmp"), filepath.Join(dir, "b", "run.sh")); err != nil {
				t.Fatal(err)
			}
		}, SyncStats{Files: 4, Hashed: 1, Dirs: 3, ReadDirs: 1}},
		{"file added to a folder", func() {
			writeFiles(t, dir, map[string]string{"a/notes.txt": "n\n"})
		}, SyncStats{Files: 5, Hashed: 1, Dirs: 3, ReadDirs: 1}},
		{"file removed", func() {
			os.Remove(filepath.Join(dir, "a", "notes.txt"))
		}, SyncStats{Files: 4, Dirs: 3, ReadDirs: 1}},
		{"folder added", func() {
			writeFiles(t, dir, map[string]string{"c/TOOL.hdlp": "name: c\n"})
		}, SyncStats{Files: 5, Hashed: 1, Dirs: 4, ReadDirs: 2}},
		{"folder removed", func() {
			os.RemoveAll(filepath.Join(dir, "c"))
		}, SyncStats{Files: 4, Dirs: 3, ReadDirs: 1}},
		{"folder replaced by a file", func() {
			os.RemoveAll(filepath.Join(dir, "a"))
			writeFiles(t, dir, map[string]string{"a": "name: a\n"})
		}, SyncStats{Files: 4, Hashed: 1, Dirs: 2, ReadDirs: 1}},
	}
	prev := first.Rev()
	for _, step := range steps {
		step.change()
		d := listed(t, dir, file, nil)
		tree := mustSyncLocal(t, d)
		t.Run(step.name, func(t *testing.T) {
			step.want.Loaded = true
			if got := d.LastSync(); got != step.want {
				t.Errorf("Sync after a restart: %+v, want %+v", got, step.want)
			}
			checkSameAsFresh(t, dir, tree, append(all, "a", "a/notes.txt", "c/TOOL.hdlp")...)
			if changed := tree.Rev() != prev; changed != (step.name != "nothing changed") {
				t.Errorf("Rev() = %s after %s, was %s", tree.Rev(), step.name, prev)
			}
		})
		prev = tree.Rev()
	}
}

// TestLocalDirListingUnsettled: a stat taken within the file system's
// clock granularity of the file's last change is not trusted (a change in
// the same tick would leave it as it is), so the next Sync reads the file
// again even though its stat did not change; once settled, it is trusted.
func TestLocalDirListingUnsettled(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "local.listing")
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "name: a\n"})
	fi, err := os.Stat(filepath.Join(dir, "a", "TOOL.hdlp"))
	if err != nil {
		t.Fatal(err)
	}
	changed := fi.ModTime() // the write also set the change time
	runs := []struct {
		name string
		now  time.Time
		want SyncStats
	}{
		{"just written", changed, SyncStats{Files: 1, Hashed: 1, Dirs: 2, ReadDirs: 2}},
		{"later, same stat", changed.Add(time.Hour), SyncStats{Files: 1, Hashed: 1, Dirs: 2, ReadDirs: 2, Loaded: true}},
		{"later again", changed.Add(time.Hour), SyncStats{Files: 1, Dirs: 2, Loaded: true}},
	}
	for _, r := range runs {
		d := &LocalDir{Path: dir, ListingFile: file, Now: func() time.Time { return r.now }}
		mustSyncLocal(t, d)
		if got := d.LastSync(); got != r.want {
			t.Errorf("%s: %+v, want %+v", r.name, got, r.want)
		}
		d.Close()
	}
}

func TestSettled(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	ns := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	tests := []struct {
		name string
		st   fileStat
		want bool
	}{
		{"no change time kept", fileStat{MTime: ns(-time.Hour)}, false},
		{"fine clock, changed 50ms before", fileStat{CTime: ns(-50*time.Millisecond - 7), MTime: ns(-time.Hour - 7)}, false},
		{"fine clock, changed 1s before", fileStat{CTime: ns(-time.Second - 7), MTime: ns(-time.Hour - 7)}, true},
		{"whole seconds, changed 1s before", fileStat{CTime: ns(-time.Second), MTime: ns(-time.Second)}, false},
		{"whole seconds, changed 3s before", fileStat{CTime: ns(-3 * time.Second), MTime: ns(-3 * time.Second)}, true},
		{"modification time in the future", fileStat{CTime: ns(-time.Hour - 7), MTime: ns(time.Hour + 7)}, true},
		{"changed after now", fileStat{CTime: ns(time.Second + 7), MTime: ns(-time.Hour - 7)}, false},
	}
	for _, tt := range tests {
		if got := settled(tt.st, now); got != tt.want {
			t.Errorf("%s: settled() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestLocalDirListingFileProblems: a listing file that cannot be used is
// ignored with a log line saying why; the Sync reads every file and gives
// the tree reading every file gives, and rewrites the file, which the next
// start uses.
func TestLocalDirListingFileProblems(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "name: a\n", "b/TOOL.hdlp": "name: b\n"})
	other := t.TempDir()
	writeFiles(t, other, map[string]string{"a/TOOL.hdlp": "name: a\n"})
	goodFile := func(t *testing.T, dir string) []byte {
		file := filepath.Join(t.TempDir(), "l")
		mustSyncLocal(t, listed(t, dir, file, nil))
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	good := goodFile(t, dir)
	// resum replaces the checksum of a listing file after a change.
	resum := func(data []byte) []byte {
		body := data[:len(data)-4]
		return binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, crcTable))
	}

	tests := []struct {
		name string
		data func(t *testing.T) []byte
		why  string
	}{
		{"garbage", func(*testing.T) []byte { return []byte("not a listing at all\n") }, "not a listing"},
		{"empty", func(*testing.T) []byte { return nil }, "not a listing"},
		{"another program's file", func(*testing.T) []byte {
			var buf bytes.Buffer
			gob.NewEncoder(&buf).Encode(struct{ Format string }{"toolagent-parse-cache-1"})
			return buf.Bytes()
		}, "not a listing"},
		{"another version", func(*testing.T) []byte {
			bad := bytes.Clone(good)
			bad[len(listingMagic)] = 9
			return resum(bad)
		}, "written as version 9"},
		{"another directory", func(t *testing.T) []byte { return goodFile(t, other) }, "another directory"},
		{"truncated", func(*testing.T) []byte { return good[:len(good)*2/3] }, "checksum"},
		{"a blob hash damaged", func(t *testing.T) []byte {
			blob := blobSum([]byte("name: a\n"))
			i := bytes.Index(good, blob[:])
			if i < 0 {
				t.Fatal("the listing file does not hold a's blob hash")
			}
			bad := bytes.Clone(good)
			bad[i+3] ^= 0xff
			return bad
		}, "checksum"},
		{"entries out of order, checksum right", func(t *testing.T) []byte {
			i, j := bytes.Index(good, []byte("a/TOOL.hdlp")), bytes.Index(good, []byte("b/TOOL.hdlp"))
			if i < 0 || j < 0 {
				t.Fatal("the listing file does not hold both paths")
			}
			bad := bytes.Clone(good)
			bad[i], bad[j] = 'b', 'a'
			return resum(bad)
		}, "corrupt"},
		{"a path that climbs out, checksum right", func(t *testing.T) []byte {
			l, err := decodeListing(good, dir)
			if err != nil {
				t.Fatal(err)
			}
			for i := range l.groups[0].entries {
				e := &l.groups[0].entries[i]
				e.Path = ".." + strings.TrimPrefix(e.Path, "a")
			}
			var buf bytes.Buffer
			if err := encodeListing(&buf, dir, l); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}, "corrupt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "l")
			if err := os.WriteFile(file, tt.data(t), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			d := listed(t, dir, file, slog.New(slog.NewTextHandler(&logs, nil)))
			tree := mustSyncLocal(t, d)
			if got, want := d.LastSync(), (SyncStats{Files: 2, Hashed: 2, Dirs: 3, ReadDirs: 3}); got != want {
				t.Errorf("Sync: %+v, want %+v (every file read)", got, want)
			}
			if !strings.Contains(logs.String(), "local dir listing ignored") || !strings.Contains(logs.String(), tt.why) {
				t.Errorf("log = %q; want a line saying the listing is ignored, %q", logs.String(), tt.why)
			}
			checkSameAsFresh(t, dir, tree, "a/TOOL.hdlp", "b/TOOL.hdlp")

			next := listed(t, dir, file, nil)
			mustSyncLocal(t, next)
			if got, want := next.LastSync(), (SyncStats{Files: 2, Dirs: 3, Loaded: true}); got != want {
				t.Errorf("the start after: %+v, want %+v (the rewritten listing used)", got, want)
			}
		})
	}
}

// TestLocalDirListingLinks: a symbolic link is read through the root on
// every Sync (its own stat says nothing of its target), so a change of
// the target shows, and a link that leaves the directory stays unreadable.
func TestLocalDirListingLinks(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "name: a\n", "target.txt": "one\n"})
	writeFiles(t, outside, map[string]string{"secret": "outside\n"})
	os.Symlink("../target.txt", filepath.Join(dir, "a", "link"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "a", "escape"))
	file := filepath.Join(t.TempDir(), "l")
	mustSyncLocal(t, listed(t, dir, file, nil))

	writeFiles(t, dir, map[string]string{"target.txt": "two\n"})
	d := listed(t, dir, file, nil)
	tree := mustSyncLocal(t, d)
	if got, want := d.LastSync(), (SyncStats{Files: 4, Hashed: 3, Dirs: 2, Loaded: true}); got != want {
		t.Errorf("Sync: %+v, want %+v (the changed target and both links read)", got, want)
	}
	if got, want := mustBlobHash(t, tree, "a/link"), blobHash([]byte("two\n")); got != want {
		t.Errorf("BlobHash(a/link) = %s, want the new target's %s", got, want)
	}
	if _, err := tree.BlobHash("a/escape"); err == nil {
		t.Error("BlobHash(a/escape) error = nil, want an error (the link leaves the directory)")
	}
	checkSameAsFresh(t, dir, tree, "a/TOOL.hdlp", "a/link", "a/escape", "target.txt")
}

// TestLocalDirTreeIsASnapshot: a tree lists folders as its Sync found
// them (the revision and blob hashes are of that moment too), and reads
// file contents from disk.
func TestLocalDirTreeIsASnapshot(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "one\n"})
	d := &LocalDir{Path: dir}
	t.Cleanup(func() { d.Close() })
	tree := mustSyncLocal(t, d)
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "two\n", "b/TOOL.hdlp": "b\n"})
	ents, err := fs.ReadDir(tree.FS(), ".")
	if err != nil || len(ents) != 1 || ents[0].Name() != "a" || !ents[0].IsDir() {
		t.Errorf("ReadDir(.) = %v, %v; want [a/] as the Sync found it", ents, err)
	}
	if got, want := mustBlobHash(t, tree, "a/TOOL.hdlp"), blobHash([]byte("one\n")); got != want {
		t.Errorf("BlobHash(a/TOOL.hdlp) = %s, want %s, the hash at the Sync", got, want)
	}
	if data, _ := fs.ReadFile(tree.FS(), "a/TOOL.hdlp"); string(data) != "two\n" {
		t.Errorf("ReadFile(a/TOOL.hdlp) = %q, want the current %q", data, "two\n")
	}
	// A folder the Sync did not list is read from disk.
	if ents, err := fs.ReadDir(tree.FS(), "b"); err != nil || len(ents) != 1 {
		t.Errorf("ReadDir(b) = %v, %v; want [TOOL.hdlp] from disk", ents, err)
	}
	if next := mustSyncLocal(t, d); next.Rev() == tree.Rev() {
		t.Errorf("the next Sync kept revision %s after two changes", next.Rev())
	}
}

func TestLocalDirSyncCanceled(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "a\n"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	d := &LocalDir{Path: dir}
	defer d.Close()
	if _, err := d.Sync(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Sync(canceled) error = %v, want context.Canceled", err)
	}
}

// TestLocalDirRevUnchanged: the revision is the one Sync computed before
// listings were kept — sha256 of the sorted "path\x00blob\n" lines, a link
// that cannot be read marked unreadable — so an upgrade keeps an unchanged
// directory's revision; names that sort differently as paths and as
// lines are among the files.
func TestLocalDirRevUnchanged(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a/TOOL.hdlp": "a\n", "a-b/TOOL.hdlp": "ab\n", "a.b/x": "x\n", "ab": "ab\n", "A/TOOL.hdlp": "A\n", "a/b/c": "c\n",
	})
	os.Symlink("/nonexistent", filepath.Join(dir, "a", "dangling"))
	var pairs []string
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fs.WalkDir(root.FS(), ".", func(name string, de fs.DirEntry, err error) error {
		if de.IsDir() {
			return nil
		}
		h := "unreadable"
		if data, err := fs.ReadFile(root.FS(), name); err == nil {
			h = blobHash(data)
		}
		pairs = append(pairs, name+"\x00"+h+"\n")
		return nil
	})
	slices.Sort(pairs)
	sum := sha256.Sum256([]byte(strings.Join(pairs, "")))
	want := "local:" + hex.EncodeToString(sum[:])[:16]
	d := &LocalDir{Path: dir}
	defer d.Close()
	if got := mustSyncLocal(t, d).Rev(); got != want {
		t.Errorf("Rev() = %s, want %s", got, want)
	}
}

// TestLocalDirTracked: while a watcher tracks the directory (Track), a
// Sync after reported changes stats only the reported top-level entries,
// and gives the tree reading every file gives, with the names it listed
// again (Tree.Delta);
// the first Sync after Track(true), one after a lost event (Changed("")),
// one with nothing reported and one after Track(false) stat everything.
func TestLocalDirTracked(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"README.md": "tools\n", "deep/TOOL.hdlp": "name: deep\n", "deep/sub/x.sh": "x\n"}
	for i := range 20 {
		files[fmt.Sprintf("t%02d/TOOL.hdlp", i)] = fmt.Sprintf("name: t%02d\n", i)
	}
	files["t03.bak/TOOL.hdlp"] = "name: bak\n" // sorts between t03 and t03/...
	writeFiles(t, dir, files)
	d := &LocalDir{Path: dir, Now: later}
	t.Cleanup(func() { d.Close() })
	mustSyncLocal(t, d)
	d.Track(true)
	d.Changed("t01")
	if mustSyncLocal(t, d); d.LastSync().Watched {
		t.Errorf("first Sync after Track(true) took the watcher's word: %+v", d.LastSync())
	}

	// One reported change: that folder is statted again, and the folder
	// with a folder in it, which the watcher does not watch (so a change
	// there is seen unreported); nothing else. No folder is read, not
	// even the directory: the folders' stats say their entries did not
	// change, and the watcher reports entries that come and go.
	base := mustSyncLocal(t, d).Rev()
	writeFiles(t, dir, map[string]string{"t03/TOOL.hdlp": "name: t03\nintent: new\n", "deep/sub/x.sh": "y\n"})
	d.Changed("t03")
	tree := mustSyncLocal(t, d)
	if st := d.LastSync(); !st.Watched || st.Hashed != 2 || st.ReadDirs != 0 {
		t.Errorf("after one reported change: %+v; want Watched, 2 files hashed (t03's, deep/sub's), no folder read", st)
	}
	if b, names, ok := tree.Delta(); !ok || b != base || !slices.Equal(names, []string{"deep", "t03"}) {
		t.Errorf("Delta() = %s, %q, %v; want %s, [deep t03], true", b, names, ok, base)
	}
	checkSameAsFresh(t, dir, tree, "t03/TOOL.hdlp", "t03.bak/TOOL.hdlp", "t04/TOOL.hdlp", "deep/sub/x.sh")

	// A change the watcher did not report stays unseen while it tracks, a
	// folder that appeared too; a Sync with nothing reported sees them.
	writeFiles(t, dir, map[string]string{"t05/TOOL.hdlp": "name: t05\nintent: unreported\n", "t99/TOOL.hdlp": "name: t99\n"})
	d.Changed("t06")
	tree = mustSyncLocal(t, d)
	if b, _ := tree.BlobHash("t05/TOOL.hdlp"); b == blobHash([]byte("name: t05\nintent: unreported\n")) {
		t.Errorf("an unreported change was read: the Sync did not take the watcher's word")
	}
	listed := func(name string) bool {
		ents, err := fs.ReadDir(tree.FS(), ".")
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return e.Name() == name })
	}
	if listed("t99") {
		t.Errorf("an unreported folder that appeared is listed: the Sync read the directory's names")
	}
	d.Changed("t99") // as the watcher reports it
	tree = mustSyncLocal(t, d)
	if !listed("t99") {
		t.Errorf("a reported folder that appeared is not listed")
	}
	for _, next := range []func(){
		func() {}, // nothing reported: a scheduled Sync
		func() { d.Changed("t07"); d.Changed("") }, // a lost event
		func() { d.Track(false); d.Changed("t07") },
	} {
		files["x"] += "x" // a new content each round
		writeFiles(t, dir, map[string]string{"t05/TOOL.hdlp": "name: t05\nintent: " + files["x"] + "\n"})
		next()
		tree = mustSyncLocal(t, d)
		if d.LastSync().Watched {
			t.Errorf("Sync took the watcher's word: %+v", d.LastSync())
		}
		if _, _, ok := tree.Delta(); ok {
			t.Errorf("a Sync that statted everything has a Delta")
		}
		checkSameAsFresh(t, dir, tree, "t05/TOOL.hdlp", "t99/TOOL.hdlp")
		d.Track(true)
		mustSyncLocal(t, d) // the full Sync Track(true) asks for
	}
	// A removed folder is gone from a watched Sync.
	if err := os.RemoveAll(filepath.Join(dir, "t10")); err != nil {
		t.Fatal(err)
	}
	d.Changed("t10")
	tree = mustSyncLocal(t, d)
	if _, err := tree.BlobHash("t10/TOOL.hdlp"); err == nil || !d.LastSync().Watched {
		t.Errorf("removed folder still listed (err %v) or Sync not watched (%+v)", err, d.LastSync())
	}
	checkSameAsFresh(t, dir, tree, "t09/TOOL.hdlp", "t11/TOOL.hdlp")

	// A watched Sync that fails loses what was reported to it: the next
	// stats everything.
	writeFiles(t, dir, map[string]string{"t12/TOOL.hdlp": "name: t12\nintent: lost\n"})
	d.Changed("t12")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := d.Sync(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sync(canceled) = %v, want context.Canceled", err)
	}
	d.Changed("t13") // reported before the next Sync
	tree = mustSyncLocal(t, d)
	if d.LastSync().Watched {
		t.Errorf("the Sync after a failed one took the watcher's word: %+v", d.LastSync())
	}
	checkSameAsFresh(t, dir, tree, "t12/TOOL.hdlp")
}

// TestLocalDirKeepRead: a file that KeepRead accepts and the Sync read to
// hash it is served once from that read (the content the Sync hashed, even
// if the file changed since), then from disk; other files from disk.
func TestLocalDirKeepRead(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "name: a\n", "a/run.sh": "echo a\n"})
	d := &LocalDir{Path: dir, Now: later, KeepRead: func(name string) bool { return path.Base(name) == "TOOL.hdlp" }}
	t.Cleanup(func() { d.Close() })
	tree := mustSyncLocal(t, d)
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "name: a\nintent: later\n", "a/run.sh": "echo later\n"})
	read := func(name string) string {
		t.Helper()
		f, err := tree.FS().Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		data, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(data)) || fi.IsDir() {
			t.Errorf("Stat(%s) = %v, %v; want a file of %d bytes", name, fi, err, len(data))
		}
		return string(data)
	}
	if got := read("a/TOOL.hdlp"); got != "name: a\n" {
		t.Errorf("first read of a kept file = %q, want what the Sync hashed", got)
	}
	if got := read("a/TOOL.hdlp"); got != "name: a\nintent: later\n" {
		t.Errorf("second read = %q, want the file on disk", got)
	}
	if got := read("a/run.sh"); got != "echo later\n" {
		t.Errorf("a file KeepRead refuses = %q, want the file on disk", got)
	}
}

// TestLocalDirWatchedListingSaved: a watched Sync's listing reaches
// ListingFile (written off the Sync; Close waits for it), so a restart
// reads nothing the watched Sync read.
func TestLocalDirWatchedListingSaved(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "local.listing")
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "name: a\n", "b/TOOL.hdlp": "name: b\n"})
	d := &LocalDir{Path: dir, ListingFile: file, Now: later}
	mustSyncLocal(t, d)
	d.Track(true)
	mustSyncLocal(t, d)
	writeFiles(t, dir, map[string]string{"b/TOOL.hdlp": "name: b\nintent: edited\n"})
	d.Changed("b")
	want := mustSyncLocal(t, d)
	if st := d.LastSync(); !st.Watched || st.Hashed != 1 {
		t.Fatalf("watched Sync: %+v, want Watched and 1 file hashed", st)
	}
	restart := func(when string) {
		t.Helper()
		next := &LocalDir{Path: dir, ListingFile: file, Now: later}
		defer next.Close()
		tree := mustSyncLocal(t, next)
		if st := next.LastSync(); !st.Loaded || st.Hashed != 0 {
			t.Errorf("Sync after a restart %s: %+v, want Loaded and nothing hashed (the watched Sync's listing)", when, st)
		}
		if tree.Rev() != want.Rev() {
			t.Errorf("Rev() after a restart %s = %s, want %s", when, tree.Rev(), want.Rev())
		}
	}
	d.Flush()
	restart("after Flush")

	writeFiles(t, dir, map[string]string{"b/TOOL.hdlp": "name: b\nintent: edited again\n"})
	d.Changed("b")
	want = mustSyncLocal(t, d)
	d.Close()
	restart("after Close")
}
