package repo

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLocalDirOffline: a restarted LocalDir's Offline serves the listing
// its last Sync kept, with that Sync's revision and blob hashes, reading
// no file it can vouch for (one removed since is still listed); the first
// Sync after it verifies the directory, reporting what changed while no
// process ran, and reading only that. Without a listing, or after a Sync,
// there is no Offline tree.
func TestLocalDirOffline(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "local.listing")
	writeFiles(t, dir, map[string]string{
		"a/TOOL.hdlp": "name: a\n",
		"b/TOOL.hdlp": "name: b\n",
		"b/run.sh":    "echo b\n",
	})
	if err := os.Symlink("TOOL.hdlp", filepath.Join(dir, "b", "a.hdlp")); err != nil {
		t.Fatal(err)
	}
	all := []string{"a/TOOL.hdlp", "b/TOOL.hdlp", "b/run.sh", "b/a.hdlp"}

	if _, err := listed(t, dir, file, nil).Offline(); !errors.Is(err, ErrNoListing) {
		t.Fatalf("Offline without a listing file = %v; want ErrNoListing", err)
	}
	d := listed(t, dir, file, nil)
	first := mustSyncLocal(t, d)
	if _, err := d.Offline(); err == nil {
		t.Errorf("Offline after a Sync succeeded; want an error")
	}
	d.Close()

	d = listed(t, dir, file, nil)
	off, err := d.Offline()
	if err != nil {
		t.Fatalf("Offline: %v", err)
	}
	if off.Rev() != first.Rev() {
		t.Errorf("Offline Rev() = %s; want the last Sync's %s", off.Rev(), first.Rev())
	}
	checkSameAsFresh(t, dir, off, all...)
	if data, err := readTree(off, "b/run.sh"); err != nil || data != "echo b\n" {
		t.Errorf("Offline tree reads b/run.sh = %q, %v", data, err)
	}
	again := mustSyncLocal(t, d)
	if got, want := d.LastSync(), (SyncStats{Files: 4, Hashed: 1, Dirs: 3, Loaded: true}); got != want {
		t.Errorf("the Sync after Offline, nothing changed: %+v; want %+v (the link read, nothing else)", got, want)
	}
	if again.Rev() != first.Rev() {
		t.Errorf("the Sync after Offline: Rev() = %s; want %s", again.Rev(), first.Rev())
	}
	d.Close()

	// Changed while no process ran: the Offline tree is the last run's
	// (a removed file still listed; the link, read now, points to a file
	// that did not change), the Sync after it the directory's.
	writeFiles(t, dir, map[string]string{"a/TOOL.hdlp": "name: a\nintent: changed\n"})
	if err := os.Remove(filepath.Join(dir, "b", "run.sh")); err != nil {
		t.Fatal(err)
	}
	d = &LocalDir{Path: dir, ListingFile: file, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}
	defer d.Close()
	off, err = d.Offline()
	if err != nil {
		t.Fatalf("Offline after changes: %v", err)
	}
	if off.Rev() != first.Rev() {
		t.Errorf("Offline after changes: Rev() = %s; want the listing's %s", off.Rev(), first.Rev())
	}
	if h, err := off.BlobHash("b/run.sh"); err != nil || h == "" {
		t.Errorf("Offline: BlobHash(b/run.sh) = %q, %v; want the listing's hash of the removed file", h, err)
	}
	verified := mustSyncLocal(t, d)
	if verified.Rev() == first.Rev() {
		t.Errorf("the Sync after Offline did not see the changes: Rev() = %s", verified.Rev())
	}
	checkSameAsFresh(t, dir, verified, "a/TOOL.hdlp", "b/TOOL.hdlp", "b/a.hdlp")
	if got, want := d.LastSync(), (SyncStats{Files: 3, Hashed: 2, Dirs: 3, ReadDirs: 1, Loaded: true}); got != want {
		t.Errorf("the Sync after Offline, one file changed, one removed: %+v; want %+v", got, want)
	}
}

// readTree reads name from t's FS.
func readTree(t *Tree, name string) (string, error) {
	data, err := fs.ReadFile(t.FS(), name)
	return string(data), err
}
