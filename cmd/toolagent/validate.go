package main

import (
	"context"
	"errors"
	"fmt"

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
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch len(pos) {
	case 0:
	case 1:
		c.tools = pos[0]
	default:
		return usageError{errors.New("validate: want at most one DIR")}
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
