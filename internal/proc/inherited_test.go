package proc

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCloseOnExecEach: the way for a kernel without close_range marks
// every descriptor from the first one asked for, and none below it.
func TestCloseOnExecEach(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var fds []int
	for range 3 {
		fd, err := syscall.Open(path, syscall.O_RDONLY, 0) // no O_CLOEXEC
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Close(fd) })
		fds = append(fds, fd)
	}
	cloexec := func(fd int) bool {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			t.Fatal(err)
		}
		return flags&unix.FD_CLOEXEC != 0
	}
	if err := closeOnExecEach(fds[1]); err != nil {
		t.Fatal(err)
	}
	if cloexec(fds[0]) {
		t.Errorf("descriptor %d, below the first asked for (%d), was marked", fds[0], fds[1])
	}
	for _, fd := range fds[1:] {
		if !cloexec(fd) {
			t.Errorf("descriptor %d was not marked close-on-exec", fd)
		}
	}
}
