package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the configuration of `toolagent serve`. Each field is one
// setting, described entirely by its tags:
//
//	yaml    the key in the --config file ("-": not allowed there)
//	env     the environment variable
//	flag    the command-line flag ("" or "-": none)
//	default the value when nothing else sets it
//	usage   what it means (flag help; README "Configuration" repeats it)
//
// Precedence: flag > environment > config file > default. Adding a setting
// is one field here and one row in the README table (a test checks the
// table against these tags).
type Config struct {
	Listen         string        `yaml:"listen" env:"TOOLAGENT_LISTEN" flag:"listen" default:"127.0.0.1:8765" usage:"address to listen on, host:port (port 0: any free port)"`
	Tools          string        `yaml:"tools" env:"TOOLAGENT_TOOLS" flag:"tools" default:"" usage:"tools tree DIR, watched for changes (default: the checkout's native-repo/tools, else the embedded copy)"`
	State          string        `yaml:"state" env:"TOOLAGENT_STATE" flag:"state" default:"" usage:"state DIR (default $XDG_STATE_HOME/toolagent or ~/.local/state/toolagent)"`
	FilesRoot      string        `yaml:"files_root" env:"TOOLAGENT_FILES_ROOT" flag:"files-root" default:"" usage:"root DIR of the file-read and file-write tools (default STATE/files)"`
	TokensFile     string        `yaml:"tokens_file" env:"TOOLAGENT_TOKENS_FILE" flag:"tokens-file" default:"" usage:"FILE of API tokens, one name:role:secret a line"`
	Tokens         string        `yaml:"-" env:"TOOLAGENT_TOKENS" flag:"-" default:"" usage:"API tokens name:role:secret, comma-separated (environment only: secrets never go in flags or config files)"`
	LogFormat      string        `yaml:"log_format" env:"TOOLAGENT_LOG_FORMAT" flag:"log-format" default:"text" usage:"log format: text or json"`
	LogLevel       string        `yaml:"log_level" env:"TOOLAGENT_LOG_LEVEL" flag:"log-level" default:"info" usage:"least log level: debug, info, warn or error"`
	MaxConcurrent  int           `yaml:"max_concurrent" env:"TOOLAGENT_MAX_CONCURRENT" flag:"max-concurrent" default:"64" usage:"most tool calls running at once; more get status busy (HTTP 429), not a queue"`
	ShutdownGrace  time.Duration `yaml:"shutdown_grace" env:"TOOLAGENT_SHUTDOWN_GRACE" flag:"shutdown-grace" default:"10s" usage:"on SIGTERM/SIGINT, how long running calls may finish before they are cancelled"`
	MaxBodyBytes   int64         `yaml:"max_body_bytes" env:"TOOLAGENT_MAX_BODY_BYTES" flag:"max-body-bytes" default:"1048576" usage:"largest request body in bytes (HTTP 413 beyond)"`
	ReloadDebounce time.Duration `yaml:"reload_debounce" env:"TOOLAGENT_RELOAD_DEBOUNCE" flag:"reload-debounce" default:"100ms" usage:"reload once the tools tree has been quiet this long"`
	ReloadMaxWait  time.Duration `yaml:"reload_max_wait" env:"TOOLAGENT_RELOAD_MAX_WAIT" flag:"reload-max-wait" default:"1s" usage:"reload at the latest this long after the first change of a burst"`
	RetryMin       time.Duration `yaml:"reload_retry_min" env:"TOOLAGENT_RELOAD_RETRY_MIN" flag:"reload-retry-min" default:"1s" usage:"first retry after a failed reload; doubles per failure"`
	RetryMax       time.Duration `yaml:"reload_retry_max" env:"TOOLAGENT_RELOAD_RETRY_MAX" flag:"reload-retry-max" default:"1m" usage:"longest wait between reload retries"`
}

// setting is one field of Config with its tags.
type setting struct {
	index               int
	key, env, flag, def string
	usage               string
}

func settings() []setting {
	t := reflect.TypeFor[Config]()
	out := make([]setting, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		out = append(out, setting{
			index: i,
			key:   f.Tag.Get("yaml"), env: f.Tag.Get("env"), flag: f.Tag.Get("flag"),
			def: f.Tag.Get("default"), usage: f.Tag.Get("usage"),
		})
	}
	return out
}

// rawFlag records a flag's text; it is applied after the file and the
// environment, so that flags win.
type rawFlag struct {
	val    *string
	isBool bool
}

func (f rawFlag) String() string {
	if f.val == nil {
		return ""
	}
	return *f.val
}
func (f rawFlag) Set(s string) error { *f.val = s; return nil }
func (f rawFlag) IsBoolFlag() bool   { return f.isBool }

