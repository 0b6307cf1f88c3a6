package cache

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unique"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolagent/toolagent/internal/hldp"
)

const good = `name: t
display: T
intent: test tool
method: run
executor: shell
argv: [echo, "{msg}", ["--n", "{n}"]]
params_schema:
  msg: { type: string, required: true, description: "message", pattern: "^[a-z]+$" }
  n: { type: integer, required: false, default: 3, enum: [1, 2, 3], minimum: 1 }
  tags: { type: array, required: false, items: { type: string }, default: [a, b] }
  opts: { type: object, required: false, default: { k: 1, nested: [true, 2.5] } }
  ratio: { type: number, required: false, default: 0.5 }
constraints: { timeout_ms: 1500, max_output_bytes: 100, require_confirm: true, max_concurrency: 2 }
keywords: [x, y]
author: a
created: 2026-11-30
why: w
`

const bad = `name: u
display: U
intent: test
method: exec
executor: sh
params_schema: {}
constraints: { require_confrim: true }
author: a
created: 2026-11-30
why: w
`

// TestPersistRoundTrip: what Save writes, Open gives back equal — the
// parsed tool with every param value type, and a parse error with its
// diagnostics — so a restart parses nothing and behaves the same.
func TestPersistRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "parse.cache")
	c, err := Open(path)
	if err != nil {
		t.Fatalf("Open(missing) = %v, want an empty cache and no error", err)
	}
	tool, err := hldp.Parse("tools/t/TOOL.hdlp", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	_, perr := hldp.Parse("tools/u/TOOL.hdlp", []byte(bad))
	if perr == nil {
		t.Fatal("bad definition parsed")
	}
	// The handle keeps the interned copy alive (package unique forgets a
	// string no handle holds once the collector runs): the reloaded tool
	// must find this one.
	held := unique.Make(tool.Params[0].Description)
	defer runtime.KeepAlive(held)
	kt := Key{Path: "t/TOOL.hdlp", Blob: "aaa"}
	ku := Key{Path: "u/TOOL.hdlp", Blob: "bbb"}
	c.Put(kt, Outcome{Tool: tool, Rev: "c0ffee"})
	c.Put(ku, Outcome{Err: perr})
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("state dir holds %d files after Save, want only the cache (no temp files)", len(ents))
	}

	c2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := c2.Get(kt)
	if !ok {
		t.Fatal("tool not in the reopened cache")
	}
	if got.Rev != "c0ffee" {
		t.Errorf("reloaded outcome revision = %q, want c0ffee (provenance survives a restart)", got.Rev)
	}
	if diff := cmp.Diff(tool, got.Tool, cmpopts.IgnoreUnexported(hldp.Tool{})); diff != "" {
		t.Errorf("reloaded tool differs (-parsed +reloaded):\n%s", diff)
	}
	// Decoded as Parse returns it: interned (hldp.Tool.Intern), so a warm
	// start keeps one copy of what tools share.
	if a, b := got.Tool.Params[0].Description, tool.Params[0].Description; unsafe.StringData(a) != unsafe.StringData(b) {
		t.Errorf("the reloaded tool's param description is a copy of its own, not interned")
	}
	// The reloaded tool works like the parsed one.
	p1, err1 := tool.CheckParams(map[string]any{"msg": "hi"})
	p2, err2 := got.Tool.CheckParams(map[string]any{"msg": "hi"})
	if err1 != nil || err2 != nil || !cmp.Equal(p1, p2) {
		t.Errorf("CheckParams: parsed %v %v, reloaded %v %v", p1, err1, p2, err2)
	}
	if string(tool.InputSchema()) != string(got.Tool.InputSchema()) {
		t.Errorf("InputSchema differs:\n%s\n%s", tool.InputSchema(), got.Tool.InputSchema())
	}
	gu, ok := c2.Get(ku)
	if !ok || gu.Err == nil || gu.Err.Error() != perr.Error() {
		t.Fatalf("reloaded error = %v, want %v", gu.Err, perr)
	}
	if n := len(hldp.Diagnostics(gu.Err)); n != len(hldp.Diagnostics(perr)) || n == 0 {
		t.Errorf("reloaded error has %d diagnostics, want %d", n, len(hldp.Diagnostics(perr)))
	}
	// Unchanged: Save writes nothing (the file keeps its modification time).
	fi1, _ := os.Stat(path)
	if err := c2.Save(); err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(path)
	if !fi1.ModTime().Equal(fi2.ModTime()) {
		t.Error("Save of an unchanged cache rewrote the file")
	}
}

