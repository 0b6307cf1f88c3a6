package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/toolagent/toolagent/internal/cli"
)

// writeHelp prints the help of subcommand name (cli.WriteHelp): its
// synopsis and summary from commands, then the flags fs holds.
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
	cli.WriteHelp(w, syn, cmd.summary, fs)
}

// didYouMean returns the subcommand closest to a mistyped one, or "".
func didYouMean(typed string) string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return cli.DidYouMean(typed, names)
}

// runCompletion prints a completion script for bash, zsh or fish:
// subcommands, then each subcommand's flags (read from its own help, so
// completion never lists a flag a subcommand does not take), then file
// names.
func runCompletion(ctx context.Context, e env, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		writeHelp(e.stdout, "completion", flag.NewFlagSet("completion", flag.ContinueOnError))
		return nil
	}
	if len(args) != 1 || !slices.Contains(cli.Shells, args[0]) {
		return usageError{Err: fmt.Errorf("completion: want one shell: bash, zsh or fish; got %q", args)}
	}
	var cmds []cli.Command
	for _, c := range commands() {
		cc := cli.Command{Name: c.name, Summary: c.summary}
		if c.name != "completion" && c.name != "version" {
			var buf bytes.Buffer
			he := env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: &buf, stderr: io.Discard}
			c.run(ctx, he, []string{"-h"})
			cc.Flags = cli.HelpFlags(buf.String())
		}
		cmds = append(cmds, cc)
	}
	cli.Completion(e.stdout, args[0], cmds)
	return nil
}
