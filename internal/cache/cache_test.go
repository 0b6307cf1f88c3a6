package cache

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/toolagent/toolagent/internal/hldp"
)

func TestGetPutRetain(t *testing.T) {
	c := New()
	a := Key{Path: "a/TOOL.hdlp", Blob: "1111"}
	b := Key{Path: "b/TOOL.hdlp", Blob: "2222"}
	if _, ok := c.Get(a); ok {
		t.Fatal("Get on an empty cache found something")
	}
	c.Put(a, Outcome{Tool: &hldp.Tool{Name: "a"}})
	c.Put(b, Outcome{Err: errors.New("bad")})
	if o, ok := c.Get(a); !ok || o.Tool.Name != "a" {
		t.Errorf("Get(a) = %+v, %v", o, ok)
	}
	if o, ok := c.Get(b); !ok || o.Err == nil {
		t.Errorf("Get(b) = %+v, %v; want the stored error", o, ok)
	}
	// Same bytes at another path is another key: parsing depends on the path.
	if _, ok := c.Get(Key{Path: "c/TOOL.hdlp", Blob: "1111"}); ok {
		t.Error("a blob at another path hit the cache")
	}
	c.Retain(map[Key]bool{a: true})
	if c.Len() != 1 {
		t.Errorf("Len after Retain = %d, want 1", c.Len())
	}
	if hits, misses := c.Stats(); hits != 2 || misses != 2 {
		t.Errorf("Stats() = %d hits %d misses, want 2 and 2", hits, misses)
	}
}

func TestConcurrentUse(t *testing.T) {
	c := New()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := Key{Path: "p", Blob: string(rune('a' + i))}
			for range 100 {
				c.Put(k, Outcome{})
				c.Get(k)
			}
		}()
	}
	wg.Wait()
	if c.Len() != 8 {
		t.Errorf("Len = %d, want 8", c.Len())
	}
}

// TestLastGood: the versions SetLastGood records are found by path,
// UpdateLastGood changes, adds (before and after the others) and drops
// some alone, Retain keeps their outcomes, and a restart gives them back.
func TestLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parse.cache")
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tool := func(name string) Outcome {
		return Outcome{Tool: &hldp.Tool{Name: name, File: name + "/TOOL.hdlp"}}
	}
	for _, k := range []Key{{"b/TOOL.hdlp", "b1"}, {"b/TOOL.hdlp", "b2"}, {"d/TOOL.hdlp", "d1"}, {"f/TOOL.hdlp", "f1"}, {"a/TOOL.hdlp", "a1"}, {"e/TOOL.hdlp", "e1"}} {
		c.Put(k, tool(k.Path[:1]))
	}
	c.SetLastGood(map[string]Served{"b/TOOL.hdlp": {"b1", "r1"}, "d/TOOL.hdlp": {"d1", "r1"}, "f/TOOL.hdlp": {"f1", "r1"}})
	c.UpdateLastGood(map[string]Served{"b/TOOL.hdlp": {"b2", "r2"}, "a/TOOL.hdlp": {"a1", "r2"}, "e/TOOL.hdlp": {"e1", "r2"}}, []string{"d/TOOL.hdlp", "c/TOOL.hdlp"})
	want := map[string]Served{"a/TOOL.hdlp": {"a1", "r2"}, "b/TOOL.hdlp": {"b2", "r2"}, "e/TOOL.hdlp": {"e1", "r2"}, "f/TOOL.hdlp": {"f1", "r1"}}
	check := func(t *testing.T, c *Cache) {
		t.Helper()
		for _, p := range []string{"a/TOOL.hdlp", "b/TOOL.hdlp", "c/TOOL.hdlp", "d/TOOL.hdlp", "e/TOOL.hdlp", "f/TOOL.hdlp"} {
			v, o, ok := c.LastGood(p)
			w, wok := want[p]
			if ok != wok || v != w || ok && o.Tool.Name != p[:1] {
				t.Errorf("LastGood(%s) = %+v, %v, %v; want %+v, %v", p, v, o.Tool, ok, w, wok)
			}
		}
	}
	check(t, c)
	c.Retain(map[Key]bool{})
	if _, ok := c.Get(Key{"b/TOOL.hdlp", "b1"}); ok {
		t.Error("Retain(nothing) kept b1, a version no longer the last good")
	}
	check(t, c)
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	check(t, again)
}

// TestStoredOutcomes: Get gives back what Put stored — tool, error and
// revision — while outcomes of one revision with no error share one
// record of it, which Retain forgets with the last of them.
func TestStoredOutcomes(t *testing.T) {
	c := New()
	tool := &hldp.Tool{Name: "a"}
	bad := errors.New("bad")
	puts := map[Key]Outcome{
		{"a/TOOL.hdlp", "1"}: {Tool: tool, Rev: "r1"},
		{"b/TOOL.hdlp", "1"}: {Tool: tool, Rev: "r1"},
		{"c/TOOL.hdlp", "1"}: {Err: bad, Rev: "r1"},
		{"d/TOOL.hdlp", "1"}: {Tool: tool, Rev: "r2"},
		{"e/TOOL.hdlp", "1"}: {Tool: tool},
	}
	for k, o := range puts {
		c.Put(k, o)
	}
	for k, o := range puts {
		if got, ok := c.Get(k); !ok || got != o {
			t.Errorf("Get(%v) = %+v, %v; want %+v", k, got, ok, o)
		}
	}
	if a, b := c.m[Key{"a/TOOL.hdlp", "1"}].rest, c.m[Key{"b/TOOL.hdlp", "1"}].rest; a != b {
		t.Error("two outcomes of revision r1 keep a record of it each")
	}
	c.Retain(map[Key]bool{{"a/TOOL.hdlp", "1"}: true, {"e/TOOL.hdlp", "1"}: true})
	if _, ok := c.revs["r2"]; ok || c.revs["r1"] == nil {
		t.Errorf("after Retain the revisions recorded are %v; want r1 alone", c.revs)
	}
}