func TestOpenIgnoresBadFiles(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt")
	if err := os.WriteFile(corrupt, []byte("not gob at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Open(corrupt)
	if err == nil || !strings.Contains(err.Error(), "ignored") || c == nil || c.Len() != 0 {
		t.Errorf("Open(corrupt) = %v, %v; want an empty cache and an error saying it was ignored", c, err)
	}
	// The cache still works and can overwrite the bad file.
	c.Put(Key{Path: "p", Blob: "b"}, Outcome{Tool: &hldp.Tool{Name: "p"}})
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(corrupt)
	if err != nil || c2.Len() != 1 {
		t.Errorf("reopen after overwrite: %v, len %d", err, c2.Len())
	}
	// Truncated file: header fine, outcomes cut.
	data, _ := os.ReadFile(corrupt)
	trunc := filepath.Join(dir, "trunc")
	os.WriteFile(trunc, data[:len(data)/2], 0o644)
	if c, err := Open(trunc); err == nil || c.Len() != 0 {
		t.Errorf("Open(truncated) = len %d, %v; want empty and an error", c.Len(), err)
	}
}

// savedWithListing saves a cache holding one outcome and a listing of the
// tree "tree-1", and returns the file's path and bytes.
func savedWithListing(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "parse.cache")
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Path: "p/TOOL.hdlp", Blob: "b1"}
	c.Put(k, Outcome{Tool: &hldp.Tool{Name: "p"}})
	c.SetListing("tree-1", map[Key]bool{k: true, {Path: "q/TOOL.hdlp", Blob: "b2"}: true})
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data
}

// TestListingPersists: the listing of the last built tree survives Save
// and Open, is given only for that tree, and an unchanged listing does
// not make Save write.
func TestListingPersists(t *testing.T) {
	path, _ := savedWithListing(t)
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"p/TOOL.hdlp": "b1", "q/TOOL.hdlp": "b2"}
	if got, ok := c.Listing("tree-1"); !ok || !cmp.Equal(got, want) {
		t.Errorf("Listing(tree-1) = %v, %v; want %v, true", got, ok, want)
	}
	for _, other := range []string{"tree-2", ""} {
		if got, ok := c.Listing(other); ok {
			t.Errorf("Listing(%q) = %v, true; want none: the listing is of tree-1", other, got)
		}
	}
	c.SetListing("tree-1", map[Key]bool{{Path: "q/TOOL.hdlp", Blob: "b2"}: true, {Path: "p/TOOL.hdlp", Blob: "b1"}: true})
	fi1, _ := os.Stat(path)
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(path); !fi1.ModTime().Equal(fi2.ModTime()) {
		t.Error("Save after recording the same listing rewrote the file")
	}
	c.SetListing("tree-2", map[Key]bool{{Path: "p/TOOL.hdlp", Blob: "b3"}: true})
	if _, ok := c.Listing("tree-1"); ok {
		t.Error("Listing(tree-1) after a listing of tree-2 was recorded; want only the latest kept")
	}
}

