package shell_test

// The shipped git-ops tool (native-repo/tools/git-ops) run through this
// executor, outside the sandbox: a read-only sandbox would also stop the
// planted programs from writing their markers, and these tests are about
// git not starting them at all.

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/hldp"
)

// shippedGitOps parses native-repo/tools/git-ops/TOOL.hdlp as shipped.
func shippedGitOps(t *testing.T) *hldp.Tool {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	file := filepath.Join("..", "..", "..", "native-repo", "tools", "git-ops", hldp.FileName)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tool, err := hldp.Parse(file, data)
	if err != nil {
		t.Fatalf("Parse(%s) = %v", file, err)
	}
	return tool
}

// callGitOps runs one git-ops call through e, params checked (and
// defaults filled) as dispatch would.
func callGitOps(t *testing.T, e *shell.Executor, tool *hldp.Tool, params map[string]any) executors.Outcome {
	t.Helper()
	p, err := tool.CheckParams(params)
	if err != nil {
		t.Fatalf("CheckParams(%v) = %v", params, err)
	}
	out, err := e.Execute(t.Context(), executors.Request{Tool: tool, Params: p})
	if err != nil {
		t.Fatalf("git-ops %v: %v", params, err)
	}
	return out
}

// plainArgs is the git command line git-ops stood for before it was
// hardened: the op, --list for branch and tag, and the optional params.
func plainArgs(repo string, params map[string]any) []string {
	op := params["op"].(string)
	args := []string{"-C", repo, "--no-pager", op}
	if op == "branch" || op == "tag" {
		args = append(args, "--list")
	}
	if n, ok := params["max_count"]; ok {
		args = append(args, fmt.Sprintf("--max-count=%d", n))
	}
	if ref, ok := params["ref"]; ok {
		args = append(args, ref.(string))
	}
	if path, ok := params["path"]; ok {
		args = append(args, "--", path.(string))
	}
	return args
}

// testEnv is the environment of the tests' own git commands: no user or
// system configuration, a fixed identity.
func testEnv(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8",
		"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid",
	}
}

// withEnv returns base with the entries of extra in place of those of
// the same key; an extra entry with an empty value ("KEY=") only removes.
func withEnv(base, extra []string) []string {
	var out []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(extra, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			out = append(out, kv)
		}
	}
	for _, kv := range extra {
		if !strings.HasSuffix(kv, "=") {
			out = append(out, kv)
		}
	}
	return out
}

