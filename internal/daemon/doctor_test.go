package daemon

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
	"github.com/toolagent/toolagent/internal/settings"
)

// doctorConfig is the default configuration on a state directory of the
// test's own, a local tools tree and a free port.
func doctorConfig(t *testing.T) Config {
	t.Helper()
	var cfg Config
	settings.New(&cfg, settings.Options{}) // the defaults
	cfg.Tools, cfg.State, cfg.Sandbox = t.TempDir(), filepath.Join(t.TempDir(), "state"), host.SandboxOff
	cfg.Listen = freeAddr(t)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// freeAddr is a loopback address no one listens on (the kernel's pick,
// let go).
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// checkOf is the check named name; it fails the test when there is none.
func checkOf(t *testing.T, cs []Check, name string) Check {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, cs)
	return Check{}
}

// TestDoctorTokensFile: a tokens file other users can read fails with
// the chmod that fixes it; a broken line fails naming it; mode 0600 and
// good lines pass, and the output never holds a secret.
func TestDoctorTokensFile(t *testing.T) {
	cfg := doctorConfig(t)
	cfg.TokensFile = filepath.Join(t.TempDir(), "tokens")
	const secret = "s3cr3t-value-never-printed"
	if err := os.WriteFile(cfg.TokensFile, []byte("alice:call:"+secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := Doctor(t.Context(), cfg)
	c := checkOf(t, cs, "tokens")
	if c.Level != CheckFail || !strings.Contains(c.Detail, "0644") || c.Fix != "chmod 600 "+cfg.TokensFile {
		t.Errorf("tokens file 0644: %+v; want FAIL with fix chmod 600 FILE", c)
	}
	var out bytes.Buffer
	if n := WriteChecks(&out, cs); n < 1 || !strings.Contains(out.String(), "FAIL  tokens") || !strings.Contains(out.String(), "fix: chmod 600 "+cfg.TokensFile) {
		t.Errorf("WriteChecks = %d failed:\n%s", n, out.String())
	}

	if err := os.Chmod(cfg.TokensFile, 0o600); err != nil {
		t.Fatal(err)
	}
	cs = Doctor(t.Context(), cfg)
	if c := checkOf(t, cs, "tokens"); c.Level != CheckOK || !strings.Contains(c.Detail, "1 tokens") {
		t.Errorf("tokens file 0600: %+v; want OK with 1 token", c)
	}
	if err := os.WriteFile(cfg.TokensFile, []byte("alice:call:"+secret+"\nbob-without-a-role\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cs = Doctor(t.Context(), cfg)
	if c := checkOf(t, cs, "tokens"); c.Level != CheckFail || !strings.Contains(c.Detail, cfg.TokensFile) {
		t.Errorf("a bad line: %+v; want FAIL naming the file", c)
	}
	out.Reset()
	WriteChecks(&out, cs)
	if strings.Contains(out.String(), secret) {
		t.Errorf("doctor printed a token's secret:\n%s", out.String())
	}

	cfg.TokensFile, cfg.Listen = "", "0.0.0.0:0"
	if c := checkOf(t, Doctor(t.Context(), cfg), "tokens"); c.Level != CheckFail || !strings.Contains(c.Detail, "refuses to start") {
		t.Errorf("no tokens on every address: %+v; want FAIL", c)
	}
}

// TestDoctorListenInUse: a running daemon holds the listen address; the
// check fails and names its pid (daemon.json), and passes once it is
// gone.
func TestDoctorListenInUse(t *testing.T) {
	cfg := doctorConfig(t)
	serve := cfg
	serve.Listen = "127.0.0.1:0"
	d, err := New(serve)
	if err != nil {
		t.Fatal(err)
	}
	info, err := operator.ReadInfo(cfg.State)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = strings.TrimPrefix(info.URL, "http://")
	c := checkOf(t, Doctor(t.Context(), cfg), "listen")
	if c.Level != CheckFail || !strings.Contains(c.Detail, "address already in use") || !strings.Contains(c.Fix, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("listen on the daemon's address: %+v; want FAIL naming pid %d", c, os.Getpid())
	}
	d.Close()
	if c := checkOf(t, Doctor(t.Context(), cfg), "listen"); c.Level != CheckOK {
		t.Errorf("listen once the daemon closed: %+v; want OK", c)
	}
}

// TestDoctorStateDir: a missing state directory is made at start (OK), a
// directory others may enter is a warning with the chmod, a file fails.
func TestDoctorStateDir(t *testing.T) {
	cfg := doctorConfig(t)
	if c := checkOf(t, Doctor(t.Context(), cfg), "state"); c.Level != CheckOK || !strings.Contains(c.Detail, "makes it") {
		t.Errorf("missing state: %+v; want OK, made at start", c)
	}
	if err := os.Mkdir(cfg.State, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg.State, 0o755); err != nil { // past the umask
		t.Fatal(err)
	}
	if c := checkOf(t, Doctor(t.Context(), cfg), "state"); c.Level != CheckWarn || c.Fix != "chmod 700 "+cfg.State+" (the daemon does at start)" {
		t.Errorf("state 0755: %+v; want WARN with chmod 700", c)
	}
	if err := os.Chmod(cfg.State, 0o700); err != nil {
		t.Fatal(err)
	}
	if c := checkOf(t, Doctor(t.Context(), cfg), "state"); c.Level != CheckOK {
		t.Errorf("state 0700: %+v; want OK", c)
	}
	if os.Geteuid() == 0 { // another user's state directory: root may use it, but says to check as its owner
		if err := os.Chown(cfg.State, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if c := checkOf(t, Doctor(t.Context(), cfg), "state"); c.Level != CheckWarn || !strings.Contains(c.Fix, "runuser -u ") {
			t.Errorf("state of uid 65534, as root: %+v; want WARN saying to run as its owner", c)
		}
	}
	if err := os.Remove(cfg.State); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.State, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if c := checkOf(t, Doctor(t.Context(), cfg), "state"); c.Level != CheckFail {
		t.Errorf("state is a file: %+v; want FAIL", c)
	}
}

// TestDoctorSource: a git source answers with the branch's head (as git
// itself says it); a branch it lacks fails naming the ones it has; a
// missing tools directory fails.
func TestDoctorSource(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	src := t.TempDir()
	gitc := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", src, "-c", "user.name=t", "-c", "user.email=t@example.org"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gitc("init", "-q", "-b", "trunk")
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitc("add", "README")
	gitc("commit", "-q", "-m", "first")
	head := gitc("rev-parse", "HEAD")

	cfg := doctorConfig(t)
	cfg.Tools, cfg.Repo, cfg.Branch = "", "file://"+src, "trunk"
	if c := checkOf(t, Doctor(t.Context(), cfg), "source"); c.Level != CheckOK || !strings.Contains(c.Detail, head[:12]) {
		t.Errorf("branch trunk: %+v; want OK at %s", c, head[:12])
	}
	cfg.Branch = "main"
	if c := checkOf(t, Doctor(t.Context(), cfg), "source"); c.Level != CheckFail || !strings.Contains(c.Detail, "it has branches trunk") || !strings.Contains(c.Fix, "branch") {
		t.Errorf("branch main: %+v; want FAIL naming trunk", c)
	}
	if _, err := os.Stat(host.RepoDir(cfg.State)); !os.IsNotExist(err) {
		t.Errorf("doctor made %s (%v); it clones nothing", host.RepoDir(cfg.State), err)
	}

	// A server that does not answer: FAIL, and the URL's password is not
	// in what doctor prints.
	cfg.Repo = "http://user:pw-never-printed@" + freeAddr(t) + "/tools.git"
	c := checkOf(t, Doctor(t.Context(), cfg), "source")
	if c.Level != CheckFail || !strings.Contains(c.Fix, "credentials") || strings.Contains(c.Detail+c.Fix, "pw-never-printed") {
		t.Errorf("unreachable repo: %+v; want FAIL without the password", c)
	}

	cfg.Repo, cfg.Tools = "", filepath.Join(t.TempDir(), "nothing-here")
	if c := checkOf(t, Doctor(t.Context(), cfg), "source"); c.Level != CheckFail {
		t.Errorf("missing tools directory: %+v; want FAIL", c)
	}
}

// TestDoctorKernel: the kernel's user-namespace switches, read from a
// /proc/sys of the test's own, each give a warning with the sysctl.
func TestDoctorKernel(t *testing.T) {
	for _, tc := range []struct{ file, value, want string }{
		{"user/max_user_namespaces", "0", "sysctl -w user.max_user_namespaces="},
		{"kernel/unprivileged_userns_clone", "0", "sysctl -w kernel.unprivileged_userns_clone=1"},
		{"kernel/apparmor_restrict_unprivileged_userns", "1", "AppArmor profile"},
		{"user/max_user_namespaces", "15000", ""},
	} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(tc.file)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c := doctorHost{procSys: dir}.userns()
		if tc.want == "" {
			if c.Level != CheckOK {
				t.Errorf("%s=%s: %+v; want OK", tc.file, tc.value, c)
			}
		} else if c.Level != CheckWarn || !strings.Contains(c.Fix, tc.want) {
			t.Errorf("%s=%s: %+v; want WARN with %q", tc.file, tc.value, c, tc.want)
		}
	}
}

// TestDoctorHugePages: the kernel's transparent huge pages setting in
// effect (the bracketed one) decides the line: always is OK (with the
// GC guide's max_ptes_none advice when it is not 0), madvise and never
// warn with the commands that change it, no such setting is OK.
func TestDoctorHugePages(t *testing.T) {
	for _, tc := range []struct {
		enabled, ptes string
		off           bool
		level, want   string
	}{
		{"[always] madvise never", "0", false, CheckOK, "always: the daemon's heap gets huge pages"},
		{"[always] madvise never", "511", false, CheckOK, "max_ptes_none is 511"},
		{"always [madvise] never", "511", false, CheckOK, "madvise: the daemon asks for huge pages for the first 96 MiB of its heap while it starts (TOOLAGENT_HUGE_HEAP=off"},
		{"always [madvise] never", "511", true, CheckWarn, "madvise: the daemon's heap gets 4 KiB pages"},
		{"always madvise [never]", "", false, CheckWarn, "never:"},
		{"", "", false, CheckOK, "no transparent huge pages"},
	} {
		dir := t.TempDir()
		if tc.enabled != "" {
			if err := os.MkdirAll(filepath.Join(dir, "khugepaged"), 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "enabled"), []byte(tc.enabled+"\n"), 0o644)
			if tc.ptes != "" {
				os.WriteFile(filepath.Join(dir, "khugepaged", "max_ptes_none"), []byte(tc.ptes+"\n"), 0o644)
			}
		}
		c := doctorHost{thpDir: dir, hugeHeapOff: tc.off}.hugePages()
		if c.Level != tc.level || !strings.Contains(c.Detail, tc.want) {
			t.Errorf("enabled %q: %+v; want %s with %q", tc.enabled, c, tc.level, tc.want)
		}
		if c.Level == CheckWarn && !strings.Contains(c.Fix, "echo always > "+filepath.Join(dir, "enabled")) {
			t.Errorf("enabled %q: fix %q does not say how to set it", tc.enabled, c.Fix)
		}
		if tc.ptes == "0" && strings.Contains(c.Detail, "max_ptes_none") {
			t.Errorf("max_ptes_none 0: %q; want no advice", c.Detail)
		}
	}
}

// TestDoctorSandbox: with the sandbox on, the line is the sandbox's own
// probe: OK with its mechanism where it runs, or FAIL with its reason;
// a bubblewrap program that is not there fails when it is the mechanism.
func TestDoctorSandbox(t *testing.T) {
	cfg := doctorConfig(t)
	cfg.Sandbox = host.SandboxOn
	cs := Doctor(t.Context(), cfg)
	sb := checkOf(t, cs, "sandbox")
	if sb.Level == CheckOK && !strings.HasPrefix(sb.Detail, "landlock") && !strings.HasPrefix(sb.Detail, "bubblewrap") {
		t.Errorf("sandbox OK without its mechanism: %+v", sb)
	}
	if sb.Level == CheckFail && sb.Detail == "" {
		t.Errorf("sandbox FAIL without a reason: %+v", sb)
	}
	t.Logf("this host: %+v", sb)

	cfg.SandboxMechanism, cfg.SandboxBwrap = "bubblewrap", filepath.Join(t.TempDir(), "no-bwrap")
	cs = Doctor(t.Context(), cfg)
	if c := checkOf(t, cs, "sandbox"); c.Level != CheckFail || !strings.Contains(c.Detail, "bubblewrap") {
		t.Errorf("sandbox with a missing bwrap: %+v; want FAIL naming bubblewrap", c)
	}
	if c := checkOf(t, cs, "bubblewrap"); c.Level != CheckFail || c.Fix != "apt-get install bubblewrap" {
		t.Errorf("bubblewrap missing: %+v; want FAIL with apt-get install bubblewrap", c)
	}
}

// TestDoctorStorePostgres: a shared store that answers is migrated and
// says its schema version; one that does not fails, without the
// password of its URL.
func TestDoctorStorePostgres(t *testing.T) {
	url := pgtest.URL(t)
	cfg := doctorConfig(t)
	cfg.Store, cfg.StoreURLEnv = "postgres", "DOCTOR_DB"
	cfg.Getenv = func(k string) string {
		if k == "DOCTOR_DB" {
			return url
		}
		return ""
	}
	if c := checkOf(t, Doctor(t.Context(), cfg), "store"); c.Level != CheckOK || !strings.Contains(c.Detail, "schema version") {
		t.Errorf("store postgres: %+v; want OK with the schema version", c)
	}
	url = "postgres://toolagent:pw-never-printed@" + freeAddr(t) + "/none?connect_timeout=5"
	c := checkOf(t, Doctor(t.Context(), cfg), "store")
	if c.Level != CheckFail || strings.Contains(c.Detail+c.Fix, "pw-never-printed") {
		t.Errorf("store postgres, no server: %+v; want FAIL without the password", c)
	}
}
