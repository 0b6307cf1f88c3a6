package operator

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// TestToken: the operator token is made once, 0600, then read back; a
// token other users may read is refused.
func TestToken(t *testing.T) {
	state := t.TempDir()
	first, created, err := EnsureToken(state)
	if err != nil || !created || len(first) < 40 {
		t.Fatalf("EnsureToken() = %q, %v, %v; want a new secret", first, created, err)
	}
	if fi, err := os.Stat(TokenPath(state)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v; want mode 0600", fi, err)
	}
	again, created, err := EnsureToken(state)
	if err != nil || created || again != first {
		t.Errorf("EnsureToken() again = %q, %v, %v; want the same secret, not made", again, created, err)
	}
	if err := os.Chmod(TokenPath(state), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadToken(state); err == nil || !strings.Contains(err.Error(), "readable by other users") {
		t.Errorf("ReadToken() of a 0644 file = %v; want a refusal", err)
	}
}

// TestInfo: daemon.json round-trips, and its remover removes only the
// record of the daemon that wrote it.
func TestInfo(t *testing.T) {
	state := t.TempDir()
	info := Info{URL: "http://127.0.0.1:1", PID: 42, Source: "dir x", Open: true, Version: "devel"}
	remove, err := WriteInfo(state, info)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReadInfo(state); err != nil || got != info {
		t.Errorf("ReadInfo() = %+v, %v; want %+v", got, err, info)
	}
	other := info
	other.PID = 43
	if _, err := WriteInfo(state, other); err != nil {
		t.Fatal(err)
	}
	remove() // another daemon's record now: kept
	if got, err := ReadInfo(state); err != nil || got.PID != 43 {
		t.Errorf("after the first daemon's remove: ReadInfo() = %+v, %v; want the second's", got, err)
	}
	if _, err := ReadInfo(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadInfo() of an empty state = %v; want fs.ErrNotExist", err)
	}
}
