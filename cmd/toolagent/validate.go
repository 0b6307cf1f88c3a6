package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/hldp"
)

// runValidate lints a tools tree for CI in a tools repository: it prints
// every problem (file:line: field: what was expected) and exits non-zero
// when there is any. A tool whose executor is merely not configured on this
// host is not a problem; one its executor cannot run at all is.
func runValidate(ctx context.Context, e env, args []string) error {
	var c common
	fs := newFlagSet("validate", e)
	c.register(fs, e)
	configFile := fs.String("config", "", "check the daemon config `FILE` (as serve --config reads it) instead of a tools tree")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if *configFile != "" {
		if len(pos) > 0 {
			return usageError{errors.New("validate: --config checks a config file; give no DIR or FILE with it")}
		}
		return validateConfig(e, *configFile)
	}
	switch len(pos) {
	case 0:
	case 1:
		c.tools = pos[0]
		if fi, err := os.Stat(pos[0]); err == nil && fi.Mode().IsRegular() {
			return validateFile(e, pos[0])
		}
	default:
		return usageError{errors.New("validate: want at most one DIR or FILE")}
	}
	asked := c.tools != ""
	if err := c.resolve(e); err != nil {
		return err
	}
	if c.tools == embeddedTools && !asked {
		// A false green is worse than none: in CI, validate checks the
		// repository's tree or says it found none.
		return exitError{code: exitFailed, msg: "validate: no tools tree here (no ./tools/*/" + hldp.FileName + " in this directory or a parent): give the DIR, or `validate embedded` for the copy compiled into the binary"}
	}
	fmt.Fprintf(e.stdout, "tools tree: %s\n", c.tools)
	l, err := c.load(e, true)
	if err != nil {
		return err
	}
	lines := problemLines(l.rep.Problems)
	for _, en := range l.snap.All() {
		if en.Tool != nil && en.Status == catalog.Disabled {
			if _, configured := l.execs[en.Tool.Executor]; configured {
				lines = append(lines, fmt.Sprintf("tools/%s: %s", en.File, en.Reason))
			}
		}
	}
	for _, ln := range lines {
		fmt.Fprintln(e.stdout, ln)
	}
	fmt.Fprintf(e.stdout, "%d tool folders, %d callable, %d problems\n", l.snap.Len(), len(l.snap.Enabled()), len(lines))
	if len(lines) > 0 {
		return exitError{code: exitFailed}
	}
	return nil
}

// validateFile checks one TOOL.hdlp: every problem, file:line:col.
func validateFile(e env, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, err := hldp.Parse(path, data); err != nil {
		lines := problemLines([]error{err})
		for _, ln := range lines {
			fmt.Fprintln(e.stdout, ln)
		}
		fmt.Fprintf(e.stdout, "%s: %d problems\n", path, len(lines))
		return exitError{code: exitFailed}
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
		_, err = loadTokens(cfg, slog.New(slog.DiscardHandler))
	}
	if err != nil {
		fmt.Fprintln(e.stdout, err)
		fmt.Fprintf(e.stdout, "config %s: not valid\n", path)
		return exitError{code: exitFailed}
	}
	fmt.Fprintf(e.stdout, "config %s: 0 problems\n", path)
	return nil
}
