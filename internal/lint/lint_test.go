package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolagent/toolagent/internal/host"
)

const good = "name: %s\ndisplay: d\nintent: %s\nmethod: run\nexecutor: shell\nargv: [echo, hi]\nparams_schema: {}\nauthor: t\ncreated: 2026-01-01\nwhy: a test\n"

// TestFile: one file's problems carry file:line, and a good file has none.
func TestFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "TOOL.hdlp")
	if err := os.WriteFile(bad, []byte("name: x\nbogus_key: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := File(bad)
	if err != nil || len(lines) == 0 || !strings.HasPrefix(lines[0], bad+":") {
		t.Errorf("File(bad) = %q, %v; want problems naming %s:LINE", lines, err, bad)
	}
	if err := os.WriteFile(bad, []byte(strings.Replace(good, "%s", "x", 2)), 0o644); err != nil {
		t.Fatal(err)
	}
	if lines, err := File(bad); err != nil || len(lines) != 0 {
		t.Errorf("File(good) = %q, %v; want none", lines, err)
	}
}

// TestTree: a folder that does not load is a problem; a tool whose
// executor is not configured here is not.
func TestTree(t *testing.T) {
	fsys := fstest.MapFS{
		"ok/TOOL.hdlp":     {Data: []byte(strings.Replace(strings.Replace(good, "%s", "ok", 1), "%s", "say hi", 1))},
		"remote/TOOL.hdlp": {Data: []byte(strings.Replace(strings.Replace(strings.Replace(good, "%s", "remote", 1), "%s", "say hi far", 1), "shell", "gatekeeper", 1))},
		"broken/TOOL.hdlp": {Data: []byte("name: broken\nbogus_key: 1\n")},
	}
	s := host.Setup{Paths: host.Paths{Tools: host.Embedded, State: t.TempDir(), Embedded: fsys}}
	if err := s.Resolve(os.Getenv); err != nil {
		t.Fatal(err)
	}
	l, err := s.Load(true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lines := Tree(l, host.Embedded)
	if len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), "broken") || strings.Contains(strings.Join(lines, "\n"), "remote") {
		t.Errorf("Tree() = %q; want the broken folder's problems only", lines)
	}
	// A tree on disk: each line names the file read there.
	if got := Tree(l, "/srv/tools"); !strings.HasPrefix(got[0], "/srv/tools/broken/TOOL.hdlp:") {
		t.Errorf("Tree(l, /srv/tools) = %q; want lines naming /srv/tools/broken/TOOL.hdlp", got)
	}
	if Summary(1, 1, 1) != "1 tool folder, 1 callable, 1 problem" || Summary(2, 0, 0) != "2 tool folders, 0 callable, 0 problems" {
		t.Errorf("Summary: %q, %q", Summary(1, 1, 1), Summary(2, 0, 0))
	}
}
