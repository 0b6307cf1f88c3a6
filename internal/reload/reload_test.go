package reload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/scan"
)

func toolFile(name, intent string) string {
	return "name: " + name + `
display: ` + name + `
intent: ` + intent + `
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true, description: "command" }
author: test
created: 2026-05-31
why: a test tool
`
}

// fakeSource serves a copy of a MapFS, or fails while err is set.
type fakeSource struct {
	mu    sync.Mutex
	fsys  fstest.MapFS
	err   error
	syncs atomic.Int64
}

func (s *fakeSource) set(name, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fsys == nil {
		s.fsys = fstest.MapFS{}
	}
	s.fsys[name] = &fstest.MapFile{Data: []byte(content)}
}

func (s *fakeSource) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fsys, name)
}

func (s *fakeSource) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *fakeSource) Sync(ctx context.Context) (scan.Tree, error) {
	s.syncs.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	cp := make(fstest.MapFS, len(s.fsys))
	for k, v := range s.fsys {
		cp[k] = &fstest.MapFile{Data: v.Data}
	}
	return scan.FromFS(cp, ""), nil
}

func newLoop(src Source) (*Loop, *catalog.Store) {
	st := new(catalog.Store)
	return &Loop{Source: src, Store: st}, st
}

// TestOnce walks one loop through the life of a tool, one step at a time.
func TestOnce(t *testing.T) {
	ctx := context.Background()
	src := &fakeSource{}
	src.set("echo/TOOL.hdlp", toolFile("echo", "print words"))
	l, st := newLoop(src)

	type want struct {
		changed bool
		err     bool
		status  catalog.Status // of "echo"; 255 = absent
		intent  string
		loadErr bool
	}
	const absent = catalog.Status(255)
	steps := []struct {
		name   string
		change func()
		want   want
	}{
		{"first load", func() {}, want{changed: true, status: catalog.Enabled, intent: "print words"}},
		{"unchanged tree", func() {}, want{changed: false, status: catalog.Enabled, intent: "print words"}},
		{"edit", func() { src.set("echo/TOOL.hdlp", toolFile("echo", "print more words")) }, want{changed: true, status: catalog.Enabled, intent: "print more words"}},
		{"break: last good keeps serving", func() { src.set("echo/TOOL.hdlp", "name: echo\nbogus: [\n") }, want{changed: true, status: catalog.Stale, intent: "print more words", loadErr: true}},
		{"source down: snapshot kept", func() { src.fail(errors.New("network unreachable")) }, want{err: true, status: catalog.Stale, intent: "print more words", loadErr: true}},
		{"source back, fixed", func() { src.fail(nil); src.set("echo/TOOL.hdlp", toolFile("echo", "fixed")) }, want{changed: true, status: catalog.Enabled, intent: "fixed"}},
		{"folder deleted", func() { src.remove("echo/TOOL.hdlp") }, want{changed: true, status: absent}},
	}
	for _, s := range steps {
		s.change()
		changed, err := l.Once(ctx)
		if changed != s.want.changed || (err != nil) != s.want.err {
			t.Fatalf("%s: Once() = %v, %v; want changed %v, error %v", s.name, changed, err, s.want.changed, s.want.err)
		}
		snap := st.Load()
		e, ok := snap.Lookup("echo")
		if s.want.status == absent {
			if ok {
				t.Fatalf("%s: echo still in the snapshot: %+v", s.name, e)
			}
			continue
		}
		if !ok {
			t.Fatalf("%s: echo missing from the snapshot", s.name)
		}
		if e.Status != s.want.status || e.Tool.Intent != s.want.intent || (e.LoadErr != nil) != s.want.loadErr {
			t.Errorf("%s: echo = status %v, intent %q, load error %v; want %v, %q, error %v",
				s.name, e.Status, e.Tool.Intent, e.LoadErr, s.want.status, s.want.intent, s.want.loadErr)
		}
		stat := l.Status()
		if s.want.err {
			if stat.LastErr == "" || stat.Failures != 1 {
				t.Errorf("%s: Status() = %+v; want LastErr set and 1 failure", s.name, stat)
			}
		} else if stat.LastErr != "" || stat.Rev != snap.Rev() || stat.Gen != snap.Gen() {
			t.Errorf("%s: Status() = %+v; want no error, revision %s gen %d", s.name, stat, snap.Rev(), snap.Gen())
		}
	}
	if got := l.Status(); got.Reloads != 5 || got.ReloadFailures != 1 {
		t.Errorf("Status() = %d reloads, %d failures; want 5, 1", got.Reloads, got.ReloadFailures)
	}
}

