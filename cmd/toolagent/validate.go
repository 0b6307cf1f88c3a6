package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/match"
	"github.com/toolagent/toolagent/internal/match/matcheval"
)

// runValidate lints a tools tree for CI in a tools repository: it prints
// every problem (file:line: field: what was expected) and exits non-zero
// when there is any. A tool whose executor is merely not configured on this
// host is not a problem; one its executor cannot run at all is. With
// --match it also runs every tool's examples against the rest of the
// catalog (lintMatch); what that finds are warnings, which fail the run
// only with --match-strict.
func runValidate(ctx context.Context, e env, args []string) error {
	var c common
	fs := newFlagSet("validate", e)
	c.register(fs, e)
	configFile := fs.String("config", "", "check the daemon config `FILE` (as serve --config reads it) instead of a tools tree")
	matchLint := fs.Bool("match", false, "also run each tool's examples against the other tools, each example left out of its own tool's text: warn when one does not find its tool first, and print Hit@1 and Hit@3 (warnings do not fail the run)")
	matchStrict := fs.Bool("match-strict", false, "--match, and exit 1 when it warns")
	vocabFile := fs.String("vocab", e.getenv("TOOLAGENT_VOCAB"), "extra vocabulary `FILE` merged with the built-in one, for --match (env TOOLAGENT_VOCAB)")
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
	lines := host.ProblemLines(l.Report.Problems)
	for _, en := range l.Snap.All() {
		if en.Tool != nil && en.Status == catalog.Disabled {
			if _, configured := l.Execs[en.Tool.Executor]; configured {
				lines = append(lines, fmt.Sprintf("tools/%s: %s", en.File, en.Reason))
			}
		}
	}
	for _, ln := range lines {
		fmt.Fprintln(e.stdout, ln)
	}
	fmt.Fprintf(e.stdout, "%d tool folders, %d callable, %d problems\n", l.Snap.Len(), len(l.Snap.Enabled()), len(lines))
	warnings := 0
	if *matchLint {
		warnings = lintMatch(e, l.Snap, c.Vocab)
	}
	if len(lines) > 0 || *matchStrict && warnings > 0 {
		return exitError{Code: exitFailed}
	}
	return nil
}

// lintMatch runs every example of the tools in snap (each tool whose
// definition parses, whatever its executor or status) against the others
// with that example left out of its own tool's text
// (matcheval.LeaveOneOut), prints a warning for each example that is
// refused, finds another tool first or does not find its tool among the
// candidates, then the figures, and returns the number of warnings.
func lintMatch(e env, snap *catalog.Snapshot, vocab *match.Vocab) int {
	var docs []match.Doc
	files := map[string]string{}
	for _, en := range snap.All() {
		if en.Tool != nil {
			docs = append(docs, catalog.ToolDoc(en.Tool))
			files[en.Name] = "tools/" + en.File
		}
	}
	results := matcheval.LeaveOneOut(docs, vocab, catalog.MaxCandidates)
	warnings := 0
	for _, r := range results {
		if r.OK() {
			continue
		}
		warnings++
		fmt.Fprintf(e.stdout, "warning: %s: %s[%d] %q: %s\n", files[r.Doc], catalog.ExamplesField, r.Index, r.Example, r.Verdict())
	}
	s := matcheval.SummarizeExamples(results)
	fmt.Fprintf(e.stdout, "match: %d examples of %d tools, each left out of its own tool: Hit@1 %.3f, Hit@3 %.3f, refused %.3f; %d warnings\n",
		s.Examples, s.Docs, s.HitAt1, s.HitAt3, s.Refused, warnings)
	return warnings
}

// validateFile checks one TOOL.hdlp: every problem, file:line:col.
func validateFile(e env, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, err := hldp.Parse(path, data); err != nil {
		lines := host.ProblemLines([]error{err})
		for _, ln := range lines {
			fmt.Fprintln(e.stdout, ln)
		}
		fmt.Fprintf(e.stdout, "%s: %d problems\n", path, len(lines))
		return exitError{Code: exitFailed}
	}
	fmt.Fprintf(e.stdout, "%s: 0 problems\n", path)
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
