package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/settings"
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

// TestServeInProcess builds a daemon of role Serve on 127.0.0.1:0 (no
// sandbox, a tools tree of one tool), runs it, calls the tool through
// its API, and stops it: Run returns, Close removes daemon.json.
func TestServeInProcess(t *testing.T) {
	tools, state := t.TempDir(), t.TempDir()
	writeTestTool(t, tools, "hello", testTool("hello", "intent: say hello\nmethod: run\nexecutor: shell\nargv: [echo, hello]\nparams_schema: {}\n"))
	var cfg Config
	settings.New(&cfg, settings.Options{}) // the defaults
	cfg.Listen, cfg.Tools, cfg.State, cfg.Sandbox = "127.0.0.1:0", tools, state, host.SandboxOff
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, err := operator.ReadInfo(state)
	if err != nil || !strings.HasPrefix(info.URL, "http://127.0.0.1:") {
		t.Fatalf("daemon.json = %+v, %v; want the listener's URL", info, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	var res dispatch.Result
	deadline := time.Now().Add(15 * time.Second)
	for res.Status != dispatch.Success && time.Now().Before(deadline) {
		resp, err := http.Post(info.URL+"/v1/call", "application/json", strings.NewReader(`{"tool":"hello","params":{}}`))
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&res)
			resp.Body.Close()
		}
		if res.Status != dispatch.Success {
			time.Sleep(10 * time.Millisecond) // the first reload may not have published yet
		}
	}
	if res.Status != dispatch.Success || res.Output != "hello\n" {
		t.Errorf("POST /v1/call hello = %s %q %q; want success hello", res.Status, res.Output, res.Error)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v; want nil after cancel", err)
	}
	d.Close()
	if _, err := operator.ReadInfo(state); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close: daemon.json = %v; want it removed", err)
	}
}
