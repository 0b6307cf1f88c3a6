package settings

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

type testSettings struct {
	Listen  string        `yaml:"listen" env:"T_LISTEN" flag:"listen" default:"127.0.0.1:1" usage:"address"`
	Grace   time.Duration `yaml:"grace" env:"T_GRACE" flag:"grace" default:"10s" usage:"grace"`
	Hosts   []string      `yaml:"hosts" env:"T_HOSTS" flag:"hosts" default:"" usage:"hosts"`
	URL     string        `yaml:"sec.url" env:"T_URL" flag:"sec-url" default:"" usage:"url"`
	Secret  string        `yaml:"-" env:"T_SECRET" flag:"-" default:"" usage:"environment only"`
	NotOne  int           // no env tag: not a setting
	Enabled bool          `yaml:"enabled" env:"T_ENABLED" flag:"enabled" default:"false" usage:"on"`
}

func load(t *testing.T, file string, env map[string]string, args ...string) (testSettings, error) {
	t.Helper()
	var s testSettings
	l := New(&s, Options{Removed: map[string]string{"old": "gone"}})
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	path := ""
	if file != "" {
		path = filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return s, l.Apply(path, func(k string) string { return env[k] })
}

// TestPrecedence: flag > environment > file > default.
func TestPrecedence(t *testing.T) {
	tests := []struct {
		name, file string
		env        map[string]string
		args       []string
		want       testSettings
	}{
		{"defaults", "", nil, nil, testSettings{Listen: "127.0.0.1:1", Grace: 10 * time.Second}},
		{"file, with a section", "listen: a:2\nsec:\n  url: http://x\nhosts: [a, b]\n", nil, nil, testSettings{Listen: "a:2", Grace: 10 * time.Second, URL: "http://x", Hosts: []string{"a", "b"}}},
		{"env over file", "listen: a:2\n", map[string]string{"T_LISTEN": "b:3", "T_SECRET": "s", "T_HOSTS": "c, d"}, nil, testSettings{Listen: "b:3", Grace: 10 * time.Second, Secret: "s", Hosts: []string{"c", "d"}}},
		{"flag over env", "", map[string]string{"T_LISTEN": "b:3"}, []string{"--listen", "c:4", "--grace=1s", "--enabled"}, testSettings{Listen: "c:4", Grace: time.Second, Enabled: true}},
	}
	for _, tc := range tests {
		got, err := load(t, tc.file, tc.env, tc.args...)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// TestErrors: every problem says where it is.
func TestErrors(t *testing.T) {
	tests := []struct {
		name, file string
		env        map[string]string
		args       []string
		want       string
	}{
		{"unknown key", "listen: a:1\nlisen: b\n", nil, nil, `c.yaml:2:1: unknown key "lisen" (did you mean "listen"?)`},
		{"removed key", "old: 1\n", nil, nil, `key "old" was removed: gone`},
		{"environment-only key", "secret: x\n", nil, nil, `unknown key "secret"`},
		{"twice", "listen: a\nlisten: b\n", nil, nil, `c.yaml:2:1: key "listen" is set twice (first on line 1)`},
		{"list for a scalar", "listen: [a]\n", nil, nil, "c.yaml:1: listen: want a single value, not a list"},
		{"bad env", "", map[string]string{"T_GRACE": "soon"}, nil, `env T_GRACE: "soon" is not a duration`},
		{"bad flag", "", nil, []string{"--grace", "soon"}, `flag --grace: "soon" is not a duration`},
	}
	for _, tc := range tests {
		_, err := load(t, tc.file, tc.env, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one containing %q", tc.name, err, tc.want)
		}
	}
	var fe *FlagError
	if _, err := load(t, "", nil, "--grace", "x"); !errors.As(err, &fe) || fe.Flag != "grace" {
		t.Errorf("a bad flag's error = %v; want a *FlagError of grace", err)
	}
}

// TestOf: fields without an env tag are no settings.
func TestOf(t *testing.T) {
	var envs []string
	for _, s := range Of(reflect.TypeFor[testSettings]()) {
		envs = append(envs, s.Env)
	}
	if want := "T_LISTEN T_GRACE T_HOSTS T_URL T_SECRET T_ENABLED"; strings.Join(envs, " ") != want {
		t.Errorf("Of() = %v; want %s", envs, want)
	}
}
