package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/settings"
)

// TestSystemdUnit: examples/toolagent.service runs the daemon with a
// command line it accepts, sets only real settings in its environment,
// keeps the hardening the docs promise, and passes `systemd-analyze
// verify` (when systemd-analyze is installed).
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	const path = "../../examples/toolagent.service"
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
	for k, want := range map[string]string{
		"DynamicUser": "yes", "StateDirectory": "toolagent", "ProtectSystem": "strict", "NoNewPrivileges": "yes",
		"PrivateTmp": "yes", "ProtectHome": "yes",
		// bubblewrap's namespaces: a narrower list breaks every tool call.
		"RestrictNamespaces": "user mnt pid ipc uts net",
	} {
		if got := unit[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s=%v; want %s", path, k, got, want)
		}
	}
	if got := unit["PrivateUsers"]; len(got) > 0 && got[0] != "no" {
		t.Errorf("%s: PrivateUsers=%v breaks bubblewrap's user namespace", path, got)
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
	exe := strings.Fields(unit["ExecStart"][0])
	if len(exe) < 2 || exe[1] != "serve" {
		t.Fatalf("%s: ExecStart=%v; want toolagent serve …", path, exe)
	}
	args := exe[2:]
	for i, a := range args {
		if a == "/etc/toolagent/toolagent.yaml" {
			args[i] = "../../examples/toolagent.yaml" // what the install steps copy there
		}
	}
	if _, err := loadConfig(testEnv(nil), "serve", args, nil); err != nil {
		t.Errorf("%s: ExecStart's arguments: %v", path, err)
	}

	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd); the unit's fields were checked, not verified by systemd")
	}
	bin := builtBinary(t)
	copyPath := filepath.Join(t.TempDir(), "toolagent.service")
	text := strings.Replace(string(data), "ExecStart=/usr/local/bin/toolagent", "ExecStart="+bin, 1)
	if err := os.WriteFile(copyPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sa, "verify", copyPath).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
}
