// Package cli owns the conventions of toolagent's command line, apart
// from the commands themselves (cmd/toolagent): help written from a flag
// set in one style, flags anywhere among the arguments, did-you-mean,
// completion scripts, params given as k=v words typed by a tool's
// schema, and JSON printed for people and scripts alike. It holds no
// state. Only command packages import it.
package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/toolagent/toolagent/internal/settings"
)

// UsageError marks bad command-line usage (exit status 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ParseArgs parses flags anywhere among the arguments (so `call NAME
// --dry-run k=v` works) and returns the others; "--" ends flag parsing.
// -h prints fs's help (fs.Usage) and returns flag.ErrHelp; a bad flag is
// a UsageError naming the command's -h.
func ParseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	help := fs.Usage
	fs.Usage = func() {} // the flag package calls it on errors too
	defer func() { fs.Usage = help }()
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			help()
			return nil, flag.ErrHelp
		} else if err != nil {
			return nil, UsageError{fmt.Errorf("%s: %v (`%s -h` lists its flags)", strings.TrimPrefix(fs.Name(), "toolagent "), err, fs.Name())}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// WriteHelp prints the help of a command: its synopsis ("toolagent NAME
// [flags] ARGS"), its summary and the flags fs holds, each with its value
// placeholder, its meaning and its default, written one way: "(default
// X)" at the end, or within the meaning when it says more ("env X;
// default Y"). A flag.Value with a Placeholder method names its own
// placeholder.
func WriteHelp(w io.Writer, synopsis, summary string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n", synopsis)
	if summary != "" {
		fmt.Fprintf(w, "%s\n\n", summary)
	}
	type line struct{ left, right string }
	var lines []line
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		placeholder, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if p, ok := f.Value.(interface{ Placeholder() string }); ok {
			placeholder = p.Placeholder()
		}
		switch placeholder {
		case "string", "value":
			placeholder = "VALUE"
		case "int", "int64", "uint":
			placeholder = "N"
		case "duration":
			placeholder = "DURATION"
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			placeholder = ""
		}
		if placeholder != "" {
			left += " " + placeholder
		}
		if d := defaultText(f.DefValue); d != "" && !strings.Contains(usage, "default") {
			if strings.HasSuffix(usage, ")") && strings.Contains(usage, "(env ") {
				usage = strings.TrimSuffix(usage, ")") + "; default " + d + ")"
			} else {
				usage += " (default " + d + ")"
			}
		}
		width = max(width, len(left))
		lines = append(lines, line{left, usage})
	})
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "flags:")
	for _, l := range lines {
		fmt.Fprintf(w, "  %-*s  %s\n", width, l.left, l.right)
	}
}

// defaultText is how a default is written: nothing for the zero values,
// durations without their trailing zero units (15m, not 15m0s).
func defaultText(v string) string {
	switch v {
	case "", "false", "0", "[]":
		return ""
	}
	if strings.HasSuffix(v, "m0s") {
		v = strings.TrimSuffix(v, "0s")
	}
	if strings.HasSuffix(v, "h0m") {
		v = strings.TrimSuffix(v, "0m")
	}
	return v
}

// DidYouMean returns the name closest to a mistyped one: at most two
// edits away, else the only one sharing its first four letters or more,
// or "".
func DidYouMean(typed string, names []string) string {
	best, bestD := "", 3
	var near []string
	for _, name := range names {
		if d := settings.Levenshtein(typed, name); d < bestD {
			best, bestD = name, d
		}
		if n := commonPrefix(typed, name); n >= 4 || (n == len(typed) && n > 0) {
			near = append(near, name)
		}
	}
	if best == "" && len(near) == 1 {
		return near[0]
	}
	return best
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// PrintJSON writes v as indented JSON with a trailing newline; HTML
// characters are not escaped, so output and commands stay readable.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// PrintRaw writes a daemon's JSON answer onto stdout as it came, indented
// (json.Indent keeps every byte and the daemon's field order).
func PrintRaw(w io.Writer, body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		_, err := w.Write(body)
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// ListFlag is a repeatable string flag: each use adds a value.
type ListFlag []string

func (l *ListFlag) String() string     { return strings.Join(*l, ",") }
func (l *ListFlag) Set(s string) error { *l = append(*l, s); return nil }

// SplitList splits a comma-separated flag value, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// NewLogger builds a long-running command's logger: format text or json,
// level debug, info, warn or error; anything else is an error naming both,
// with a text logger at info level, never nil.
func NewLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil || (format != "text" && format != "json") {
		return slog.New(slog.NewTextHandler(w, nil)), fmt.Errorf("log format %q / log level %q: want text or json, and debug, info, warn or error", format, level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// HelpFlags returns the flags a help text (WriteHelp's) lists, as --name.
func HelpFlags(help string) []string {
	var flags []string
	for _, l := range strings.Split(help, "\n") {
		if f, ok := strings.CutPrefix(l, "  --"); ok {
			flags = append(flags, "--"+strings.Fields(f)[0])
		}
	}
	return flags
}

// TooManyArgs is the usage error of a command given arguments it does
// not take.
func TooManyArgs(cmd string, extra []string) error {
	return UsageError{Err: fmt.Errorf("%s: unexpected arguments %s", cmd, strings.Join(extra, " "))}
}
