package cache

import (
	"errors"
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
