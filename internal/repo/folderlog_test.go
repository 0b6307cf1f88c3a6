package repo

import (
	"errors"
	"strings"
	"testing"
)

// TestFolderLogAndDiff: the commits that changed tools/x, newest first,
// with author and message (not the commit that changed only y), the diff
// between two of them by go-git, and a shallow clone's log marked
// incomplete; a local tree has no history.
func TestFolderLogAndDiff(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	s := serve(t, r, nil)
	r.write("tools/x/TOOL.hdlp", "name: x\nintent: one\n")
	c1 := r.commit("add x")
	r.write("tools/y/TOOL.hdlp", "y1")
	r.commit("add y")
	r.write("tools/x/TOOL.hdlp", "name: x\nintent: 查看提交\n")
	r.write("tools/x/run.sh", "echo hi\n")
	c3 := r.commit("x: a Chinese intent\n\nbecause the seed asks")

	g := historyGit(t, s)
	tree := mustSync(t, g)
	log, complete, err := tree.FolderLog("x", 10)
	if err != nil || !complete {
		t.Fatalf("FolderLog = %v complete=%v", err, complete)
	}
	if len(log) != 2 || log[0].Hash != c3 || log[1].Hash != c1 || log[1].Parent != "" || log[0].Parent == "" {
		t.Fatalf("FolderLog(x) = %+v; want %s then %s", log, c3, c1)
	}
	if log[0].Message != "x: a Chinese intent\n\nbecause the seed asks" || log[0].Author == "" || log[0].When.IsZero() {
		t.Errorf("change = %+v", log[0])
	}
	if l, complete, err := tree.FolderLog("x", 1); err != nil || complete || len(l) != 1 {
		t.Errorf("FolderLog(x, 1) = %d complete=%v %v; want 1, incomplete", len(l), complete, err)
	}
	d, err := tree.FolderDiff(t.Context(), "x", c1, c3)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-intent: one", "+intent: 查看提交", "+echo hi", "a/TOOL.hdlp"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
	if d, err := tree.FolderDiff(t.Context(), "x", "", c1); err != nil || !strings.Contains(d, "+name: x") {
		t.Errorf("diff from nothing = %v\n%s", err, d)
	}
	if _, err := tree.FolderDiff(t.Context(), "x", "HEAD", c1); err == nil {
		t.Error("a revision that is not a full hash was accepted")
	}
	if _, _, err := tree.FolderLog("../y", 10); err == nil {
		t.Error("a folder name with a slash was accepted")
	}

	shallow := mustSync(t, newGit(t, s))
	if l, complete, err := shallow.FolderLog("x", 10); err != nil || complete {
		t.Errorf("shallow FolderLog = %d complete=%v %v; want incomplete", len(l), complete, err)
	}

	local := mustSyncLocal(t, &LocalDir{Path: t.TempDir()})
	if _, _, err := local.FolderLog("x", 10); !errors.Is(err, ErrNoHistory) {
		t.Errorf("local FolderLog = %v; want ErrNoHistory", err)
	}
}