// TestOnceFirstSyncFails: with nothing loaded, a failure publishes nothing.
// TestRunQuietAfterFailedStart: a first sync that fails still ends the
// start's work: Quiet is called once, and not again for the retries.
func TestRunQuietAfterFailedStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		src := &fakeSource{}
		src.fail(fs.ErrPermission)
		l, _ := newLoop(src)
		var quiet atomic.Int64
		l.Quiet = func() { quiet.Add(1) }
		go l.Run(ctx, NewTrigger().C())
		synctest.Wait()
		if n := quiet.Load(); n != 1 {
			t.Fatalf("Quiet called %d times after a failed first sync; want 1", n)
		}
		time.Sleep(10 * time.Minute) // retries back off and fail again
		synctest.Wait()
		if n, syncs := quiet.Load(), src.syncs.Load(); n != 1 || syncs < 3 {
			t.Errorf("after %d syncs Quiet was called %d times; want 1 and several retries", syncs, n)
		}
	})
}

// TestRunQuietAfterNext: QuietAfterNext makes the next attempt that
// begins after it end with Quiet, once; attempts nobody asked about do
// not.
func TestRunQuietAfterNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		src := &fakeSource{}
		src.set("a/TOOL.hdlp", toolFile("a", "restart nginx"))
		l, _ := newLoop(src)
		var quiet atomic.Int64
		l.Quiet = func() { quiet.Add(1) }
		trig := NewTrigger()
		go l.Run(ctx, trig.C())
		synctest.Wait()
		sync := func() {
			trig.Poke()
			time.Sleep(5 * time.Second) // past the debounce
			synctest.Wait()
		}
		sync()
		if n := quiet.Load(); n != 1 {
			t.Fatalf("Quiet called %d times after the first sync and one unasked; want 1", n)
		}
		l.QuietAfterNext()
		sync()
		if n := quiet.Load(); n != 2 {
			t.Fatalf("Quiet called %d times after an asked sync; want 2", n)
		}
		sync()
		if n, syncs := quiet.Load(), src.syncs.Load(); n != 2 || syncs != 4 {
			t.Errorf("after %d syncs Quiet was called %d times; want 4 syncs, 2 calls", syncs, n)
		}
	})
}

func TestOnceFirstSyncFails(t *testing.T) {
	src := &fakeSource{}
	src.fail(fs.ErrPermission)
	l, st := newLoop(src)
	if _, err := l.Once(context.Background()); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("Once() error = %v; want it to wrap %v", err, fs.ErrPermission)
	}
	if st.Load() != nil {
		t.Errorf("Store.Load() = a snapshot after a failed first sync; want nil")
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 10 * time.Second}
	for n, want := range []time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 50: 10 * time.Second} {
		if want == 0 {
			continue
		}
		if got := b.Delay(n); got != want {
			t.Errorf("Backoff%+v.Delay(%d) = %v; want %v", b, n, got, want)
		}
	}
	if got := (Backoff{}).Delay(1); got != DefaultBackoffMin {
		t.Errorf("Backoff{}.Delay(1) = %v; want %v", got, DefaultBackoffMin)
	}
}

