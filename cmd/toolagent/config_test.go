package main

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/settings"
)

func testEnv(vars map[string]string) env {
	return env{getenv: func(k string) string { return vars[k] }, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "toolagent.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigPrecedence: flag > environment > config file > default.
func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, "listen: 127.0.0.1:1111\nshutdown_grace: 3s\nmax_concurrent: 7\nlog_format: json\n")
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantAddr  string
		wantGrace time.Duration
		wantMax   int
	}{
		{"defaults", nil, nil, "127.0.0.1:8765", 10 * time.Second, 64},
		{"file", nil, []string{"--config", file}, "127.0.0.1:1111", 3 * time.Second, 7},
		{"file from env", map[string]string{"TOOLAGENT_CONFIG": file}, nil, "127.0.0.1:1111", 3 * time.Second, 7},
		{"env over file", map[string]string{"TOOLAGENT_LISTEN": "127.0.0.1:2222", "TOOLAGENT_SHUTDOWN_GRACE": "250ms"}, []string{"--config", file}, "127.0.0.1:2222", 250 * time.Millisecond, 7},
		{"flag over env", map[string]string{"TOOLAGENT_LISTEN": "127.0.0.1:2222"}, []string{"--config", file, "--listen", "127.0.0.1:3333", "--max-concurrent=9"}, "127.0.0.1:3333", 3 * time.Second, 9},
	}
	for _, tc := range tests {
		cfg, err := loadConfig(testEnv(tc.env), "serve", tc.args, nil)
		if err != nil {
			t.Errorf("%s: loadConfig(%q) error: %v", tc.name, tc.args, err)
			continue
		}
		if cfg.Listen != tc.wantAddr || cfg.ShutdownGrace != tc.wantGrace || cfg.MaxConcurrent != tc.wantMax {
			t.Errorf("%s: loadConfig(%q) = listen %s, grace %v, max %d; want %s, %v, %d",
				tc.name, tc.args, cfg.Listen, cfg.ShutdownGrace, cfg.MaxConcurrent, tc.wantAddr, tc.wantGrace, tc.wantMax)
		}
	}
}

