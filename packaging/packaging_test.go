// Package packaging holds the Debian package's files (nfpm.yaml, the
// systemd unit, the config, the maintainer scripts) that
// scripts/release.sh builds releases with, and the tests of them and of
// the release scripts.
package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/settings"
)

// versionRE is what a release's version looks like (scripts/version.sh).
var versionRE = regexp.MustCompile(`^v\d+\.\d+\.\d+(-\d+-g[0-9a-f]{12})?(-dirty)?$`)

// script runs a script of scripts/ in dir and returns its output.
func script(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", "scripts", name))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(abs, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %v in %s: %v\n%s%s", name, args, dir, err, out, stderr)
	}
	return strings.TrimSpace(string(out))
}

// TestVersionScript: scripts/version.sh needs no tag (v0.0.0-N-gSHA with
// N the commits), names a tag at it (vX.Y.Z) and after it
// (vX.Y.Z-N-gSHA), ignores tags that are not versions and says -dirty.
func TestVersionScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "tag.gpgSign=false", "-c", "commit.gpgSign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	commit := func(msg string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(msg), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "f")
		git("commit", "-q", "-m", msg)
	}
	git("init", "-q")
	commit("one")
	commit("two")
	git("tag", "nightly") // not a version: ignored
	short := git("rev-parse", "--short=12", "HEAD")
	if got, want := script(t, dir, "version.sh"), "v0.0.0-2-g"+short; got != want {
		t.Errorf("no tag: %q; want %q", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := script(t, dir, "version.sh"), "v0.0.0-2-g"+short+"-dirty"; got != want {
		t.Errorf("no tag, changed: %q; want %q", got, want)
	}
	git("checkout", "-q", "f")
	git("tag", "-a", "-m", "v1.2.3", "v1.2.3")
	if got := script(t, dir, "version.sh"); got != "v1.2.3" {
		t.Errorf("at tag v1.2.3: %q", got)
	}
	commit("three")
	short = git("rev-parse", "--short=12", "HEAD")
	got := script(t, dir, "version.sh")
	if want := "v1.2.3-1-g" + short; got != want {
		t.Errorf("one after v1.2.3: %q; want %q", got, want)
	}
	if !versionRE.MatchString(got) {
		t.Errorf("%q does not look like a release version", got)
	}
	if got, want := script(t, dir, "version.sh", "--ldflags"), "-X github.com/toolagent/toolagent/internal/daemon.version=v1.2.3-1-g"+short; got != want {
		t.Errorf("--ldflags: %q; want %q", got, want)
	}
}

// TestReleaseVersion: a binary built with scripts/version.sh's -ldflags,
// as scripts/release.sh builds it, prints that version (this host's
// architecture only, without -trimpath, to reuse the build cache;
// scripts/release-check.sh checks the release's own binaries).
func TestReleaseVersion(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").CombinedOutput(); err != nil {
		t.Skipf("not a git checkout (%v: %s): the version comes from git describe", err, out)
	}
	want := script(t, root, "version.sh")
	if !versionRE.MatchString(want) {
		t.Fatalf("version.sh = %q; want vX.Y.Z[-N-gSHA][-dirty]", want)
	}
	bin := filepath.Join(t.TempDir(), "toolagent")
	build := exec.Command("go", "build", "-ldflags", "-s -w "+script(t, root, "version.sh", "--ldflags"), "-o", bin, "./cmd/toolagent")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil || string(out) != "toolagent "+want+"\n" {
			t.Errorf("toolagent %s = %q, %v; want toolagent %s", arg, out, err, want)
		}
	}
}

// unitFields reads a systemd unit's Key=Value lines.
func unitFields(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unit := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			unit[k] = append(unit[k], v)
		}
	}
	return unit
}

