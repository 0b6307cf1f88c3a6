package reload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// Watch watches the tools directory dir and every folder in it with
// fsnotify, and pokes trigger on every change below them: a file written,
// created, removed or renamed, a folder added or removed. Editors that save
// through a temporary file and a rename are covered because the folder, not
// the file, is watched. A folder created later is watched as soon as its
// creation is seen; what was written into it before that is read by the
// reload the creation itself triggers.
//
// Watch returns nil when ctx is done, and an error when the watcher cannot
// be set up. Errors the watcher reports later (a queue overflow) are logged
// and answered with a reload, since events may have been lost.
//
// A non-nil tr hears what changed: Track(true) once every folder is
// watched (false when one cannot be, or Watch returns), and before each
// poke Changed with the top-level name the event is about, or "" when
// events may have been lost. A source that trusts it (repo.LocalDir)
// then rereads only what changed.
func Watch(ctx context.Context, dir string, trigger *Trigger, tr Tracker, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if tr == nil {
		tr = noTracker{}
	}
	dir = filepath.Clean(dir)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("reload: watch %s: %w", dir, err)
	}
	defer w.Close()
	defer tr.Track(false)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("reload: watch %s: %w", dir, err)
	}
	all, err := watchFolders(w, dir, log)
	if err != nil {
		return fmt.Errorf("reload: watch %s: %w", dir, err)
	}
	tr.Track(all)
	// A change between the first load and the watches being in place would
	// otherwise go unseen until the next event (Track made the next
	// reload read everything).
	trigger.Poke()
	log.Debug("watching tools directory", "dir", dir, "folders", len(w.WatchList())-1)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod {
				continue // touch or chmod: no content change
			}
			if filepath.Dir(ev.Name) == dir && !ev.Has(fsnotify.Write) {
				// A folder appeared, moved or went. A moved folder keeps its
				// inotify watch under the old name until fsnotify drops it
				// (the Rename of the old name arrives after the Create of
				// the new one), so re-add what is missing on every such
				// event rather than only on Create.
				all, err := watchFolders(w, dir, log)
				if err != nil {
					log.Warn("cannot list tools directory", "dir", dir, "err", err)
				}
				if !all || err != nil {
					tr.Track(false)
				}
			}
			log.Debug("tools directory changed", "path", ev.Name, "op", ev.Op.String())
			tr.Changed(topName(dir, ev.Name))
			trigger.Poke()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			log.Warn("tools directory watcher error; reloading in case events were lost", "dir", dir, "err", err)
			tr.Changed("")
			trigger.Poke()
		}
	}
}

// Tracker hears from Watch what changed (see Watch); repo.LocalDir is one.
type Tracker interface {
	Track(on bool)
	Changed(name string)
}

type noTracker struct{}

func (noTracker) Track(bool)     {}
func (noTracker) Changed(string) {}

// topName is the name in dir of the top-level entry that path is or is
// in, or "" when path is dir itself or outside it.
func topName(dir, path string) string {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	name, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	return name
}

// watchFolders adds a watch for every tool folder of dir not watched yet,
// and reports whether every one is watched. A folder removed again before
// its watch is added is not an error.
func watchFolders(w *fsnotify.Watcher, dir string, log *slog.Logger) (all bool, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	all = true
	unwatched, first, firstErr := 0, "", error(nil)
	watched := make(map[string]bool)
	for _, p := range w.WatchList() {
		watched[p] = true
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if watched[p] {
			continue
		}
		// The entry's type comes with its name; only a link is statted,
		// to follow it (10,000 folders cost no stat each).
		if e.Type()&fs.ModeSymlink != 0 {
			if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
				continue
			}
		} else if !e.IsDir() {
			continue
		}
		if err := w.Add(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			if unwatched == 0 {
				first, firstErr = p, err
			}
			unwatched++
			all = false
		}
	}
	// One line, not one per folder: past fs.inotify.max_user_watches
	// every further folder fails alike.
	if unwatched > 0 {
		log.Warn("cannot watch tool folders; their edits are seen at the next sync, and every sync stats the whole directory",
			"unwatched", unwatched, "first", first, "err", firstErr)
	}
	return all, nil
}
