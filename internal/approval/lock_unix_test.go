//go:build unix

package approval

import (
	"os"
	"os/exec"
	"testing"
)

// TestCloseReleasesLockHeldByChild: a process that holds a copy of the
// lock's open file (a child started while the queue was open, still
// between its fork and its exec, here one given the file outright) does
// not keep the queue locked after Close: this process opens it again at
// once, while the child still runs.
func TestCloseReleasesLockHeldByChild(t *testing.T) {
	s, c, dir := newStore(t)
	child := exec.Command("sleep", "600")
	child.ExtraFiles = []*os.File{s.lock}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	s2, err := Open(Options{Dir: dir, Now: c.Now})
	if err != nil {
		t.Fatalf("Open after Close, a child holding a copy of the lock's file: %v; want the queue", err)
	}
	s2.Close()
}
