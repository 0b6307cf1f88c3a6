package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/lint"
)

// runValidate lints a tools tree for CI in a tools repository: it prints
// every problem (file:line: field: what was expected) and exits non-zero
// when there is any. A tool whose executor is merely not configured on this
// host is not a problem; one its executor cannot run at all is. With
// --match it also runs every tool's examples against the rest of the
// catalog (lint.Examples); what that finds are warnings, which fail the run
// only with --match-strict.
func runValidate(ctx context.Context, e env, args []string) error {
	var c common
	fs := newFlagSet("validate", e)
	c.register(fs, e)
	configFile := fs.String("config", "", "check the daemon config `FILE` (as serve --config reads it) instead of a tools tree")
	matchLint := fs.Bool("match", false, "also run each tool's examples against the other tools, each example left out of its own tool's text: warn when one does not find its tool first, and print Hit@1 and Hit@3 (warnings do not fail the run)")
	matchStrict := fs.Bool("match-strict", false, "--match, and exit 1 when it warns")
	vocabFile := fs.String("vocab", e.getenv("TOOLAGENT_VOCAB"), "extra vocabulary `FILE` merged with the built-in one, for --match (env TOOLAGENT_VOCAB)")
	signers := fs.String("trusted-signers", "", "allowed_signers `FILE` (as serve reads it): also check that the commit that last changed each tool folder, at HEAD of the git checkout the tools tree is in, is signed by one of these keys; each tool that is not is a problem")
	keyring := fs.String("trusted-keyring", "", "armored OpenPGP keyring `FILE` (as serve reads it), for --trusted-signers' check of OpenPGP-signed commits")
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	*matchLint = *matchLint || *matchStrict
	if *configFile != "" {
		if len(pos) > 0 {
			return usageError{Err: errors.New("validate: --config checks a config file; give no DIR or FILE with it")}
		}
		if *matchLint {
			return usageError{Err: errors.New("validate: --match checks a tools tree; it does not go with --config")}
		}
		return validateConfig(e, *configFile)
	}
	switch len(pos) {
	case 0:
	case 1:
		c.Tools = pos[0]
		if fi, err := os.Stat(pos[0]); err == nil && fi.Mode().IsRegular() {
			if *matchLint {
				return usageError{Err: errors.New("validate: --match runs each tool's examples against the other tools of a tree; give the tools DIR, not one FILE")}
			}
			return validateFile(e, pos[0])
		}
		// One tool's folder, not a tree of them: its file is what to check.
		if f := filepath.Join(pos[0], hldp.FileName); !*matchLint && isFile(f) {
			return validateFile(e, f)
		}
	default:
		return usageError{Err: errors.New("validate: want at most one DIR or FILE")}
	}
	asked := c.Tools != ""
	if err := c.resolve(e); err != nil {
		return err
	}
	if c.Tools == host.Embedded && !asked {
		// A false green is worse than none: in CI, validate checks the
		// repository's tree or says it found none.
		return exitError{Code: exitFailed, Msg: "validate: no tools tree here (no ./tools/*/" + hldp.FileName + " in this directory or a parent): give the DIR, or `validate embedded` for the copy compiled into the binary"}
	}
	if *matchLint {
		if c.Vocab, err = host.LoadVocab(*vocabFile); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "tools tree: %s\n", c.Tools)
	l, err := c.load(e, true)
	if err != nil {
		return err
	}
	defer l.Close()
	lines := lint.Tree(l, c.Tools)
	if *signers != "" || *keyring != "" {
		if c.Tools == host.Embedded {
			return usageError{Err: errors.New("validate: --trusted-signers checks the commits of a tools tree in a git checkout, not the embedded copy")}
		}
		var names []string
		for en := range l.Snap.Each() {
			names = append(names, en.Name)
		}
		head, problems, err := daemon.CheckTrust(*signers, *keyring, c.Tools, names)
		if err != nil {
			return exitError{Code: exitFailed, Msg: "validate: trusted signers: " + err.Error()}
		}
		for _, p := range problems {
			lines = append(lines, "untrusted: "+p.Reason)
		}
		fmt.Fprintf(e.stdout, "signatures at %s: %d of %d tools signed by an allowed key\n", head, len(names)-len(problems), len(names))
	}
	printLines(e, lines...)
	fmt.Fprintln(e.stdout, lint.Summary(l.Snap.Len(), len(l.Snap.Enabled()), len(lines)))
	if l.Snap.Len() == 0 && len(lines) == 0 {
		return exitError{Code: exitFailed, Msg: "validate: no tool in " + c.Tools + " (want " + filepath.Join(c.Tools, "<name>", hldp.FileName) + ")"}
	}
	var warnings []string
	if *matchLint {
		var s lint.MatchCheck
		warnings, s = lint.Examples(l.Snap, c.Vocab, host.Learned(c.State))
		printLines(e, warnings...)
		fmt.Fprint(e.stdout, s)
	}
	if len(lines) > 0 || *matchStrict && len(warnings) > 0 {
		return exitError{Code: exitFailed}
	}
	return nil
}

// printLines prints each line on stdout.
func printLines(e env, lines ...string) {
	for _, ln := range lines {
		fmt.Fprintln(e.stdout, ln)
	}
}

// validateFile checks one TOOL.hdlp (lint.File): every problem,
// file:line:col.
func validateFile(e env, path string) error {
	lines, err := lint.File(path)
	if err != nil {
		return err
	}
	printLines(e, lines...)
	fmt.Fprintf(e.stdout, "%s: %s\n", path, lint.Count(len(lines), "problem"))
	if len(lines) > 0 {
		return exitError{Code: exitFailed}
	}
	return nil
}

// validateConfig checks a daemon config file the way serve reads it
// (unknown keys, bad values, profiles), with the environment's overrides.
func validateConfig(e env, path string) error {
	cfg, err := loadConfig(e, "serve", []string{"--config", path}, nil)
	if err == nil {
		// The tokens it names (tokens_file, TOOLAGENT_TOKENS) too; a
		// secret never appears in an error.
		_, err = daemon.LoadTokens(cfg, slog.New(slog.DiscardHandler))
	}
	if err != nil {
		fmt.Fprintln(e.stdout, err)
		fmt.Fprintf(e.stdout, "config %s: not valid\n", path)
		return exitError{Code: exitFailed}
	}
	fmt.Fprintf(e.stdout, "config %s: 0 problems\n", path)
	return nil
}

// isFile reports whether path is a regular file.
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