// TestListingDamaged: a file whose listing is missing (written before
// listings), cut, or altered keeps its outcomes and loads without a
// listing, so the next build reads the tree; cut and altered listings are
// reported.
func TestListingDamaged(t *testing.T) {
	_, data := savedWithListing(t)
	tail := bytes.LastIndex(data, []byte("b2"))
	if tail < 0 {
		t.Fatal("listing not found in the file")
	}
	// A file ending after the outcomes (as written before listings):
	// header and one chunk.
	var old bytes.Buffer
	chunk, err := appendChunk(nil, []fileEntry{{Key: Key{Path: "p/TOOL.hdlp", Blob: "b1"}, Tool: &hldp.Tool{Name: "p"}}})
	if err != nil {
		t.Fatal(err)
	}
	old.Write(appendHeader(nil, []int64{int64(len(chunk))}))
	old.Write(chunk)
	altered := bytes.Clone(data)
	altered[tail+1] = '3' // "b2" -> "b3": decodes, fails the checksum
	tests := []struct {
		name    string
		data    []byte
		wantErr string // "" for none
	}{
		{"intact", data, ""},
		{"written before listings", old.Bytes(), ""},
		{"listing cut", data[:tail], "corrupt"},
		{"listing altered", altered, "checksum"},
	}
	for _, tc := range tests {
		p := filepath.Join(t.TempDir(), "parse.cache")
		if err := os.WriteFile(p, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Open(p)
		if got := errText(err); (tc.wantErr == "") != (got == "") || !strings.Contains(got, tc.wantErr) {
			t.Errorf("%s: Open error = %q; want one containing %q", tc.name, got, tc.wantErr)
		}
		if c.Len() != 1 {
			t.Errorf("%s: Open kept %d outcomes; want 1: a bad listing costs only the listing", tc.name, c.Len())
		}
		_, ok := c.Listing("tree-1")
		if want := tc.name == "intact"; ok != want {
			t.Errorf("%s: Listing(tree-1) ok = %v; want %v", tc.name, ok, want)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestPersistChunks: outcomes are saved in chunks decoded in parallel; a
// cache of several chunks comes back whole, a damaged chunk makes the
// file ignored (never half used), and a file of the layout before chunks
// is ignored with its format named.
func TestPersistChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parse.cache")
	c := New()
	c.path = path
	const n = 3*chunkLen + 7
	for i := range n {
		name := fmt.Sprintf("t%04d", i)
		c.Put(Key{Path: name + "/TOOL.hdlp", Blob: fmt.Sprint(i)}, Outcome{Tool: &hldp.Tool{Name: name, Keywords: []string{name}}, Rev: "r"})
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(path)
	if err != nil || c2.Len() != n {
		t.Fatalf("Open() = %d outcomes, %v; want %d, nil", c2.Len(), err, n)
	}
	for _, i := range []int{0, chunkLen, n - 1} {
		name := fmt.Sprintf("t%04d", i)
		if o, ok := c2.Get(Key{Path: name + "/TOOL.hdlp", Blob: fmt.Sprint(i)}); !ok || o.Tool.Name != name || o.Tool.Keywords[0] != name || o.Rev != "r" {
			t.Errorf("Get(%s) = %+v, %v; want the tool saved", name, o, ok)
		}
	}

	data, _ := os.ReadFile(path)
	i := bytes.LastIndex(data, []byte("t0700"))
	if i < 0 {
		t.Fatal("outcome t0700 not found in the file")
	}
	damaged := bytes.Clone(data)
	damaged[i-2] ^= 0xff // the length of a string inside one chunk
	bad := filepath.Join(t.TempDir(), "parse.cache")
	os.WriteFile(bad, damaged, 0o600)
	if c, err := Open(bad); err == nil || !strings.Contains(err.Error(), "ignored") || c.Len() != 0 {
		t.Errorf("Open(a damaged chunk) = %d outcomes, %v; want none and an error saying it was ignored", c.Len(), err)
	}

	var v1 bytes.Buffer
	enc := gob.NewEncoder(&v1)
	enc.Encode(fileHeader{Format: "toolagent-parse-cache-1", FormatVersion: hldp.FormatVersion})
	enc.Encode([]fileEntry{{Key: Key{Path: "p/TOOL.hdlp", Blob: "b"}, Tool: &hldp.Tool{Name: "p"}}})
	old := filepath.Join(t.TempDir(), "parse.cache")
	os.WriteFile(old, v1.Bytes(), 0o600)
	if c, err := Open(old); err == nil || !strings.Contains(err.Error(), "toolagent-parse-cache-1") || c.Len() != 0 {
		t.Errorf("Open(layout 1) = %d outcomes, %v; want none and an error naming the old format", c.Len(), err)
	}
	// Layout 3 (gob chunks in frames of their own) is named, not read.
	v3 := filepath.Join(t.TempDir(), "parse.cache")
	os.WriteFile(v3, append([]byte("toolagent-parse-cache-3\n"), data[len(fileFormat)+1:]...), 0o600)
	if c, err := Open(v3); err == nil || !strings.Contains(err.Error(), "toolagent-parse-cache-3") || c.Len() != 0 {
		t.Errorf("Open(layout 3) = %d outcomes, %v; want none and an error naming the old format", c.Len(), err)
	}
}

// TestOpenLongHeader: a file whose chunk lengths go on past the first
// bytes Open reads to find its layout (headLen) is read whole, and one cut
// inside those lengths, or inside its last chunk, is ignored as corrupt.
func TestOpenLongHeader(t *testing.T) {
	const n = headLen + 100 // a length a byte: the header ends past headLen
	var chunks []byte
	lens := make([]int64, n)
	for i := range n {
		name := fmt.Sprintf("t%05d", i)
		c, err := appendChunk(nil, []fileEntry{{Key: Key{Path: name + "/TOOL.hdlp", Blob: "b"}, Tool: &hldp.Tool{Name: name}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(c) >= 0x80 {
			t.Fatalf("a chunk of one outcome is %d bytes; the test wants lengths of one byte", len(c))
		}
		lens[i] = int64(len(c))
		chunks = append(chunks, c...)
	}
	head := appendHeader(nil, lens)
	if len(head) <= headLen {
		t.Fatalf("header of %d bytes; want one longer than headLen (%d)", len(head), headLen)
	}
	data := append(head, chunks...)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, err := Open(write("whole", data))
	if err != nil || c.Len() != n {
		t.Fatalf("Open() = %d outcomes, %v; want %d, nil", c.Len(), err, n)
	}
	if o, ok := c.Get(Key{Path: fmt.Sprintf("t%05d/TOOL.hdlp", n-1), Blob: "b"}); !ok || o.Tool.Name != fmt.Sprintf("t%05d", n-1) {
		t.Errorf("Get(the last chunk's outcome) = %+v, %v; want its tool", o, ok)
	}
	for _, cut := range []struct {
		name string
		at   int
	}{
		{"in the lengths past headLen", headLen + 50},
		{"in the last chunk", len(data) - 3},
	} {
		c, err := Open(write("cut", data[:cut.at]))
		if err == nil || !strings.Contains(err.Error(), "corrupt (ignored)") || c.Len() != 0 {
			t.Errorf("Open(cut %s) = %d outcomes, %v; want none and an error saying it is corrupt and ignored", cut.name, c.Len(), err)
		}
	}
}

// TestSaveEncodesChangedChunks: after a first Save, or an Open, a Save
// encodes only the chunks whose outcomes changed (a Put, a Retain that
// drops one) and copies the others from the file, and what Open reads
// back is the whole cache every time; a cache that grew past its layout,
// or whose file another process replaced, is encoded anew.
func TestSaveEncodesChangedChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parse.cache")
	c := New()
	c.path = path
	put := func(i int, blob string) Key {
		name := fmt.Sprintf("t%05d", i)
		k := Key{Path: name + "/TOOL.hdlp", Blob: blob}
		c.Put(k, Outcome{Tool: &hldp.Tool{Name: name, Intent: blob}})
		return k
	}
	const n = 8 * chunkLen
	keep := map[Key]bool{}
	for i := range n {
		keep[put(i, "b1")] = true
	}
	check := func(what string, wantEncoded int) {
		t.Helper()
		if err := c.Save(); err != nil {
			t.Fatal(err)
		}
		if c.encoded != wantEncoded {
			t.Errorf("%s: Save encoded %d chunks, want %d", what, c.encoded, wantEncoded)
		}
		back, err := Open(path)
		if err != nil || back.Len() != c.Len() {
			t.Fatalf("%s: Open() = %d outcomes, %v; want %d", what, back.Len(), err, c.Len())
		}
		for k, s := range c.m {
			if g, ok := back.Get(k); !ok || g.Tool.Intent != s.tool.Intent {
				t.Fatalf("%s: Open().Get(%v) = %+v, %v; want %q", what, k, g, ok, s.tool.Intent)
			}
		}
	}
	check("first save", chunkCount(n))
	check("nothing changed", 0) // not dirty: no write at all
	delete(keep, Key{Path: "t00007/TOOL.hdlp", Blob: "b1"})
	keep[put(7, "b2")] = true
	c.Retain(keep) // drops the old t00007, in the same chunk as the new
	check("one file changed", 1)
	put(8, "b2")
	put(4000, "b2")
	check("two files in two chunks", 2)
	for i := n; i < 5*n; i++ {
		put(i, "b1")
	}
	check("grown fivefold", chunkCount(c.Len()))

	// A restart: the first Save copies from the file it opened too.
	var err error
	if c, err = Open(path); err != nil {
		t.Fatal(err)
	}
	put(9, "b3")
	check("one file changed after a restart", 1)

	// Another process replaced the file: nothing is copied from it.
	other := New()
	other.path = path
	other.Put(Key{Path: "x/TOOL.hdlp", Blob: "x"}, Outcome{Tool: &hldp.Tool{Name: "x"}})
	if err := other.Save(); err != nil {
		t.Fatal(err)
	}
	put(10, "b3")
	check("one file changed after the file was replaced", chunkCount(c.Len()))

}

// TestOpenSharesStrings: a restart holds each path, blob hash and
// revision once — the last good versions share the outcomes' keys, a
// key's path is the end of its tool's File (which may have the prefix of
// messages), and outcomes of one commit share its revision — as a
// cache that parsed them does (100,000 tools hold each several times).
func TestOpenSharesStrings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parse.cache")
	c := New()
	c.path = path
	rev := "0123456789abcdef0123456789abcdef01234567"
	served := map[string]Served{}
	// b's File has the prefix of messages, as the daemon's tools have.
	files := map[string]string{"a": "a/TOOL.hdlp", "b": "tools/b/TOOL.hdlp"}
	for _, name := range []string{"a", "b"} {
		k := Key{Path: name + "/TOOL.hdlp", Blob: strings.Repeat(name, 40)}
		c.Put(k, Outcome{Tool: &hldp.Tool{Name: name, File: files[name]}, Rev: rev})
		served[k.Path] = Served{Blob: k.Blob, Rev: rev}
	}
	c.SetLastGood(served)
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	got, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	var revs []string
	for k, s := range got.m {
		o := s.outcome()
		f := o.Tool.File
		if f != files[o.Tool.Name] || !same(f[len(f)-len(k.Path):], k.Path) {
			t.Errorf("%s: the key's path is a copy of the end of the tool's File %q", k.Path, f)
		}
		i, ok := findLastGood(got.lastGood, k.Path)
		if !ok {
			t.Fatalf("%s: no last good version after Open", k.Path)
		}
		if g := got.lastGood[i]; !same(g.Path, k.Path) || !same(g.Blob, k.Blob) || !same(g.Rev, o.Rev) {
			t.Errorf("%s: the last good version holds copies of the key's path, blob or the outcome's revision", k.Path)
		}
		revs = append(revs, o.Rev)
	}
	if len(revs) != 2 || revs[0] != rev || !same(revs[0], revs[1]) {
		t.Errorf("revisions %q: want one string %q for both outcomes", revs, rev)
	}
}

// TestPersistEveryDefinition: every good definition of hldp's testdata,
// and one whose params carry a default of each kind a value takes (a
// list and a map), comes back from the file as Parse gave it. gob alone
// (a Tool's fields, without hldp.Tool.MarshalBinary) fails it: it leaves
// out a zero value, so deploy-gate's `minimum: 0` came back as no minimum.
func TestPersistEveryDefinition(t *testing.T) {
	dir := filepath.Join("..", "hldp", "testdata", "good")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"values/TOOL.hdlp": []byte(`name: values
display: values
intent: defaults of every kind
method: run
executor: shell
argv: [echo, "{s}", "{i}", "{f}", "{b}", "{l}", "{m}"]
params_schema:
  s: { type: string, description: "s", default: "x", enum: [x, y] }
  i: { type: integer, description: "i", default: 3, minimum: 1, maximum: 9 }
  f: { type: number, description: "f", default: 1.5 }
  b: { type: boolean, description: "b", default: true }
  l: { type: array, description: "l", default: [a, b], items: { type: string } }
  m: { type: object, description: "m", default: { k: v, n: 2 } }
author: test
created: 2026-01-01
why: every kind of default survives the parse cache
`)}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), hldp.FileName))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()+"/"+hldp.FileName] = data
	}
	path := filepath.Join(t.TempDir(), "parse.cache")
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[Key]*hldp.Tool{}
	for rel, data := range files {
		tool, err := hldp.Parse("tools/"+rel, data)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		k := Key{Path: rel, Blob: fmt.Sprint(len(data))}
		parsed[k] = tool
		c.Put(k, Outcome{Tool: tool})
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range parsed {
		got, ok := c2.Get(k)
		if !ok || got.Tool == nil {
			t.Errorf("%s: not in the reopened cache", k.Path)
			continue
		}
		if diff := cmp.Diff(want, got.Tool, cmpopts.IgnoreUnexported(hldp.Tool{})); diff != "" {
			t.Errorf("%s: reloaded tool differs (-parsed +reloaded):\n%s", k.Path, diff)
		}
	}
	if len(parsed) < 9 {
		t.Errorf("%d definitions, want hldp's good ones and values", len(parsed))
	}
}
