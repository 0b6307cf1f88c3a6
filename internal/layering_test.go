package internal_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/toolagent/toolagent"

// allowed is the one-way import table (docs/architecture.md): for each
// internal package, the internal packages it may import. A package missing
// here may not exist; add it to the table (and to docs/architecture.md) on
// purpose. Only commands may import internal/daemon: no entry lists it but
// the development commands under internal/cmd.
var allowed = map[string][]string{
	"internal/hldp":                 {},
	"internal/match":                {},
	"internal/match/matcheval":      {"internal/match"},
	"internal/proc":                 {},
	"internal/hugeheap":             {},
	"internal/grant":                {},
	"internal/repo":                 {},
	"internal/trust":                {},
	"internal/cache":                {"internal/hldp"},
	"internal/catalog":              {"internal/hldp", "internal/match"},
	"internal/executors":            {"internal/hldp"},
	"internal/policy":               {"internal/hldp"},
	"internal/scan":                 {"internal/hldp", "internal/cache", "internal/catalog"},
	"internal/executors/shell":      {"internal/executors", "internal/hldp", "internal/proc", "internal/policy"},
	"internal/executors/gatekeeper": {"internal/executors", "internal/hldp", "internal/grant"},
	"internal/executors/hlpdapi":    {"internal/executors", "internal/hldp"},
	"internal/executors/forgejo":    {"internal/executors", "internal/hldp"},
	"internal/approval":             {"internal/hldp", "internal/grant", "internal/pgstore"},
	"internal/pgstore":              {},
	"internal/pgstore/pgtest":       {},
	"internal/dispatch":             {"internal/catalog", "internal/executors", "internal/hldp", "internal/policy", "internal/approval", "internal/runs", "internal/telemetry"},
	"internal/reload":               {"internal/catalog", "internal/scan"},
	"internal/embed":                {"internal/catalog", "internal/hldp", "internal/match"},
	"internal/health":               {"internal/catalog", "internal/executors", "internal/hldp", "internal/scan"},
	"internal/api":                  {"internal/catalog", "internal/dispatch", "internal/reload", "internal/hldp", "internal/runs", "internal/feedback", "internal/telemetry"},
	"internal/mcpserver":            {"internal/catalog", "internal/dispatch", "internal/hldp", "internal/runs", "internal/telemetry"},
	"internal/console":              {"internal/catalog", "internal/dispatch", "internal/hldp", "internal/reload", "internal/audit"},
	"internal/audit":                {"internal/pgstore"},
	"internal/runs":                 {},
	"internal/notify":               {},
	"internal/feedback":             {},
	"internal/gatekeeper":           {"internal/proc", "internal/policy", "internal/grant", "internal/httpserve", "internal/telemetry"},

	// Beside the request path, below the daemon and the commands: host is
	// what a process finds on its host (paths, sandbox, shell executor,
	// the local queue, a catalog loaded once); operator is how the CLI
	// reaches the process that owns a state directory.
	"internal/host": {"internal/approval", "internal/catalog", "internal/dispatch", "internal/executors", "internal/executors/shell", "internal/feedback", "internal/health",
		"internal/hldp", "internal/match", "internal/policy", "internal/proc", "internal/repo", "internal/scan"},
	"internal/operator": {"internal/dispatch", "internal/host", "internal/runs"},

	// Mechanisms: stdlib (and yaml) only.
	"internal/settings":  {},
	"internal/httpserve": {},

	// OpenTelemetry set up from OTEL_*, and the OTLP receiver of its tests.
	"internal/telemetry":          {},
	"internal/telemetry/otlptest": {},

	// The command line's conventions, and what validate and eval check.
	"internal/cli":  {"internal/dispatch", "internal/hldp", "internal/settings"},
	"internal/lint": {"internal/catalog", "internal/hldp", "internal/host", "internal/match", "internal/match/matcheval", "internal/scan"},

	// The daemon wires everything below it; only commands import it
	// (no other entry of this table lists it).
	"internal/daemon": {"internal/api", "internal/approval", "internal/audit", "internal/cache", "internal/catalog", "internal/console",
		"internal/dispatch", "internal/embed", "internal/executors", "internal/executors/forgejo", "internal/executors/gatekeeper", "internal/executors/hlpdapi",
		"internal/feedback", "internal/health", "internal/hldp", "internal/host", "internal/httpserve", "internal/hugeheap", "internal/mcpserver", "internal/notify", "internal/operator",
		"internal/pgstore", "internal/policy", "internal/proc", "internal/reload", "internal/repo", "internal/runs", "internal/scan", "internal/settings", "internal/trust",
		"internal/telemetry"},

	// Development commands beside the product binary (go run ./internal/cmd/...).
	"internal/cmd/benchcatalog": {"internal/catalog", "internal/daemon", "internal/mcpserver", "internal/repo", "internal/scan", "internal/settings"},
	"internal/cmd/benchstart":   {},
	"internal/cmd/benchrelay":   {}, // the stream's floor: no package of ours

	// Test helpers of sandboxed children: proc only.
	"internal/proc/proctest": {"internal/proc"},

	// The canned Gitea API of the git-forgejo protocol tests: stdlib only.
	"internal/executors/forgejo/forgejotest": {},

	// The test2json summarizer .ci/run pipes the suite through: stdlib only.
	"internal/cmd/testsummary": {},
}

// TestImportLayering runs `go list` over the module and fails on any
// internal import edge the table does not allow, naming the edge.
func TestImportLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...").Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module+"/")
		if !strings.HasPrefix(pkg, "internal/") {
			continue // cmd/toolagent may import anything; native-repo imports nothing internal
		}
		seen++
		want, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %s is not in the layering table; add it with the imports it may have", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			if dep == "native-repo" || strings.HasPrefix(dep, "cmd/") {
				t.Errorf("forbidden import %s -> %s: only cmd/toolagent wires those", pkg, dep)
				continue
			}
			if !slices.Contains(want, dep) {
				t.Errorf("forbidden import %s -> %s (allowed: %v)", pkg, dep, want)
			}
		}
	}
	if seen < 5 {
		t.Fatalf("go list saw only %d internal packages; the test is not looking at the module", seen)
	}
}

// TestHouseSizes keeps the house as docs/architecture.md describes it:
// cmd/toolagent is flags and wiring (under 1,500 lines of non-test Go),
// and no non-test source file passes 1,000 lines (split by
// responsibility instead).
func TestHouseSizes(t *testing.T) {
	out, err := exec.Command("git", "-C", "..", "ls-files", "*.go").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the sizes are checked in one", err)
	}
	cmdLines := 0
	for _, f := range strings.Fields(string(out)) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", f))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		n := bytes.Count(b, []byte("\n"))
		if n > 1000 {
			t.Errorf("%s has %d lines; split it by responsibility (at most 1,000)", f, n)
		}
		if filepath.Dir(f) == "cmd/toolagent" {
			cmdLines += n
		}
	}
	if cmdLines >= 1500 {
		t.Errorf("cmd/toolagent has %d non-test lines; it is flags and wiring (under 1,500): move logic into internal/", cmdLines)
	}
}