// runGit runs git with env and returns its stdout and stderr.
func runGit(env []string, stdin string, args ...string) (string, string, error) {
	cmd := exec.Command("git", args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// git runs a git command of the test's setup and returns its trimmed
// stdout; it fails the test when git fails.
func git(t *testing.T, args ...string) string {
	t.Helper()
	return gitIn(t, "", args...)
}

// gitIn is git with stdin.
func gitIn(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := runGit(testEnv(t.TempDir()), stdin, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return strings.TrimSpace(out)
}

func writeFile(t *testing.T, path, content string, perm fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
}

// newRepo makes an ordinary repository in dir: a.txt and b.txt in commit
// "one" (tagged v1), a.txt changed in commit "two" on main (branch dev
// points there too), and a.txt changed again in the work tree.
func newRepo(t *testing.T, dir string) string {
	t.Helper()
	git(t, "init", "--quiet", "-b", "main", dir)
	writeFile(t, filepath.Join(dir, "a.txt"), "one\n", 0o644)
	writeFile(t, filepath.Join(dir, "b.txt"), "bee\n", 0o644)
	git(t, "-C", dir, "add", "a.txt", "b.txt")
	git(t, "-C", dir, "commit", "--quiet", "-m", "one")
	git(t, "-C", dir, "tag", "v1")
	writeFile(t, filepath.Join(dir, "a.txt"), "two\n", 0o644)
	git(t, "-C", dir, "commit", "--quiet", "-am", "two")
	git(t, "-C", dir, "branch", "dev")
	writeFile(t, filepath.Join(dir, "a.txt"), "three\n", 0o644)
	return dir
}

// TestGitOpsOutput: on ordinary repositories every op prints what plain
// git prints for the same command line.
func TestGitOpsOutput(t *testing.T) {
	tool := shippedGitOps(t)
	tmp := t.TempDir()
	e := shell.New(shell.Options{Env: []string{"TMPDIR=" + tmp}})
	dir := t.TempDir()
	repo := newRepo(t, filepath.Join(dir, "repo"))
	writeFile(t, filepath.Join(repo, "sub", "c.txt"), "see\n", 0o644)
	git(t, "-C", repo, "add", "sub/c.txt")
	git(t, "-C", repo, "commit", "--quiet", "-m", "three", "--", "sub/c.txt")
	bare := filepath.Join(dir, "bare.git")
	git(t, "clone", "--quiet", "--bare", repo, bare)
	linked := filepath.Join(dir, "linked")
	git(t, "-C", repo, "worktree", "add", "--quiet", linked, "dev")
	writeFile(t, filepath.Join(linked, "b.txt"), "changed\n", 0o644)
	sha256 := filepath.Join(dir, "sha256")
	git(t, "init", "--quiet", "--object-format=sha256", "-b", "main", sha256)
	writeFile(t, filepath.Join(sha256, "a.txt"), "one\n", 0o644)
	git(t, "-C", sha256, "add", "a.txt")
	git(t, "-C", sha256, "commit", "--quiet", "-m", "one")

	tests := []struct {
		name   string
		repo   string
		params map[string]any
	}{
		{"log", repo, map[string]any{"op": "log", "max_count": 2}},
		{"log of a path", repo, map[string]any{"op": "log", "path": "a.txt"}},
		{"show", repo, map[string]any{"op": "show"}},
		{"show a ref", repo, map[string]any{"op": "show", "ref": "v1"}},
		{"diff", repo, map[string]any{"op": "diff"}},
		{"diff of a range", repo, map[string]any{"op": "diff", "ref": "v1..main"}},
		{"status", repo, map[string]any{"op": "status"}},
		{"branch", repo, map[string]any{"op": "branch"}},
		{"branch filtered", repo, map[string]any{"op": "branch", "ref": "dev"}},
		{"tag", repo, map[string]any{"op": "tag"}},
		{"blame", repo, map[string]any{"op": "blame", "path": "b.txt"}},
		{"ls-files", repo, map[string]any{"op": "ls-files"}},
		{"status in a subdirectory", filepath.Join(repo, "sub"), map[string]any{"op": "status"}},
		{"ls-files in a subdirectory", filepath.Join(repo, "sub"), map[string]any{"op": "ls-files"}},
		{"blame in a subdirectory", filepath.Join(repo, "sub"), map[string]any{"op": "blame", "path": "c.txt"}},
		{"log in a bare repository", bare, map[string]any{"op": "log", "max_count": 1}},
		{"branch in a bare repository", bare, map[string]any{"op": "branch"}},
		{"log in the git directory", filepath.Join(repo, ".git"), map[string]any{"op": "log", "max_count": 1}},
		{"status in a linked worktree", linked, map[string]any{"op": "status"}},
		{"diff in a linked worktree", linked, map[string]any{"op": "diff"}},
		{"branch in a linked worktree", linked, map[string]any{"op": "branch"}},
		{"log of a sha256 repository", sha256, map[string]any{"op": "log"}},
		{"status of a sha256 repository", sha256, map[string]any{"op": "status"}},
		{"not a repository", dir, map[string]any{"op": "log"}},
		{"unknown ref", repo, map[string]any{"op": "log", "ref": "nosuchref"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := map[string]any{"repo": tt.repo}
			for k, v := range tt.params {
				params[k] = v
			}
			wantOut, wantErr, err := runGit(testEnv(t.TempDir()), "", plainArgs(tt.repo, params)...)
			wantCode := 0
			if err != nil {
				wantCode = err.(*exec.ExitError).ExitCode()
			}
			got := callGitOps(t, e, tool, params)
			if string(got.Output) != wantOut || got.ExitCode != wantCode {
				t.Errorf("git-ops %v = exit %d, stderr %q, output diff (-plain git +git-ops):\n%s",
					tt.params, got.ExitCode, got.Stderr, cmp.Diff(wantOut, string(got.Output)))
			}
			if wantCode != 0 && string(got.Stderr) != wantErr {
				t.Errorf("git-ops %v stderr = %q; want git's own %q", tt.params, got.Stderr, wantErr)
			}
		})
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("git-ops left %d entries in its TMPDIR (%s); want none", len(left), left[0].Name())
	}
}

// plant is a repository set up to make git run a program of its choosing:
// the program appends a line to marker and fails.
type plant struct {
	dir    string // the vector's own directory, outside the repository
	repo   string
	prog   string // the planted program (executable)
	marker string
}

// config sets key=value in the planted repository's own config file.
func (p *plant) config(t *testing.T, key, value string) {
	t.Helper()
	git(t, "config", "--file", filepath.Join(p.repo, ".git", "config"), key, value)
}

// ran reports what the planted program recorded, and clears it.
func (p *plant) ran(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(p.marker)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	os.Remove(p.marker)
	return strings.TrimSpace(string(b))
}

// touch gives every work-tree file a new modification time, so git has
// to read them again (and run their clean filter) to know whether they
// changed.
func (p *plant) touch(t *testing.T, n int) {
	t.Helper()
	when := time.Unix(1_000_000_000+int64(n)*1000, 0)
	err := filepath.WalkDir(p.repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil // a submodule's gitfile
		}
		if d.Type().IsRegular() {
			return os.Chtimes(path, when, when)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// partialClone replaces p.repo with a blob-less clone of a new
// repository: the blobs of commit "one" are missing, so show (the diff
// of commit "two") fetches them from the promisor remote ("origin").
func (p *plant) partialClone(t *testing.T) {
	t.Helper()
	src := newRepo(t, filepath.Join(p.dir, "src"))
	git(t, "-C", src, "config", "uploadpack.allowFilter", "true")
	if err := os.RemoveAll(p.repo); err != nil {
		t.Fatal(err)
	}
	git(t, "clone", "--quiet", "--no-local", "--filter=blob:none", "file://"+src, p.repo)
	writeFile(t, filepath.Join(p.repo, "a.txt"), "three\n", 0o644)
}

// signedCommit puts on main a commit with the tree and parent of main
// whose gpgsig header holds an armoured block of the given kind.
func (p *plant) signedCommit(t *testing.T, kind string) {
	t.Helper()
	tree := git(t, "-C", p.repo, "rev-parse", "main^{tree}")
	parent := git(t, "-C", p.repo, "rev-parse", "main")
	raw := fmt.Sprintf("tree %s\nparent %s\nauthor t <t@example.invalid> 1700000000 +0000\ncommitter t <t@example.invalid> 1700000000 +0000\n"+
		"gpgsig -----BEGIN %s-----\n \n AAAA\n -----END %s-----\n\nsigned %s\n", tree, parent, kind, kind, kind)
	id := gitIn(t, raw, "-C", p.repo, "hash-object", "-t", "commit", "-w", "--stdin")
	git(t, "-C", p.repo, "update-ref", "refs/heads/main", id)
}

// gitOpsCalls is one call of every op; blame names a file, so it has
// something to annotate.
var gitOpsCalls = []map[string]any{
	{"op": "log", "max_count": 3},
	{"op": "show"},
	{"op": "diff"},
	{"op": "status"},
	{"op": "branch"},
	{"op": "tag"},
	{"op": "blame", "path": "a.txt"},
	{"op": "ls-files"},
}

// TestGitOpsRunsNoRepositoryCode: for each way a repository (or the
// environment) can make git run a program, the program runs under plain
// git for the ops listed in live (so the fixture is real on this git),
// and never under git-ops, whatever the op.
func TestGitOpsRunsNoRepositoryCode(t *testing.T) {
	tool := shippedGitOps(t)
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(auth.Close)

	tests := []struct {
		name string
		// plant sets the repository up; env returns extra environment
		// for both plain git and the executor (the daemon's Options.Env).
		plant func(t *testing.T, p *plant) (env []string)
		// live lists the ops whose plain git runs the program; none
		// means no op reaches it even unhardened (kept to show it stays so).
		live []string
	}{
		{"core.fsmonitor", func(t *testing.T, p *plant) []string {
			p.config(t, "core.fsmonitor", p.prog)
			return nil
		}, []string{"status", "diff", "blame", "ls-files"}},
		{"post-index-change hook", func(t *testing.T, p *plant) []string {
			writeFile(t, filepath.Join(p.repo, ".git", "hooks", "post-index-change"), "#!/bin/sh\nexec "+p.prog+" hook\n", 0o755)
			return nil
		}, []string{"status"}},
		{"core.hooksPath", func(t *testing.T, p *plant) []string {
			writeFile(t, filepath.Join(p.dir, "hooks", "post-index-change"), "#!/bin/sh\nexec "+p.prog+" hook\n", 0o755)
			p.config(t, "core.hooksPath", filepath.Join(p.dir, "hooks"))
			return nil
		}, []string{"status"}},
		{"filter clean and smudge chosen by .gitattributes", func(t *testing.T, p *plant) []string {
			writeFile(t, filepath.Join(p.repo, ".gitattributes"), "* filter=evil\n", 0o644)
			p.config(t, "filter.evil.clean", p.prog+" clean")
			p.config(t, "filter.evil.smudge", p.prog+" smudge")
			return nil
		}, []string{"status", "diff", "blame"}},
		{"filter process chosen by info/attributes", func(t *testing.T, p *plant) []string {
			writeFile(t, filepath.Join(p.repo, ".git", "info", "attributes"), "* filter=evil\n", 0o644)
			p.config(t, "filter.evil.process", p.prog+" process")
			p.config(t, "filter.evil.required", "true")
			return nil
		}, []string{"status", "diff", "blame"}},
		{"diff driver textconv", func(t *testing.T, p *plant) []string {
			writeFile(t, filepath.Join(p.repo, ".git", "info", "attributes"), "* diff=evil\n", 0o644)
			p.config(t, "diff.evil.textconv", p.prog+" textconv")
			return nil
		}, []string{"diff", "show", "blame"}},
		{"diff driver command", func(t *testing.T, p *plant) []string {
			writeFile(t, filepath.Join(p.repo, ".git", "info", "attributes"), "* diff=evil\n", 0o644)
			p.config(t, "diff.evil.command", p.prog+" command")
			return nil
		}, []string{"diff"}},
		{"diff.external", func(t *testing.T, p *plant) []string {
			p.config(t, "diff.external", p.prog+" external")
			return nil
		}, []string{"diff"}},
		{"include.path", func(t *testing.T, p *plant) []string {
			writeFile(t, filepath.Join(p.dir, "included"), "[core]\n\tfsmonitor = "+p.prog+" included\n", 0o644)
			p.config(t, "include.path", filepath.Join(p.dir, "included"))
			return nil
		}, []string{"status"}},
		{"includeIf gitdir", func(t *testing.T, p *plant) []string {
			writeFile(t, filepath.Join(p.dir, "included"), "[core]\n\tfsmonitor = "+p.prog+" included\n", 0o644)
			p.config(t, "includeIf.gitdir:/.path", filepath.Join(p.dir, "included"))
			return nil
		}, []string{"status"}},
		{"extensions.worktreeConfig", func(t *testing.T, p *plant) []string {
			p.config(t, "core.repositoryformatversion", "1")
			p.config(t, "extensions.worktreeConfig", "true")
			writeFile(t, filepath.Join(p.repo, ".git", "config.worktree"), "[core]\n\tfsmonitor = "+p.prog+" worktree\n", 0o644)
			return nil
		}, []string{"status"}},
		{"pager and editor", func(t *testing.T, p *plant) []string {
			p.config(t, "core.pager", p.prog+" pager")
			p.config(t, "core.editor", p.prog+" editor")
			for _, op := range []string{"log", "show", "diff", "status", "branch", "tag", "blame", "ls-files"} {
				p.config(t, "pager."+op, p.prog+" pager")
			}
			return nil
		}, nil}, // stdout is a pipe, and no op edits
		{"signature verification", func(t *testing.T, p *plant) []string {
			p.signedCommit(t, "PGP SIGNATURE")
			p.signedCommit(t, "SIGNED MESSAGE")
			p.signedCommit(t, "SSH SIGNATURE")
			p.config(t, "log.showSignature", "true")
			p.config(t, "gpg.program", p.prog)
			p.config(t, "gpg.x509.program", p.prog)
			p.config(t, "gpg.ssh.program", p.prog)
			p.config(t, "gpg.ssh.allowedSignersFile", p.prog)
			return nil
		}, []string{"log", "show"}},
		{"lazy fetch with protocol ext", func(t *testing.T, p *plant) []string {
			p.partialClone(t)
			p.config(t, "remote.origin.url", "ext::"+p.prog+" ext")
			p.config(t, "protocol.allow", "always")
			return nil
		}, []string{"show"}},
		{"lazy fetch with core.sshCommand", func(t *testing.T, p *plant) []string {
			p.partialClone(t)
			p.config(t, "remote.origin.url", "ssh://git.example.invalid/repo.git")
			p.config(t, "core.sshCommand", p.prog+" ssh")
			return nil
		}, []string{"show"}},
		{"lazy fetch with remote uploadpack", func(t *testing.T, p *plant) []string {
			p.partialClone(t)
			p.config(t, "remote.origin.uploadpack", p.prog+" upload-pack")
			p.config(t, "protocol.file.allow", "always")
			return nil
		}, []string{"show"}},
		{"lazy fetch with credential.helper and core.askPass", func(t *testing.T, p *plant) []string {
			p.partialClone(t)
			p.config(t, "remote.origin.url", auth.URL+"/repo.git")
			p.config(t, "credential.helper", "!"+p.prog+" credential")
			p.config(t, "core.askPass", p.prog)
			return nil
		}, []string{"show"}},
		{"submodule's own config", func(t *testing.T, p *plant) []string {
			sub := newRepo(t, filepath.Join(p.dir, "sub"))
			git(t, "-C", sub, "commit", "--quiet", "-am", "three")
			git(t, "-C", p.repo, "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", sub, "sub")
			git(t, "-C", p.repo, "commit", "--quiet", "-m", "sub", "--", ".gitmodules", "sub")
			modules := filepath.Join(p.repo, ".git", "modules", "sub")
			git(t, "config", "--file", filepath.Join(modules, "config"), "filter.evil.clean", p.prog+" submodule")
			writeFile(t, filepath.Join(modules, "info", "attributes"), "* filter=evil\n", 0o644)
			return nil
		}, []string{"status", "diff"}},
		{"global config and attributes in HOME", func(t *testing.T, p *plant) []string {
			home := filepath.Join(p.dir, "home")
			writeFile(t, filepath.Join(home, ".gitconfig"), "[core]\n\tfsmonitor = "+p.prog+" global\n[filter \"evil\"]\n\tclean = "+p.prog+" global-filter\n", 0o644)
			writeFile(t, filepath.Join(home, ".config", "git", "attributes"), "* filter=evil\n", 0o644)
			return []string{"HOME=" + home, "GIT_CONFIG_GLOBAL=", "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
		}, []string{"status", "diff"}},
		{"GIT_* variables in the daemon's environment", func(t *testing.T, p *plant) []string {
			system := filepath.Join(p.dir, "system")
			writeFile(t, system, "[core]\n\tfsmonitor = "+p.prog+" system\n", 0o644)
			return []string{
				"GIT_CONFIG_NOSYSTEM=", "GIT_CONFIG_SYSTEM=" + system,
				"GIT_EXTERNAL_DIFF=" + p.prog,
				"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.fsmonitor", "GIT_CONFIG_VALUE_0=" + p.prog + " count",
				"GIT_CONFIG_PARAMETERS='core.hooksPath'='" + filepath.Join(p.dir, "hooks") + "'",
				"PAGER=" + p.prog, "GIT_PAGER=" + p.prog, "GIT_EDITOR=" + p.prog, "GIT_SSH_COMMAND=" + p.prog,
			}
		}, []string{"status", "diff"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p := &plant{dir: dir, repo: filepath.Join(dir, "repo"), prog: filepath.Join(dir, "planted"), marker: filepath.Join(dir, "marker")}
			writeFile(t, p.prog, "#!/bin/sh\necho \"$*\" >> '"+p.marker+"'\nexit 1\n", 0o755)
			newRepo(t, p.repo)
			env := tt.plant(t, p)
			n := 0
			for _, op := range tt.live {
				n++
				p.touch(t, n)
				params := map[string]any{"op": op, "repo": p.repo}
				if op == "blame" {
					params["path"] = "a.txt"
				}
				runGit(withEnv(testEnv(dir), env), "", plainArgs(p.repo, params)...)
				if got := p.ran(t); got == "" {
					t.Fatalf("plain git %s did not run the planted program; the fixture does not test what it claims", op)
				}
			}
			e := shell.New(shell.Options{Env: withEnv(nil, env)})
			for _, call := range gitOpsCalls {
				n++
				p.touch(t, n)
				params := map[string]any{"repo": p.repo}
				for k, v := range call {
					params[k] = v
				}
				out := callGitOps(t, e, tool, params)
				if got := p.ran(t); got != "" {
					t.Errorf("git-ops op=%s ran the planted program (%s); exit %d, stderr %q", call["op"], got, out.ExitCode, out.Stderr)
				}
			}
		})
	}
}
