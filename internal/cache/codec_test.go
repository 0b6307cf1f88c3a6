package cache

import (
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolagent/toolagent/internal/hldp"
)

// TestChunkRoundTrip: every kind of entry layout 4 writes comes back as
// it was: a tool (its key's path shared with its File), a tool whose
// File does not end in the key's path, diagnostics, a plain error, with
// and without a revision.
func TestChunkRoundTrip(t *testing.T) {
	in := []fileEntry{
		{Key: Key{Path: "a/TOOL.hdlp", Blob: "b1"}, Tool: &hldp.Tool{Name: "a", File: "tools/a/TOOL.hdlp", Keywords: []string{"x"}}, Rev: "r1"},
		{Key: Key{Path: "b/TOOL.hdlp", Blob: "b2"}, Tool: &hldp.Tool{Name: "b", File: "elsewhere"}, Rev: "r1"},
		{Key: Key{Path: "c/TOOL.hdlp", Blob: "b3"}, Diags: []*hldp.Diagnostic{
			{File: "tools/c/TOOL.hdlp", Line: 3, Col: 7, Field: "params.n", Problem: "unknown key", Want: "int", Got: "str", Hint: `did you mean "m"?`},
			{File: "tools/c/TOOL.hdlp", Problem: "missing required field"},
		}},
		{Key: Key{Path: "d/TOOL.hdlp", Blob: "b4"}, Err: "read: permission denied", Rev: "r2"},
	}
	data, err := appendChunk([]byte("prefix"), in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeChunk(data[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out, cmpopts.IgnoreUnexported(hldp.Tool{})); diff != "" {
		t.Fatalf("decoded chunk differs (-written +read):\n%s", diff)
	}
	// Kept once: the key's path is the end of the tool's File, a
	// revision one string for its outcomes.
	if p, f := out[0].Key.Path, out[0].Tool.File; unsafe.StringData(p) != unsafe.StringData(f[len(f)-len(p):]) {
		t.Errorf("key path %q is a string of its own, not the end of the tool's file %q", p, f)
	}
	if unsafe.StringData(out[0].Rev) != unsafe.StringData(out[1].Rev) {
		t.Error("one revision read as two strings")
	}
}

// TestChunkDamage: a chunk cut at any length or with any one byte
// changed is refused, never read as other outcomes.
func TestChunkDamage(t *testing.T) {
	data, err := appendChunk(nil, []fileEntry{
		{Key: Key{Path: "a/TOOL.hdlp", Blob: "b1"}, Tool: &hldp.Tool{Name: "a", File: "tools/a/TOOL.hdlp"}, Rev: "r1"},
		{Key: Key{Path: "d/TOOL.hdlp", Blob: "b4"}, Err: "boom"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(data) {
		if es, err := decodeChunk(data[:n]); err == nil {
			t.Fatalf("a chunk cut to %d of %d bytes decoded to %d entries", n, len(data), len(es))
		}
	}
	for i := range data {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			d := append([]byte(nil), data...)
			d[i] ^= x
			if es, err := decodeChunk(d); err == nil {
				t.Fatalf("a chunk with byte %d xor %#x decoded to %d entries", i, x, len(es))
			}
		}
	}
}

// TestTailRoundTrip: the listing and the last good versions come back;
// a listing altered fails its checksum, one cut is corrupt, and a file
// with no tail has neither and no error.
func TestTailRoundTrip(t *testing.T) {
	l := fileListing{Tree: "local:abc", Keys: []Key{{Path: "a/TOOL.hdlp", Blob: "b1"}, {Path: "b/TOOL.hdlp", Blob: "b2"}}}
	l.Sum = listingSum(l.Tree, l.Keys)
	last := fileLast{Good: []fileServed{{Path: "a/TOOL.hdlp", Blob: "b1", Rev: "r"}}, Head: "deadbeef"}
	data := appendTail(nil, l, last)
	gl, glast, lerr, gerr := decodeTail(data)
	if lerr != nil || gerr != nil || !cmp.Equal(l, gl) || !cmp.Equal(last, glast) {
		t.Fatalf("decodeTail = %+v %+v %v %v; want %+v %+v", gl, glast, lerr, gerr, l, last)
	}
	if gl, glast, lerr, gerr := decodeTail(nil); lerr != nil || gerr != nil || gl.Tree != "" || glast.Head != "" {
		t.Errorf("no tail: %+v %+v %v %v; want nothing, no error", gl, glast, lerr, gerr)
	}
	altered := append([]byte(nil), data...)
	altered[5] ^= 1 // inside the listing's tree name
	if _, _, lerr, _ := decodeTail(altered); lerr != errListingSum {
		t.Errorf("altered listing: %v, want %v", lerr, errListingSum)
	}
	if _, _, lerr, _ := decodeTail(data[:8]); lerr != errCut {
		t.Errorf("cut listing: %v, want %v", lerr, errCut)
	}
	// The listing whole, the last good versions cut: the listing stays.
	if gl, _, lerr, gerr := decodeTail(data[:len(data)-3]); lerr != nil || gerr == nil || !cmp.Equal(l, gl) {
		t.Errorf("cut last good versions: %+v %v %v; want the listing and an error about the rest", gl, lerr, gerr)
	}
}
