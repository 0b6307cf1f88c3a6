package catalog

import (
	"fmt"
	"sync"
	"testing"

	"github.com/toolagent/toolagent/internal/hldp"
)

func tool(name string) *hldp.Tool {
	return &hldp.Tool{Name: name, Display: name, Intent: "does " + name, Method: "exec", Executor: hldp.Shell}
}

func TestStatusText(t *testing.T) {
	for _, s := range []Status{Enabled, Disabled, Failed, Stale} {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Status
		if err := got.UnmarshalText(b); err != nil || got != s {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, got, err, s)
		}
	}
	if got := Status(9).String(); got != "Status(9)" {
		t.Errorf("Status(9).String() = %q", got)
	}
	var s Status
	if err := s.UnmarshalText([]byte("enabld")); err == nil {
		t.Error("UnmarshalText(enabld) = nil error, want one")
	}
}

func TestSnapshotEnabledExcludesNotCallable(t *testing.T) {
	s := New("r1", []Entry{
		{Name: "b", Tool: tool("b"), Status: Enabled},
		{Name: "a", Tool: tool("a"), Status: Stale},
		{Name: "c", Tool: tool("c"), Status: Disabled, Reason: "executor gatekeeper is not configured"},
		{Name: "d", Status: Failed, Reason: "bad yaml"},
	}, Options{LazyIndex: true})
	var got []string
	for _, e := range s.Enabled() {
		got = append(got, e.Name)
	}
	if fmt.Sprint(got) != "[a b]" {
		t.Errorf("Enabled() = %v, want [a b]", got)
	}
	if n := len(s.All()); n != 4 {
		t.Errorf("len(All()) = %d, want 4", n)
	}
	if c := s.Counts(); c[Enabled] != 1 || c[Stale] != 1 || c[Disabled] != 1 || c[Failed] != 1 {
		t.Errorf("Counts() = %v", c)
	}
	// The counts are kept with the snapshot; a caller's map is its own.
	c := s.Counts()
	c[Enabled] = 99
	if got := s.Counts()[Enabled]; got != 1 {
		t.Errorf("after a caller changed its map, Counts()[Enabled] = %d, want 1", got)
	}
}

// TestStoreReadersSeeWholeSnapshots swaps snapshots while readers load in a
// loop: each reader must see a snapshot whose generation and contents agree
// (snapshot gen N holds exactly N tools), and generations never go back.
func TestStoreReadersSeeWholeSnapshots(t *testing.T) {
	var st Store
	build := func(n int) *Snapshot {
		var es []Entry
		for i := range n {
			name := fmt.Sprintf("t%03d", i)
			es = append(es, Entry{Name: name, Tool: tool(name), Rev: fmt.Sprint(n), Status: Enabled})
		}
		return New(fmt.Sprint(n), es, Options{LazyIndex: true})
	}
	st.Swap(build(1))
	const gens = 200
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for {
				s := st.Load()
				g := s.Gen()
				if g < last {
					t.Errorf("generation went back: %d after %d", g, last)
					return
				}
				last = g
				if got := len(s.Enabled()); uint64(got) != g {
					t.Errorf("snapshot gen %d has %d tools, want %d", g, got, g)
					return
				}
				if s.Rev() != fmt.Sprint(g) {
					t.Errorf("snapshot gen %d has rev %s", g, s.Rev())
					return
				}
				if g == gens {
					return
				}
			}
		}()
	}
	for n := 2; n <= gens; n++ {
		st.Swap(build(n))
	}
	wg.Wait()
}

func TestStoreChangedClosesOnSwap(t *testing.T) {
	var st Store
	ch := st.Changed()
	select {
	case <-ch:
		t.Fatal("Changed closed before any Swap")
	default:
	}
	prev := st.Swap(New("r1", nil, Options{LazyIndex: true}))
	if prev != nil {
		t.Errorf("first Swap returned %v, want nil", prev)
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed after Swap")
	}
	ch2 := st.Changed()
	if ch2 == ch {
		t.Fatal("Changed returned the closed channel again")
	}
	st.Swap(New("r2", nil, Options{LazyIndex: true}))
	<-ch2
	if g := st.Load().Gen(); g != 2 {
		t.Errorf("Gen() = %d, want 2", g)
	}
}

// TestMatchOffersOnlyCallableTools: a disabled or failed tool that fits
// the query best is never a candidate.
func TestMatchOffersOnlyCallableTools(t *testing.T) {
	restart := &hldp.Tool{Name: "svc-restart", Display: "重启服务", Intent: "restart a systemd service on the host", Method: "run", Executor: hldp.Gatekeeper}
	status := &hldp.Tool{Name: "svc-status", Display: "服务状态", Intent: "show whether a systemd service is running", Method: "run", Executor: hldp.Shell}
	q := "restart the nginx service"
	all := New("r", []Entry{
		{Name: "svc-restart", Tool: restart, Status: Enabled},
		{Name: "svc-status", Tool: status, Status: Enabled},
	}, Options{})
	if r := all.MatchIntent(q, 3); !r.Found || r.Candidates[0].Name != "svc-restart" {
		t.Fatalf("with svc-restart enabled: %+v, want it first", r)
	}
	for _, st := range []Status{Disabled, Failed} {
		s := New("r", []Entry{
			{Name: "svc-restart", Tool: restart, Status: st, Reason: "executor gatekeeper is not configured"},
			{Name: "svc-status", Tool: status, Status: Enabled},
		}, Options{})
		for _, c := range s.MatchIntent(q, 3).Candidates {
			if c.Name == "svc-restart" {
				t.Errorf("%s svc-restart offered as a candidate", st)
			}
		}
	}
}

// TestSnapshotEntriesByName: entries come back sorted by name whatever
// the order given, a later entry of a name replaces an earlier one, and
// Lookup finds each name (and no other).
func TestSnapshotEntriesByName(t *testing.T) {
	first, second := tool("b"), tool("b")
	s := New("r", []Entry{
		{Name: "c", Tool: tool("c")}, {Name: "b", Tool: first}, {Name: ""}, {Name: "a", Tool: tool("a"), Status: Failed}, {Name: "b", Tool: second},
	}, Options{LazyIndex: true})
	var names []string
	for _, e := range s.All() {
		names = append(names, e.Name)
	}
	if fmt.Sprint(names) != "[a b c]" || s.Len() != 3 {
		t.Fatalf("All() names = %v (Len %d), want [a b c]", names, s.Len())
	}
	if e, ok := s.Lookup("b"); !ok || e.Tool != second {
		t.Errorf("Lookup(b) = %+v, %v; want the later entry", e, ok)
	}
	if _, ok := s.Lookup("bb"); ok {
		t.Error("Lookup(bb) found an entry")
	}
	var enabled []string
	for _, e := range s.Enabled() {
		enabled = append(enabled, e.Name)
	}
	if fmt.Sprint(enabled) != "[b c]" {
		t.Errorf("Enabled() = %v, want [b c]", enabled)
	}
}