// TestSystemdUnit: the package's unit runs `toolagent serve` from
// /usr/bin as user toolagent on the packaged config, which the daemon
// accepts; it keeps every hardening line of examples/toolagent.service
// but DynamicUser; and `systemd-analyze verify` passes when it is
// installed.
func TestSystemdUnit(t *testing.T) {
	const path = "toolagent.service"
	unit := unitFields(t, path)
	for k, want := range map[string]string{
		"User": "toolagent", "Group": "toolagent", "StateDirectory": "toolagent", "StateDirectoryMode": "0700",
		"ExecStart": "/usr/bin/toolagent serve --config /etc/toolagent/toolagent.yaml",
		"WantedBy":  "multi-user.target",
	} {
		if got := unit[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s=%v; want %s", path, k, got, want)
		}
	}
	example := unitFields(t, "../examples/toolagent.service")
	for _, k := range []string{"NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "ProtectKernelTunables",
		"ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock", "ProtectHostname", "RestrictSUIDSGID",
		"RestrictRealtime", "LockPersonality", "MemoryDenyWriteExecute", "RestrictAddressFamilies", "RestrictNamespaces",
		"SystemCallArchitectures", "SystemCallFilter", "UMask"} {
		if len(example[k]) == 0 {
			t.Errorf("examples/toolagent.service has no %s: the list here is stale", k)
		}
		if !slices.Equal(unit[k], example[k]) {
			t.Errorf("%s: %s=%v; want examples/toolagent.service's %v", path, k, unit[k], example[k])
		}
	}
	if len(unit["DynamicUser"]) > 0 || len(unit["PrivateUsers"]) > 0 {
		t.Errorf("%s: DynamicUser or PrivateUsers set: the package makes user toolagent, and bubblewrap needs its own user namespace", path)
	}

	// The packaged config loads as serve would load it, and puts the state
	// where StateDirectory makes it.
	var cfg daemon.Config
	ld := settings.New(&cfg, settings.Options{Removed: daemon.RemovedKeys, Hint: daemon.KeyHint})
	if err := ld.Apply("toolagent.yaml", func(string) string { return "" }); err != nil {
		t.Fatalf("toolagent.yaml: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("toolagent.yaml: %v", err)
	}
	if cfg.State != "/var/lib/toolagent" || cfg.Listen != "127.0.0.1:8765" {
		t.Errorf("toolagent.yaml: state %q listen %q; want /var/lib/toolagent (StateDirectory) on loopback", cfg.State, cfg.Listen)
	}
	known := map[string]bool{}
	for _, s := range settings.Of(reflect.TypeFor[daemon.Config]()) {
		known[s.Env] = true
	}
	for _, env := range unit["Environment"] {
		if k, _, _ := strings.Cut(env, "="); !known[k] {
			t.Errorf("%s: Environment=%s is not a setting", path, env)
		}
	}

	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd); the unit's fields were checked, not verified by systemd")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// verify wants the program to exist: any executable stands in.
	copyPath := filepath.Join(t.TempDir(), "toolagent.service")
	text := strings.Replace(string(data), "ExecStart=/usr/bin/toolagent", "ExecStart=/bin/true", 1)
	if err := os.WriteFile(copyPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sa, "verify", copyPath).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
}

// TestNfpmConfig: the package depends on bubblewrap and git, installs the
// binary, the unit and the config (as a conffile) from files
// scripts/release.sh stages, and its maintainer scripts parse.
func TestNfpmConfig(t *testing.T) {
	data, err := os.ReadFile("nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Depends  []string `yaml:"depends"`
		Contents []struct {
			Src, Dst, Type string
		} `yaml:"contents"`
		Scripts map[string]string `yaml:"scripts"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("nfpm.yaml: %v", err)
	}
	for _, p := range []string{"bubblewrap", "git"} {
		if !slices.Contains(cfg.Depends, p) {
			t.Errorf("nfpm.yaml: depends %v lacks %s", cfg.Depends, p)
		}
	}
	release, err := os.ReadFile("../scripts/release.sh")
	if err != nil {
		t.Fatal(err)
	}
	dsts := map[string]string{}
	for _, c := range cfg.Contents {
		dsts[c.Dst] = c.Type
		src := strings.TrimPrefix(c.Src, "./")
		if !strings.Contains(string(release), src) {
			t.Errorf("nfpm.yaml: %s is installed from %s, which scripts/release.sh does not stage", c.Dst, src)
		}
	}
	for dst, typ := range map[string]string{"/usr/bin/toolagent": "", "/lib/systemd/system/toolagent.service": "", "/etc/toolagent/toolagent.yaml": "config|noreplace"} {
		if got, ok := dsts[dst]; !ok || got != typ {
			t.Errorf("nfpm.yaml: %s installed %v, type %q; want type %q", dst, ok, got, typ)
		}
	}
	for _, s := range []string{"postinstall", "preremove", "postremove"} {
		f := strings.TrimPrefix(cfg.Scripts[s], "./")
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("nfpm.yaml: %s %q is not an executable file here (%v)", s, f, err)
			continue
		}
		if out, err := exec.Command("sh", "-n", f).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", f, err, out)
		}
	}
}

// TestReleaseScript runs scripts/release.sh for this host's architecture
// and scripts/release-check.sh on the result. It builds nfpm and a
// -trimpath binary (minutes), so it runs only with
// TOOLAGENT_TEST_RELEASE=1 (NFPM names an nfpm binary to skip building
// one).
func TestReleaseScript(t *testing.T) {
	if os.Getenv("TOOLAGENT_TEST_RELEASE") != "1" {
		t.Skip("set TOOLAGENT_TEST_RELEASE=1 to build a release (minutes: nfpm and a -trimpath binary)")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts", "release.sh"), out)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "RELEASE_ARCHES="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, b)
	}
	t.Log(script(t, root, "release-check.sh", out))
}