// TestRunDebounce checks, on a fake clock, that a burst of triggers gives
// one reload after the quiet period, and a never-ending stream gives one
// at the maximum wait.
func TestRunDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		src := &fakeSource{}
		src.set("echo/TOOL.hdlp", toolFile("echo", "one"))
		l, _ := newLoop(src)
		l.Debounce = Debounce{Min: 100 * time.Millisecond, Max: time.Second}
		trig := NewTrigger()
		done := make(chan error)
		go func() { done <- l.Run(ctx, trig.C()) }()
		synctest.Wait()
		if got := src.syncs.Load(); got != 1 {
			t.Fatalf("syncs after start = %d; want 1", got)
		}

		// A burst of ten pokes 10ms apart: one sync, 100ms after the last.
		for range 10 {
			trig.Poke()
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		if got := src.syncs.Load(); got != 1 {
			t.Fatalf("syncs during a burst = %d; want still 1", got)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := src.syncs.Load(); got != 2 {
			t.Fatalf("syncs after the burst went quiet = %d; want 2", got)
		}

		// A stream every 50ms never goes quiet: the max wait forces a sync.
		start := time.Now()
		for src.syncs.Load() == 2 {
			trig.Poke()
			time.Sleep(50 * time.Millisecond)
			synctest.Wait()
		}
		if took := time.Since(start); took < time.Second || took > time.Second+100*time.Millisecond {
			t.Errorf("a steady stream synced after %v; want about the max wait of 1s", took)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v after cancel; want nil", err)
		}
	})
}

// TestRunBackoff checks that failed syncs are retried with doubling
// delays, that Status.Next says when, and that a success resets it.
func TestRunBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		src := &fakeSource{}
		src.set("echo/TOOL.hdlp", toolFile("echo", "one"))
		src.fail(errors.New("connection refused"))
		l, st := newLoop(src)
		l.Backoff = Backoff{Min: time.Second, Max: 4 * time.Second}
		go l.Run(ctx, NewTrigger().C())

		start := time.Now()
		var at []time.Duration
		for len(at) < 5 {
			n := src.syncs.Load()
			synctest.Wait()
			if next := l.Status().Next; !next.IsZero() {
				time.Sleep(time.Until(next))
			}
			synctest.Wait()
			if src.syncs.Load() > n {
				at = append(at, time.Since(start))
			}
		}
		want := []time.Duration{1 * time.Second, 3 * time.Second, 7 * time.Second, 11 * time.Second, 15 * time.Second}
		for i := range want {
			if at[i] != want[i] {
				t.Fatalf("retries at %v; want %v", at, want)
			}
		}
		if st.Load() != nil {
			t.Fatalf("a snapshot was published while the source failed")
		}
		src.fail(nil)
		time.Sleep(time.Until(l.Status().Next))
		synctest.Wait()
		if s := l.Status(); s.Failures != 0 || !s.Next.IsZero() || s.LastErr != "" || st.Load() == nil {
			t.Errorf("after recovery Status() = %+v; want no failures, no retry scheduled, a snapshot", s)
		}
	})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dirSource serves a real directory.
type dirSource string

func (d dirSource) Sync(ctx context.Context) (scan.Tree, error) {
	if _, err := os.Stat(string(d)); err != nil {
		return nil, err
	}
	return scan.FromFS(os.DirFS(string(d)), ""), nil
}

