package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// TestTrapsThroughTheBinary runs issue 14's traps as a newcomer meets
// them, through the built binary in a temporary tools repository (trap 2
// is TestOperatorApprovesOnTheEmbeddedDefault, trap 3 TestReadmeTour).
func TestTrapsThroughTheBinary(t *testing.T) {
	t.Parallel()
	proctest.SkipWithoutSandbox(t)
	repo := t.TempDir()
	writeTool(t, filepath.Join(repo, "tools"), "greet", "method: run\nexecutor: shell\nargv: [echo, hi]\nparams_schema: {}\nbogus_key: 1\n")
	writeTool(t, filepath.Join(repo, "tools"), "hello", "method: run\nexecutor: shell\nargv: [echo, hello]\nparams_schema: {}\n")
	state := filepath.Join(t.TempDir(), "state")
	env := binEnv(t)

	// Trap 1: validate checks the repository's tree, not the embedded copy.
	out, _, code := runBin(t, filepath.Join(repo, "tools"), env, "validate", "--state", state)
	if code != exitFailed || !strings.Contains(out, "tools tree: "+filepath.Join(repo, "tools")) || !strings.Contains(out, "greet/TOOL.hdlp") || !strings.Contains(out, "bogus_key") {
		t.Errorf("trap 1: validate in a repository with a broken tool = exit %d\n%s\nwant 1, the tree and the broken file and field named", code, out)
	}
	out, _, code = runBin(t, repo, env, "call", "--state", state, "greet")
	var r result
	if json.Unmarshal([]byte(out), &r) != nil || r.Status == "not_found" || !strings.Contains(r.Error, "bogus_key") || code != exitRefused {
		t.Errorf("trap 1: call greet (its file exists, broken) = exit %d %s; want 5 and the file's problem, not not_found", code, out)
	}

	// Trap 5: a files-root refusal is denied, with the rule.
	out, _, code = runBin(t, repo, env, "call", "--tools", nativeTools(t), "--state", state, "file-read", "path=../../etc/passwd")
	if json.Unmarshal([]byte(out), &r) != nil || r.Status != "denied" || code != exitRefused || !strings.Contains(out, `"rule"`) {
		t.Errorf("trap 5: file-read ../../etc/passwd = exit %d %s; want 5, denied with its rule", code, out)
	}

	// Trap 6: show carries the policy.
	out, _, code = runBin(t, repo, env, "show", "--tools", nativeTools(t), "--state", state, "shell-exec")
	for _, want := range []string{`"shell_policy": "default"`, `"sandbox"`, `"constraints"`, `"require_confirm"`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("trap 6: show shell-exec = exit %d, lacks %s:\n%s", code, want, out)
		}
	}

	// Trap 4: every API error is JSON; / is a JSON index of the routes.
	info := startBinDaemon(t, repo, state, env)
	for _, tc := range []struct {
		method, path string
		code         int
		want         string
	}{
		{"GET", "/", 200, `"POST /v1/call"`},
		{"GET", "/v1/call", 405, `"error"`},
		{"GET", "/no/such/route", 404, `"error"`},
		{"POST", "/v1/call", 400, `"error"`},
	} {
		req, _ := http.NewRequest(tc.method, info.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !json.Valid(b) || !strings.Contains(string(b), tc.want) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("trap 4: %s %s = %d %q (%s); want %d JSON holding %s", tc.method, tc.path, resp.StatusCode, b, resp.Header.Get("Content-Type"), tc.code, tc.want)
		}
	}
}
