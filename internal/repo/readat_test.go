package repo

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadAtWholeFile: readAt returns every byte of a file, whatever its
// size, and of a file whose stat says less than it holds (a /proc file
// says 0): the read that fills the stat's size is not taken for the end
// unless it left the byte past it unfilled.
func TestReadAtWholeFile(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{0, 1, 7, 4095, 4096, 4097, 65536, 1 << 20}
	for _, n := range sizes {
		b := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(n)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(dir, name string) []byte {
		t.Helper()
		dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(dfd)
		got, err := readAt(&folder{path: ".", fd: dfd}, name)
		if err != nil {
			t.Fatalf("readAt %s/%s: %v", dir, name, err)
		}
		return got
	}
	for _, n := range sizes {
		want, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(n)))
		if err != nil {
			t.Fatal(err)
		}
		if got := read(dir, strconv.Itoa(n)); !bytes.Equal(got, want) {
			t.Errorf("readAt of a %d-byte file: %d bytes, equal %v", n, len(got), bytes.Equal(got, want))
		}
	}
	// /proc/self/status: its stat says 0 bytes; its content is hundreds.
	if fi, err := os.Stat("/proc/self/status"); err != nil || fi.Size() != 0 {
		t.Skipf("/proc/self/status does not state size 0 here (%v)", err)
	}
	got := read("/proc/self", "status")
	if len(got) < 100 || !bytes.HasPrefix(got, []byte("Name:")) || !bytes.HasSuffix(got, []byte("\n")) {
		t.Errorf("readAt of /proc/self/status: %q; want the whole file", got)
	}
}