// TestWatch drives Watch and Run with real files, the way editors and git
// change them: write in place, write a temp file and rename it over, add a
// folder, rename a folder, delete a folder.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/TOOL.hdlp", toolFile("a", "first"))

	ctx, cancel := context.WithCancel(context.Background())
	l, st := newLoop(dirSource(dir))
	l.Debounce = Debounce{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	trig := NewTrigger()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.Run(ctx, trig.C()) }()
	go func() {
		defer wg.Done()
		if err := Watch(ctx, dir, trig, nil, nil); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })

	intent := func(name string) string {
		snap := st.Load()
		if snap == nil {
			return "<no snapshot>"
		}
		e, ok := snap.Lookup(name)
		if !ok {
			return "<absent>"
		}
		if e.Tool == nil {
			return "<failed>"
		}
		if e.LoadErr != nil {
			return "<stale> " + e.Tool.Intent
		}
		return e.Tool.Intent
	}
	steps := []struct {
		name   string
		change func()
		tool   string
		want   string
	}{
		{"initial", func() {}, "a", "first"},
		{"write in place", func() { write("a/TOOL.hdlp", toolFile("a", "second")) }, "a", "second"},
		{"temp file renamed over", func() {
			write("a/.TOOL.hdlp.swp", toolFile("a", "third"))
			if err := os.Rename(filepath.Join(dir, "a/.TOOL.hdlp.swp"), filepath.Join(dir, "a/TOOL.hdlp")); err != nil {
				t.Fatal(err)
			}
		}, "a", "third"},
		{"new folder", func() { write("b/TOOL.hdlp", toolFile("b", "bee")) }, "b", "bee"},
		{"edit in the new folder", func() { write("b/TOOL.hdlp", toolFile("b", "bee two")) }, "b", "bee two"},
		{"broken file", func() { write("b/TOOL.hdlp", "name: b\n  bad indent: [") }, "b", "<stale> bee two"},
		{"folder renamed: old gone", func() {
			if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "c")); err != nil {
				t.Fatal(err)
			}
		}, "a", "<absent>"},
		{"folder renamed: new folder, name mismatch", func() {}, "c", "<failed>"},
		{"renamed folder's file fixed", func() { write("c/TOOL.hdlp", toolFile("c", "sea")) }, "c", "sea"},
		{"folder deleted", func() {
			if err := os.RemoveAll(filepath.Join(dir, "c")); err != nil {
				t.Fatal(err)
			}
		}, "c", "<absent>"},
	}
	for _, s := range steps {
		s.change()
		waitFor(t, s.name+": "+s.tool+" = "+s.want, func() bool { return intent(s.tool) == s.want })
	}
}

// TestRunFailureLogSaysWhatServes: a failure before anything was ever
// loaded does not claim a last good snapshot; one after does.
func TestRunFailureLogSaysWhatServes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var logs bytes.Buffer
		src := &fakeSource{}
		src.set("echo/TOOL.hdlp", toolFile("echo", "one"))
		src.fail(errors.New("connection refused"))
		l, _ := newLoop(src)
		l.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		l.Backoff = Backoff{Min: time.Second, Max: time.Second}
		trig := NewTrigger()
		go l.Run(ctx, trig.C())
		synctest.Wait()
		if got := logs.String(); !strings.Contains(got, "no snapshot was ever loaded") || strings.Contains(got, "last good snapshot") {
			t.Errorf("first failure logged %q; want it to say nothing is served yet", got)
		}
		src.fail(nil)
		time.Sleep(time.Until(l.Status().Next))
		synctest.Wait()
		logs.Reset()
		src.fail(errors.New("connection refused"))
		trig.Poke()
		time.Sleep(time.Minute) // past any debounce; the fake clock only moves when all wait
		synctest.Wait()
		if got := logs.String(); !strings.Contains(got, "the last good snapshot keeps serving") {
			t.Errorf("failure after a load logged %q; want the last good snapshot named", got)
		}
	})
}

// TestRunBackoffDropsTicks: while Run backs off after failures, scheduled
// ticks do not reach the source (the retry is the next attempt), but a
// webhook or POST /v1/sync poke still goes through at once; retry waits
// carry their jitter, within its bound, and Status says when.
func TestRunBackoffDropsTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		src := &fakeSource{}
		src.set("echo/TOOL.hdlp", toolFile("echo", "one"))
		src.fail(errors.New("connection refused"))
		l, _ := newLoop(src)
		l.Backoff = Backoff{Min: time.Minute, Max: time.Minute, Jitter: 0.5}
		trig := NewTrigger()
		l.Ticks = trig.Ticks()
		go l.Run(ctx, trig.C())
		synctest.Wait()
		failedAt := time.Now()
		next := l.Status().Next
		if wait := next.Sub(failedAt); wait < time.Minute || wait >= 90*time.Second {
			t.Errorf("retry in %v; want 1m plus at most 50%% jitter", wait)
		}
		n := src.syncs.Load()
		for range 10 { // a 2 s schedule during the backoff
			time.Sleep(2 * time.Second)
			trig.Tick()
			synctest.Wait()
		}
		if got := src.syncs.Load(); got != n {
			t.Errorf("%d syncs during the backoff from scheduled ticks; want none", got-n)
		}
		trig.Poke() // a webhook
		time.Sleep(time.Second)
		synctest.Wait()
		if got := src.syncs.Load(); got != n+1 {
			t.Errorf("a poke during the backoff gave %d syncs; want 1 at once", got-n)
		}
	})
}

