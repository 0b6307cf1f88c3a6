package policy

import (
	"slices"
	"strings"
	"testing"
)

// TestSpecsParse: every option spec, parsed at its first use rather than
// at init, parses (a malformed word would panic there, in a call), and
// lists what it declares; the command table's specs included.
func TestSpecsParse(t *testing.T) {
	commandTable() // the specs it makes register too
	specsMu.Lock()
	all := append([]*optWords(nil), specs...)
	specsMu.Unlock()
	if len(all) < 50 {
		t.Fatalf("%d specs registered; want every opts() call's (over 50)", len(all))
	}
	for _, w := range all {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("spec %.60q…: %v", w.list, r)
				}
			}()
			got := (&optSpec{words: w}).options()
			if n := len(strings.Fields(w.list)); len(got.short)+len(got.long) == 0 && n > 0 {
				t.Errorf("spec %.60q…: %d words, no option parsed", w.list, n)
			}
		}()
	}
}

// TestMalformedSpecPanicsAtFirstUse: a bad word is found when the spec is
// first used (TestSpecsParse uses them all), not silently taken.
func TestMalformedSpecPanicsAtFirstUse(t *testing.T) {
	s := opts(`-a -b:::`)
	defer func() {
		specsMu.Lock()
		specs = slices.DeleteFunc(specs, func(w *optWords) bool { return w == s.words }) // not one of the program's
		specsMu.Unlock()
		if r := recover(); r == nil || !strings.Contains(r.(string), "bad option spec -b:::") {
			t.Errorf("a malformed spec's first use: panic %v; want bad option spec -b:::", r)
		}
	}()
	s.options()
}
