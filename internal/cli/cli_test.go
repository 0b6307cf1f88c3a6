package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestKVParams: values take the declared type when they parse as it;
// k:=JSON is always JSON; anything else goes through as a string.
func TestKVParams(t *testing.T) {
	types := map[string]string{"n": "integer", "x": "number", "b": "boolean", "l": "array", "s": "string"}
	got, err := KVParamsTyped(types, []string{"n=3", "x=1.5", "b=true", `l=["a"]`, "s=007", "u=plain", `j:={"k":1}`, "n2=x=y"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": int64(3), "x": 1.5, "b": true, "l": []any{"a"}, "s": "007", "u": "plain", "j": map[string]any{"k": float64(1)}, "n2": "x=y"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("KVParamsTyped() = %#v; want %#v", got, want)
	}
	for _, bad := range []string{"novalue", "=v", "j:={"} {
		if _, err := KVParamsTyped(nil, []string{bad}); err == nil {
			t.Errorf("KVParamsTyped(%q) = nil error; want one", bad)
		}
	}
}

// TestParseArgs: flags anywhere among the arguments, "--" ends them, a
// bad flag is a UsageError, -h is flag.ErrHelp after the help.
func TestParseArgs(t *testing.T) {
	fs := flag.NewFlagSet("toolagent call", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dry := fs.Bool("dry-run", false, "")
	helped := false
	fs.Usage = func() { helped = true }
	pos, err := ParseArgs(fs, []string{"NAME", "--dry-run", "k=v", "--", "--not-a-flag"})
	if err != nil || !*dry || !slices.Equal(pos, []string{"NAME", "k=v", "--not-a-flag"}) {
		t.Errorf("ParseArgs() = %q, %v, dry-run %v; want [NAME k=v --not-a-flag], nil, true", pos, err, *dry)
	}
	var ue UsageError
	if _, err := ParseArgs(fs, []string{"--bogus"}); !errors.As(err, &ue) || helped {
		t.Errorf("ParseArgs(--bogus) = %v (help printed: %v); want a UsageError and no help", err, helped)
	}
	if _, err := ParseArgs(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) || !helped {
		t.Errorf("ParseArgs(-h) = %v (help printed: %v); want flag.ErrHelp after the help", err, helped)
	}
}

// TestDidYouMean: a near name, a unique prefix, or nothing.
func TestDidYouMean(t *testing.T) {
	names := []string{"serve", "sync", "status", "validate"}
	for typed, want := range map[string]string{"serv": "serve", "valid": "validate", "stat": "status", "zzzz": ""} {
		if got := DidYouMean(typed, names); got != want {
			t.Errorf("DidYouMean(%q) = %q; want %q", typed, got, want)
		}
	}
}

func TestNewLoggerAndSplitList(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger("json", "warn", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown")
	if s := buf.String(); strings.Contains(s, "hidden") || !strings.Contains(s, `"msg":"shown"`) {
		t.Errorf("json logger at warn wrote %q", s)
	}
	for _, bad := range [][2]string{{"xml", "info"}, {"text", "loud"}} {
		log, err := NewLogger(bad[0], bad[1], &buf)
		if err == nil || log == nil || !strings.Contains(err.Error(), bad[0]) || !strings.Contains(err.Error(), bad[1]) {
			t.Errorf("NewLogger(%q, %q) = %v, %v; want an error naming both and a usable logger", bad[0], bad[1], log, err)
		}
	}
	if got := SplitList(" git, ,curl,"); !slices.Equal(got, []string{"git", "curl"}) {
		t.Errorf("SplitList = %q", got)
	}
}