// gatedSource blocks every Sync until release is closed.
type gatedSource struct {
	fakeSource
	entered chan struct{}
	release chan struct{}
}

func (s *gatedSource) Sync(ctx context.Context) (scan.Tree, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.fakeSource.Sync(ctx)
}

// TestSyncInProgress: Status shows a sync while it runs (syncing_since)
// and not after; the log has its start and its end with the duration in
// milliseconds (a JSON log's took_ms is a number of ms, not ns).
func TestSyncInProgress(t *testing.T) {
	src := &gatedSource{entered: make(chan struct{}), release: make(chan struct{})}
	src.set("echo/TOOL.hdlp", toolFile("echo", "one"))
	l, _ := newLoop(src)
	var logs bytes.Buffer
	var mu sync.Mutex
	l.Logger = slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))
	done := make(chan error, 1)
	go func() { _, err := l.Once(t.Context()); done <- err }()
	<-src.entered
	if st := l.Status(); st.SyncingSince.IsZero() {
		t.Errorf("status during a sync = %+v; want syncing_since set", st)
	}
	close(src.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := l.Status(); !st.SyncingSince.IsZero() {
		t.Errorf("status after the sync: syncing_since = %v; want none", st.SyncingSince)
	}
	mu.Lock()
	got := logs.String()
	mu.Unlock()
	for _, want := range []string{`"msg":"sync started"`, `"msg":"sync ended"`, `"took_ms":`} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, `"took":`) {
		t.Errorf("a duration is logged in nanoseconds (took):\n%s", got)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// recordTracker records what Watch tells a Tracker.
type recordTracker struct {
	mu      sync.Mutex
	tracked []bool
	changed []string
}

func (r *recordTracker) Track(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tracked = append(r.tracked, on)
}

func (r *recordTracker) Changed(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed = append(r.changed, name)
}

func (r *recordTracker) state() ([]bool, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.tracked), slices.Clone(r.changed)
}

