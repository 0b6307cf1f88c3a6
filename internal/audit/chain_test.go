package audit

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileChain: the file store's lines form a hash chain across
// rotations and reopening; VerifyFile finds every line and the head,
// ExportFile writes them oldest first, Recent shows records without
// their links, and an edited, removed or inserted line breaks the chain
// where it is.
func TestFileChain(t *testing.T) {
	dir := t.TempDir()
	write := func(n, from int) {
		a, err := Open(dir, 600, 10)
		if err != nil {
			t.Fatal(err)
		}
		log := slog.New(a.Handler())
		for i := from; i < from+n; i++ {
			log.Info("call", "tool", "shell-exec", "i", i, "run_id", "r"+strings.Repeat("x", i%7))
		}
		a.Close()
	}
	write(8, 0)
	write(4, 8) // reopened: the chain goes on from the last line
	if _, err := os.Stat(filepath.Join(dir, "audit.jsonl.1")); err != nil {
		t.Fatalf("no rotation happened (the test wants the chain across files): %v", err)
	}
	res, err := VerifyFile(dir)
	if err != nil || res.Rows != 12 || res.Broken != "" || len(res.Head) != 64 {
		t.Fatalf("VerifyFile = %+v, %v; want 12 rows, a head, no break", res, err)
	}
	var out bytes.Buffer
	if n, err := ExportFile(dir, &out); err != nil || n != 12 {
		t.Fatalf("ExportFile = %d, %v", n, err)
	}
	var first Row
	json.Unmarshal(bytes.SplitN(out.Bytes(), []byte("\n"), 2)[0], &first)
	if !strings.Contains(string(first.Record), `"i":0`) || strings.Contains(string(first.Record), "hash") || first.Seq != 1 || first.At.IsZero() {
		t.Errorf("first exported row = %+v; want record i=0 without its link, seq 1, its time", first)
	}
	a, _ := Open(dir, 600, 10)
	recs, _ := a.Recent(Filter{}, 100)
	a.Close()
	if len(recs) != 12 || recs[0]["i"] != float64(11) || recs[0]["hash"] != nil {
		t.Errorf("Recent = %d records, newest %v; want 12, i=11 first, no hash field", len(recs), recs[0])
	}

	cur := filepath.Join(dir, "audit.jsonl")
	orig, _ := os.ReadFile(cur)
	for name, edit := range map[string]func([]byte) []byte{
		"edited":  func(b []byte) []byte { return bytes.Replace(b, []byte(`"i":11`), []byte(`"i":12`), 1) },
		"removed": func(b []byte) []byte { _, rest, _ := bytes.Cut(b, []byte("\n")); return rest },
		"inserted": func(b []byte) []byte {
			return append(b, []byte(`{"time":"2026-01-01T00:00:00Z","msg":"forged"}`+"\n")...)
		},
	} {
		os.WriteFile(cur, edit(bytes.Clone(orig)), 0o600)
		if res, err := VerifyFile(dir); err != nil || res.Broken == "" || !strings.Contains(res.Broken, cur+":") {
			t.Errorf("%s line: VerifyFile = %+v, %v; want a break naming %s:LINE", name, res, err, cur)
		}
	}
}
