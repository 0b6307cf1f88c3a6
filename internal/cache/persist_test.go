package cache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolagent/toolagent/internal/hldp"
)

const good = `name: t
display: T
intent: test tool
method: run
executor: shell
argv: [echo, "{msg}", ["--n", "{n}"]]
params_schema:
  msg: { type: string, required: true, description: "message", pattern: "^[a-z]+$" }
  n: { type: integer, required: false, default: 3, enum: [1, 2, 3], minimum: 1 }
  tags: { type: array, required: false, items: { type: string }, default: [a, b] }
  opts: { type: object, required: false, default: { k: 1, nested: [true, 2.5] } }
  ratio: { type: number, required: false, default: 0.5 }
constraints: { timeout_ms: 1500, max_output_bytes: 100, require_confirm: true, max_concurrency: 2 }
keywords: [x, y]
author: a
created: 2026-11-30
why: w
`

const bad = `name: u
display: U
intent: test
method: exec
executor: sh
params_schema: {}
constraints: { require_confrim: true }
author: a
created: 2026-11-30
why: w
`

// TestPersistRoundTrip: what Save writes, Open gives back equal — the
// parsed tool with every param value type, and a parse error with its
// diagnostics — so a restart parses nothing and behaves the same.
func TestPersistRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "parse.cache")
	c, err := Open(path)
	if err != nil {
		t.Fatalf("Open(missing) = %v, want an empty cache and no error", err)
	}
	tool, err := hldp.Parse("tools/t/TOOL.hdlp", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	_, perr := hldp.Parse("tools/u/TOOL.hdlp", []byte(bad))
	if perr == nil {
		t.Fatal("bad definition parsed")
	}
	kt := Key{Path: "t/TOOL.hdlp", Blob: "aaa"}
	ku := Key{Path: "u/TOOL.hdlp", Blob: "bbb"}
	c.Put(kt, Outcome{Tool: tool, Rev: "c0ffee"})
	c.Put(ku, Outcome{Err: perr})
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("state dir holds %d files after Save, want only the cache (no temp files)", len(ents))
	}

	c2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := c2.Get(kt)
	if !ok {
		t.Fatal("tool not in the reopened cache")
	}
	if got.Rev != "c0ffee" {
		t.Errorf("reloaded outcome revision = %q, want c0ffee (provenance survives a restart)", got.Rev)
	}
	if diff := cmp.Diff(tool, got.Tool, cmpopts.IgnoreUnexported(hldp.Tool{})); diff != "" {
		t.Errorf("reloaded tool differs (-parsed +reloaded):\n%s", diff)
	}
	// The reloaded tool works like the parsed one.
	p1, err1 := tool.CheckParams(map[string]any{"msg": "hi"})
	p2, err2 := got.Tool.CheckParams(map[string]any{"msg": "hi"})
	if err1 != nil || err2 != nil || !cmp.Equal(p1, p2) {
		t.Errorf("CheckParams: parsed %v %v, reloaded %v %v", p1, err1, p2, err2)
	}
	if string(tool.InputSchema()) != string(got.Tool.InputSchema()) {
		t.Errorf("InputSchema differs:\n%s\n%s", tool.InputSchema(), got.Tool.InputSchema())
	}
	gu, ok := c2.Get(ku)
	if !ok || gu.Err == nil || gu.Err.Error() != perr.Error() {
		t.Fatalf("reloaded error = %v, want %v", gu.Err, perr)
	}
	if n := len(hldp.Diagnostics(gu.Err)); n != len(hldp.Diagnostics(perr)) || n == 0 {
		t.Errorf("reloaded error has %d diagnostics, want %d", n, len(hldp.Diagnostics(perr)))
	}
	// Unchanged: Save writes nothing (the file keeps its modification time).
	fi1, _ := os.Stat(path)
	if err := c2.Save(); err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(path)
	if !fi1.ModTime().Equal(fi2.ModTime()) {
		t.Error("Save of an unchanged cache rewrote the file")
	}
}

func TestOpenIgnoresBadFiles(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt")
	if err := os.WriteFile(corrupt, []byte("not gob at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Open(corrupt)
	if err == nil || !strings.Contains(err.Error(), "ignored") || c == nil || c.Len() != 0 {
		t.Errorf("Open(corrupt) = %v, %v; want an empty cache and an error saying it was ignored", c, err)
	}
	// The cache still works and can overwrite the bad file.
	c.Put(Key{Path: "p", Blob: "b"}, Outcome{Tool: &hldp.Tool{Name: "p"}})
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(corrupt)
	if err != nil || c2.Len() != 1 {
		t.Errorf("reopen after overwrite: %v, len %d", err, c2.Len())
	}
	// Truncated file: header fine, body cut.
	data, _ := os.ReadFile(corrupt)
	trunc := filepath.Join(dir, "trunc")
	os.WriteFile(trunc, data[:len(data)-10], 0o644)
	if c, err := Open(trunc); err == nil || c.Len() != 0 {
		t.Errorf("Open(truncated) = len %d, %v; want empty and an error", c.Len(), err)
	}
}