// TestWatchTracks: Watch tells its Tracker when every folder is watched,
// the top-level name of every change before it pokes, and that it stopped.
func TestWatchTracks(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a/TOOL.hdlp", "b/TOOL.hdlp"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	trig := NewTrigger()
	tr := &recordTracker{}
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, dir, trig, tr, nil) }()
	waitFor(t, "Track(true) once the folders are watched", func() bool {
		on, _ := tr.state()
		return slices.Equal(on, []bool{true})
	})
	poked := func(what string) {
		t.Helper()
		select {
		case <-trig.C():
		case <-time.After(15 * time.Second):
			t.Fatalf("no poke within 15s: %s", what)
		}
	}
	poked("after setup")
	if err := os.WriteFile(filepath.Join(dir, "b", "TOOL.hdlp"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	poked("after writing b/TOOL.hdlp")
	if _, changed := tr.state(); !slices.Contains(changed, "b") || slices.Contains(changed, "a") {
		t.Errorf("after writing b/TOOL.hdlp and a poke, Changed got %q; want b (before the poke) and not a", changed)
	}
	if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Changed(a) and Changed(c) after a folder rename", func() bool {
		_, changed := tr.state()
		return slices.Contains(changed, "a") && slices.Contains(changed, "c")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if on, _ := tr.state(); !slices.Equal(on, []bool{true, false}) {
		t.Errorf("Track calls %v, want [true false] (the watcher stopped)", on)
	}
}

// TestRunCompacts: after a reload that updated the match index (few of
// many tools changed), Run builds it anew once CompactAfter passes with no
// other reload, keeping the snapshot; a reload within that time puts it
// off; an index built anew is left alone.
func TestRunCompacts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		src := &fakeSource{}
		for i := range 300 {
			name := fmt.Sprintf("tool-%03d", i)
			src.set(name+"/TOOL.hdlp", toolFile(name, fmt.Sprintf("restart service %03d", i)))
		}
		l, st := newLoop(src)
		l.CompactAfter = 10 * time.Minute
		var quiet atomic.Int64 // Quiet: after the first attempt and each compaction
		l.Quiet = func() { quiet.Add(1) }
		trig := NewTrigger()
		go l.Run(ctx, trig.C())
		synctest.Wait()
		first := st.Load()
		if first == nil || first.IndexDrift() != 0 {
			t.Fatalf("first load: %v", first)
		}
		if n := quiet.Load(); n != 1 {
			t.Fatalf("Quiet called %d times after the first sync; want 1", n)
		}
		edit := func(intent string) *catalog.Snapshot {
			src.set("tool-007/TOOL.hdlp", toolFile("tool-007", intent))
			trig.Poke()
			time.Sleep(5 * time.Second) // past the debounce
			synctest.Wait()
			return st.Load()
		}
		updated := edit("rotate zookeeper certificates")
		if updated == first || updated.IndexDrift() == 0 {
			t.Fatalf("after one edit: drift %v; want an updated index", updated.IndexDrift())
		}
		time.Sleep(6 * time.Minute)
		synctest.Wait()
		again := edit("rotate kafka certificates") // puts compaction off
		if again.IndexDrift() == 0 {
			t.Fatal("second edit: index built anew")
		}
		time.Sleep(6 * time.Minute) // 10 minutes after the first edit, 6 after the second
		synctest.Wait()
		if st.Load() != again {
			t.Fatal("compacted 6 minutes after the last reload; want 10")
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		cur := st.Load()
		if cur == again || cur.IndexDrift() != 0 || cur.Gen() != again.Gen() {
			t.Fatalf("10 minutes after the last reload: snapshot changed %v, drift %v, gen %d (want %d)", cur != again, cur.IndexDrift(), cur.Gen(), again.Gen())
		}
		if r := cur.Match("rotate kafka certificates", 1); !r.Found || r.Candidates[0].ID != "tool-007" {
			t.Errorf("compacted index: %+v", r)
		}
		if n := quiet.Load(); n != 2 {
			t.Errorf("Quiet called %d times after the edits and one compaction; want 2", n)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if st.Load() != cur {
			t.Error("an index built anew was compacted again")
		}
		if n := quiet.Load(); n != 2 {
			t.Errorf("Quiet called %d times an hour later with nothing compacted; want 2", n)
		}
	})
}

// TestBeforeIndex: a published snapshot's BeforeIndex runs once the store
// serves it and before the publishing call returns (the index build comes
// after it), for Once and for Prime alike.
func TestBeforeIndex(t *testing.T) {
	src := &fakeSource{}
	src.set("echo/TOOL.hdlp", toolFile("echo", "print words"))
	for _, how := range []string{"Once", "Prime"} {
		t.Run(how, func(t *testing.T) {
			l, st := newLoop(src)
			entered, release := make(chan string, 1), make(chan struct{})
			l.BeforeIndex = func() {
				rev := ""
				if snap := st.Load(); snap != nil {
					rev = snap.Rev()
				}
				entered <- rev
				<-release
			}
			done := make(chan error, 1)
			go func() {
				if how == "Once" {
					_, err := l.Once(t.Context())
					done <- err
					return
				}
				tree, err := src.Sync(t.Context())
				if err == nil {
					_, err = l.Prime(tree)
				}
				done <- err
			}()
			select {
			case rev := <-entered:
				if rev == "" {
					t.Fatal("BeforeIndex ran before the snapshot was published")
				}
			case err := <-done:
				t.Fatalf("%s returned (%v) without calling BeforeIndex", how, err)
			case <-time.After(time.Minute):
				t.Fatal("no BeforeIndex within a minute")
			}
			select {
			case err := <-done:
				t.Fatalf("%s returned (%v) while BeforeIndex held it", how, err)
			default:
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
