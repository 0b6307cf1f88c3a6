package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/dispatch"
)

// These tests sign the commits of a real repository with real keys: SSH
// keys through git's gpg.format=ssh (ssh-keygen -Y sign), OpenPGP keys
// through GnuPG with a throwaway GNUPGHOME, and check that the daemon
// serves only what an allowed key signed (issue 37).

// sshSigner is an SSH key that signs commits.
type sshSigner struct {
	key  string // private key file
	line string // its allowed_signers line
}

// newSSHSigner makes a key for principal; opts go before the key in its
// allowed_signers line, comment after it.
func newSSHSigner(t testing.TB, principal, opts, comment string) sshSigner {
	t.Helper()
	key := filepath.Join(t.TempDir(), "key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", principal, "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(pub))
	line := principal + " "
	if opts != "" {
		line += opts + " "
	}
	return sshSigner{key: key, line: strings.TrimSpace(line + f[0] + " " + f[1] + " " + comment)}
}

// gitWith runs git in the work clone with extra environment and returns
// its trimmed stdout.
func (r *gitRepo) gitWith(env []string, args ...string) string {
	r.tb.Helper()
	cmd := exec.Command(r.git, append([]string{"-C", r.work}, args...)...)
	cmd.Env = append(r.env(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		r.tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// sshArgs are git's options to sign a commit with s.
func (s sshSigner) args() []string {
	return []string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + s.key}
}

// commitSigned commits the work tree signed by sign (nil: unsigned),
// without pushing, and returns the commit.
func (r *gitRepo) commitSigned(env, sign []string, msg string) string {
	r.tb.Helper()
	r.run(r.work, "add", "-A")
	args := append(append([]string{}, sign...), "commit", "--quiet", "--allow-empty", "-m", msg)
	if sign != nil {
		args = append(args, "-S")
	} else {
		args = append(args, "--no-gpg-sign")
	}
	r.gitWith(env, args...)
	return r.run(r.work, "rev-parse", "HEAD")
}

// gpgSigner makes an OpenPGP key in a throwaway GNUPGHOME and returns the
// environment git signs with, its options and the armored public key.
func gpgSigner(t testing.TB, uid string) (env, args []string, armored []byte) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "gnupg")
	os.Mkdir(home, 0o700)
	env = []string{"GNUPGHOME=" + home}
	gpg := func(args ...string) []byte {
		cmd := exec.Command("gpg", append([]string{"--batch"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gpg %v: %v\n%s", args, err, stderr.String())
		}
		return out
	}
	gpg("--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
	t.Cleanup(func() { exec.Command("gpgconf", "--homedir", home, "--kill", "all").Run() })
	return env, []string{"-c", "gpg.format=openpgp", "-c", "user.signingkey=" + uid}, gpg("--armor", "--export")
}

// trustView is a tool of /v1/tools with its trust.
type trustView struct {
	Name   string             `json:"name"`
	Status catalog.Status     `json:"status"`
	Reason string             `json:"reason"`
	Signed *catalog.Signature `json:"signed"`
}

func getTools(t testing.TB, get func(path string) (int, []byte), all bool) map[string]trustView {
	t.Helper()
	path := "/v1/tools"
	if all {
		path += "?all=1"
	}
	code, b := get(path)
	var body struct {
		Tools []trustView `json:"tools"`
	}
	if code != 200 || json.Unmarshal(b, &body) != nil {
		t.Fatalf("GET %s = %d %s", path, code, b)
	}
	m := map[string]trustView{}
	for _, v := range body.Tools {
		m[v.Name] = v
	}
	return m
}

// TestTrustedSigners: every case of issue 37 on one repository: an
// allowed key, an unsigned commit, a foreign key, a key outside its
// validity, a key outside its path globs, OpenPGP, a signed merge of
// unsigned commits; then a force-push that replaces a signed commit with an
// unsigned one, and re-signing it, without a restart; then a restart that
// verifies nothing again.
func TestTrustedSigners(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"ssh-keygen", "gpg"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s is needed: %v", c, err)
		}
	}
	r := newGitRepo(t)
	alice := newSSHSigner(t, "alice@example.com", `namespaces="git"`, "")
	db := newSSHSigner(t, "db@example.com", "", "database team toolagent-paths=tools/db-*")
	old := newSSHSigner(t, "old@example.com", `valid-before="20200101Z"`, "")
	mallory := newSSHSigner(t, "mallory@example.com", "", "")
	gpgEnv, pat, patKey := gpgSigner(t, "Pat <pat@example.com>")
	dir := t.TempDir()
	signers := filepath.Join(dir, "allowed_signers")
	os.WriteFile(signers, []byte("# who may define tools\n"+alice.line+"\n"+db.line+"\n"+old.line+"\n"), 0o644)
	keyring := filepath.Join(dir, "keyring.asc")
	os.WriteFile(keyring, patKey, 0o644)

	r.write("tools/good/TOOL.hdlp", versionTool("good", "g1"))
	cGood := r.commitSigned(nil, alice.args(), "good")
	r.write("tools/unsigned/TOOL.hdlp", versionTool("unsigned", "u1"))
	cUnsigned := r.commitSigned(nil, nil, "unsigned")
	r.write("tools/foreign/TOOL.hdlp", versionTool("foreign", "f1"))
	r.commitSigned(nil, mallory.args(), "foreign")
	r.write("tools/expired/TOOL.hdlp", versionTool("expired", "e1"))
	r.commitSigned(nil, old.args(), "expired")
	r.write("tools/db-backup/TOOL.hdlp", versionTool("db-backup", "d1"))
	r.write("tools/notdb/TOOL.hdlp", versionTool("notdb", "n1"))
	r.commitSigned(nil, db.args(), "db team")
	r.write("tools/pgp/TOOL.hdlp", versionTool("pgp", "p1"))
	cPGP := r.commitSigned(gpgEnv, pat, "pgp")
	// Unsigned commits on a branch, merged by a signed merge commit.
	r.run(r.work, "checkout", "--quiet", "-b", "feature")
	r.write("tools/merged/TOOL.hdlp", versionTool("merged", "m1"))
	r.commitSigned(nil, nil, "feature work")
	r.run(r.work, "checkout", "--quiet", "main")
	r.gitWith(nil, append(alice.args(), "merge", "--quiet", "--no-ff", "-S", "-m", "merge feature", "feature")...)
	cMerge := r.run(r.work, "rev-parse", "HEAD")
	r.pushTo("main")

	state := t.TempDir()
	d := startDaemon(t, nil, "--repo", r.url(), "--schedule", "off", "--state", state, "--trusted-signers", signers, "--trusted-keyring", keyring)
	d.waitRev(t, cMerge)
	get := func(p string) (int, []byte) { return d.request(t, "GET", p, "") }
	all := getTools(t, get, true)
	trusted := map[string]struct{ principal, method, commit string }{
		"good":      {"alice@example.com", "ssh", cGood},
		"db-backup": {"db@example.com", "ssh", ""},
		"pgp":       {"pat@example.com", "openpgp", cPGP},
		"merged":    {"alice@example.com", "ssh", cMerge},
	}
	for name, w := range trusted {
		v := all[name]
		if v.Status != catalog.Enabled || v.Signed == nil || v.Signed.Principal != w.principal || v.Signed.Method != w.method ||
			(w.commit != "" && v.Signed.Commit != w.commit) || v.Signed.Fingerprint == "" {
			t.Errorf("%s: got %s %q signed %+v; want enabled, signed by %s (%s) in %s", name, v.Status, v.Reason, v.Signed, w.principal, w.method, w.commit)
		}
	}
	untrusted := map[string]string{
		"unsigned": "tools/unsigned last changed in " + cUnsigned[:7] + " by an unsigned commit",
		"foreign":  "signed by a key not in trusted_signers (SHA256:",
		"expired":  "but the key expired at 2020-01-01T00:00:00Z",
		"notdb":    "whose key may change only tools/db-*",
	}
	for name, want := range untrusted {
		v := all[name]
		if v.Status != catalog.Untrusted || !strings.Contains(v.Reason, want) || v.Signed != nil {
			t.Errorf("%s: got %s %q; want untrusted with %q", name, v.Status, v.Reason, want)
		}
	}
	// Callers see the trusted tools alone, and cannot call the others.
	listed := getTools(t, get, false)
	for name := range untrusted {
		if _, ok := listed[name]; ok {
			t.Errorf("%s is listed to callers", name)
		}
	}
	if _, ok := listed["good"]; !ok {
		t.Errorf("good is not listed to callers: %v", listed)
	}
	code, res := d.call(t, "unsigned", map[string]any{})
	if res.Status != dispatch.Disabled || !strings.Contains(res.Error, "by an unsigned commit") {
		t.Errorf("call unsigned = %d %s %q; want disabled naming the reason", code, res.Status, res.Error)
	}
	d.callVersion(t, "trusted", "good", "g1", cMerge)
	// The provenance is in the call's result and its audit line.
	if _, res := d.call(t, "pgp", map[string]any{}); res.Signed == nil || res.Signed.Principal != "pat@example.com" || res.Signed.Commit != cPGP {
		t.Errorf("call pgp: signed %+v; want pat@example.com in %s", res.Signed, cPGP)
	}
	pollUntil(t, "the audit line of the call of pgp", func() bool {
		for line := range strings.Lines(d.logs.String()) {
			if strings.Contains(line, `"tool":"pgp"`) && strings.Contains(line, `"signer":"pat@example.com"`) &&
				strings.Contains(line, `"signed_commit":"`+cPGP+`"`) && strings.Contains(line, `"signer_key":"`) {
				return true
			}
		}
		return false
	})

	// A force-push replaces the signed merge with an unsigned one.
	r.gitWith(nil, "commit", "--quiet", "--amend", "--no-edit", "--no-gpg-sign")
	cBad := r.pushTo("main")
	d.syncNow(t)
	d.waitRev(t, cBad)
	if v := getTools(t, get, true)["merged"]; v.Status != catalog.Untrusted || !strings.Contains(v.Reason, cBad[:7]+" by an unsigned commit") {
		t.Errorf("after the force-push: merged %s %q; want untrusted, unsigned", v.Status, v.Reason)
	}
	if code, res := d.call(t, "merged", map[string]any{}); res.Status != dispatch.Disabled {
		t.Errorf("call merged after the force-push = %d %s", code, res.Status)
	}
	// Re-signed: callable again at the next sync, no restart.
	r.gitWith(nil, append(alice.args(), "commit", "--quiet", "--amend", "--no-edit", "-S")...)
	cResigned := r.pushTo("main")
	d.syncNow(t)
	d.waitRev(t, cResigned)
	if v := getTools(t, get, true)["merged"]; v.Status != catalog.Enabled || v.Signed == nil || v.Signed.Commit != cResigned {
		t.Errorf("after re-signing: merged %s %q %+v; want enabled, signed in %s", v.Status, v.Reason, v.Signed, cResigned)
	}
	d.callVersion(t, "re-signed", "merged", "m1", cResigned)

	// The operator adds mallory's key: the next sync, at the same commit,
	// trusts what it signed.
	os.WriteFile(signers, []byte(alice.line+"\n"+db.line+"\n"+old.line+"\n"+mallory.line+"\n"), 0o644)
	d.syncNow(t)
	pollUntil(t, "foreign trusted after its key was added", func() bool {
		v := getTools(t, get, true)["foreign"]
		return v.Status == catalog.Enabled && v.Signed != nil && v.Signed.Principal == "mallory@example.com"
	})

	// A restart verifies nothing again: the verdicts are kept.
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	d2 := startDaemon(t, nil, "--repo", r.url(), "--schedule", "off", "--state", state, "--trusted-signers", signers, "--trusted-keyring", keyring)
	d2.waitRev(t, cResigned)
	if v := getTools(t, func(p string) (int, []byte) { return d2.request(t, "GET", p, "") }, true)["good"]; v.Status != catalog.Enabled {
		t.Errorf("after a restart: good %s %q", v.Status, v.Reason)
	}
	verifiedNothing(t, d2)
}

// aliceAndMallory is the start of a trust test: a repository, two SSH
// signers, and an allowed_signers file that trusts alice alone.
func aliceAndMallory(t *testing.T) (r *gitRepo, alice, mallory sshSigner, signers string) {
	t.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Fatalf("ssh-keygen is needed: %v", err)
	}
	r = newGitRepo(t)
	alice = newSSHSigner(t, "alice@example.com", "", "")
	mallory = newSSHSigner(t, "mallory@example.com", "", "")
	signers = filepath.Join(t.TempDir(), "allowed_signers")
	if err := os.WriteFile(signers, []byte(alice.line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return r, alice, mallory, signers
}

// verifiedNothing fails t unless d (restarted) checked signatures and
// verified none: every verdict came from the trust cache.
func verifiedNothing(t *testing.T, d *liveDaemon) {
	t.Helper()
	logs := d.logs.String()
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `"signatures checked"`) && !strings.Contains(line, `"verified":0`) {
			t.Errorf("a restart verified signatures again: %s", line)
		}
	}
	if !strings.Contains(logs, `"signatures checked"`) {
		t.Errorf("no signature check logged:\n%s", logs)
	}
}

// TestTrustedSignersBinary runs the built binary as an operator would:
// serve --repo file://… --trusted-signers FILE serves the signed tool,
// refuses the unsigned and foreign ones with the reason, and names the
// signer; with a local tools directory it refuses to start.
func TestTrustedSignersBinary(t *testing.T) {
	t.Parallel()
	r, alice, mallory, signers := aliceAndMallory(t)
	r.write("tools/signed/TOOL.hdlp", versionTool("signed", "s1"))
	cSigned := r.commitSigned(nil, alice.args(), "signed")
	r.write("tools/unsigned/TOOL.hdlp", versionTool("unsigned", "u1"))
	r.commitSigned(nil, nil, "unsigned")
	r.write("tools/foreign/TOOL.hdlp", versionTool("foreign", "f1"))
	r.commitSigned(nil, mallory.args(), "foreign")
	r.pushTo("main")

	work := t.TempDir()
	info := startBinDaemon(t, work, filepath.Join(t.TempDir(), "state"), binEnv(t),
		"--repo", "file://"+r.bare, "--schedule", "off", "--trusted-signers", signers)
	get := func(p string) (int, []byte) {
		resp, err := http.Get(info.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}
	all := getTools(t, get, true)
	if v := all["signed"]; v.Status != catalog.Enabled || v.Signed == nil || v.Signed.Principal != "alice@example.com" || v.Signed.Commit != cSigned {
		t.Errorf("signed: %s %q %+v", v.Status, v.Reason, v.Signed)
	}
	if v := all["unsigned"]; v.Status != catalog.Untrusted || !strings.Contains(v.Reason, "by an unsigned commit") {
		t.Errorf("unsigned: %s %q", v.Status, v.Reason)
	}
	if v := all["foreign"]; v.Status != catalog.Untrusted || !strings.Contains(v.Reason, "signed by a key not in trusted_signers") {
		t.Errorf("foreign: %s %q", v.Status, v.Reason)
	}
	code, b := get("/v1/tools/signed")
	var one trustView
	if code != 200 || json.Unmarshal(b, &one) != nil || one.Signed == nil || one.Signed.Principal != "alice@example.com" {
		t.Errorf("GET /v1/tools/signed = %d %s; want the signer named", code, b)
	}

	// validate in the tools repository (CI): the unsigned and the foreign
	// tool fail it, each with its reason.
	out, stderr, exit := runBin(t, r.work, binEnv(t), "validate", "--trusted-signers", signers)
	if exit == 0 || !strings.Contains(out, "untrusted: tools/unsigned last changed in") || !strings.Contains(out, "by an unsigned commit") ||
		!strings.Contains(out, "untrusted: tools/foreign last changed in") || strings.Contains(out, "tools/signed last") ||
		!strings.Contains(out, "1 of 3 tools signed by an allowed key") {
		t.Errorf("validate --trusted-signers: exit %d\n%s%s", exit, out, stderr)
	}
	// Once the two are gone, validate passes.
	r.remove("tools/unsigned")
	r.remove("tools/foreign")
	r.commitSigned(nil, alice.args(), "remove the untrusted tools")
	if out, stderr, exit := runBin(t, r.work, binEnv(t), "validate", "--trusted-signers", signers); exit != 0 || !strings.Contains(out, "1 of 1 tools signed") {
		t.Errorf("validate --trusted-signers on signed tools: exit %d\n%s%s", exit, out, stderr)
	}

	// A local tools directory has no commits: serve refuses to start.
	tools := filepath.Join(t.TempDir(), "tools")
	os.MkdirAll(filepath.Join(tools, "x"), 0o755)
	os.WriteFile(filepath.Join(tools, "x", "TOOL.hdlp"), []byte(versionTool("x", "1")), 0o644)
	_, stderr, exit = runBin(t, work, binEnv(t), "serve", "--listen", "127.0.0.1:0", "--state", filepath.Join(t.TempDir(), "s"),
		"--tools", tools, "--trusted-signers", signers)
	if exit == 0 || !strings.Contains(stderr, "trusted_signers and trusted_keyring need a git source (repo)") {
		t.Errorf("serve --tools DIR --trusted-signers: exit %d, stderr %s; want a refusal naming the reason", exit, stderr)
	}
}

// fastImportTools writes n tools into r's bare repository as n commits on
// main, one tool each (git fast-import: unsigned, as fast-import cannot
// sign), and returns the head.
func fastImportTools(b *testing.B, r *gitRepo, n int) string {
	b.Helper()
	var s strings.Builder
	for i := range n {
		name := fmt.Sprintf("tool-%05d", i)
		body := versionTool(name, "v1")
		fmt.Fprintf(&s, "commit refs/heads/main\nmark :%d\ncommitter T <t@example.invalid> %d +0000\ndata %d\n%s\n", i+1, 1700000000+i, len(name), name)
		if i > 0 {
			fmt.Fprintf(&s, "from :%d\n", i)
		}
		fmt.Fprintf(&s, "M 100644 inline tools/%s/TOOL.hdlp\ndata %d\n%s\n", name, len(body), body)
	}
	cmd := exec.Command(r.git, "-C", r.bare, "fast-import", "--quiet")
	cmd.Env = r.env()
	cmd.Stdin = strings.NewReader(s.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git fast-import: %v\n%s", err, out)
	}
	return r.run(r.bare, "rev-parse", "main")
}

// BenchmarkTrustStart10k measures the start of a daemon serving 10,000
// tools, with trusted_signers set and without: the first start (clone,
// history walk, verification, parse) and a restart at the same commit
// (from run() to /readyz, the catalog served from the clone and the
// caches). "one-commit": the 10,000 tools in one commit signed by an
// allowed key; "10k-commits": each tool added by a commit of its own
// (10,000 verdicts, the walk over 10,000 commits: the worst history).
func BenchmarkTrustStart10k(b *testing.B) {
	const n = 10000
	alice := newSSHSigner(b, "alice@example.com", "", "")
	signers := filepath.Join(b.TempDir(), "allowed_signers")
	os.WriteFile(signers, []byte(alice.line+"\n"), 0o644)
	for _, history := range []string{"one-commit", "10k-commits"} {
		var r *gitRepo
		var rev string
		if history == "one-commit" {
			r = newGitRepo(b)
			for i := range n {
				name := fmt.Sprintf("tool-%05d", i)
				r.write("tools/"+name+"/TOOL.hdlp", versionTool(name, "v1"))
			}
			r.commitSigned(nil, alice.args(), "10000 tools")
			rev = r.pushTo("main")
		} else {
			r = newGitRepo(b)
			rev = fastImportTools(b, r, n)
		}
		for _, trusted := range []bool{false, true} {
			name := history + "/trust-off"
			if trusted {
				name = history + "/trust-on"
			}
			b.Run(name, func(b *testing.B) {
				state := b.TempDir()
				args := []string{"--repo", r.url(), "--schedule", "off", "--state", state}
				if trusted {
					args = append(args, "--trusted-signers", signers)
				}
				// The first start, as `toolagent sync`: the clone (of the
				// whole history with trust on), the walk, the verification
				// and the parse; longer than startDaemon waits for.
				first := time.Now()
				sum, err := runSyncCmd(b, args...)
				if err != nil || sum.Revision != rev {
					b.Fatalf("first sync: %+v %v", sum, err)
				}
				b.Logf("first sync (clone, walk, verify, parse %d tools): %v", n, time.Since(first))
				var samples []time.Duration
				for b.Loop() {
					start := time.Now()
					d := startDaemon(b, nil, args...)
					samples = append(samples, time.Since(start))
					b.StopTimer()
					pollUntil(b, "the first sync", func() bool { return !d.status(b).LastOK.IsZero() })
					if trusted && !strings.Contains(d.logs.String(), `"verified":0`) {
						b.Fatalf("a restart verified signatures again:\n%s", d.logs)
					}
					d.stop(b)
					b.StartTimer()
				}
				reportDurations(b, samples, "restart-to-serving")
			})
		}
	}
}

// TestTrustedRugPull: a call held for approval binds the definition it
// was asked of; when a new signed commit changes the tool before the
// approver decides, approving is refused (409 "the definition changed;
// ask again") and nothing runs.
func TestTrustedRugPull(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Fatalf("ssh-keygen is needed: %v", err)
	}
	r := newGitRepo(t)
	alice := newSSHSigner(t, "alice@example.com", "", "")
	dir := t.TempDir()
	signers := filepath.Join(dir, "allowed_signers")
	os.WriteFile(signers, []byte(alice.line+"\n"), 0o644)
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("alice:call:"+aliceToken+"\nbob:approve:"+bobToken+"\nops:admin:ops-0123456789abcdef00\n"), 0o600)
	marker := filepath.Join(t.TempDir(), "ran")
	r.write("tools/guarded/TOOL.hdlp", guardedTool("run a command once approved"))
	c1 := r.commitSigned(nil, alice.args(), "guarded")
	r.pushTo("main")
	d := startDaemon(t, nil, "--repo", r.url(), "--schedule", "off", "--trusted-signers", signers, "--tokens-file", tokens)
	ad, bd := d.as(aliceToken), d.as(bobToken)
	bd.waitRev(t, c1)
	// The console's tool page names the signer.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if resp, err := browser.PostForm(d.url+"/ui/login", url.Values{"token": {bobToken}}); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	resp, err := browser.Get(d.url + "/ui/tools/guarded")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `<span id="signed">alice@example.com</span>`) || !strings.Contains(string(page), c1) {
		t.Errorf("console tool page = %d; want the signer and the commit named:\n%s", resp.StatusCode, page)
	}
	code, res := ad.call(t, "guarded", map[string]any{"cmd": "touch " + marker})
	if code != http.StatusAccepted || res.ApprovalID == "" {
		t.Fatalf("call guarded = %d %s %q; want 202 held", code, res.Status, res.Error)
	}
	// The definition changes (signed: the tool stays trusted) before the
	// decision.
	r.write("tools/guarded/TOOL.hdlp", guardedTool("run a command once approved, changed"))
	c2 := r.commitSigned(nil, alice.args(), "guarded changed")
	r.pushTo("main")
	d.as("ops-0123456789abcdef00").syncNow(t)
	bd.waitRev(t, c2)
	code, _, body := bd.approval(t, "POST", res.ApprovalID, `{"decision":"approve"}`)
	if code != http.StatusConflict || !strings.Contains(body, "the definition changed; ask again") {
		t.Errorf("approve after the definition changed = %d %s; want 409 the definition changed; ask again", code, body)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the call ran on a definition its approver never saw")
	}
}