// TestConfigLists: public_hosts and allowed_origins are lists in a config
// file, comma-separated in the environment and flags; the former key
// mcp_allowed_origins adds to allowed_origins.
func TestConfigLists(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		file        string
		env         map[string]string
		args        []string
		wantHosts   []string
		wantOrigins []string
	}{
		{"none", "", nil, nil, nil, nil},
		{"a YAML list", "public_hosts: [toolagent.example.com, \"10.0.0.5:8765\"]\nallowed_origins:\n  - https://console.example\n", nil, nil,
			[]string{"toolagent.example.com", "10.0.0.5:8765"}, []string{"https://console.example"}},
		{"a comma list in a file", "public_hosts: a.example, b.example\n", nil, nil, []string{"a.example", "b.example"}, nil},
		{"an empty YAML list", "public_hosts: []\n", nil, nil, nil, nil},
		{"env", "", map[string]string{"TOOLAGENT_PUBLIC_HOSTS": " a.example ,, b.example:80", "TOOLAGENT_ALLOWED_ORIGINS": "http://localhost:6274"}, nil,
			[]string{"a.example", "b.example:80"}, []string{"http://localhost:6274"}},
		{"flag over env", "", map[string]string{"TOOLAGENT_PUBLIC_HOSTS": "a.example"}, []string{"--public-hosts", "c.example"}, []string{"c.example"}, nil},
		{"the former key adds to allowed_origins", "allowed_origins: [https://a.example]\nmcp_allowed_origins: [https://b.example]\n", nil, []string{"--mcp-allowed-origins", "https://c.example"},
			nil, []string{"https://a.example", "https://c.example"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeConfig(t, tc.file)}, args...)
			}
			cfg, err := loadConfig(testEnv(tc.env), "serve", args, nil)
			if err != nil {
				t.Fatal(err)
			}
			g := cfg.GuardOptions()
			if !reflect.DeepEqual(g.PublicHosts, tc.wantHosts) || !reflect.DeepEqual(g.AllowedOrigins, tc.wantOrigins) {
				t.Errorf("public hosts %q, allowed origins %q; want %q, %q", g.PublicHosts, g.AllowedOrigins, tc.wantHosts, tc.wantOrigins)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		env  map[string]string
		args []string
		want string
	}{
		{"unknown key names the line", "listen: 127.0.0.1:1\n\nlisen: x\n", nil, nil, `toolagent.yaml:3:1: unknown key "lisen" (did you mean "listen"?)`},
		{"tokens never in a file", "tokens: a:call:0123456789abcdef\n", nil, nil, "never from a config file"},
		{"bad duration names the line", "log_level: info\nshutdown_grace: soon\n", nil, nil, `toolagent.yaml:2: shutdown_grace: "soon" is not a duration`},
		{"list for a scalar", "listen: [a, b]\n", nil, nil, "toolagent.yaml:1: listen: want a single value, not a list"},
		{"set twice", "listen: a:1\nlisten: b:2\n", nil, nil, `toolagent.yaml:2:1: key "listen" is set twice (first on line 1)`},
		{"not a mapping", "- listen\n", nil, nil, "want a mapping of settings"},
		{"bad env", "", map[string]string{"TOOLAGENT_MAX_CONCURRENT": "many"}, nil, `env TOOLAGENT_MAX_CONCURRENT: "many" is not a whole number`},
		{"bad flag", "", nil, []string{"--shutdown-grace", "1 minute"}, `flag --shutdown-grace: "1 minute" is not a duration`},
		{"bad log format", "log_format: xml\n", nil, nil, `log_format "xml": want text or json`},
		{"arguments", "", nil, []string{"extra"}, "serve takes no arguments"},
		{"a URL as a public host", "public_hosts: [https://toolagent.example.com]\n", nil, nil, `public_hosts: "https://toolagent.example.com" is not a host`},
		{"a bad public host from env", "", map[string]string{"TOOLAGENT_PUBLIC_HOSTS": "ok.example,*.example"}, nil, `public_hosts: "*.example" is not a host`},
		{"a host as an allowed origin", "", nil, []string{"--allowed-origins", "console.example"}, `allowed_origins: "console.example" is not an origin`},
		{"null under the former name", "mcp_allowed_origins: \"null\"\n", nil, nil, `allowed_origins: "null" is not an origin`},
		{"a mapping for a list", "public_hosts: {a: b}\n", nil, nil, "toolagent.yaml:1: public_hosts"},
	}
	for _, tc := range tests {
		args := tc.args
		if tc.file != "" {
			args = append([]string{"--config", writeConfig(t, tc.file)}, args...)
		}
		_, err := loadConfig(testEnv(tc.env), "serve", args, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: loadConfig() error = %v; want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestConfigDocumented checks that docs/daemon.md's configuration table has one
// row per Config field with its key, variable, flag and default.
func TestConfigDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../docs/daemon.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| `TOOLAGENT_") {
			env := strings.Trim(strings.Split(line, "|")[1], " `")
			rows[env] = line
		}
	}
	for _, s := range settings.Of(reflect.TypeFor[daemon.Config]()) {
		row, ok := rows[s.Env]
		if !ok {
			t.Errorf("docs/daemon.md has no configuration row for %s", s.Env)
			continue
		}
		cells := strings.Split(row, "|")
		if len(cells) < 6 {
			t.Errorf("docs/daemon.md row for %s has %d cells; want | env | key | flag | default | meaning |", s.Env, len(cells))
			continue
		}
		want := []string{s.Key, "--" + s.Flag, s.Default}
		if s.Key == "-" {
			want[0] = "—"
		}
		if s.Flag == "" || s.Flag == "-" {
			want[1] = "—"
		}
		for i, w := range want {
			got := strings.Trim(cells[i+2], " `")
			if w == "" {
				continue // a default that depends on the machine: the row says which
			}
			if got != w {
				t.Errorf("docs/daemon.md row for %s: column %d = %q; want %q", s.Env, i+2, got, w)
			}
		}
	}
}

