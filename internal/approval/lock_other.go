//go:build !unix

package approval

import (
	"fmt"
	"os"
)

// lockDir opens path without a lock: flock is Unix-only, so on other
// systems nothing stops a second process from opening the directory.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	return f, nil
}

// unlockDir closes f.
func unlockDir(f *os.File) error { return f.Close() }
