package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// TestBenchCatalog runs benchcatalog on a small catalog and checks its
// counts (never its timings): the cold start parses and hashes every
// file, the warm start neither parses nor reads any, and one changed file
// costs one read and one parse; reported by the watcher, it costs no
// folder read, and a scan of its folder, not of every folder.
func TestBenchCatalog(t *testing.T) {
	const n = 30
	parent := t.TempDir()
	var out, errOut strings.Builder
	if err := run(t.Context(), []string{"--tools", "30", "--queries", "50", "--dir", parent, "--json"}, &out, &errOut); err != nil {
		t.Fatalf("benchcatalog: %v\n%s", err, errOut.String())
	}
	var r benchReport
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
		t.Fatalf("benchcatalog --json: %v\n%s", err, out.String())
	}
	checks := []struct {
		what      string
		got, want int
	}{
		{"tools", r.Tools, n},
		{"cold start parsed", r.Cold.Parsed, n},
		{"cold start hashed", r.Cold.Hashed, n},
		{"warm start parsed", r.Warm.Parsed, 0},
		{"warm start reused", r.Warm.Reused, n},
		{"warm start hashed", r.Warm.Hashed, 0},
		{"warm start folders read", r.Warm.ReadDirs, 0},
		{"reload parsed", r.Changed.Parsed, 1},
		{"reload hashed", r.Changed.Hashed, 1},
		{"reload scanned", r.Changed.Scanned, n},
		// The watched reload reads the folder it was told of, and the one
		// the reload before edited: that Sync took the file's stat right
		// after the edit, too soon to trust it (repo.LocalDir).
		{"watched reload parsed", r.Watched.Parsed, 1},
		{"watched reload hashed", r.Watched.Hashed, 2},
		{"watched reload folders read", r.Watched.ReadDirs, 0},
		{"watched reload scanned", r.Watched.Scanned, 2},
		{"queries", r.Queries, 50},
		{"tools listed over MCP", r.MCPListed, n},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.what, c.got, c.want)
		}
	}
	if r.Found == 0 || r.Heap == 0 || r.FileBytes < 300 || r.FileBytes > 600 {
		t.Errorf("found %d queries, live heap %d, %d bytes per file; want some, some, about 450", r.Found, r.Heap, r.FileBytes)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Errorf("bench left %d entries in --dir; want none without --keep", len(ents))
	}
}

// TestBenchUsage: bad flags and arguments are usage errors.
func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{{"catalog"}, {"--tools", "1"}, {"--queries", "0"}, {"--bogus"}} {
		if err := run(t.Context(), args, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%q = %v, want a usage error", args, err)
		}
	}
}