// TestTrustedDelta: a reload to a commit whose first parent is the served
// one judges the folders it changed alone, and serves what judging every
// tool gives (daemon.CheckTrust on the same commit, as validate does): a
// signed change, an unsigned one, a signed merge of unsigned work, a
// removal. A push of two commits in which a tool is changed and changed
// back by an unsigned commit judges every tool: that tool is untrusted
// although the served and the new trees hold the same folder; so does a
// push whose first parent is a branch main was merged into, and a sync
// that brings a new policy. A push of three commits judges the two tools
// they changed, each by the newest commit that changed it. A restart then
// verifies nothing again and serves the same.
func TestTrustedDelta(t *testing.T) {
	t.Parallel()
	r, alice, mallory, signers := aliceAndMallory(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		r.write("tools/"+n+"/TOOL.hdlp", versionTool(n, n+"1"))
	}
	c0 := r.commitSigned(nil, alice.args(), "four tools")
	r.pushTo("main")
	state := t.TempDir()
	args := []string{"--repo", r.url(), "--schedule", "off", "--state", state, "--trusted-signers", signers}
	d := startDaemon(t, nil, args...)
	d.waitRev(t, c0)

	// judged returns the "since" of the signature check of rev: the
	// served revision it judged from, "" when it judged every tool.
	judged := func(d *liveDaemon, rev string) (since string, tools int) {
		t.Helper()
		for line := range strings.Lines(d.logs.String()) {
			var l struct {
				Msg, Revision, Since string
				Tools                int
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "signatures checked" && l.Revision == rev {
				since, tools = l.Since, l.Tools
			}
		}
		return since, tools
	}
	// check compares what d serves with every tool judged at the work
	// tree's commit; signedIn names the commit each trusted tool must
	// cite.
	check := func(step string, d *liveDaemon, signedIn map[string]string) {
		t.Helper()
		all := getTools(t, func(p string) (int, []byte) { return d.request(t, "GET", p, "") }, true)
		var names []string
		for n := range all {
			names = append(names, n)
		}
		head, problems, err := daemon.CheckTrust(signers, "", filepath.Join(r.work, "tools"), names)
		if err != nil {
			t.Fatalf("%s: CheckTrust: %v", step, err)
		}
		want := map[string]string{}
		for _, p := range problems {
			want[p.Tool] = p.Reason
		}
		for n, v := range all {
			reason, untrusted := want[n]
			switch {
			case untrusted && (v.Status != catalog.Untrusted || v.Reason != reason || v.Signed != nil):
				t.Errorf("%s at %s: %s is %s %q signed %+v; judging every tool: untrusted %q", step, head[:7], n, v.Status, v.Reason, v.Signed, reason)
			case !untrusted && (v.Status != catalog.Enabled || v.Signed == nil || v.Signed.Commit != signedIn[n]):
				t.Errorf("%s at %s: %s is %s %q signed %+v; judging every tool: trusted, signed in %s", step, head[:7], n, v.Status, v.Reason, v.Signed, signedIn[n])
			}
		}
		if len(all) != len(signedIn)+len(want) {
			t.Errorf("%s: %d tools served, want %d trusted and %d untrusted", step, len(all), len(signedIn), len(want))
		}
	}
	check("start", d, map[string]string{"a": c0, "b": c0, "c": c0, "d": c0})
	sync := func(step, rev, since string, tools int) {
		t.Helper()
		d.syncNow(t)
		d.waitRev(t, rev)
		if s, n := judged(d, rev); s != since || n != tools {
			t.Errorf("%s: the signature check of %s judged %d tools since %q; want %d since %q", step, rev[:7], n, s, tools, since)
		}
	}

	r.write("tools/a/TOOL.hdlp", versionTool("a", "a2"))
	c1 := r.commitSigned(nil, alice.args(), "a signed")
	r.pushTo("main")
	sync("a signed", c1, c0, 1)
	check("a signed", d, map[string]string{"a": c1, "b": c0, "c": c0, "d": c0})

	r.write("tools/b/TOOL.hdlp", versionTool("b", "b2"))
	c2 := r.commitSigned(nil, nil, "b unsigned")
	r.pushTo("main")
	sync("b unsigned", c2, c1, 1)
	check("b unsigned", d, map[string]string{"a": c1, "c": c0, "d": c0})

	r.write("tools/c/TOOL.hdlp", versionTool("c", "c2"))
	r.commitSigned(nil, mallory.args(), "c changed by mallory")
	r.write("tools/c/TOOL.hdlp", versionTool("c", "c1"))
	c4 := r.commitSigned(nil, nil, "c back, unsigned")
	r.pushTo("main")
	sync("c changed and back", c4, "", 4)
	check("c changed and back", d, map[string]string{"a": c1, "d": c0})

	r.run(r.work, "checkout", "--quiet", "-b", "feature")
	r.write("tools/d/TOOL.hdlp", versionTool("d", "d2"))
	r.commitSigned(nil, nil, "d on a branch, unsigned")
	r.run(r.work, "checkout", "--quiet", "main")
	r.gitWith(nil, append(alice.args(), "merge", "--quiet", "--no-ff", "-S", "-m", "merge feature", "feature")...)
	c5 := r.run(r.work, "rev-parse", "HEAD")
	r.pushTo("main")
	sync("signed merge", c5, c4, 1)
	check("signed merge", d, map[string]string{"a": c1, "d": c5})

	r.remove("tools/a/TOOL.hdlp")
	c6 := r.commitSigned(nil, alice.args(), "a removed")
	r.pushTo("main")
	sync("a removed", c6, c5, 0)
	check("a removed", d, map[string]string{"d": c5})

	// The operator trusts mallory, and mallory's change of c arrives in
	// the same sync: a new policy judges every tool.
	os.WriteFile(signers, []byte(alice.line+"\n"+mallory.line+"\n"), 0o644)
	r.write("tools/c/TOOL.hdlp", versionTool("c", "c3"))
	cM := r.commitSigned(nil, mallory.args(), "c by mallory")
	r.pushTo("main")
	sync("a new policy", cM, "", 3)
	check("a new policy", d, map[string]string{"c": cM, "d": c5})

	// Main merged into a branch from before d's change, by an unsigned
	// merge, pushed as main: a fast-forward whose first parent is not the
	// served commit. Against that parent the merge changed d, so d's last
	// change is the unsigned merge, although the served tree and the new
	// one hold the same d.
	r.run(r.work, "checkout", "--quiet", "-b", "side", c4)
	r.write("tools/b/TOOL.hdlp", versionTool("b", "b3"))
	c7 := r.commitSigned(nil, alice.args(), "b on a side branch")
	r.gitWith(nil, "merge", "--quiet", "--no-ff", "--no-gpg-sign", "-m", "merge main into side", "main")
	c8 := r.pushTo("main")
	sync("main merged into a side branch", c8, "", 3)
	check("main merged into a side branch", d, map[string]string{"b": c7})

	// Three commits in one push: b changed unsigned and then signed by
	// alice, d changed by mallory (trusted now). Only b and d are judged,
	// each by the newest commit that changed it.
	r.write("tools/b/TOOL.hdlp", versionTool("b", "b4"))
	r.commitSigned(nil, nil, "b unsigned")
	r.write("tools/b/TOOL.hdlp", versionTool("b", "b5"))
	cB := r.commitSigned(nil, alice.args(), "b signed")
	r.write("tools/d/TOOL.hdlp", versionTool("d", "d4"))
	cD := r.commitSigned(nil, mallory.args(), "d by mallory")
	r.pushTo("main")
	sync("three commits", cD, c8, 2)
	check("three commits", d, map[string]string{"b": cB, "d": cD})

	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	if logs := d.logs.String(); strings.Contains(logs, "no tool is trusted") {
		t.Errorf("a judge failed:\n%s", logs)
	}
	d2 := startDaemon(t, nil, args...)
	d2.waitRev(t, cD)
	check("restarted", d2, map[string]string{"b": cB, "d": cD})
	verifiedNothing(t, d2)
}