// loadConfig builds the configuration of the long-running command name
// (serve, mcp) from defaults, the config file (--config, or env
// TOOLAGENT_CONFIG), the environment and the flags in args, in rising
// precedence. extra, when not nil, registers the command's own flags. It
// rejects positional arguments.
func loadConfig(e env, name string, args []string, extra func(*flag.FlagSet)) (Config, error) {
	var cfg Config
	v := reflect.ValueOf(&cfg).Elem()
	sets := settings()
	for _, s := range sets {
		if err := setField(v.Field(s.index), s.def); err != nil {
			panic(fmt.Sprintf("Config.%s: bad default %q: %v", v.Type().Field(s.index).Name, s.def, err))
		}
	}

	fs := newFlagSet(name, e)
	if extra != nil {
		extra(fs)
	}
	configFile := fs.String("config", "", "YAML config `FILE` (env TOOLAGENT_CONFIG); flags and environment override it")
	flagText := map[string]*string{}
	for _, s := range sets {
		if s.flag == "" || s.flag == "-" {
			continue
		}
		p := new(string)
		flagText[s.flag] = p
		help := s.usage + fmt.Sprintf(" (env %s", s.env)
		if s.def != "" {
			help += "; default " + s.def
		}
		fs.Var(rawFlag{val: p, isBool: v.Field(s.index).Kind() == reflect.Bool}, s.flag, help+")")
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return cfg, err
	}
	if len(pos) > 0 {
		return cfg, usageError{fmt.Errorf("%s takes no arguments; got %q", name, pos)}
	}

	path := *configFile
	if path == "" {
		path = e.getenv("TOOLAGENT_CONFIG")
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("config: %w", err)
		}
		if err := applyYAML(v, sets, path, data); err != nil {
			return cfg, err
		}
	}
	for _, s := range sets {
		if val := e.getenv(s.env); val != "" {
			if err := setField(v.Field(s.index), val); err != nil {
				return cfg, fmt.Errorf("config: env %s: %w", s.env, err)
			}
		}
	}
	var flagErr error
	fs.Visit(func(f *flag.Flag) {
		p, ok := flagText[f.Name]
		if !ok || flagErr != nil {
			return
		}
		for _, s := range sets {
			if s.flag == f.Name {
				if err := setField(v.Field(s.index), *p); err != nil {
					flagErr = usageError{fmt.Errorf("flag --%s: %w", f.Name, err)}
				}
			}
		}
	})
	if flagErr != nil {
		return cfg, flagErr
	}
	return cfg, cfg.validate()
}

// validate checks values that parse but make no sense.
func (c Config) validate() error {
	var errs []error
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log_format %q: want text or json", c.LogFormat))
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(c.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("log_level %q: want debug, info, warn or error", c.LogLevel))
	}
	if c.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("shutdown_grace %s: want 0 or more", c.ShutdownGrace))
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, fmt.Errorf("max_body_bytes %d: want more than 0", c.MaxBodyBytes))
	}
	if c.MaxConcurrent < 1 {
		errs = append(errs, fmt.Errorf("max_concurrent %d: want 1 or more", c.MaxConcurrent))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"reload_debounce", c.ReloadDebounce}, {"reload_max_wait", c.ReloadMaxWait}, {"reload_retry_min", c.RetryMin}, {"reload_retry_max", c.RetryMax}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: want more than 0", d.name, d.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// applyYAML sets the fields named in a YAML mapping. Every problem names
// the file and line: an unknown key (with the nearest known one), a key
// given twice, a value of the wrong type.
func applyYAML(v reflect.Value, sets []setting, path string, data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config %s:%d: want a mapping of settings (key: value)", path, root.Line)
	}
	var known []string
	byKey := map[string]setting{}
	for _, s := range sets {
		if s.key != "-" {
			known = append(known, s.key)
			byKey[s.key] = s
		}
	}
	seen := map[string]int{}
	var errs []error
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, val := root.Content[i], root.Content[i+1]
		at := fmt.Sprintf("%s:%d:%d", path, k.Line, k.Column)
		s, ok := byKey[k.Value]
		if !ok {
			msg := fmt.Sprintf("%s: unknown key %q", at, k.Value)
			if near := nearestKey(k.Value, known); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			if strings.Contains(k.Value, "token") && !strings.Contains(k.Value, "file") {
				msg += "; tokens are read from tokens_file or the environment (TOOLAGENT_TOKENS), never from a config file"
			}
			errs = append(errs, errors.New(msg+"; known keys: "+strings.Join(known, ", ")))
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			errs = append(errs, fmt.Errorf("%s: key %q is set twice (first on line %d)", at, k.Value, prev))
			continue
		}
		seen[k.Value] = k.Line
		f := v.Field(s.index)
		var err error
		switch {
		case val.Kind == yaml.ScalarNode && val.Tag == "!!null":
			continue // key: with no value keeps the default
		case val.Kind == yaml.ScalarNode:
			err = setField(f, val.Value)
		case isScalarKind(f):
			err = fmt.Errorf("want a single value, not a %s", nodeKind(val))
		default:
			err = val.Decode(f.Addr().Interface())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %w", path, val.Line, k.Value, err))
		}
	}
	return errors.Join(errs...)
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	default:
		return "structure"
	}
}

var durationType = reflect.TypeFor[time.Duration]()

func isScalarKind(f reflect.Value) bool {
	switch f.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Float64:
		return true
	}
	return false
}

// setField parses text into f by f's type. Settings that are lists or
// maps take YAML (or JSON) text, so they work from the environment too.
func setField(f reflect.Value, text string) error {
	switch {
	case f.Type() == durationType:
		if text == "" {
			f.SetInt(0)
			return nil
		}
		d, err := time.ParseDuration(text)
		if err != nil {
			return fmt.Errorf("%q is not a duration; want e.g. 250ms, 10s, 1m", text)
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.String:
		f.SetString(text)
	case f.Kind() == reflect.Bool:
		if text == "" {
			f.SetBool(false)
			return nil
		}
		b, err := strconv.ParseBool(text)
		if err != nil {
			return fmt.Errorf("%q is not a boolean; want true or false", text)
		}
		f.SetBool(b)
	case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
		if text == "" {
			f.SetInt(0)
			return nil
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", text)
		}
		f.SetInt(n)
	case f.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", text)
		}
		f.SetFloat(x)
	default:
		if text == "" {
			return nil
		}
		return yaml.Unmarshal([]byte(text), f.Addr().Interface())
	}
	return nil
}

// nearestKey returns the known key closest to k when it is a likely typo.
func nearestKey(k string, known []string) string {
	best, bestD := "", 3
	for _, c := range known {
		if d := levenshtein(k, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
