// Package settings fills a struct of settings described entirely by its
// field tags from defaults, a YAML file, the environment and command-line
// flags, in rising precedence. It owns the mechanism only: which struct,
// which file and which flags a command takes are its caller's.
//
// Each field of the struct is one setting:
//
//	yaml    the key in the file ("-": not allowed there; "a.b": key b of a section a)
//	env     the environment variable (a field without one is no setting)
//	flag    the command-line flag ("" or "-": none)
//	default the value when nothing else sets it
//	usage   what it means (the flag's help)
//
// Every problem names where it is: file:line:col and the key for the file
// (an unknown key with the nearest known one, a key given twice, a value
// of the wrong type), the variable, the flag. A Loader is used by one
// goroutine. Command packages import this package, and internal/daemon,
// whose Config it fills.
package settings

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Setting is one field of a settings struct with its tags.
type Setting struct {
	Index                   int // of the field in the struct
	Key, Env, Flag, Default string
	Usage                   string
}

// Of returns the settings of the struct type t: its fields with an env
// tag, in order.
func Of(t reflect.Type) []Setting {
	var out []Setting
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("env") == "" {
			continue
		}
		out = append(out, Setting{
			Index: i,
			Key:   f.Tag.Get("yaml"), Env: f.Tag.Get("env"), Flag: f.Tag.Get("flag"),
			Default: f.Tag.Get("default"), Usage: f.Tag.Get("usage"),
		})
	}
	return out
}

// Options tune a Loader.
type Options struct {
	// Include says whether a setting's flag is registered (nil: every
	// setting with a flag).
	Include func(flag string) bool
	// Placeholders are the words help writes for flags' values, by flag
	// name, where the type alone does not say (DIR, HOST:PORT...).
	Placeholders map[string]string
	// Removed are keys of earlier versions, and why they are gone: the
	// file's error says so instead of "unknown key".
	Removed map[string]string
	// Hint, when not nil, may add a sentence to the error of an unknown
	// key of the file (e.g. where secrets come from instead).
	Hint func(key string) string
}

// A Loader fills one settings struct.
type Loader struct {
	v    reflect.Value
	sets []Setting
	opts Options
	// flagText holds each registered flag's text, applied after the file
	// and the environment so that flags win.
	flagText map[string]*string
	fs       *flag.FlagSet
}

// New returns a Loader of dst, a pointer to a struct, with every setting
// at its default. A default that does not parse is a programming error:
// New panics.
func New(dst any, opts Options) *Loader {
	v := reflect.ValueOf(dst).Elem()
	l := &Loader{v: v, sets: Of(v.Type()), opts: opts, flagText: map[string]*string{}}
	for _, s := range l.sets {
		if err := setField(v.Field(s.Index), s.Default); err != nil {
			panic(fmt.Sprintf("%s.%s: bad default %q: %v", v.Type().Name(), v.Type().Field(s.Index).Name, s.Default, err))
		}
	}
	return l
}

// defaultInUsage matches a usage text ending in "(default[:] WORDS)".
var defaultInUsage = regexp.MustCompile(`^(.*) \(default:? (.*)\)$`)

// Register adds the settings' flags to fs; their help says the variable
// and the default.
func (l *Loader) Register(fs *flag.FlagSet) {
	l.fs = fs
	for _, s := range l.sets {
		if s.Flag == "" || s.Flag == "-" || (l.opts.Include != nil && !l.opts.Include(s.Flag)) {
			continue
		}
		p := new(string)
		l.flagText[s.Flag] = p
		usage, def := s.Usage, s.Default
		if m := defaultInUsage.FindStringSubmatch(usage); m != nil && def == "" {
			usage, def = m[1], m[2] // a default the machine decides, said in words
		}
		help := usage + fmt.Sprintf(" (env %s", s.Env)
		isBool := l.v.Field(s.Index).Kind() == reflect.Bool
		if def != "" && !(isBool && def == "false") {
			help += "; default " + def
		}
		fs.Var(rawFlag{val: p, isBool: isBool, value: l.placeholder(s.Flag, l.v.Field(s.Index).Type())}, s.Flag, help+")")
	}
}

// FlagError is a flag whose value does not parse.
type FlagError struct {
	Flag string
	Err  error
}

func (e *FlagError) Error() string { return fmt.Sprintf("flag --%s: %v", e.Flag, e.Err) }
func (e *FlagError) Unwrap() error { return e.Err }

// Apply sets, in rising precedence, the settings file names (none when
// file is ""), those of the environment getenv reads, and the flags set
// on the FlagSet given to Register (after it was parsed). A bad flag is a
// *FlagError.
func (l *Loader) Apply(file string, getenv func(string) string) error {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if err := l.ApplyYAML(file, data); err != nil {
			return err
		}
	}
	for _, s := range l.sets {
		if val := getenv(s.Env); val != "" {
			if err := setField(l.v.Field(s.Index), val); err != nil {
				return fmt.Errorf("config: env %s: %w", s.Env, err)
			}
		}
	}
	if l.fs == nil {
		return nil
	}
	var flagErr error
	l.fs.Visit(func(f *flag.Flag) {
		p, ok := l.flagText[f.Name]
		if !ok || flagErr != nil {
			return
		}
		for _, s := range l.sets {
			if s.Flag == f.Name {
				if err := setField(l.v.Field(s.Index), *p); err != nil {
					flagErr = &FlagError{Flag: f.Name, Err: err}
				}
			}
		}
	})
	return flagErr
}

