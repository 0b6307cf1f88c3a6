package repo

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// treeBytes encodes entries as a tree object's content, in the order given.
func treeBytes(entries ...object.TreeEntry) []byte {
	var b bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&b, "%o %s\x00", uint32(e.Mode), e.Name)
		b.Write(e.Hash[:])
	}
	return b.Bytes()
}

// goGitDecode decodes data with go-git's decoder, sorted by name as
// gitDir keeps entries.
func goGitDecode(data []byte) ([]object.TreeEntry, error) {
	obj := &plumbing.MemoryObject{}
	obj.SetType(plumbing.TreeObject)
	obj.Write(data)
	var tr object.Tree
	if err := tr.Decode(obj); err != nil {
		return nil, err
	}
	out := slices.Clone(tr.Entries)
	slices.SortStableFunc(out, func(a, b object.TreeEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// TestDecodeTree checks decodeTree against go-git's decoder on a tree with
// every kind of entry, in git's order (a folder sorts as if its name ended
// in "/", so "foo" the folder comes after "foo-bar" and "foo.txt"), and
// that find finds every entry and nothing else.
func TestDecodeTree(t *testing.T) {
	t.Parallel()
	h := func(i byte) plumbing.Hash { return plumbing.Hash{i, 0xff, i} }
	data := treeBytes(
		object.TreeEntry{Name: "a.txt", Mode: filemode.Regular, Hash: h(1)},
		object.TreeEntry{Name: "foo-bar", Mode: filemode.Dir, Hash: h(2)},
		object.TreeEntry{Name: "foo.txt", Mode: filemode.Executable, Hash: h(3)},
		object.TreeEntry{Name: "foo", Mode: filemode.Dir, Hash: h(4)},
		object.TreeEntry{Name: "link", Mode: filemode.Symlink, Hash: h(5)},
		object.TreeEntry{Name: "sub", Mode: filemode.Submodule, Hash: h(6)},
		object.TreeEntry{Name: "工具", Mode: filemode.Deprecated, Hash: h(7)}, // read as Regular
	)
	d, err := decodeTree(data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := goGitDecode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.entries, want) {
		t.Errorf("decodeTree = %v\nwant (go-git) %v", d.entries, want)
	}
	for i, e := range want {
		if j, ok := d.find(e.Name); !ok || j != i {
			t.Errorf("find(%q) = %d, %v; want %d, true", e.Name, j, ok, i)
		}
	}
	for _, name := range []string{"", "fo", "foo/", "zzz", "a"} {
		if j, ok := d.find(name); ok {
			t.Errorf("find(%q) = %d, true; want not found", name, j)
		}
	}
	if d, err := decodeTree(nil); err != nil || len(d.entries) != 0 {
		t.Errorf("decodeTree(empty) = %v, %v; want no entries", d, err)
	}
}

// TestDecodeTreeMalformed checks that a damaged tree object is an error,
// never a panic or a wrong entry: cut anywhere, or with a bad mode.
func TestDecodeTreeMalformed(t *testing.T) {
	t.Parallel()
	good := treeBytes(
		object.TreeEntry{Name: "one", Mode: filemode.Dir, Hash: plumbing.Hash{1}},
		object.TreeEntry{Name: "two", Mode: filemode.Regular, Hash: plumbing.Hash{2}},
	)
	first := len(good) / 2 // the end of the first entry
	for cut := 1; cut < len(good); cut++ {
		d, err := decodeTree(good[:cut])
		if cut == first {
			if err != nil || len(d.entries) != 1 {
				t.Errorf("decodeTree(first entry) = %v, %v; want one entry", d, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("decodeTree(cut at %d of %d) = %v; want an error", cut, len(good), d.entries)
		}
	}
	for _, bad := range []string{"100648 x\x00", "x100644 x\x00", " x\x00", "10000000644 x\x00", "100644x\x00", "100644 \x00"} {
		data := append([]byte(bad), make([]byte, hashSize)...)
		if d, err := decodeTree(data); err == nil || !strings.Contains(err.Error(), "malformed tree") {
			t.Errorf("decodeTree(%q) = %v, %v; want a malformed tree error", bad, d, err)
		}
	}
}

// FuzzDecodeTree checks decodeTree against go-git's decoder on any bytes:
// where go-git decodes a tree, decodeTree gives the same entries (in name
// order); decodeTree never panics.
func FuzzDecodeTree(f *testing.F) {
	f.Add(treeBytes(object.TreeEntry{Name: "TOOL.hdlp", Mode: filemode.Regular, Hash: plumbing.Hash{9}}))
	f.Add(treeBytes(
		object.TreeEntry{Name: "b", Mode: filemode.Dir, Hash: plumbing.Hash{1}},
		object.TreeEntry{Name: "a", Mode: filemode.Executable, Hash: plumbing.Hash{2}},
	))
	f.Add([]byte("40000 \x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeTree(data)
		want, gerr := goGitDecode(data)
		if err != nil || gerr != nil {
			// go-git accepts some damage decodeTree refuses (a mode it
			// reads with a lenient parser); the reverse must not be.
			if err == nil && gerr != nil {
				t.Fatalf("decodeTree accepted %q, which go-git refuses (%v): %v", data, gerr, d.entries)
			}
			return
		}
		if !slices.Equal(d.entries, want) {
			t.Fatalf("decodeTree(%q) = %v\nwant (go-git) %v", data, d.entries, want)
		}
	})
}

// mappedPacks returns how many of this process's memory mappings are of a
// file under dir.
func mappedPacks(t *testing.T, dir string) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return strings.Count(string(maps), dir+"/")
}

// TestPackFilesMapped checks that a Tree reads its clone's pack and index
// files through read-only mappings (not copies on the heap), that the
// objects read through them are right, and that closing the storage
// unmaps them all.
func TestPackFilesMapped(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	r.write("tools/a/TOOL.hdlp", "name: a\n")
	r.write("tools/b/TOOL.hdlp", "name: b\n")
	r.commit("two tools")
	g := newGit(t, serve(t, r, nil))
	tree := mustSync(t, g)
	dir := clonePath(t, g)
	before := mappedPacks(t, dir) // the mappings of tree's own reads
	o := openObjects(dir, nil)
	f := &gitFS{o: o, root: plumbing.NewHash(tree.TreeHash())}
	data, err := f.ReadFile("b/TOOL.hdlp")
	if err != nil || string(data) != "name: b\n" {
		t.Fatalf("ReadFile through the mapped pack = %q, %v", data, err)
	}
	if n := mappedPacks(t, dir); n < before+1 {
		t.Errorf("%d mappings of files of the clone after a read (%d before), want the pack's too", n, before)
	}
	o.mu.Lock()
	err = o.s.Close()
	o.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if n := mappedPacks(t, dir); n != before {
		t.Errorf("%d mappings of files of the clone after the storage closed, want %d (as before it opened)", n, before)
	}
}
