package health

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/reload"
	"github.com/toolagent/toolagent/internal/repo"
	"github.com/toolagent/toolagent/internal/scan"
)

// localSource adapts repo.LocalDir, whose Sync returns *repo.Tree, to
// reload.Source.
type localSource struct{ dir *repo.LocalDir }

func (s localSource) Sync(ctx context.Context) (scan.Tree, error) {
	t, err := s.dir.Sync(ctx)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// syncBuffer is a goroutine-safe log sink the test reads while the
// monitor writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// pollUntil polls cond until it holds, failing the test after 15s.
func pollUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func testTool(name, body string) string {
	return "name: " + name + "\ndisplay: " + name + "\nauthor: test\ncreated: 2026-05-31\nwhy: a test tool\n" + body
}

// putTool writes dir/name/TOOL.hdlp beside and renames it over, as
// editors and git do.
func putTool(t testing.TB, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, name, ".TOOL.hdlp.tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name, "TOOL.hdlp")); err != nil {
		t.Fatal(err)
	}
}

// writeFakeProgram puts an executable shell script at path, written beside it
// and renamed over, so a process running the old one is never handed a
// half-written file.
func writeFakeProgram(t *testing.T, path, script string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestRequiresProgramAppearsOnPath: a tool requiring a program that is
// not on the PATH its processes get is disabled, left out of the listing
// and of matching, with a reason naming the program; once a fake program
// of that name appears in a directory of that PATH its check runs (and
// fails, then passes) and the tool comes back, with no restart: the
// health schedule re-evaluates and rebuilds the catalog. Real parts
// throughout: the shell executor, the local tools tree, the reload loop,
// the health loop; the PATH is the shell executor's own setting, as an
// operator would give it.
func TestRequiresProgramAppearsOnPath(t *testing.T) {
	bin, tools := t.TempDir(), t.TempDir()
	putTool(t, tools, "fake-pods", testTool("fake-pods", "intent: list the pods of the fake cluster\nmethod: run\nexecutor: shell\n"+
		"argv: [fakectl, get, pods]\nparams_schema: {}\nrequires:\n  programs: [fakectl, sh]\n  check: [fakectl, ping]\n"))
	putTool(t, tools, "plain", testTool("plain", "intent: print the date\nmethod: run\nexecutor: shell\nargv: [date]\nparams_schema: {}\n"))

	pathList := bin + ":" + proc.MinimalPath
	sh := shell.New(shell.Options{Env: []string{"PATH=" + pathList}})
	execs := map[hldp.ExecutorKind]executors.Executor{hldp.Shell: sh}
	sched, err := cron.ParseStandard("@every 1s")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	h := New(Options{Probes: []Probe{{Kind: hldp.Shell, Ex: sh}}, Schedule: sched, Timeout: 5 * time.Second, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	check := h.Narrow(Configured(execs))
	store := new(catalog.Store)
	dir := &repo.LocalDir{Path: tools}
	t.Cleanup(func() { dir.Close() })
	loop := &reload.Loop{
		Source: localSource{dir},
		Build: func(prev *catalog.Snapshot, tr scan.Tree) (*catalog.Snapshot, scan.Report, error) {
			return scan.Build(prev, tr, nil, scan.Options{Check: check})
		},
		Store: store,
	}
	if _, err := loop.Once(t.Context()); err != nil {
		t.Fatalf("first load: %v", err)
	}

	entry := func() catalog.Entry {
		e, ok := store.Load().Lookup("fake-pods")
		if !ok {
			t.Fatalf("fake-pods is not in the catalog")
		}
		return e
	}
	enabled := func() []string {
		var names []string
		for _, e := range store.Load().Enabled() {
			names = append(names, e.Name)
		}
		return names
	}
	const query = "list the pods of the fake cluster"
	matched := func() bool {
		for _, c := range store.Load().Match(query, 3).Candidates {
			if c.ID == "fake-pods" {
				return true
			}
		}
		return false
	}

	// At load: the program is missing.
	e := entry()
	if want := "program fakectl not found on PATH (" + pathList + ")"; e.Status != catalog.Disabled || e.Reason != want {
		t.Errorf("at load: fake-pods = %s %q; want disabled %q", e.Status, e.Reason, want)
	}
	if got := enabled(); !slices.Equal(got, []string{"plain"}) {
		t.Errorf("at load: enabled tools = %v; want [plain]", got)
	}
	if matched() {
		t.Errorf("at load: Match(%q) offers the disabled fake-pods", query)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := h.Run(ctx, store, loop.Rebuild); err != nil {
			t.Errorf("health run() = %v; want nil", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	// The program appears, but its check fails: still disabled, and the
	// reason now says how the check failed.
	writeFakeProgram(t, filepath.Join(bin, "fakectl"), "echo 'fake cluster unreachable' >&2\nexit 3\n")
	const checkFailed = "check [fakectl ping] exited 3: fake cluster unreachable"
	pollUntil(t, "the reason "+checkFailed, func() bool { return entry().Reason == checkFailed })
	if e := entry(); e.Status != catalog.Disabled {
		t.Errorf("with a failing check: fake-pods = %s; want disabled", e.Status)
	}

	// The check passes: the tool comes back without a restart.
	writeFakeProgram(t, filepath.Join(bin, "fakectl"), "exit 0\n")
	pollUntil(t, "fake-pods to be enabled", func() bool { return entry().Status == catalog.Enabled })
	if e := entry(); e.Reason != "" {
		t.Errorf("enabled fake-pods keeps the reason %q", e.Reason)
	}
	if got := enabled(); !slices.Equal(got, []string{"fake-pods", "plain"}) {
		t.Errorf("after the program appeared: enabled tools = %v; want [fake-pods plain]", got)
	}
	if !matched() {
		t.Errorf("after the program appeared: Match(%q) does not offer fake-pods", query)
	}

	// It goes away again: disabled again on the next round.
	if err := os.Remove(filepath.Join(bin, "fakectl")); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "fake-pods to be disabled again", func() bool { return entry().Status == catalog.Disabled })

	for _, want := range []string{`"msg":"tool prerequisites missing; it is disabled"`, `"msg":"tool prerequisites met; it is enabled"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("health log lacks %s:\n%s", want, logs)
		}
	}
}