// rawFlag records a flag's text; Apply sets it after the file and the
// environment, so that flags win.
type rawFlag struct {
	val    *string
	isBool bool
	// value is the placeholder help shows for the flag's value.
	value string
}

// Placeholder is the word help writes for the flag's value.
func (f rawFlag) Placeholder() string { return f.value }

func (f rawFlag) String() string {
	if f.val == nil {
		return ""
	}
	return *f.val
}
func (f rawFlag) Set(s string) error { *f.val = s; return nil }
func (f rawFlag) IsBoolFlag() bool   { return f.isBool }

// placeholder picks the help placeholder of a setting's flag.
func (l *Loader) placeholder(flagName string, kind reflect.Type) string {
	if p, ok := l.opts.Placeholders[flagName]; ok {
		return p
	}
	switch {
	case kind == durationType:
		return "DURATION"
	case kind.Kind() == reflect.Int || kind.Kind() == reflect.Int64:
		return "N"
	case strings.HasSuffix(flagName, "-file"):
		return "FILE"
	case strings.HasSuffix(flagName, "-url"):
		return "URL"
	case kind.Kind() == reflect.Slice:
		return "LIST"
	}
	return "VALUE"
}

// ApplyYAML sets the fields named in a YAML mapping. Every problem names
// the file and line: an unknown key (with the nearest known one), a key
// given twice, a value of the wrong type.
func (l *Loader) ApplyYAML(path string, data []byte) error {
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
	byKey := map[string]Setting{}
	for _, s := range l.sets {
		if s.Key != "-" {
			known = append(known, s.Key)
			byKey[s.Key] = s
		}
	}
	seen := map[string]int{}
	var errs []error
	pairs := sectionPairs(root, "", known)
	for i := 0; i+1 < len(pairs); i += 2 {
		k, val := pairs[i], pairs[i+1]
		at := fmt.Sprintf("%s:%d:%d", path, k.Line, k.Column)
		s, ok := byKey[k.Value]
		if why, gone := l.opts.Removed[k.Value]; !ok && gone {
			errs = append(errs, fmt.Errorf("%s: key %q was removed: %s", at, k.Value, why))
			continue
		}
		if !ok {
			msg := fmt.Sprintf("%s: unknown key %q", at, k.Value)
			if near := nearestKey(k.Value, known); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			if l.opts.Hint != nil {
				if h := l.opts.Hint(k.Value); h != "" {
					msg += "; " + h
				}
			}
			errs = append(errs, errors.New(msg+"; known keys: "+strings.Join(known, ", ")))
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			errs = append(errs, fmt.Errorf("%s: key %q is set twice (first on line %d)", at, k.Value, prev))
			continue
		}
		seen[k.Value] = k.Line
		f := l.v.Field(s.Index)
		var err error
		switch {
		case val.Kind == yaml.ScalarNode && val.Tag == "!!null":
			continue // key: with no value keeps the default
		case val.Kind == yaml.ScalarNode:
			err = setField(f, val.Value)
		case isScalarKind(f):
			err = fmt.Errorf("want a single value, not a %s", NodeKind(val))
		default:
			err = val.Decode(f.Addr().Interface())
			if err == nil && f.Kind() == reflect.Slice && f.Len() == 0 {
				f.Set(reflect.Zero(f.Type())) // [] is no list, as an unset one
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %w", path, val.Line, k.Value, err))
		}
	}
	return errors.Join(errs...)
}

// sectionPairs flattens the key/value pairs of a config mapping: a key
// whose value is a mapping and that is the section of known dotted keys
// ("gatekeeper" of "gatekeeper.url") is replaced by its pairs, with the
// keys' Value made dotted. Other pairs are kept as they are.
func sectionPairs(m *yaml.Node, prefix string, known []string) []*yaml.Node {
	var out []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, val := m.Content[i], m.Content[i+1]
		name := prefix + k.Value
		isSection := !slices.Contains(known, name) && slices.ContainsFunc(known, func(s string) bool { return strings.HasPrefix(s, name+".") })
		switch {
		case isSection && val.Kind == yaml.MappingNode:
			out = append(out, sectionPairs(val, name+".", known)...)
		case isSection && val.Kind == yaml.ScalarNode && val.Tag == "!!null":
			// an empty section
		default:
			kc := *k
			kc.Value = name
			out = append(out, &kc, val)
		}
	}
	return out
}

// NodeKind names the kind of a YAML node that is not a single value, for
// "want a single value, not a list".
func NodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	default:
		return "structure"
	}
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	stringsType  = reflect.TypeFor[[]string]()
)

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
	case f.Type() == stringsType:
		// A list from the environment or a flag: comma-separated.
		var list []string
		for _, item := range strings.Split(text, ",") {
			if item = strings.TrimSpace(item); item != "" {
				list = append(list, item)
			}
		}
		f.Set(reflect.ValueOf(list))
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
		if d := Levenshtein(k, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Levenshtein is the edit distance of a and b in bytes: the "did you
// mean" of keys, and of the caller's own words (subcommands).
func Levenshtein(a, b string) int {
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
