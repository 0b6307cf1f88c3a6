package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
)

// TestForgeLinks: the console links a git revision to the Forgejo/Gitea
// web UI of an http(s) repository, without credentials, and nothing else.
func TestForgeLinks(t *testing.T) {
	rev := strings.Repeat("ab", 20)
	links := forgeLinks("https://user:secret@forgejo.example/ops/tools.git", "tools")
	commit, file := links(rev, "greet/TOOL.hdlp")
	if commit != "https://forgejo.example/ops/tools/commit/"+rev || file != "https://forgejo.example/ops/tools/src/commit/"+rev+"/tools/greet/TOOL.hdlp" {
		t.Errorf("links = %q %q", commit, file)
	}
	if c, f := links("local:3f9c2a1b7e04d5a6", "greet/TOOL.hdlp"); c != "" || f != "" {
		t.Errorf("a local revision got links %q %q", c, f)
	}
	for _, repo := range []string{"", "git@forgejo.example:ops/tools.git", "ssh://forgejo.example/ops/tools.git"} {
		if forgeLinks(repo, "tools") != nil {
			t.Errorf("forgeLinks(%q) is not nil", repo)
		}
	}
}

// TestRemoteExecutorsStartErrors: problems found only when the executors
// are built (files, the hlpd-api options) stop the start with a message.
func TestRemoteExecutorsStartErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.token")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"empty token file", Config{GatekeeperURL: "http://g", GatekeeperTokenFile: empty}, "is empty"},
		{"unset token_env", Config{GatekeeperTargets: map[string]GatekeeperTarget{"b": {URL: "http://b", TokenEnv: "NOPE"}}}, "token_env NOPE is not set"},
		{"hlpd URL", Config{HlpdURL: "ftp://h", HlpdHealthPath: "/healthz", HlpdAuthHeader: "Authorization"}, "want http:// or https://"},
		{"hlpd route verb", Config{HlpdURL: "http://h", HlpdHealthPath: "/healthz", HlpdRoutes: map[string]string{"m": "FETCH /x"}}, `verb "FETCH"`},
	}
	for _, tc := range tests {
		tc.cfg.HealthSchedule, tc.cfg.HealthTimeout = "@every 30s", time.Second
		_, err := remoteExecutors(map[hldp.ExecutorKind]executors.Executor{}, tc.cfg, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: remoteExecutors() = %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
}