// TestExampleConfig: examples/toolagent.yaml names every setting a config
// file may hold, each at its default, and loads to exactly the defaults.
func TestExampleConfig(t *testing.T) {
	t.Parallel()
	const path = "../../examples/toolagent.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for k, v := range doc {
		keys[k] = true
		if section, ok := v.(map[string]any); ok {
			for sub := range section {
				keys[k+"."+sub] = true
			}
		}
	}
	for _, s := range settings.Of(reflect.TypeFor[daemon.Config]()) {
		if s.Key != "-" && !keys[s.Key] {
			t.Errorf("%s has no %s (every setting belongs in the example)", path, s.Key)
		}
		delete(keys, s.Key)
	}
	for k := range keys {
		if !strings.Contains(k, ".") && keys[k] {
			if _, section := doc[k].(map[string]any); section {
				continue
			}
		}
		t.Errorf("%s: %s is not a setting", path, k)
	}
	def, err := loadConfig(testEnv(nil), "serve", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := loadConfig(testEnv(nil), "serve", []string{"--config", path}, nil)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	// {} in the file and no key at all are the same empty map.
	for _, c := range []*daemon.Config{&def, &got} {
		v := reflect.ValueOf(c).Elem()
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.Map && f.Len() == 0 {
				f.Set(reflect.Zero(f.Type()))
			}
		}
	}
	if !reflect.DeepEqual(def, got) {
		t.Errorf("%s does not load to the defaults:\n got %+v\nwant %+v", path, got, def)
	}
}

// TestValidateFileAndConfig (issue 14, trap 1): validate FILE checks one
// TOOL.hdlp, validate --config FILE a daemon config and its tokens; each
// exits 1 naming the problem, 0 when there is none.
func TestValidateFileAndConfig(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	writeTool(t, tools, "broken", "method: run\nexecutor: shell\nargv: [echo]\nparams_schema: {}\nbogus_key: 1\n")
	file := filepath.Join(tools, "broken", "TOOL.hdlp")
	if out, _, code := runCLI(t, nil, "validate", file); code != exitFailed || !strings.Contains(out, file+":") || !strings.Contains(out, "bogus_key") {
		t.Errorf("validate a broken FILE = exit %d\n%s\nwant 1 naming the file, line and field", code, out)
	}
	if out, _, code := runCLI(t, nil, "validate", "../../native-repo/tools/git-ops/TOOL.hdlp"); code != 0 || !strings.Contains(out, "0 problems") {
		t.Errorf("validate a good FILE = exit %d %s", code, out)
	}
	// One tool's folder is its file; it is not a tree of no tools.
	if out, _, code := runCLI(t, nil, "validate", filepath.Join(tools, "broken")); code != exitFailed || !strings.Contains(out, file+":") || !strings.Contains(out, "bogus_key") {
		t.Errorf("validate a broken tool's FOLDER = exit %d\n%s\nwant 1 naming the file, line and field", code, out)
	}
	if out, _, code := runCLI(t, nil, "validate", "../../native-repo/tools/git-ops"); code != 0 || !strings.Contains(out, "git-ops/TOOL.hdlp: 0 problems") {
		t.Errorf("validate a good tool's FOLDER = exit %d %s", code, out)
	}
	// A tree with no tool in it is no green.
	if out, errOut, code := runCLI(t, nil, "validate", t.TempDir()); code != exitFailed || !strings.Contains(out+errOut, "no tool in") {
		t.Errorf("validate an empty DIR = exit %d %s %s; want 1 saying it holds no tool", code, out, errOut)
	}
	if out, _, code := runCLI(t, nil, "validate", "--config", "../../examples/toolagent.yaml"); code != 0 || !strings.Contains(out, "0 problems") {
		t.Errorf("validate --config examples/toolagent.yaml = exit %d %s; want 0", code, out)
	}
	bad := writeConfig(t, "listen: 127.0.0.1:8765\nmax_concurent: 3\n")
	if out, _, code := runCLI(t, nil, "validate", "--config", bad); code != exitFailed || !strings.Contains(out, bad+":2") || !strings.Contains(out, "max_concurrent") {
		t.Errorf("validate --config with a typo = exit %d %s; want 1 naming the line and the key it meant", code, out)
	}
}
