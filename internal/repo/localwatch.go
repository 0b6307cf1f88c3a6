// The watcher's side of LocalDir: Track and Changed, and the hints a
// watched Sync takes from them.

package repo

// Track says whether a watcher now reports, through Changed, every change
// below the directory: on, once its watches are in place on the
// directory and every folder in it; off when it stops or cannot watch
// them all. While on, a Sync after reported changes stats only the
// top-level entries reported, without reading the directory's names (the
// watcher reports an entry that appears or goes): a reload after one
// edited file of 100,000 costs that file's folder. Its Tree says which
// names it listed again (Tree.Delta). A Sync with
// nothing reported (a scheduled one, one asked for over HTTP), the first
// after Track(true), and any after a lost event (Changed("")) stat
// everything, as without a watcher, so changes a watcher cannot see (a
// network file system) are still found on schedule.
func (d *LocalDir) Track(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tracked, d.changed, d.lost = on, nil, true
}

// Changed reports a change to the top-level entry name of the directory
// (a tool folder, or a file beside them); "" says changes may have been
// missed, so the next Sync stats everything.
func (d *LocalDir) Changed(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if name == "" || name == "." {
		d.lost = true
		return
	}
	if d.changed == nil {
		d.changed = map[string]bool{}
	}
	d.changed[name] = true
}

// takeHintsLocked returns the top-level names to stat, or nil when the
// Sync must stat everything (see Track), and starts the next round.
func (d *LocalDir) takeHintsLocked() map[string]bool {
	hints := d.changed
	if !d.tracked || d.lost || len(hints) == 0 {
		hints = nil
	}
	d.changed, d.lost = nil, false
	return hints
}
