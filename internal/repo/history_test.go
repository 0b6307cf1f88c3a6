package repo

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// signWith makes the work clone sign its commits with a new SSH key
// (gpg.format=ssh) and returns the key's allowed_signers line.
func (r *remote) signWith(principal string) string {
	r.tb.Helper()
	key := filepath.Join(r.tb.TempDir(), "key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		r.tb.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	r.run(r.work, "config", "gpg.format", "ssh")
	r.run(r.work, "config", "user.signingkey", key)
	r.run(r.work, "config", "commit.gpgsign", "true")
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		r.tb.Fatal(err)
	}
	return principal + " " + strings.TrimSpace(string(pub))
}

func TestGitLastChanged(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Fatalf("ssh-keygen is needed: %v", err)
	}
	r := newRemote(t, "main")
	s := serve(t, r, nil)
	allowed := r.signWith("alice@example.com")

	r.write("tools/x/TOOL.hdlp", "x1")
	r.write("tools/y/TOOL.hdlp", "y1")
	r.write("README.md", "r1")
	c1 := r.commit("add x and y")
	r.write("tools/y/TOOL.hdlp", "y2")
	c2 := r.commit("change y")
	r.write("README.md", "r2")
	r.commit("outside tools")
	// A feature branch with two commits, merged without fast-forward: the
	// merge is what changed z on the first-parent history.
	r.run(r.work, "checkout", "--quiet", "-b", "feature")
	r.write("tools/z/TOOL.hdlp", "z1")
	r.commitLocal("z")
	r.write("tools/z/TOOL.hdlp", "z2")
	r.commitLocal("z again")
	merge := r.mergeNoFF("feature")

	g := historyGit(t, s)
	tree := mustSync(t, g)
	got, reached, err := tree.LastChanged([]string{"x", "y", "z"}, "")
	if err != nil || reached {
		t.Fatalf("LastChanged: %v %v", err, reached)
	}
	want := map[string]string{"x": c1, "y": c2, "z": merge}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s last changed in %s, want %s", k, got[k], v)
		}
	}
	// Stopping at c2: y and x are older, z is found.
	got, reached, err = tree.LastChanged([]string{"x", "y", "z"}, c2)
	if err != nil || !reached || got["z"] != merge || got["x"] != "" || got["y"] != "" {
		t.Fatalf("LastChanged to %s: %v %v %v", c2, got, reached, err)
	}

	// The commit's payload and signature are what ssh-keygen verifies.
	c, err := tree.Commit(merge)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Signature, "-----BEGIN SSH SIGNATURE-----") || c.When.IsZero() {
		t.Fatalf("merge commit: signature %q when %v", c.Signature, c.When)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "allowed"), []byte(allowed+"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "sig"), []byte(c.Signature), 0o600)
	verify := exec.Command("ssh-keygen", "-Y", "verify", "-f", filepath.Join(dir, "allowed"), "-I", "alice@example.com", "-n", "git", "-s", filepath.Join(dir, "sig"))
	verify.Stdin = strings.NewReader(string(c.Payload))
	if out, err := verify.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y verify of the payload: %v\n%s", err, out)
	}

	// A force-push replacing the head with an unsigned commit.
	r.run(r.work, "reset", "--quiet", "--hard", c2)
	r.write("tools/x/TOOL.hdlp", "x2")
	r.run(r.work, "add", "-A")
	r.run(r.work, "-c", "commit.gpgsign=false", "commit", "--quiet", "-m", "unsigned x")
	head := r.push()
	tree = mustSync(t, g)
	got, _, err = tree.LastChanged([]string{"x", "y"}, merge)
	if err != nil || got["x"] != head || got["y"] != c2 {
		t.Fatalf("after a force-push: %v %v", got, err)
	}
	if c, err := tree.Commit(head); err != nil || c.Signature != "" {
		t.Fatalf("unsigned head: %q %v", c.Signature, err)
	}
}

