package trust_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/trust"
)

func need(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s is needed for this test: %v", c, err)
		}
	}
}

func run(t *testing.T, env []string, stdin string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// sshKey makes an ed25519 key pair and returns the private key's path and
// the public key as "keytype base64".
func sshKey(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	key := filepath.Join(dir, name)
	run(t, nil, "", "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key)
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(pub))
	return key, f[0] + " " + f[1]
}

// sshSign signs payload as git does with gpg.format=ssh.
func sshSign(t *testing.T, key string, payload []byte) string {
	t.Helper()
	msg := filepath.Join(t.TempDir(), "msg")
	if err := os.WriteFile(msg, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, nil, "", "ssh-keygen", "-Y", "sign", "-n", "git", "-f", key, msg)
	sig, err := os.ReadFile(msg + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return string(sig)
}

func policy(t *testing.T, signers string) *trust.Policy {
	t.Helper()
	f := filepath.Join(t.TempDir(), "allowed_signers")
	if err := os.WriteFile(f, []byte(signers), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := trust.Load(f, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerifySSH(t *testing.T) {
	need(t, "ssh-keygen")
	dir := t.TempDir()
	alice, alicePub := sshKey(t, dir, "alice")
	db, dbPub := sshKey(t, dir, "db")
	old, oldPub := sshKey(t, dir, "old")
	mallory, _ := sshKey(t, dir, "mallory")
	p := policy(t, "# the operator's signers\n"+
		"alice@example.com namespaces=\"git\" "+alicePub+" alice's laptop\n"+
		"db@example.com "+dbPub+" "+trust.PathsOption+"tools/db-*,tools/pg-*\n"+
		"old@example.com namespaces=\"git\",valid-after=\"20200101Z\",valid-before=\"20250101Z\" "+oldPub+"\n")
	payload := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor A <a@x> 1760000000 +0000\ncommitter A <a@x> 1760000000 +0000\n\nadd a tool\n")
	when := time.Unix(1760000000, 0) // 2025-10-09: after old's key expired
	cases := []struct {
		name      string
		c         trust.Commit
		dir       string
		principal string
		problem   string
	}{
		{"allowed", trust.Commit{When: when, Payload: payload, Signature: sshSign(t, alice, payload)}, "tools/x", "alice@example.com", ""},
		{"unsigned", trust.Commit{When: when, Payload: payload}, "tools/x", "", "by an unsigned commit"},
		{"foreign key", trust.Commit{When: when, Payload: payload, Signature: sshSign(t, mallory, payload)}, "tools/x", "", "signed by a key not in trusted_signers (SHA256:"},
		{"tampered", trust.Commit{When: when, Payload: append([]byte("x"), payload...), Signature: sshSign(t, alice, payload)}, "tools/x", "", "does not verify"},
		{"expired", trust.Commit{When: when, Payload: payload, Signature: sshSign(t, old, payload)}, "tools/x", "", "but the key expired at 2025-01-01T00:00:00Z (valid-before)"},
		{"not yet valid", trust.Commit{When: time.Date(2019, 5, 1, 0, 0, 0, 0, time.UTC), Payload: payload, Signature: sshSign(t, old, payload)}, "tools/x", "", "before the key is valid (valid-after 2020-01-01T00:00:00Z)"},
		{"within validity", trust.Commit{When: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), Payload: payload, Signature: sshSign(t, old, payload)}, "tools/x", "old@example.com", ""},
		{"path allowed", trust.Commit{When: when, Payload: payload, Signature: sshSign(t, db, payload)}, "tools/db-backup", "db@example.com", ""},
		{"path outside glob", trust.Commit{When: when, Payload: payload, Signature: sshSign(t, db, payload)}, "tools/shell-exec", "", "whose key may change only tools/db-*, tools/pg-*"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := p.Verify(tc.c)
			ok, why := v.Allows(tc.dir)
			if tc.problem == "" {
				if !ok || v.Signer == nil || v.Signer.Principal != tc.principal || v.Signer.Method != trust.SSH || !strings.HasPrefix(v.Signer.Fingerprint, "SHA256:") {
					t.Fatalf("want trusted by %s, got %+v %q", tc.principal, v.Signer, why)
				}
				return
			}
			if ok || !strings.Contains(why, tc.problem) {
				t.Fatalf("want untrusted with %q, got ok=%v %q", tc.problem, ok, why)
			}
		})
	}
}

func TestVerifySSHNamespace(t *testing.T) {
	need(t, "ssh-keygen")
	dir := t.TempDir()
	k, pub := sshKey(t, dir, "k")
	p := policy(t, "file@example.com namespaces=\"file\" "+pub+"\n")
	payload := []byte("commit")
	v := p.Verify(trust.Commit{When: time.Now(), Payload: payload, Signature: sshSign(t, k, payload)})
	if v.Signer != nil || !strings.Contains(v.Problem, `exclude "git"`) {
		t.Fatalf("got %+v", v)
	}
}

func TestParseAllowedSignersErrors(t *testing.T) {
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOyJ3c7Uxn6Uqqw8mxqQnl4Fe0H9bGvAKY3R7H1fVx6D"
	cases := map[string]string{
		"a@x cert-authority " + key:            "cert-authority",
		"a@x valid-before=\"2025\" " + key:     "want YYYYMMDD",
		"a@x frobnicate=\"1\" " + key:          "unknown",
		"a@x":                                  "not followed by a key",
		"a@x " + key + " toolagent-paths=[":    "glob",
		"a@x ssh-ed25519 notbase64!":           "key of a@x",
		"a@x " + key + " " + trust.PathsOption: "names no glob",
	}
	for line, want := range cases {
		_, err := trust.ParseAllowedSigners("signers", []byte("# ok\n\n"+line+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "signers:3:") {
			t.Errorf("%q: want an error at signers:3 with %q, got %v", line, want, err)
		}
	}
	keys, err := trust.ParseAllowedSigners("signers", []byte(`"a@x,b@y" namespaces="git,file" `+key+" comment\n"))
	if err != nil || len(keys) != 1 {
		t.Fatalf("quoted principals: %v", err)
	}
}

func TestVerifyOpenPGP(t *testing.T) {
	need(t, "gpg")
	home := t.TempDir()
	env := []string{"GNUPGHOME=" + home}
	t.Cleanup(func() { exec.Command("gpgconf", "--homedir", home, "--kill", "all").Run() })
	run(t, env, "", "gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Pat <pat@example.com>", "ed25519", "sign", "2d")
	keyring := filepath.Join(t.TempDir(), "keyring.asc")
	if err := os.WriteFile(keyring, []byte(run(t, env, "", "gpg", "--batch", "--armor", "--export", "pat@example.com")), 0o600); err != nil {
		t.Fatal(err)
	}
	payload := []byte("tree x\n\nmessage\n")
	msg := filepath.Join(t.TempDir(), "msg")
	os.WriteFile(msg, payload, 0o600)
	sig := run(t, env, "", "gpg", "--batch", "--armor", "--detach-sign", "--output", "-", msg)

	p, err := trust.Load("", keyring)
	if err != nil {
		t.Fatal(err)
	}
	v := p.Verify(trust.Commit{When: time.Now(), Payload: payload, Signature: sig})
	if v.Signer == nil || v.Signer.Principal != "pat@example.com" || v.Signer.Method != trust.OpenPGP || len(v.Signer.Fingerprint) != 40 {
		t.Fatalf("want signed by pat, got %+v", v)
	}
	// git stamps the committer time before gpg signs: a signature a few
	// seconds younger than its commit is the normal case, not an expired one.
	if v := p.Verify(trust.Commit{When: time.Now().Add(-5 * time.Second), Payload: payload, Signature: sig}); v.Signer == nil {
		t.Fatalf("a commit stamped just before its signature: want signed by pat, got %+v", v)
	}
	if v := p.Verify(trust.Commit{When: time.Now().Add(72 * time.Hour), Payload: payload, Signature: sig}); v.Signer != nil || !strings.Contains(v.Problem, "expired") {
		t.Fatalf("a commit after the key's expiry: want expired, got %+v", v)
	}

	// Another keyring: the signer is unknown.
	other := t.TempDir()
	t.Cleanup(func() { exec.Command("gpgconf", "--homedir", other, "--kill", "all").Run() })
	run(t, []string{"GNUPGHOME=" + other}, "", "gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Eve <eve@example.com>", "ed25519", "sign", "never")
	ring2 := filepath.Join(t.TempDir(), "keyring.asc")
	os.WriteFile(ring2, []byte(run(t, []string{"GNUPGHOME=" + other}, "", "gpg", "--batch", "--armor", "--export")), 0o600)
	p2, err := trust.Load("", ring2)
	if err != nil {
		t.Fatal(err)
	}
	if v := p2.Verify(trust.Commit{When: time.Now(), Payload: payload, Signature: sig}); v.Signer != nil || !strings.Contains(v.Problem, "not in trusted_keyring") {
		t.Fatalf("foreign OpenPGP key: got %+v", v)
	}
	// An SSH-only policy has no keyring.
	need(t, "ssh-keygen")
	_, pub := sshKey(t, t.TempDir(), "a")
	if v := policy(t, "a@x "+pub+"\n").Verify(trust.Commit{When: time.Now(), Payload: payload, Signature: sig}); !strings.Contains(v.Problem, "no trusted_keyring") {
		t.Fatalf("got %+v", v)
	}
}

func TestCachePersists(t *testing.T) {
	f := filepath.Join(t.TempDir(), "trust.json")
	c, err := trust.OpenCache(f)
	if err != nil {
		t.Fatal(err)
	}
	c.SetChanges("h1", map[string]string{"x": "c1", "y": "c2"})
	c.PutVerdict("p1", "c1", trust.Verdict{Signer: &trust.Signer{Method: trust.SSH, Principal: "a"}})
	c.PutVerdict("p1", "c2", trust.Verdict{Problem: "by an unsigned commit"})
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	c2, err := trust.OpenCache(f)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := c2.Verdict("p1", "c1"); !ok || v.Signer.Principal != "a" {
		t.Fatalf("verdict not kept: %+v %v", v, ok)
	}
	if _, ok := c2.Verdict("p2", "c1"); ok {
		t.Fatal("a verdict of another policy was used")
	}
	if head, ch := c2.Changes(); head != "h1" || ch["y"] != "c2" {
		t.Fatalf("changes not kept: %s %v", head, ch)
	}
	os.WriteFile(f, []byte("{not json"), 0o600)
	if c3, err := trust.OpenCache(f); err == nil || c3 == nil {
		t.Fatalf("a damaged file: want an error and an empty cache, got %v", err)
	}
}

// TestCacheMoveChanges: the record of each folder's last change moves to
// a child commit by the folders it changed, keeps the others, drops the
// verdicts no folder cites any more, survives a restart, and does not
// move from a head it is not of.
func TestCacheMoveChanges(t *testing.T) {
	f := filepath.Join(t.TempDir(), "trust.json")
	c, err := trust.OpenCache(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.MoveChanges("", "h1", map[string]string{"x": "h1"}) {
		t.Fatal("MoveChanges moved a cache with no head")
	}
	c.SetChanges("h1", map[string]string{"x": "c1", "y": "c2", "w": "c2"})
	for _, h := range []string{"c1", "c2"} {
		c.PutVerdict("p1", h, trust.Verdict{Problem: "by an unsigned commit"})
	}
	if c.MoveChanges("h0", "h2", map[string]string{"x": "h2"}) {
		t.Fatal("MoveChanges moved from h0 a record of h1")
	}
	if c.Head() != "h1" {
		t.Fatalf("head %s after a refused move, want h1", c.Head())
	}
	if !c.MoveChanges("h1", "h2", map[string]string{"x": "h2", "z": "h2", "w": "h2"}) {
		t.Fatal("MoveChanges refused to move from h1")
	}
	// c1 is cited by no folder now, c2 still by y.
	if _, ok := c.Verdict("p1", "c1"); ok {
		t.Error("the verdict of c1, which no folder cites any more, is kept")
	}
	if _, ok := c.Verdict("p1", "c2"); !ok {
		t.Error("the verdict of c2, which y still cites, was dropped")
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	c2, err := trust.OpenCache(f)
	if err != nil {
		t.Fatal(err)
	}
	head, ch := c2.Changes()
	if want := map[string]string{"x": "h2", "y": "c2", "z": "h2", "w": "h2"}; head != "h2" || !maps.Equal(ch, want) {
		t.Fatalf("after the move and a restart: %s %v; want h2 %v", head, ch, want)
	}
	if h, ok := c2.Change("y"); !ok || h != "c2" {
		t.Fatalf("Change(y) = %s %v", h, ok)
	}
	if _, ok := c2.Change("gone"); ok {
		t.Fatal("Change of a folder never recorded")
	}
}

// BenchmarkMoveChanges10k: one folder's change moved into a record of
// 10,000 folders, as a reload of one signed commit does.
func BenchmarkMoveChanges10k(b *testing.B) {
	c, err := trust.OpenCache("")
	if err != nil {
		b.Fatal(err)
	}
	changes := make(map[string]string, 10000)
	for i := range 10000 {
		changes[fmt.Sprintf("tool-%05d", i)] = "c0"
	}
	c.SetChanges("h0", changes)
	head := "h0"
	for i := 0; b.Loop(); i++ {
		next := fmt.Sprintf("h%d", i+1)
		if !c.MoveChanges(head, next, map[string]string{fmt.Sprintf("tool-%05d", i%10000): next}) {
			b.Fatal("refused")
		}
		head = next
	}
}
