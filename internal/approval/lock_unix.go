//go:build unix

package approval

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive, non-blocking flock on path (created 0600).
// The kernel drops it when the process dies, so a crash leaves no stale
// lock. Within one process a second open of the same file conflicts too.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("approval: lock %s: %w", path, err)
	}
	return f, nil
}

// unlockDir releases the lock lockDir took and closes f. The lock is
// released before the close: a process started at this moment holds a
// copy of f (between its fork and its exec, which the sandbox's user
// namespace set-up makes longer), and the kernel keeps an flock while
// any copy of its open file is open, so a close alone left the queue
// locked against the next Open of this very process
// (TestCloseReleasesLockHeldByChild).
func unlockDir(f *os.File) error {
	uerr := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return errors.Join(uerr, f.Close())
}
