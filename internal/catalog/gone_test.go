package catalog

import (
	"testing"

	"github.com/toolagent/toolagent/internal/hldp"
)

// TestGone: a snapshot remembers the tools earlier snapshots had and it
// has not, with the revision of the first one without them; a tool that
// comes back is no longer gone.
func TestGone(t *testing.T) {
	tool := func(name string) Entry { return Entry{Name: name, Tool: &hldp.Tool{Name: name}, Status: Enabled} }
	s1 := New("r1", []Entry{tool("a"), tool("b"), tool("c")}, Options{LazyIndex: true})
	s2 := New("r2", []Entry{tool("a"), tool("c")}, Options{LazyIndex: true, Prev: s1})
	s3 := New("r3", []Entry{tool("a")}, Options{LazyIndex: true, Prev: s2})
	s4 := New("r4", []Entry{tool("a"), tool("b")}, Options{LazyIndex: true, Prev: s3})
	for _, c := range []struct {
		s    *Snapshot
		name string
		rev  string
		ok   bool
	}{
		{s1, "b", "", false}, {s2, "b", "r2", true}, {s3, "b", "r2", true}, {s3, "c", "r3", true},
		{s3, "a", "", false}, {s4, "b", "", false}, {s4, "c", "r3", true}, {s4, "never", "", false},
	} {
		if rev, ok := c.s.Gone(c.name); rev != c.rev || ok != c.ok {
			t.Errorf("%s.Gone(%s) = %q, %v; want %q, %v", c.s.Rev(), c.name, rev, ok, c.rev, c.ok)
		}
	}
}
