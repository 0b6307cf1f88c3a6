package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/proc"
)

// TestResolve: the state directory follows XDG_STATE_HOME, the files
// root the state directory, and a named tree counts as chosen.
func TestResolve(t *testing.T) {
	xdg := t.TempDir()
	p := Paths{Tools: "/some/tools"}
	if err := p.Resolve(func(k string) string { return map[string]string{"XDG_STATE_HOME": xdg}[k] }); err != nil {
		t.Fatal(err)
	}
	want := Paths{Tools: "/some/tools", State: filepath.Join(xdg, "toolagent"), FilesRoot: filepath.Join(xdg, "toolagent", "files"), ToolsChosen: true, resolved: true}
	if p != want {
		t.Errorf("Resolve() = %+v; want %+v", p, want)
	}
}

// TestLoadEmbedded: a command without a sandbox loads the tree it is
// given as the embedded one; a tool whose executor is not configured
// here is disabled, saying so.
func TestLoadEmbedded(t *testing.T) {
	tool := "name: %s\ndisplay: d\nintent: say hello\nmethod: run\nexecutor: %s\nargv: [echo, hi]\nparams_schema: {}\nauthor: t\ncreated: 2026-01-01\nwhy: a test\n"
	fsys := fstest.MapFS{
		"hello/TOOL.hdlp":  {Data: []byte(fmt.Sprintf(tool, "hello", "shell"))},
		"remote/TOOL.hdlp": {Data: []byte(fmt.Sprintf(tool, "remote", "gatekeeper"))},
	}
	state := t.TempDir()
	s := Setup{Paths: Paths{Tools: Embedded, State: state, Embedded: fsys}}
	if err := s.Resolve(os.Getenv); err != nil {
		t.Fatal(err)
	}
	l, err := s.Load(true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if e, ok := l.Snap.Lookup("hello"); !ok || e.Status != catalog.Enabled {
		t.Errorf("hello = %+v, %v; want enabled", e, ok)
	}
	if e, ok := l.Snap.Lookup("remote"); !ok || e.Status != catalog.Disabled || e.Reason != "executor gatekeeper is not configured" {
		t.Errorf("remote = %s %q; want disabled, not configured", e.Status, e.Reason)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory: %v, %v; want mode 0700", fi, err)
	}
}

// TestOpenSandboxMode: a mode other than on and off is ErrSandboxMode;
// off is no sandbox.
func TestOpenSandboxMode(t *testing.T) {
	if _, err := OpenSandbox("maybe", proc.SandboxOptions{}); !errors.Is(err, ErrSandboxMode) {
		t.Errorf("OpenSandbox(maybe) = %v; want ErrSandboxMode", err)
	}
	if sb, err := OpenSandbox(SandboxOff, proc.SandboxOptions{}); sb != nil || err != nil {
		t.Errorf("OpenSandbox(off) = %v, %v; want nil, nil", sb, err)
	}
}
