package audit

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestRecentNewestFirstAcrossRotation: records come back newest first,
// filtered, across rotated files; the oldest file beyond keep is dropped.
func TestRecentNewestFirstAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(dir, 600, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	log := slog.New(a.Handler())
	for i := range 30 {
		tool := "a"
		if i%3 == 0 {
			tool = "b"
		}
		log.Info("call", "tool", tool, "caller", fmt.Sprintf("c%d", i), "status", "success", "n", i)
	}
	got, err := a.Recent(Filter{}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[0]["n"] != float64(29) || got[4]["n"] != float64(25) {
		t.Errorf("Recent(5) = %v; want n 29..25", got)
	}
	bs, _ := a.Recent(Filter{Tool: "b"}, 100)
	for _, r := range bs {
		if r.Str("tool") != "b" {
			t.Errorf("filter tool=b returned %v", r)
		}
	}
	if len(bs) == 0 || bs[0]["n"] != float64(27) {
		t.Errorf("newest b = %v; want n 27", bs)
	}
	if _, err := os.Stat(filepath.Join(dir, "audit.jsonl.3")); err == nil {
		t.Errorf("a file beyond keep=2 exists")
	}
	fi, err := os.Stat(filepath.Join(dir, "audit.jsonl"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("audit file %v %v; want 0600", fi, err)
	}
	all, _ := a.Recent(Filter{}, 1000)
	if len(all) >= 30 {
		t.Errorf("kept %d records; rotation with keep=2 and 600 bytes a file should have dropped the oldest", len(all))
	}
}
