package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/toolagent/toolagent/internal/settings"
)

// writeHelp prints the help of subcommand name: its synopsis, its summary
// and the flags fs holds, each with its value placeholder, its meaning and
// its default, written one way: "(default X)" at the end, or within the
// meaning when it says more ("env X; default Y").
func writeHelp(w io.Writer, name string, fs *flag.FlagSet) {
	cmd := command{name: name}
	for _, c := range commands() {
		if c.name == name {
			cmd = c
		}
	}
	syn := "toolagent " + name + " [flags]"
	if cmd.args != "" {
		syn += " " + cmd.args
	}
	fmt.Fprintf(w, "usage: %s\n\n", syn)
	if cmd.summary != "" {
		fmt.Fprintf(w, "%s\n\n", cmd.summary)
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

// didYouMean returns the subcommand closest to a mistyped one: at most two
// edits away, else the only one sharing its first four letters or more,
// or "".
func didYouMean(typed string) string {
	best, bestD := "", 3
	var near []string
	for _, c := range commands() {
		if d := settings.Levenshtein(typed, c.name); d < bestD {
			best, bestD = c.name, d
		}
		if n := commonPrefix(typed, c.name); n >= 4 || (n == len(typed) && n > 0) {
			near = append(near, c.name)
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

// subcommandFlags returns the flags of every subcommand, read from its own
// help (so completion can never list a flag a subcommand does not take).
func subcommandFlags(ctx context.Context, e env) map[string][]string {
	out := map[string][]string{}
	for _, c := range commands() {
		if c.name == "completion" || c.name == "version" {
			continue
		}
		var buf bytes.Buffer
		he := env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: &buf, stderr: io.Discard}
		c.run(ctx, he, []string{"-h"})
		var flags []string
		for _, l := range strings.Split(buf.String(), "\n") {
			if f, ok := strings.CutPrefix(l, "  --"); ok {
				flags = append(flags, "--"+strings.Fields(f)[0])
			}
		}
		out[c.name] = flags
	}
	return out
}

// runCompletion prints a completion script for bash, zsh or fish:
// subcommands, then each subcommand's flags, then file names.
func runCompletion(ctx context.Context, e env, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		writeHelp(e.stdout, "completion", flag.NewFlagSet("completion", flag.ContinueOnError))
		return nil
	}
	if len(args) != 1 || !slices.Contains([]string{"bash", "zsh", "fish"}, args[0]) {
		return usageError{fmt.Errorf("completion: want one shell: bash, zsh or fish; got %q", args)}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	flags := subcommandFlags(ctx, e)
	w := e.stdout
	switch args[0] {
	case "bash", "zsh":
		if args[0] == "zsh" {
			fmt.Fprintln(w, "# zsh: load with  source <(toolagent completion zsh)")
			fmt.Fprintln(w, "autoload -U +X bashcompinit && bashcompinit")
		} else {
			fmt.Fprintln(w, "# bash: load with  source <(toolagent completion bash)")
		}
		fmt.Fprintln(w, "_toolagent() {")
		fmt.Fprintln(w, `  local cur=${COMP_WORDS[COMP_CWORD]}`)
		fmt.Fprintln(w, `  if [ "$COMP_CWORD" -eq 1 ]; then`)
		fmt.Fprintf(w, "    COMPREPLY=($(compgen -W %q -- \"$cur\")); return\n", strings.Join(names, " "))
		fmt.Fprintln(w, "  fi")
		fmt.Fprintln(w, `  case "${COMP_WORDS[1]}" in`)
		for _, n := range names {
			if len(flags[n]) == 0 {
				continue
			}
			fmt.Fprintf(w, "    %s) [[ $cur == -* ]] && { COMPREPLY=($(compgen -W %q -- \"$cur\")); return; } ;;\n", n, strings.Join(flags[n], " "))
		}
		fmt.Fprintln(w, "  esac")
		fmt.Fprintln(w, `  COMPREPLY=($(compgen -f -- "$cur"))`)
		fmt.Fprintln(w, "}")
		fmt.Fprintln(w, "complete -o filenames -F _toolagent toolagent")
	case "fish":
		fmt.Fprintln(w, "# fish: load with  toolagent completion fish | source")
		fmt.Fprintln(w, "complete -c toolagent -f")
		for _, c := range commands() {
			fmt.Fprintf(w, "complete -c toolagent -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
		}
		for _, n := range names {
			for _, f := range flags[n] {
				fmt.Fprintf(w, "complete -c toolagent -n '__fish_seen_subcommand_from %s' -l %s\n", n, strings.TrimPrefix(f, "--"))
			}
		}
	}
	return nil
}

func fishQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }
