package reload

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/cache"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/repo"
	"github.com/toolagent/toolagent/internal/scan"
)

// localSource adapts repo.LocalDir as cmd/toolagent does.
type localSource struct{ dir *repo.LocalDir }

func (s localSource) Sync(ctx context.Context) (scan.Tree, error) {
	t, err := s.dir.Sync(ctx)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// started is what one start of a daemon over a local directory did.
type started struct {
	status Status
	read   repo.SyncStats
	snap   *catalog.Snapshot
	log    string
}

// startLocal starts a daemon the way serve does for a local directory —
// the parse cache opened from the state directory, the directory's listing
// kept there too, one reload — and stops it. Every file is settled (the
// directory's clock is an hour ahead), so what is read is decided by the
// stats alone.
func startLocal(t *testing.T, tools, state string) started {
	t.Helper()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	c, err := cache.Open(filepath.Join(state, "parse.cache"))
	if err != nil {
		log.Warn("parse cache not fully used", "err", err)
	}
	dir := &repo.LocalDir{Path: tools, ListingFile: filepath.Join(state, "local.listing"), Logger: log,
		Now: func() time.Time { return time.Now().Add(time.Hour) }}
	defer dir.Close()
	store := new(catalog.Store)
	loop := &Loop{
		Source: localSource{dir},
		Build: func(prev *catalog.Snapshot, tr scan.Tree) (*catalog.Snapshot, scan.Report, error) {
			snap, rep, err := scan.Build(prev, tr, c, scan.Options{Catalog: catalog.Options{LazyIndex: true}})
			if err == nil {
				if err := c.Save(); err != nil {
					t.Errorf("Save() = %v", err)
				}
			}
			return snap, rep, err
		},
		Store:  store,
		Logger: log,
	}
	if _, err := loop.Once(t.Context()); err != nil {
		t.Fatalf("Once() = %v", err)
	}
	return started{status: loop.Status(), read: dir.LastSync(), snap: store.Load(), log: logs.String()}
}

// TestRestartLocalDir: a restart over an unchanged local directory parses
// no file and reads none; a file changed while the daemon was down is
// read and parsed again, even with its old size and modification time; a
// damaged listing or parse cache costs reading or parsing, is logged,
// and loses nothing.
func TestRestartLocalDir(t *testing.T) {
	const n = 40
	tools, state := t.TempDir(), t.TempDir()
	for i := range n {
		name := fmt.Sprintf("tool-%02d", i)
		writeFile(t, filepath.Join(tools, name, "TOOL.hdlp"), toolFile(name, "intent number "+name))
	}
	check := func(t *testing.T, s started, parsed, hashed int) {
		t.Helper()
		if s.status.Parsed != parsed || s.read.Hashed != hashed {
			t.Errorf("parsed %d, hashed %d; want %d, %d", s.status.Parsed, s.read.Hashed, parsed, hashed)
		}
		if s.snap.Len() != n || len(s.snap.Enabled()) != n {
			t.Errorf("snapshot has %d tools, %d enabled; want %d", s.snap.Len(), len(s.snap.Enabled()), n)
		}
	}

	cold := startLocal(t, tools, state)
	check(t, cold, n, n)

	t.Run("nothing changed", func(t *testing.T) {
		s := startLocal(t, tools, state)
		check(t, s, 0, 0)
		if s.read.ReadDirs != 0 || !s.read.Loaded {
			t.Errorf("folders read %d, listing loaded %v; want 0 and true", s.read.ReadDirs, s.read.Loaded)
		}
		if s.snap.Rev() != cold.snap.Rev() {
			t.Errorf("revision %s, want the cold start's %s", s.snap.Rev(), cold.snap.Rev())
		}
	})

	t.Run("changed while down, same size and time", func(t *testing.T) {
		f := filepath.Join(tools, "tool-07", "TOOL.hdlp")
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(f)
		changed := strings.Replace(string(data), "intent number tool-07", "INTENT NUMBER TOOL-07", 1)
		writeFile(t, f, changed)
		if err := os.Chtimes(f, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		s := startLocal(t, tools, state)
		check(t, s, 1, 1)
		if e, _ := s.snap.Lookup("tool-07"); e.Tool == nil || e.Tool.Intent != "INTENT NUMBER TOOL-07" {
			t.Errorf("tool-07 serves %+v, want the changed intent", e.Tool)
		}
		check(t, startLocal(t, tools, state), 0, 0)
	})

	t.Run("listing damaged", func(t *testing.T) {
		writeFile(t, filepath.Join(state, "local.listing"), "garbage")
		s := startLocal(t, tools, state)
		check(t, s, 0, n)
		if !strings.Contains(s.log, "local dir listing ignored") {
			t.Errorf("log = %q, want the listing reported ignored", s.log)
		}
		check(t, startLocal(t, tools, state), 0, 0)
	})

	t.Run("parse cache damaged", func(t *testing.T) {
		writeFile(t, filepath.Join(state, "parse.cache"), "garbage")
		s := startLocal(t, tools, state)
		check(t, s, n, 0)
		if !strings.Contains(s.log, "parse cache not fully used") {
			t.Errorf("log = %q, want the parse cache reported", s.log)
		}
		check(t, startLocal(t, tools, state), 0, 0)
	})
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
