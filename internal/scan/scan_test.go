package scan

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"unsafe"

	"github.com/toolagent/toolagent/internal/cache"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/hldp"
)

// def returns a valid TOOL.hdlp for name with the given intent.
func def(name, intent string) string {
	return `name: ` + name + `
display: ` + name + `
intent: ` + intent + `
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true, description: "command" }
author: test
created: 2026-11-30
why: for tests
`
}

func mapFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for p, c := range files {
		m[p] = &fstest.MapFile{Data: []byte(c)}
	}
	return m
}

func build(t *testing.T, prev *catalog.Snapshot, files map[string]string, rev string, c *cache.Cache, opts Options) (*catalog.Snapshot, Report) {
	t.Helper()
	opts.Catalog.LazyIndex = true
	s, rep, err := Build(prev, FromFS(mapFS(files), rev), c, opts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return s, rep
}

func names(es []catalog.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name+":"+e.Status.String())
	}
	return out
}

func TestBuildCases(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		want     []string // name:status of every entry
		problems []string // substrings, one per expected problem, in any order
	}{
		{
			name:  "good tools",
			files: map[string]string{"a/TOOL.hdlp": def("a", "x"), "b/TOOL.hdlp": def("b", "y"), "README.md": "not a tool"},
			want:  []string{"a:enabled", "b:enabled"},
		},
		{
			name:     "folder without definition",
			files:    map[string]string{"a/TOOL.hdlp": def("a", "x"), "empty/notes.txt": "x"},
			want:     []string{"a:enabled"},
			problems: []string{"tools/empty/TOOL.hdlp: folder empty has no TOOL.hdlp"},
		},
		{
			name:     "misspelt file name",
			files:    map[string]string{"a/tool.hdlp": def("a", "x")},
			want:     nil,
			problems: []string{`found "tool.hdlp"`},
		},
		{
			name:     "broken file beside good ones",
			files:    map[string]string{"a/TOOL.hdlp": def("a", "x"), "b/TOOL.hdlp": "name: b\nintent: [unclosed\n"},
			want:     []string{"a:enabled", "b:failed"},
			problems: []string{"tools/b/TOOL.hdlp:"},
		},
		{
			name:  "duplicate name in another folder",
			files: map[string]string{"a/TOOL.hdlp": def("a", "x"), "b/TOOL.hdlp": def("a", "y")},
			want:  []string{"a:enabled", "b:failed"},
			problems: []string{
				"tools/b/TOOL.hdlp:", // name does not match folder
				`tools/a/TOOL.hdlp: duplicate tool name "a" (declared by tools/a/TOOL.hdlp, tools/b/TOOL.hdlp)`,
				`tools/b/TOOL.hdlp: duplicate tool name "a" (declared by tools/a/TOOL.hdlp, tools/b/TOOL.hdlp)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rep := build(t, nil, tt.files, "r1", nil, Options{})
			if got := names(s.All()); !slices.Equal(got, tt.want) {
				t.Errorf("entries = %v, want %v", got, tt.want)
			}
			if len(rep.Problems) != len(tt.problems) {
				t.Errorf("got %d problems, want %d:\n%v", len(rep.Problems), len(tt.problems), rep.Problems)
			}
			for _, want := range tt.problems {
				if !slices.ContainsFunc(rep.Problems, func(e error) bool { return strings.Contains(e.Error(), want) }) {
					t.Errorf("no problem contains %q; problems:\n%v", want, rep.Problems)
				}
			}
		})
	}
}

// TestStaleCarryOver walks one tool through good -> broken -> fixed ->
// deleted, checking the last good definition keeps serving while broken.
func TestStaleCarryOver(t *testing.T) {
	s1, _ := build(t, nil, map[string]string{"a/TOOL.hdlp": def("a", "first")}, "r1", nil, Options{})
	s2, rep := build(t, s1, map[string]string{"a/TOOL.hdlp": "name: a\nexecutor: [\n"}, "r2", nil, Options{})
	e, ok := s2.Lookup("a")
	if !ok || e.Status != catalog.Stale || e.Tool == nil || e.Tool.Intent != "first" || e.Rev != "r1" || e.LoadErr == nil {
		t.Fatalf("broken: entry = %+v, want stale serving intent first from r1 with a load error", e)
	}
	if !strings.Contains(e.Reason, "r1") || len(rep.Problems) != 1 {
		t.Errorf("broken: reason %q, problems %v", e.Reason, rep.Problems)
	}
	if got := names(s2.Enabled()); !slices.Equal(got, []string{"a:stale"}) {
		t.Errorf("broken: Enabled() = %v; a stale tool keeps serving", got)
	}
	// Still broken at the next revision: still the r1 definition.
	s3, _ := build(t, s2, map[string]string{"a/TOOL.hdlp": "name: a\nexecutor: [\n"}, "r3", nil, Options{})
	if e, _ := s3.Lookup("a"); e.Status != catalog.Stale || e.Rev != "r1" {
		t.Errorf("still broken: entry = %v rev %s, want stale r1", e.Status, e.Rev)
	}
	s4, _ := build(t, s3, map[string]string{"a/TOOL.hdlp": def("a", "second")}, "r4", nil, Options{})
	if e, _ := s4.Lookup("a"); e.Status != catalog.Enabled || e.Tool.Intent != "second" || e.Rev != "r4" || e.LoadErr != nil {
		t.Errorf("fixed: entry = %+v, want enabled intent second from r4", e)
	}
	s5, _ := build(t, s4, map[string]string{"b/TOOL.hdlp": def("b", "other")}, "r5", nil, Options{})
	if _, ok := s5.Lookup("a"); ok {
		t.Error("deleted: a is still in the snapshot")
	}
}

// TestProvenanceAndReuse: an unchanged file keeps the revision it came
// from and is not parsed again; the cache serves a restart.
func TestProvenanceAndReuse(t *testing.T) {
	c := cache.New()
	files := map[string]string{"a/TOOL.hdlp": def("a", "x"), "b/TOOL.hdlp": def("b", "y")}
	s1, rep := build(t, nil, files, "r1", c, Options{})
	if rep.Parsed != 2 || rep.Reused != 0 {
		t.Errorf("first build parsed %d reused %d, want 2 and 0", rep.Parsed, rep.Reused)
	}
	files["b/TOOL.hdlp"] = def("b", "changed")
	s2, rep := build(t, s1, files, "r2", c, Options{})
	if rep.Parsed != 1 || rep.Reused != 1 {
		t.Errorf("second build parsed %d reused %d, want 1 and 1", rep.Parsed, rep.Reused)
	}
	if a, _ := s2.Lookup("a"); a.Rev != "r1" {
		t.Errorf("unchanged a has rev %s, want r1 (the revision its definition came from)", a.Rev)
	}
	if b, _ := s2.Lookup("b"); b.Rev != "r2" {
		t.Errorf("changed b has rev %s, want r2", b.Rev)
	}
	// A restart (no previous snapshot) with the same cache parses nothing.
	_, rep = build(t, nil, files, "r2", c, Options{})
	if rep.Parsed != 0 || rep.Reused != 2 {
		t.Errorf("restart parsed %d reused %d, want 0 and 2", rep.Parsed, rep.Reused)
	}
	if c.Len() != 2 {
		t.Errorf("cache holds %d outcomes, want 2 (old ones dropped)", c.Len())
	}
}

func TestCheckNarrows(t *testing.T) {
	check := func(tl *hldp.Tool) (catalog.Status, string) {
		if tl.Name == "b" {
			return catalog.Disabled, "executor gatekeeper is not configured"
		}
		return catalog.Enabled, ""
	}
	s, _ := build(t, nil, map[string]string{"a/TOOL.hdlp": def("a", "x"), "b/TOOL.hdlp": def("b", "y")}, "r1", nil, Options{Check: check})
	if got := names(s.All()); !slices.Equal(got, []string{"a:enabled", "b:disabled"}) {
		t.Errorf("entries = %v", got)
	}
	if b, _ := s.Lookup("b"); b.Reason != "executor gatekeeper is not configured" {
		t.Errorf("b reason = %q", b.Reason)
	}
}

// TestSymlinkEscape uses a real directory opened with os.OpenRoot: a tool
// folder or a TOOL.hdlp that is a symlink out of the tree is refused, one
// inside the tree works.
func TestSymlinkEscape(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "TOOL.hdlp"), []byte(def("evil", "x")), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "good", "TOOL.hdlp"), def("good", "x"))
	mustWrite(t, filepath.Join(dir, "inner", "TOOL.hdlp"), def("inner", "x"))
	if err := os.Mkdir(filepath.Join(dir, "filelink"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ target, link string }{
		{outside, filepath.Join(dir, "evil")},                                              // folder out of the tree
		{filepath.Join(outside, "TOOL.hdlp"), filepath.Join(dir, "filelink", "TOOL.hdlp")}, // file out of the tree
		{filepath.Join(dir, "inner"), filepath.Join(dir, "alias")},                         // inside: fine, but name != folder
	} {
		if err := os.Symlink(l.target, l.link); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	s, rep, err := Build(nil, FromFS(root.FS(), ""), nil, Options{Catalog: catalog.Options{LazyIndex: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"evil", "filelink"} {
		e, ok := s.Lookup(name)
		if !ok || e.Status != catalog.Failed || !errors.Is(e.LoadErr, ErrSymlinkEscape) {
			t.Errorf("%s: entry %+v, want failed with ErrSymlinkEscape", name, e)
		}
	}
	for _, name := range []string{"good", "inner"} {
		if e, _ := s.Lookup(name); e.Status != catalog.Enabled {
			t.Errorf("%s: status %v, want enabled", name, e.Status)
		}
	}
	if !strings.HasPrefix(s.Rev(), "local:") {
		t.Errorf("Rev() = %q, want local:<hash>", s.Rev())
	}
	if len(rep.Problems) != 3 { // evil, filelink, alias (name/folder mismatch)
		t.Errorf("problems = %v, want 3", rep.Problems)
	}
}

func mustWrite(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrokenCorpus loads hldp's corpus of broken definitions next to the
// five shipped tools: every broken one fails with its own error, and every
// valid one still loads.
func TestBrokenCorpus(t *testing.T) {
	m := fstest.MapFS{}
	copyTree(t, m, "../hldp/testdata/bad/tools")
	copyTree(t, m, "../../native-repo/tools")
	s, rep, err := Build(nil, FromFS(m, "r1"), nil, Options{Catalog: catalog.Options{LazyIndex: true}})
	if err != nil {
		t.Fatal(err)
	}
	var failed, enabled int
	for _, e := range s.All() {
		switch e.Status {
		case catalog.Failed:
			failed++
			if e.LoadErr == nil || !strings.Contains(e.LoadErr.Error(), "tools/"+e.Name+"/") {
				t.Errorf("%s: load error %v does not name its file", e.Name, e.LoadErr)
			}
		case catalog.Enabled:
			enabled++
		}
	}
	if enabled != 5 {
		t.Errorf("%d tools enabled, want the 5 shipped ones: %v", enabled, names(s.Enabled()))
	}
	if failed < 30 {
		t.Errorf("%d broken tools failed, want at least 30", failed)
	}
	if len(rep.Problems) < failed {
		t.Errorf("%d problems for %d failed tools", len(rep.Problems), failed)
	}
}

func copyTree(t *testing.T, m fstest.MapFS, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		m[filepath.ToSlash(rel)] = &fstest.MapFile{Data: data}
		return nil
	})
	if err != nil {
		t.Fatalf("copy %s: %v", dir, err)
	}
}

// hashedTree is a Tree that names its content, like a git tree, and
// counts what the scan asks of it (Build asks from several goroutines).
type hashedTree struct {
	Tree
	hash              string
	blobHashes, opens atomic.Int64
}

func (h *hashedTree) TreeHash() string { return h.hash }

func (h *hashedTree) BlobHash(p string) (string, error) {
	h.blobHashes.Add(1)
	return h.Tree.BlobHash(p)
}

func (h *hashedTree) FS() fs.FS { return countingFS{h.Tree.FS(), &h.opens} }

// countingFS counts opened files (reading the top folder is not counted).
type countingFS struct {
	fs.FS
	opens *atomic.Int64
}

func (c countingFS) Open(name string) (fs.File, error) {
	if name != "." {
		c.opens.Add(1)
	}
	return c.FS.Open(name)
}

// TestListingSkipsTreeReads: a build records the listing of a tree that
// has a hash; a build of a tree with that hash (a restart, prev nil)
// takes its blob hashes from the listing, asking the tree only for the
// folder without a definition, and gives the same snapshot and problems as
// reading the tree. A tree with another hash, or a cache without a
// listing, is read as before.
func TestListingSkipsTreeReads(t *testing.T) {
	files := map[string]string{
		"a/TOOL.hdlp":      def("a", "x"),
		"b/TOOL.hdlp":      def("b", "y"),
		"broken/TOOL.hdlp": "name: broken\nintent: [\n",
		"notes/README.md":  "not a tool",
		"README.md":        "beside the folders",
	}
	const folders = 4
	opts := Options{Catalog: catalog.Options{LazyIndex: true}}
	tree := func(hash string) *hashedTree { return &hashedTree{Tree: FromFS(mapFS(files), "r1"), hash: hash} }
	summary := func(s *catalog.Snapshot, rep Report) string {
		var b strings.Builder
		for _, e := range s.All() {
			b.WriteString(e.Name + " " + e.Status.String() + " " + e.Blob + " " + e.Rev + "\n")
		}
		for _, p := range rep.Problems {
			b.WriteString(p.Error() + "\n")
		}
		return b.String()
	}

	c := cache.New()
	first := tree("T1")
	s, rep, err := Build(nil, first, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.FromListing || first.blobHashes.Load() != int64(folders) || rep.Parsed != 3 {
		t.Fatalf("first build: from listing %v, %d blob hashes asked, %d parsed; want false, %d, 3", rep.FromListing, first.blobHashes.Load(), rep.Parsed, folders)
	}
	want := summary(s, rep)

	// No listing yet: a cache filled by a tree without a hash.
	noListing := cache.New()
	if _, _, err := Build(nil, FromFS(mapFS(files), "r1"), noListing, opts); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name         string
		hash         string
		c            *cache.Cache
		wantListing  bool
		wantBlobHash int
		wantOpens    int
	}{
		// Only "notes" is missing from the listing: it has no definition,
		// and saying so lists it (one open). The broken definition is read
		// for the name it declares (duplicates), which its cached outcome
		// does not keep (the other open).
		{"same tree", "T1", c, true, 1, 2},
		{"another tree", "T2", c, false, folders, 2},
		{"no listing on record", "T1", noListing, false, folders, 2},
	}
	for _, tc := range tests {
		tr := tree(tc.hash)
		s, rep, err := Build(nil, tr, tc.c, opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rep.FromListing != tc.wantListing || tr.blobHashes.Load() != int64(tc.wantBlobHash) || tr.opens.Load() != int64(tc.wantOpens) || rep.Parsed != 0 {
			t.Errorf("%s: from listing %v, %d blob hashes asked, %d files opened, %d parsed; want %v, %d, %d, 0",
				tc.name, rep.FromListing, tr.blobHashes.Load(), tr.opens.Load(), rep.Parsed, tc.wantListing, tc.wantBlobHash, tc.wantOpens)
		}
		if got := summary(s, rep); got != want {
			t.Errorf("%s: snapshot and problems differ from reading the tree:\n got %s\nwant %s", tc.name, got, want)
		}
	}
}

// TestSymlinkProblemsSayWhatTheyAre: a symlink loop and a symlink to
// nothing are reported as such, not as leaving the tools tree.
func TestSymlinkProblemsSayWhatTheyAre(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "good", "TOOL.hdlp"), def("good", "x"))
	for _, l := range []struct{ target, link string }{
		// Relative targets, as `ln -s b a` writes them (os.Root takes an
		// absolute target as leaving the tree, whatever it names).
		{"loop-b", filepath.Join(dir, "loop-a")},
		{"loop-a", filepath.Join(dir, "loop-b")},
		{"missing", filepath.Join(dir, "dangling")},
	} {
		if err := os.Symlink(l.target, l.link); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	s, _, err := Build(nil, FromFS(root.FS(), ""), nil, Options{Catalog: catalog.Options{LazyIndex: true}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]error{"loop-a": ErrSymlinkLoop, "loop-b": ErrSymlinkLoop, "dangling": ErrSymlinkDangling} {
		e, ok := s.Lookup(name)
		if !ok || e.Status != catalog.Failed || !errors.Is(e.LoadErr, want) || errors.Is(e.LoadErr, ErrSymlinkEscape) {
			t.Errorf("%s: entry %+v, want failed with %v only", name, e, want)
		}
	}
	if e, _ := s.Lookup("good"); e.Status != catalog.Enabled {
		t.Errorf("good: status %v, want enabled", e.Status)
	}
}

// TestStaleSurvivesARestart: a tool whose newest definition is broken
// serves its last good one (stale) also when there is no previous snapshot
// (a restart): the persisted cache keeps the last good version, and keeps
// it until the file loads again or goes away.
func TestStaleSurvivesARestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "parse-cache")
	c, _ := cache.Open(file)
	good := fstest.MapFS{"echo/TOOL.hdlp": {Data: []byte(def("echo", "say a word"))}}
	s, _, err := Build(nil, FromFS(good, "rev1"), c, Options{Catalog: catalog.Options{LazyIndex: true}})
	if err != nil || mustLookup(t, s, "echo").Status != catalog.Enabled {
		t.Fatalf("good build: %v", err)
	}
	broken := fstest.MapFS{"echo/TOOL.hdlp": {Data: []byte("name: echo\nintent: [\n")}}
	if _, _, err := Build(s, FromFS(broken, "rev2"), c, Options{Catalog: catalog.Options{LazyIndex: true}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // a restart, then another one on what the first wrote
		c2, err := cache.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		s2, _, err := Build(nil, FromFS(broken, "rev2"), c2, Options{Catalog: catalog.Options{LazyIndex: true}})
		if err != nil {
			t.Fatal(err)
		}
		e := mustLookup(t, s2, "echo")
		if e.Status != catalog.Stale || e.Tool == nil || e.Tool.Intent != "say a word" || e.Rev != "rev1" || e.LoadErr == nil {
			t.Errorf("restart %d: echo = %+v; want stale, serving the rev1 definition, with the load error", i+1, e)
		}
		if err := c2.Save(); err != nil {
			t.Fatal(err)
		}
	}
	// Removed from the tree: no last good version is kept for it.
	c3, _ := cache.Open(file)
	if _, _, err := Build(nil, FromFS(fstest.MapFS{"other/TOOL.hdlp": {Data: []byte(def("other", "x"))}}, "rev3"), c3, Options{Catalog: catalog.Options{LazyIndex: true}}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c3.LastGood("echo/TOOL.hdlp"); ok {
		t.Errorf("the last good version of a removed tool is still kept")
	}
}

func mustLookup(t *testing.T, s *catalog.Snapshot, name string) catalog.Entry {
	t.Helper()
	e, ok := s.Lookup(name)
	if !ok {
		t.Fatalf("no entry %s", name)
	}
	return e
}

// TestBuildParallelOrder: folders are scanned on several goroutines, yet
// the report lists problems in the tree's order, duplicates after, the
// same on every build; every file is parsed once, and a build through the
// cache parses none.
func TestBuildParallelOrder(t *testing.T) {
	files := map[string]string{}
	var want []string
	for i := range 300 {
		name := fmt.Sprintf("t%03d", i)
		switch {
		case i%50 == 7:
			files[name+"/TOOL.hdlp"] = "name: " + name + "\nbroken: [\n"
			want = append(want, "tools/"+name+"/TOOL.hdlp")
		case i%50 == 21:
			files[name+"/notes.txt"] = "no definition"
			want = append(want, "tools/"+name+"/TOOL.hdlp: folder "+name)
		default:
			files[name+"/TOOL.hdlp"] = def(name, "intent of "+name)
		}
	}
	// A folder declaring another's name: its own problem, then the
	// duplicate, reported for both files after all others.
	files["zz1/TOOL.hdlp"] = def("t000", "a copy")
	want = append(want, "tools/zz1/TOOL.hdlp", "tools/t000/TOOL.hdlp: duplicate", "tools/zz1/TOOL.hdlp: duplicate")
	const defs = 300 - 6 + 1
	var first []string
	for run := range 3 {
		_, rep := build(t, nil, files, "r1", cache.New(), Options{})
		var got []string
		for _, p := range rep.Problems {
			got = append(got, p.Error())
		}
		if rep.Parsed != defs || rep.Reused != 0 {
			t.Errorf("build %d: parsed %d, reused %d; want %d, 0", run, rep.Parsed, rep.Reused, defs)
		}
		if run == 0 {
			first = got
		} else if !slices.Equal(got, first) {
			t.Errorf("build %d problems differ from the first build's:\n%q\nwant\n%q", run, got, first)
		}
	}
	if len(first) != len(want) {
		t.Fatalf("problems = %q, want %d", first, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(first[i], w) {
			t.Errorf("problem %d = %q, want it to start with %q (the tree's order)", i, first[i], w)
		}
	}

	c := cache.New()
	build(t, nil, files, "r1", c, Options{})
	if _, rep := build(t, nil, files, "r1", c, Options{}); rep.Parsed != 0 || rep.Reused != defs {
		t.Errorf("build through the cache: parsed %d, reused %d; want 0, %d", rep.Parsed, rep.Reused, defs)
	}
}

// staleHashTree reports, for one file, the blob hash of what it held
// before (as a local tree does when the file changes between the Sync and
// the build).
type staleHashTree struct {
	Tree
	path, hash string
}

func (s staleHashTree) BlobHash(p string) (string, error) {
	if p == s.path {
		return s.hash, nil
	}
	return s.Tree.BlobHash(p)
}

// TestBuildKeysWhatItParsed: when the bytes read differ from the blob hash
// the tree reported, the outcome is stored and served under the hash of
// the bytes parsed, never paired with the stale hash.
func TestBuildKeysWhatItParsed(t *testing.T) {
	old, cur := def("a", "old intent"), def("a", "new intent")
	tree := staleHashTree{Tree: FromFS(mapFS(map[string]string{"a/TOOL.hdlp": cur}), "r1"), path: "a/TOOL.hdlp", hash: BlobHash([]byte(old))}
	c := cache.New()
	snap, rep, err := Build(nil, tree, c, Options{Catalog: catalog.Options{LazyIndex: true}})
	if err != nil || rep.Parsed != 1 {
		t.Fatalf("Build = %v, parsed %d; want 1 parse", err, rep.Parsed)
	}
	e, _ := snap.Lookup("a")
	if e.Blob != BlobHash([]byte(cur)) || e.Tool.Intent != "new intent" {
		t.Errorf("entry = blob %s, intent %q; want the parsed bytes' hash %s and %q", e.Blob, e.Tool.Intent, BlobHash([]byte(cur)), "new intent")
	}
	if _, ok := c.Get(cache.Key{Path: "a/TOOL.hdlp", Blob: BlobHash([]byte(old))}); ok {
		t.Error("the cache pairs the stale hash with an outcome")
	}
	if o, ok := c.Get(cache.Key{Path: "a/TOOL.hdlp", Blob: BlobHash([]byte(cur))}); !ok || o.Tool.Intent != "new intent" {
		t.Errorf("cache under the parsed bytes' hash = %v, %v; want the new tool", o.Tool, ok)
	}
}

// deltaMapTree is a tree over a map of files that names the top-level
// entries that differ from the tree of revision base, as a watched local
// Sync's does.
type deltaMapTree struct {
	Tree
	base  string
	names []string
}

func (d deltaMapTree) Delta() (string, []string, bool) { return d.base, d.names, true }

// TestBuildDeltaEqualsBuild: a Build of a tree that names the folders that
// differ from the tree prev was built from scans those alone, and gives
// what a whole Build gives: the entries with their statuses and
// revisions, the problems, the counts, and the cache's outcomes and last
// good versions. One whose delta is from another revision scans all.
func TestBuildDeltaEqualsBuild(t *testing.T) {
	files := map[string]string{
		"a/TOOL.hdlp":      def("a", "list things"),
		"b/TOOL.hdlp":      def("b", "show things"),
		"c/TOOL.hdlp":      def("c", "count things disabled here"),
		"broken/TOOL.hdlp": "name: broken\nintent: [unclosed\n",
		"nofile/run.sh":    "echo\n",
		"README.md":        "tools\n",
		"wrong/TOOL.hdlp":  def("a", "declares another folder's name"),
	}
	checker := func(tool *hldp.Tool) (catalog.Status, string) {
		if strings.Contains(tool.Intent, "disabled") {
			return catalog.Disabled, "disabled by the test"
		}
		return catalog.Enabled, ""
	}
	opts := Options{Check: checker, Catalog: catalog.Options{LazyIndex: true}}
	treeOf := func() Tree { return FromFS(mapFS(files), "") }
	cWhole, cDelta := cache.New(), cache.New()
	whole, _, err := Build(nil, treeOf(), cWhole, opts)
	if err != nil {
		t.Fatal(err)
	}
	delta, _, err := Build(nil, treeOf(), cDelta, opts)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		change  func()
		touched []string
	}{
		{"one edited", func() { files["b/TOOL.hdlp"] = def("b", "show more things") }, []string{"b"}},
		{"one broken, served stale", func() { files["a/TOOL.hdlp"] = "name: a\nintent: [\n" }, []string{"a"}},
		{"broken again, otherwise", func() { files["a/TOOL.hdlp"] = "name: a\nintent: {\n" }, []string{"a"}},
		{"fixed", func() { files["a/TOOL.hdlp"] = def("a", "list things again") }, []string{"a"}},
		{"added", func() { files["d/TOOL.hdlp"] = def("d", "new things") }, []string{"d"}},
		{"added, disabled", func() { files["e/TOOL.hdlp"] = def("e", "disabled things") }, []string{"e"}},
		{"removed", func() { delete(files, "c/TOOL.hdlp") }, []string{"c"}},
		{"a second duplicate", func() { files["f/TOOL.hdlp"] = def("b", "declares b") }, []string{"f"}},
		{"the first duplicate goes", func() { delete(files, "wrong/TOOL.hdlp") }, []string{"wrong"}},
		{"a missing file appears", func() { files["nofile/TOOL.hdlp"] = def("nofile", "now a tool") }, []string{"nofile"}},
		{"a broken one is fixed", func() { files["broken/TOOL.hdlp"] = def("broken", "fixed") }, []string{"broken"}},
		{"a file beside, and a name with nothing", func() { files["notes.txt"] = "n\n" }, []string{"notes.txt", "zz"}},
		{"two at once, one named twice", func() {
			files["b/TOOL.hdlp"] = def("b", "show yet more")
			files["d/TOOL.hdlp"] = "name: d\n"
		}, []string{"b", "d"}},
		{"named, unchanged", func() {}, []string{"a", "e"}},
	}
	for _, st := range steps {
		base := treeOf().Rev()
		st.change()
		tree := treeOf()
		var err error
		var repWhole, repDelta Report
		if whole, repWhole, err = Build(whole, tree, cWhole, opts); err != nil {
			t.Fatal(err)
		}
		if delta, repDelta, err = Build(delta, deltaMapTree{tree, base, st.touched}, cDelta, opts); err != nil {
			t.Fatal(err)
		}
		if repDelta.Scanned > len(st.touched) {
			t.Errorf("%s: the delta Build scanned %d folders, want at most %d", st.name, repDelta.Scanned, len(st.touched))
		}
		sameBuild(t, st.name, whole, delta, repWhole, repDelta, cWhole, cDelta)
	}

	// A delta from a revision prev was not built from: a whole Build.
	files["a/TOOL.hdlp"] = def("a", "list once more")
	tree := treeOf()
	_, rep, err := Build(delta, deltaMapTree{tree, "local:another", []string{"a"}}, cDelta, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(delta.All()); rep.Scanned != want { // every folder has an entry by now
		t.Errorf("a delta from another revision scanned %d folders, want every folder (%d)", rep.Scanned, want)
	}
}

// sameBuild fails t when two Builds of one tree differ.
func sameBuild(t *testing.T, step string, a, b *catalog.Snapshot, ra, rb Report, ca, cb *cache.Cache) {
	t.Helper()
	show := func(s *catalog.Snapshot) []string {
		var out []string
		for _, e := range s.All() {
			line := fmt.Sprintf("%s %s rev=%s blob=%s %s %q", e.Name, e.File, e.Rev, e.Blob, e.Status, e.Reason)
			if e.LoadErr != nil {
				line += " err=" + e.LoadErr.Error()
			}
			if e.Tool != nil {
				line += " intent=" + e.Tool.Intent
			}
			out = append(out, line)
		}
		return out
	}
	if x, y := show(a), show(b); !slices.Equal(x, y) {
		t.Errorf("%s: entries differ:\nwhole: %q\ndelta: %q", step, x, y)
	}
	problems := func(r Report) []string {
		var out []string
		for _, p := range r.Problems {
			out = append(out, p.Error())
		}
		slices.Sort(out)
		return out
	}
	if ra.Parsed != rb.Parsed || ra.Reused != rb.Reused || !slices.Equal(problems(ra), problems(rb)) {
		t.Errorf("%s: reports differ:\nwhole: parsed %d reused %d %q\ndelta: parsed %d reused %d %q", step,
			ra.Parsed, ra.Reused, problems(ra), rb.Parsed, rb.Reused, problems(rb))
	}
	if ca.Len() != cb.Len() {
		t.Errorf("%s: the caches hold %d and %d outcomes", step, ca.Len(), cb.Len())
	}
	for _, e := range a.All() {
		va, _, oka := ca.LastGood(e.File)
		vb, _, okb := cb.LastGood(e.File)
		if va != vb || oka != okb {
			t.Errorf("%s: last good of %s: whole %v %v, delta %v %v", step, e.File, va, oka, vb, okb)
		}
	}
}

// TestDuplicateFromCache: two folders declaring one name are reported
// when the failing file's outcome comes from the cache (a reload, a
// restart), not only when it is parsed.
func TestDuplicateFromCache(t *testing.T) {
	files := map[string]string{"a/TOOL.hdlp": def("a", "x"), "copy/TOOL.hdlp": def("a", "a copy")}
	c := cache.New()
	for _, run := range []string{"parsed", "from the cache"} {
		_, rep := build(t, nil, files, "r1", c, Options{})
		var dup int
		for _, p := range rep.Problems {
			if strings.Contains(p.Error(), "duplicate tool name") {
				dup++
			}
		}
		if dup != 2 {
			t.Errorf("%s: %d duplicate problems, want 2 (one per file): %v", run, dup, rep.Problems)
		}
	}
}

// TestEntrySharesToolStrings: an entry's file path and name are the end
// of its tool's File ("tools/a/TOOL.hdlp"), not copies of their own, when
// parsed and when taken from the cache at a restart (100,000 tools held
// each twice more).
func TestEntrySharesToolStrings(t *testing.T) {
	c := cache.New()
	files := map[string]string{"a/TOOL.hdlp": def("a", "x"), "bb/TOOL.hdlp": def("bb", "y")}
	parsed, _ := build(t, nil, files, "r1", c, Options{})
	restarted, rep := build(t, nil, files, "r1", c, Options{})
	if rep.Reused != 2 {
		t.Fatalf("restart reused %d, want 2 from the cache", rep.Reused)
	}
	for what, s := range map[string]*catalog.Snapshot{"parsed": parsed, "from the cache": restarted} {
		for e := range s.Each() {
			f := e.Tool.File
			if f != "tools/"+e.File || unsafe.StringData(e.File) != unsafe.StringData(f[len("tools/"):]) || unsafe.StringData(e.Name) != unsafe.StringData(e.File) {
				t.Errorf("%s: entry %s (file %s) holds copies of its tool's File %q", what, e.Name, e.File, f)
			}
		}
	}
}

// gitDeltaTree is a commit's tree over a map of files, as internal/repo
// gives after a fetch: its tree hash, its parents, and the top-level
// names that differ from the tree of the commit base.
type gitDeltaTree struct {
	Tree
	hash, baseTree string
	parents        []string
	base           string
	names          []string
	delta          bool
	below          []string // commits below its parent on its first-parent history, in the clone
}

func (g gitDeltaTree) TreeHash() string                { return g.hash }
func (g gitDeltaTree) BaseTreeHash() string            { return g.baseTree }
func (g gitDeltaTree) Parents() ([]string, bool)       { return g.parents, true }
func (g gitDeltaTree) Delta() (string, []string, bool) { return g.base, g.names, g.delta }
func (g gitDeltaTree) Descends(base string) bool {
	return base != "" && (slices.Contains(g.parents[:1], base) || slices.Contains(g.below, base))
}

// TestBuildDeltaGitEqualsBuild: for git commits, a Build of a tree that
// names the folders that differ from its parent's scans those alone and
// gives what a whole Build gives (entries with the revisions they cite,
// problems, counts, the cache's outcomes and last good versions), and it
// moves the cache's listing to the new tree hash as a whole Build sets it,
// so a restart at the new commit takes every blob hash from it. A commit
// that is not the child of the one prev was built from (a force push, or
// several commits in one fetch into a clone that cannot show the way
// back), or a cache whose listing is of another tree, gets a whole Build.
// Several commits in one fetch whose first-parent history the clone
// holds down to the commit prev was built from (Descends) get the delta
// Build, citing what a whole Build cites.
func TestBuildDeltaGitEqualsBuild(t *testing.T) {
	files := map[string]string{
		"a/TOOL.hdlp":      def("a", "list things"),
		"b/TOOL.hdlp":      def("b", "show things"),
		"broken/TOOL.hdlp": "name: broken\nintent: [unclosed\n",
		"nofile/run.sh":    "echo\n",
		"wrong/TOOL.hdlp":  def("a", "declares another folder's name"),
	}
	opts := Options{Catalog: catalog.Options{LazyIndex: true}}
	commit := 0
	head, headTree := "", ""
	// next makes the tree of a new commit whose parent is parent.
	next := func(parent string, names []string) gitDeltaTree {
		commit++
		rev := fmt.Sprintf("%040d", commit)
		tree := FromFS(mapFS(files), rev)
		g := gitDeltaTree{Tree: tree, hash: fmt.Sprintf("tree-%d", commit), parents: []string{parent}, base: head, baseTree: headTree, names: names, delta: head != ""}
		head, headTree = rev, g.hash
		return g
	}
	cWhole, cDelta := cache.New(), cache.New()
	first := next("", nil)
	whole, _, err := Build(nil, first, cWhole, opts)
	if err != nil {
		t.Fatal(err)
	}
	delta, _, err := Build(nil, first, cDelta, opts)
	if err != nil {
		t.Fatal(err)
	}
	listings := func(step, hash string) {
		t.Helper()
		lw, okw := cWhole.Listing(hash)
		ld, okd := cDelta.Listing(hash)
		if !okw || !okd || !maps.Equal(lw, ld) {
			t.Errorf("%s: listing of %s: whole %v %v, delta %v %v", step, hash, lw, okw, ld, okd)
		}
		if cWhole.Head() != cDelta.Head() {
			t.Errorf("%s: heads: whole %s, delta %s", step, cWhole.Head(), cDelta.Head())
		}
	}
	steps := []struct {
		name    string
		change  func()
		touched []string
		forced  bool // the new commit's parent is not the last one
		over    bool // its parent is a commit after the last one, which is below it (several commits fetched at once)
	}{
		{"one edited", func() { files["b/TOOL.hdlp"] = def("b", "show more things") }, []string{"b"}, false, false},
		{"one broken, served stale", func() { files["a/TOOL.hdlp"] = "name: a\nintent: [\n" }, []string{"a"}, false, false},
		{"fixed", func() { files["a/TOOL.hdlp"] = def("a", "list things again") }, []string{"a"}, false, false},
		{"added", func() { files["d/TOOL.hdlp"] = def("d", "new things") }, []string{"d"}, false, false},
		{"removed", func() { delete(files, "d/TOOL.hdlp") }, []string{"d"}, false, false},
		{"the duplicate goes", func() { delete(files, "wrong/TOOL.hdlp") }, []string{"wrong"}, false, false},
		{"a missing file appears", func() { files["nofile/TOOL.hdlp"] = def("nofile", "now a tool") }, []string{"nofile"}, false, false},
		{"nothing changed below tools/", func() {}, nil, false, false},
		{"force-pushed", func() { files["b/TOOL.hdlp"] = def("b", "rewritten") }, []string{"b"}, true, false},
		{"after the force push", func() { files["e/TOOL.hdlp"] = def("e", "more") }, []string{"e"}, false, false},
		{"two commits in one fetch", func() { files["a/TOOL.hdlp"] = def("a", "list, two commits on") }, []string{"a"}, false, true},
		{"after them", func() { files["e/TOOL.hdlp"] = def("e", "and more") }, []string{"e"}, false, false},
	}
	for _, st := range steps {
		parent, last := head, head
		if st.forced {
			parent = "f000000000000000000000000000000000000000"
		}
		if st.over {
			parent = "e000000000000000000000000000000000000000"
		}
		st.change()
		tree := next(parent, st.touched)
		if st.over {
			tree.below = []string{last}
		}
		var repWhole, repDelta Report
		if whole, repWhole, err = Build(whole, tree, cWhole, opts); err != nil {
			t.Fatal(err)
		}
		if delta, repDelta, err = Build(delta, tree, cDelta, opts); err != nil {
			t.Fatal(err)
		}
		switch {
		case st.forced && repDelta.Scanned != repWhole.Scanned:
			t.Errorf("%s: the Build after a force push scanned %d folders, want all %d", st.name, repDelta.Scanned, repWhole.Scanned)
		case !st.forced && repDelta.Scanned > len(st.touched):
			t.Errorf("%s: the delta Build scanned %d folders, want at most %d", st.name, repDelta.Scanned, len(st.touched))
		}
		sameBuild(t, st.name, whole, delta, repWhole, repDelta, cWhole, cDelta)
		listings(st.name, tree.hash)
	}

	// A cache whose listing is of another tree: a whole Build (which
	// records this tree's listing).
	files["a/TOOL.hdlp"] = def("a", "list once more")
	tree := next(head, []string{"a"})
	tree.baseTree = "tree-elsewhere"
	_, rep, err := Build(delta, tree, cDelta, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Scanned <= 1 {
		t.Errorf("a delta whose base tree the cache has no listing of scanned %d folders, want every folder", rep.Scanned)
	}
	if _, ok := cDelta.Listing(tree.hash); !ok {
		t.Error("after it, the cache has no listing of the new tree")
	}
}

// TestBuildDeltaVet: with Vet set, a Build starts from prev only when
// VetDelta says prev's verdicts hold, and then vets the folders it scanned
// again, alone; the snapshot is what a whole Build vetting every entry
// gives. Without VetDelta, or when it says no, the Build scans and vets
// every folder.
func TestBuildDeltaVet(t *testing.T) {
	files := map[string]string{
		"a/TOOL.hdlp":      def("a", "list things"),
		"b/TOOL.hdlp":      def("b", "show things (untrusted)"),
		"c/TOOL.hdlp":      def("c", "count things"),
		"broken/TOOL.hdlp": "name: broken\nintent: [unclosed\n",
	}
	// vetted records the names each vet saw; a tool whose intent says
	// "untrusted" is made Untrusted.
	var vetted [][]string
	vet := func(entries []catalog.Entry) {
		var names []string
		for i := range entries {
			e := &entries[i]
			names = append(names, e.Name)
			if e.Tool != nil && strings.Contains(e.Tool.Intent, "untrusted") {
				e.Status, e.Reason = catalog.Untrusted, "its intent says so"
			}
		}
		vetted = append(vetted, names)
	}
	holds := true
	var asked []string // the prev revisions VetDelta was asked about
	whole := Options{Catalog: catalog.Options{LazyIndex: true}, Vet: func(_ Tree, e []catalog.Entry) { vet(e) }}
	delta := whole
	delta.VetDelta = func(_ Tree, prev *catalog.Snapshot) (func([]catalog.Entry), bool) {
		asked = append(asked, prev.Rev())
		return vet, holds
	}
	commit := 0
	head, headTree := "", ""
	next := func(names []string) gitDeltaTree {
		commit++
		rev := fmt.Sprintf("%040d", commit)
		g := gitDeltaTree{Tree: FromFS(mapFS(files), rev), hash: fmt.Sprintf("tree-%d", commit), parents: []string{head}, base: head, baseTree: headTree, names: names, delta: head != ""}
		head, headTree = rev, g.hash
		return g
	}
	cWhole, cDelta, cNone := cache.New(), cache.New(), cache.New()
	none := whole // Vet without VetDelta
	first := next(nil)
	var sw, sd, sn *catalog.Snapshot
	var err error
	build := func(step string, tree Tree, wantDelta bool, touched []string) {
		t.Helper()
		var rw, rd, rn Report
		vetted = nil
		if sw, rw, err = Build(sw, tree, cWhole, whole); err != nil {
			t.Fatal(err)
		}
		vetted = nil
		if sd, rd, err = Build(sd, tree, cDelta, delta); err != nil {
			t.Fatal(err)
		}
		gotVetted := vetted
		if sn, rn, err = Build(sn, tree, cNone, none); err != nil {
			t.Fatal(err)
		}
		sameBuild(t, step, sw, sd, rw, rd, cWhole, cDelta)
		sameBuild(t, step+" (no VetDelta)", sw, sn, rw, rn, cWhole, cNone)
		if rn.Scanned != rw.Scanned {
			t.Errorf("%s: without VetDelta the Build scanned %d folders, want all %d", step, rn.Scanned, rw.Scanned)
		}
		if len(gotVetted) != 1 {
			t.Fatalf("%s: vet called %d times, want once", step, len(gotVetted))
		}
		if wantDelta {
			if rd.Scanned != len(touched) || !slices.Equal(gotVetted[0], touched) {
				t.Errorf("%s: the delta Build scanned %d folders and vetted %q; want %q alone", step, rd.Scanned, gotVetted[0], touched)
			}
		} else if rd.Scanned != rw.Scanned || len(gotVetted[0]) != sw.Len() {
			t.Errorf("%s: VetDelta said no, yet the Build scanned %d folders and vetted %q; want all %d", step, rd.Scanned, gotVetted[0], sw.Len())
		}
	}
	build("first", first, false, nil)
	if len(asked) != 0 {
		t.Errorf("VetDelta asked about %q for a first Build", asked)
	}
	files["a/TOOL.hdlp"] = def("a", "list things (untrusted)")
	prev := head
	build("a made untrusted", next([]string{"a"}), true, []string{"a"})
	if !slices.Equal(asked, []string{prev}) {
		t.Errorf("VetDelta asked about %q, want the previous revision %s", asked, prev)
	}
	files["b/TOOL.hdlp"] = def("b", "show things, now trusted")
	build("b made trusted", next([]string{"b"}), true, []string{"b"})
	files["d/TOOL.hdlp"] = def("d", "new (untrusted)")
	delete(files, "c/TOOL.hdlp")
	build("d added, c removed", next([]string{"c", "d"}), true, []string{"d"})
	holds = false
	files["a/TOOL.hdlp"] = def("a", "list things again")
	build("VetDelta says no", next([]string{"a"}), false, nil)
	if e, _ := sd.Lookup("a"); e.Status != catalog.Enabled {
		t.Errorf("a after a whole Build: %s %q", e.Status, e.Reason)
	}
}
