package cache

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/hldp"
)

// BenchmarkOpen10000 is the decoding of a warm start's parse cache: 10,000
// parsed tools (good's shape, every param type) with their listing and
// last good versions, as Open reads them. A start pays it before its first
// build (docs/operations.md); allocs/op and B/op are what it leaves to
// the collector and the resident set.
//
//	go test -run '^$' -bench Open10000 -benchmem ./internal/cache/
func BenchmarkOpen10000(b *testing.B) {
	const n = 10000
	path := filepath.Join(b.TempDir(), "parse.cache")
	c := New()
	c.path = path
	keys := map[Key]bool{}
	served := map[string]Served{}
	for i := range n {
		name := fmt.Sprintf("tool-%05d", i)
		file := "tools/" + name + "/TOOL.hdlp"
		tl, err := hldp.Parse(file, []byte(strings.Replace(good, "name: t\n", "name: "+name+"\n", 1)))
		if err != nil {
			b.Fatal(err)
		}
		k := Key{Path: name + "/TOOL.hdlp", Blob: fmt.Sprintf("%040x", i)}
		c.Put(k, Outcome{Tool: tl, Rev: "0123456789abcdef0123456789abcdef01234567"})
		keys[k] = true
		served[k.Path] = Served{Blob: k.Blob, Rev: "0123456789abcdef0123456789abcdef01234567"}
	}
	c.SetListing("fedcba9876543210fedcba9876543210fedcba98", keys)
	c.SetLastGood(served)
	if err := c.Save(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c2, err := Open(path)
		if err != nil || c2.Len() != n {
			b.Fatalf("Open() = %d outcomes, %v; want %d", c2.Len(), err, n)
		}
	}
}
