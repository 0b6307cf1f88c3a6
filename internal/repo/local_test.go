package repo

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
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
