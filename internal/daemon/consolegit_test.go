package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/settings"
)

// TestRepoHistory: without a trust policy the clone is one commit deep
// and a tool's history says older commits are not in it; repo_history
// keeps the whole history, and the console's log lists every commit that
// changed the tool's folder.
func TestRepoHistory(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	src := t.TempDir()
	gitc := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", src, "-c", "user.name=Pat", "-c", "user.email=pat@example.org", "-c", "gc.auto=0"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitc("init", "-q", "-b", "main")
	for i, msg := range []string{"add greet", "greet: say more", "greet: say it louder"} {
		dir := filepath.Join(src, "tools", "greet")
		os.MkdirAll(dir, 0o755)
		def := "name: greet\nintent: say hello " + strings.Repeat("again ", i) + "\nmethod: exec\nexecutor: shell\nwhy: a test\n"
		if err := os.WriteFile(filepath.Join(dir, "TOOL.hdlp"), []byte(def), 0o644); err != nil {
			t.Fatal(err)
		}
		gitc("add", "-A")
		gitc("commit", "-q", "-m", msg)
	}
	for _, tc := range []struct {
		history bool
		want    int
		note    string
	}{{false, 0, "repo_history"}, {true, 3, ""}} {
		var cfg Config
		settings.New(&cfg, settings.Options{})
		cfg.Listen, cfg.Tools, cfg.State, cfg.Sandbox = "127.0.0.1:0", "", filepath.Join(t.TempDir(), "state"), host.SandboxOff
		cfg.Repo, cfg.Schedule, cfg.RepoHistory = "file://"+src, "off", tc.history
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		d, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		deadline := time.Now().Add(time.Minute)
		for d.store.Load() == nil || d.store.Load().Len() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the repository was never served")
			}
			time.Sleep(10 * time.Millisecond)
		}
		l, err := d.toolLog("greet", 20)
		cancel()
		<-done
		d.Close()
		if err != nil {
			t.Fatalf("repo_history %v: %v", tc.history, err)
		}
		if len(l.Changes) != tc.want || (tc.note != "") != !l.Complete || !strings.Contains(l.Note, tc.note) {
			t.Errorf("repo_history %v: %d commits, complete %v, note %q; want %d, the note naming %q", tc.history, len(l.Changes), l.Complete, l.Note, tc.want, tc.note)
		}
		if tc.history && len(l.Changes) > 0 && (l.Changes[0].Message != "greet: say it louder" || l.Changes[0].Author != "Pat") {
			t.Errorf("newest change %+v; want the last commit by Pat", l.Changes[0])
		}
	}
}