// TestGitChangedSince: the folders the commits after a base changed,
// each against its first parent: one changed and changed back is listed,
// a removed one and an added one are, a file outside the sub-tree is
// not, and a merge is compared with its first parent; a base off that
// history or past the limit is not reached.
func TestGitChangedSince(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	s := serve(t, r, nil)
	r.write("tools/x/TOOL.hdlp", "x1")
	r.write("tools/y/TOOL.hdlp", "y1")
	r.write("README.md", "r1")
	c1 := r.commit("add x and y")
	r.write("tools/y/TOOL.hdlp", "y2")
	r.write("README.md", "r2")
	c2 := r.commit("change y and the readme")
	r.write("tools/x/TOOL.hdlp", "x2")
	c3 := r.commit("change x")
	r.write("tools/x/TOOL.hdlp", "x1")
	c4 := r.commit("x back")
	r.run(r.work, "rm", "--quiet", "-r", "tools/y")
	r.write("tools/z/TOOL.hdlp", "z1")
	c5 := r.commit("remove y, add z")
	r.run(r.work, "checkout", "--quiet", "-b", "feature")
	r.write("tools/w/TOOL.hdlp", "w1")
	onFeature := r.commitLocal("w")
	merge := r.mergeNoFF("feature")

	g := historyGit(t, s)
	tree := mustSync(t, g)
	for _, tc := range []struct {
		base  string
		limit int
		want  string // the names, comma-separated; "-" for not reached
	}{
		{c1, 10, "w,x,y,z"},
		{c2, 10, "w,x,y,z"},
		{c3, 10, "w,x,y,z"},
		{c4, 10, "w,y,z"},
		{c5, 10, "w"},
		{merge, 10, ""},
		{c1, 5, "w,x,y,z"},
		{c1, 4, "-"},
		{onFeature, 10, "-"},
		{strings.Repeat("0", 40), 10, "-"},
	} {
		changed, ok, err := tree.ChangedSince(tc.base, tc.limit)
		got := strings.Join(slices.Sorted(maps.Keys(changed)), ",")
		if !ok {
			got = "-"
		}
		if err != nil || got != tc.want || (!ok && changed != nil) {
			t.Errorf("ChangedSince(%s, %d) = %v %v %v, want %q", tc.base[:7], tc.limit, changed, ok, err, tc.want)
		}
	}
	// Each with the newest commit that changed it: x's is the one that
	// changed it back, y's the one that removed it.
	changed, _, _ := tree.ChangedSince(c1, 10)
	if want := map[string]string{"w": merge, "x": c4, "y": c5, "z": c5}; !maps.Equal(changed, want) {
		t.Errorf("ChangedSince(c1) = %v, want %v", changed, want)
	}
	// Descends: the commits below the head on its first-parent history.
	for base, want := range map[string]bool{c1: true, c4: true, c5: true, merge: false, onFeature: false, "": false} {
		if got := tree.Descends(base); got != want {
			t.Errorf("Descends(%.7s) = %v, want %v", base, got, want)
		}
	}
	// A clone kept one commit deep holds no parent to walk through: its
	// head's parent alone is known, by hash.
	shallow := mustSync(t, newGit(t, s))
	if shallow.Rev() != merge || !shallow.Descends(c5) || shallow.Descends(c4) {
		t.Errorf("a shallow clone at %.7s: Descends(c5) = %v, Descends(c4) = %v; want true, false", shallow.Rev(), shallow.Descends(c5), shallow.Descends(c4))
	}
}

func TestGitHistoryReclonesShallow(t *testing.T) {
	t.Parallel()
	r := newRemote(t, "main")
	s := serve(t, r, nil)
	r.write("tools/x/TOOL.hdlp", "x1")
	c1 := r.commit("one")
	r.write("tools/y/TOOL.hdlp", "y1")
	r.commit("two")

	g := newGit(t, s)
	tree := mustSync(t, g)
	if _, _, err := tree.LastChanged([]string{"x"}, ""); !errors.Is(err, ErrNoHistory) {
		t.Fatalf("a shallow clone: want ErrNoHistory, got %v", err)
	}
	// Another process on the same state dir, with History: it clones again.
	g2 := &Git{URL: g.URL, Dir: g.Dir, Logger: g.Logger, History: true}
	tree = mustSync(t, g2)
	got, _, err := tree.LastChanged([]string{"x"}, "")
	if err != nil || got["x"] != c1 {
		t.Fatalf("LastChanged after re-clone: %v %v", got, err)
	}
	r.write("tools/x/TOOL.hdlp", "x2")
	c3 := r.commit("three")
	tree = mustSync(t, g2) // a fetch that keeps the whole history
	got, _, err = tree.LastChanged([]string{"x", "y"}, "")
	if err != nil || got["x"] != c3 || got["y"] == "" {
		t.Fatalf("LastChanged after a fetch: %v %v", got, err)
	}
}

// BenchmarkLastChanged10k walks a history of 10,000 commits, each adding
// one tool folder, to find the commit of each of the 10,000 folders: the
// worst history a start with trusted signers walks (once; the daemon keeps
// the result).
func BenchmarkLastChanged10k(b *testing.B) {
	const n = 10000
	r := newRemote(b, "main")
	var s strings.Builder
	for i := range n {
		name := fmt.Sprintf("tool-%05d", i)
		fmt.Fprintf(&s, "commit refs/heads/main\nmark :%d\ncommitter T <t@example.invalid> %d +0000\ndata %d\n%s\n", i+1, 1700000000+i, len(name), name)
		if i > 0 {
			fmt.Fprintf(&s, "from :%d\n", i)
		}
		fmt.Fprintf(&s, "M 100644 inline tools/%s/TOOL.hdlp\ndata %d\n%s\n", name, len(name), name)
	}
	cmd := exec.Command(r.git, "-C", r.bare, "fast-import", "--quiet")
	cmd.Env = gitEnv(r.home)
	cmd.Stdin = strings.NewReader(s.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git fast-import: %v\n%s", err, out)
	}
	// As a fetch stores it: one pack, as the server sends it.
	r.run(r.bare, "repack", "-a", "-d", "-q")
	head := plumbing.NewHash(r.run(r.bare, "rev-parse", "main"))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("tool-%05d", i)
	}
	for b.Loop() {
		t, err := newGitTree(r.bare, head, "tools", nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		found, _, err := t.LastChanged(names, "")
		if err != nil || len(found) != n {
			b.Fatalf("found %d of %d: %v", len(found), n, err)
		}
	}
}
