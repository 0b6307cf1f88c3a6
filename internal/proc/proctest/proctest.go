// Package proctest helps the tests of packages whose children run in a
// proc.Sandbox: a sandbox that fails the test when it cannot be built
// (bubblewrap is part of the product, and .ci/run installs it) and skips
// only when asked to, a host directory the sandbox does not replace with a
// private one, and a count of processes by a marker in their argv, which
// works across the sandbox's PID namespaces; and the processes a test
// left behind (Descendants, WithMarker, procs.go).
//
// Imports: proc. Imported only by tests.
package proctest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/toolagent/toolagent/internal/proc"
)

// NoSandboxEnv set to 1 skips the tests that need a sandbox, on a machine
// without bubblewrap.
const NoSandboxEnv = "TOOLAGENT_TEST_NO_SANDBOX"

// SkipWithoutSandbox skips the test when NoSandboxEnv asks for it.
func SkipWithoutSandbox(t testing.TB) {
	t.Helper()
	if os.Getenv(NoSandboxEnv) == "1" {
		t.Skip(NoSandboxEnv + "=1: sandbox tests skipped (install bubblewrap and unset it to run them)")
	}
}

// NewSandbox builds a sandbox or fails the test (see SkipWithoutSandbox).
func NewSandbox(t testing.TB, opts proc.SandboxOptions) *proc.Sandbox {
	t.Helper()
	SkipWithoutSandbox(t)
	sb, err := proc.NewSandbox(opts)
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	t.Cleanup(sb.Close)
	return sb
}

// HostDir returns a new directory outside /tmp and /var/tmp (which are
// private inside a sandbox, so a secret or a write there proves nothing),
// readable by every user, removed at the end of the test: under /var/lib when that is writable
// (root), else under the home directory; the test is skipped without
// either.
func HostDir(t testing.TB) string {
	t.Helper()
	for _, base := range []string{"/var/lib", os.Getenv("HOME")} {
		if base == "" {
			continue
		}
		if d, err := os.MkdirTemp(base, "toolagent-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			// Readable by every user: tools run as users of their own.
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Skip("no writable directory outside /tmp (/var/lib or $HOME) for a sandbox test")
	return ""
}

// GrantDir returns a HostDir the calls of sb may write where the sandbox
// lets them, as an operator prepares a path granted to tools: group
// writable by the sandbox's group under MechanismLandlock (calls run as
// users of their own in it), writable by everyone otherwise. A write
// that fails there was refused by the sandbox, not by permissions.
func GrantDir(t testing.TB, sb *proc.Sandbox) string {
	t.Helper()
	d := HostDir(t)
	if gid, ok := sb.Group(); ok {
		if err := os.Chown(d, -1, int(gid)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o770|os.ModeSetgid); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// CountMarked counts the live processes whose name, argv[0], begins with
// marker (`exec -a MARKER sleep 9` names one); a zombie is dead and does
// not count. Only the name counts, not the arguments: bwrap and the shell
// that start a marked process carry the marker in theirs.
func CountMarked(marker string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		name, _, _ := bytes.Cut(b, []byte{0})
		if err == nil && bytes.HasPrefix(name, []byte(marker)) && !zombie(e.Name()) {
			n++
		}
	}
	return n
}

// zombie reports whether process pid is a zombie (state Z).
func zombie(pid string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return true // gone
	}
	// Format: pid (comm) state ...; comm may hold spaces: cut at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
