package main

import (
	"context"
	"errors"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/lint"
)

// runEval measures intent matching alone: it indexes every tool whose
// definition parses (whatever its executor, configured here or not), ranks
// each query of a queries.jsonl and prints what callers are served (a
// refusal is a miss) per language, then the ranking alone; then the same figures with the tools' examples removed, so
// that what the examples gain (or cost) shows.
func runEval(ctx context.Context, e env, args []string) error {
	var c common
	fs := newFlagSet("eval", e)
	c.register(fs, e)
	queries := fs.String("queries", "", "queries `FILE` (JSONL: {\"query\", \"expected\": [names], \"lang\"})")
	asJSON := fs.Bool("json", false, "print the figures as one JSON object")
	byLang := fs.Bool("by-lang", true, "break the figures down by the lang field")
	misses := fs.Bool("misses", false, "list the queries answered wrongly (text output)")
	vocabFile := fs.String("vocab", e.getenv("TOOLAGENT_VOCAB"), "extra vocabulary `FILE` merged with the built-in one (env TOOLAGENT_VOCAB)")
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return cli.TooManyArgs("eval", pos)
	}
	if *queries == "" {
		return usageError{Err: errors.New("eval: --queries FILE is required")}
	}
	if err := c.resolve(e); err != nil {
		return err
	}
	tree, closeTree, err := c.OpenTree()
	if err != nil {
		return err
	}
	defer closeTree()
	return lint.EvalRun{Tree: tree, ToolsDir: c.Tools, VocabFile: *vocabFile, QueriesFile: *queries,
		ByLang: *byLang, JSON: *asJSON, Misses: *misses, Stdout: e.stdout, Stderr: e.stderr}.Run()
}
