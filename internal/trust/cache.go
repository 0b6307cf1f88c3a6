package trust

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
)

// cacheVersion is the layout of the cache file; another is ignored.
const cacheVersion = 1

// Cache keeps what verifying costs, so that a restart verifies nothing
// twice: the verdicts reached under one policy, by commit, and the commit
// that last changed each tool folder as of one head (see
// Cache.Changes). It is a memo: a missing or damaged file costs only the
// work again. Safe for concurrent use.
type Cache struct {
	path string // "" keeps it in memory

	mu    sync.Mutex
	f     cacheFile
	dirty bool
}

type cacheFile struct {
	Version  int                `json:"version"`
	Policy   string             `json:"policy"`   // Policy.Digest the verdicts were reached under
	Verdicts map[string]Verdict `json:"verdicts"` // by commit hash
	Head     string             `json:"head"`     // the commit Changes are of
	Changes  map[string]string  `json:"changes"`  // tool folder -> commit that last changed it
}

// OpenCache reads the cache file at path ("" for a cache in memory only).
// A missing file gives an empty cache; an unreadable one an empty cache
// and an error saying why, which callers may log and go on.
func OpenCache(path string) (*Cache, error) {
	c := &Cache{path: path}
	c.reset()
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("trust cache: %w", err)
	}
	var f cacheFile
	if err := json.Unmarshal(data, &f); err != nil {
		return c, fmt.Errorf("trust cache %s: %w (verifying again)", path, err)
	}
	if f.Version != cacheVersion {
		return c, nil
	}
	if f.Verdicts == nil {
		f.Verdicts = map[string]Verdict{}
	}
	if f.Changes == nil {
		f.Changes = map[string]string{}
	}
	c.f = f
	return c, nil
}

func (c *Cache) reset() {
	c.f = cacheFile{Version: cacheVersion, Verdicts: map[string]Verdict{}, Changes: map[string]string{}}
}

// Verdict returns the verdict on commit under the policy with digest
// policy, if one is kept.
func (c *Cache) Verdict(policy, commit string) (Verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f.Policy != policy {
		return Verdict{}, false
	}
	v, ok := c.f.Verdicts[commit]
	return v, ok
}

// PutVerdict keeps v, the verdict on commit under policy. Verdicts under
// another policy are dropped: they no longer say anything.
func (c *Cache) PutVerdict(policy, commit string, v Verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f.Policy != policy {
		c.f.Policy = policy
		c.f.Verdicts = map[string]Verdict{}
	}
	c.f.Verdicts[commit] = v
	c.dirty = true
}

// Changes returns the head and, for each tool folder of it, the commit
// that last changed it, as SetChanges kept them; the map is a copy.
func (c *Cache) Changes() (head string, changes map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.f.Head, maps.Clone(c.f.Changes)
}

// Head returns the commit Changes are of ("" for none).
func (c *Cache) Head() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.f.Head
}

// Change returns the commit that last changed folder as of Head.
func (c *Cache) Change(folder string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.f.Changes[folder]
	return h, ok
}

// MoveChanges moves Changes from base to head, a commit with base on its
// first-parent history (its first parent, or below it): changes holds the
// folders the commits after base changed, each with the newest that did;
// every other folder keeps its commit. It reports false, and keeps nothing, when
// Changes are not of base. It keeps the folders head removed (a folder
// is looked up only while it exists, and one added again is a change of
// the commit that adds it). The verdicts of the commits the changed
// folders cited before are dropped when no folder cites them any more,
// as SetChanges drops them.
func (c *Cache) MoveChanges(base, head string, changes map[string]string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f.Head != base || base == "" {
		return false
	}
	replaced := map[string]bool{}
	for folder, h := range changes {
		if old, ok := c.f.Changes[folder]; ok && old != h {
			replaced[old] = true
		}
	}
	c.f.Head = head
	maps.Copy(c.f.Changes, changes)
	if len(replaced) > 0 {
		for _, h := range c.f.Changes {
			delete(replaced, h)
		}
		for h := range replaced {
			delete(c.f.Verdicts, h)
		}
	}
	c.dirty = true
	return true
}

// SetChanges keeps changes, the commit that last changed each tool folder
// of head.
func (c *Cache) SetChanges(head string, changes map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f.Head == head && maps.Equal(c.f.Changes, changes) {
		return
	}
	c.f.Head, c.f.Changes = head, maps.Clone(changes)
	// Verdicts of commits no folder cites any more are dropped, so the
	// file does not grow with history.
	cited := make(map[string]bool, len(changes))
	for _, h := range changes {
		cited[h] = true
	}
	maps.DeleteFunc(c.f.Verdicts, func(h string, _ Verdict) bool { return !cited[h] })
	c.dirty = true
}

// Save writes the cache to its file if it changed, atomically.
func (c *Cache) Save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" || !c.dirty {
		return nil
	}
	data, err := json.Marshal(c.f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return fmt.Errorf("trust cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".trust-*")
	if err != nil {
		return fmt.Errorf("trust cache: %w", err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("trust cache: %w", err)
	}
	c.dirty = false
	return nil
}
