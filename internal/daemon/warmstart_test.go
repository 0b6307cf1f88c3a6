package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/reload"
	"github.com/toolagent/toolagent/internal/scan"
	"github.com/toolagent/toolagent/internal/settings"
)

// lockedBuffer is a log sink safe for the daemon's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// inProcess is a daemon of role Serve run in this process.
type inProcess struct {
	url  string
	logs *lockedBuffer
	stop func()
}

// serveDir runs a daemon (no sandbox) on the tools directory tools with
// the state directory state, until the test ends or stop is called.
func serveDir(t *testing.T, tools, state string) *inProcess {
	t.Helper()
	var cfg Config
	settings.New(&cfg, settings.Options{}) // the defaults
	cfg.Listen, cfg.Tools, cfg.State, cfg.Sandbox = "127.0.0.1:0", tools, state, host.SandboxOff
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, err := operator.ReadInfo(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run() = %v", err)
			}
			d.Close()
		})
	}
	t.Cleanup(stop)
	return &inProcess{url: info.URL, logs: logs, stop: stop}
}

// call calls tool without parameters.
func (p *inProcess) call(t *testing.T, tool string) dispatch.Result {
	t.Helper()
	var res dispatch.Result
	resp, err := http.Post(p.url+"/v1/call", "application/json", strings.NewReader(`{"tool":"`+tool+`","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&res)
	return res
}

// waitOutput calls tool until it prints want, for up to a minute.
func (p *inProcess) waitOutput(t *testing.T, tool, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var res dispatch.Result
	for time.Now().Before(deadline) {
		if res = p.call(t, tool); res.Status == dispatch.Success && res.Output == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never printed %q: last %s %q %q\n%s", tool, want, res.Status, res.Output, res.Error, p.logs.String())
}

// status is GET /v1/status's revision.
func (p *inProcess) revision(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(p.url + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Rev string `json:"revision"`
	}
	json.NewDecoder(resp.Body).Decode(&st)
	return st.Rev
}

func echoTool(name, out string) string {
	return "name: " + name + "\ndisplay: " + name + "\nintent: print " + out + "\nmethod: run\nexecutor: shell\nargv: [echo, " + out + "]\nparams_schema: {}\nauthor: t\ncreated: 2026-01-01\nwhy: a test\n"
}

func writeTool(t *testing.T, tools, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(tools, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, name, "TOOL.hdlp"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWarmStartServesKeptListing: a restarted daemon on a local directory
// first serves the catalog of the listing its last run kept (no stat of
// the tree before it is ready), then verifies the directory and serves
// what changed while it was down; and, started so, its watcher still
// brings an edit made afterwards.
func TestWarmStartServesKeptListing(t *testing.T) {
	tools, state := t.TempDir(), t.TempDir()
	writeTool(t, tools, "hello", echoTool("hello", "v1"))
	writeTool(t, tools, "other", echoTool("other", "o1"))
	// The listing vouches for a file whose change time was older than its
	// Sync by the file system's clock granularity (repo.LocalDir): let
	// that pass, as it has for any tree a daemon restarts on.
	settledAfter(t, filepath.Join(tools, "hello", "TOOL.hdlp"), filepath.Join(tools, "other", "TOOL.hdlp"))

	first := serveDir(t, tools, state)
	first.waitOutput(t, "hello", "v1\n")
	rev1 := first.revision(t)
	first.stop()

	// Changed while no daemon ran.
	writeTool(t, tools, "hello", echoTool("hello", "v2"))
	second := serveDir(t, tools, state)
	second.waitOutput(t, "hello", "v2\n")
	if rev2 := second.revision(t); rev2 == rev1 {
		t.Errorf("revision after the change while down = %s; want another than %s", rev2, rev1)
	}
	var primed struct {
		Rev string `json:"revision"`
	}
	for line := range strings.Lines(second.logs.String()) {
		if strings.Contains(line, `"msg":"serving the last synced catalog"`) {
			json.Unmarshal([]byte(line), &primed)
		}
	}
	if primed.Rev != rev1 {
		t.Errorf("the restarted daemon first served revision %q; want the kept listing's %s\n%s", primed.Rev, rev1, second.logs.String())
	}

	// Edited while it runs: the watcher, set up after the first publish,
	// reports it.
	writeTool(t, tools, "other", echoTool("other", "o2"))
	second.waitOutput(t, "other", "o2\n")
}

// settledAfter waits until the change time of each file is a quarter
// second old.
func settledAfter(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			t.Skip("no change times here")
		}
		time.Sleep(time.Until(time.Unix(st.Ctim.Unix()).Add(250 * time.Millisecond)))
	}
}

// recTracker records the Track calls it hears.
type recTracker struct {
	mu      sync.Mutex
	on      []bool
	changed []string
}

func (r *recTracker) Track(on bool) { r.mu.Lock(); r.on = append(r.on, on); r.mu.Unlock() }
func (r *recTracker) Changed(n string) {
	r.mu.Lock()
	r.changed = append(r.changed, n)
	r.mu.Unlock()
}

// TestWatchingReturnsMemory: once the watcher has every folder watched
// (Track(true)), the sync it pokes for ends with the loop's Quiet (the
// daemon's returnMemory), and the source's own tracker still hears
// every call.
func TestWatchingReturnsMemory(t *testing.T) {
	quiet := make(chan struct{}, 8)
	l := &reload.Loop{
		Source: staticSource{scan.FromFS(fstest.MapFS{}, "r1")},
		Store:  new(catalog.Store),
		Quiet:  func() { quiet <- struct{}{} },
	}
	trig := reload.NewTrigger()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx, trig.C())
	wait := func(what string) {
		t.Helper()
		select {
		case <-quiet:
		case <-time.After(time.Minute):
			t.Fatalf("no Quiet %s within a minute", what)
		}
	}
	wait("after the first sync")
	inner := &recTracker{}
	q := quietWhenWatching{inner: inner, loop: l}
	q.Track(true)
	q.Changed("a")
	trig.Poke()
	wait("after the sync the watcher asked for")
	q.Track(false)
	inner.mu.Lock()
	defer inner.mu.Unlock()
	if !slices.Equal(inner.on, []bool{true, false}) || !slices.Equal(inner.changed, []string{"a"}) {
		t.Errorf("the source's tracker heard Track %v, Changed %v; want [true false], [a]", inner.on, inner.changed)
	}
	quietWhenWatching{loop: l}.Track(true) // no source tracker: no panic
}
