package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/operator"
)

func runNew(ctx context.Context, e env, args []string) error {
	var c common
	fs := newFlagSet("new", e)
	c.register(fs, e)
	author := fs.String("author", e.getenv("USER"), "author written into the definition")
	intent := fs.String("intent", "", "the tool's intent `TEXT` (one sentence: what it does); without it the file holds a placeholder and does not load until edited")
	why := fs.String("why", "", "why the tool exists, `TEXT`; without it a placeholder that keeps the file from loading until edited")
	force := fs.Bool("force", false, "write even into the tools tree a running daemon serves (it would serve the new tool as soon as it loads)")
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{Err: errors.New("new: want exactly one tool NAME")}
	}
	if err := c.resolve(e); err != nil {
		return err
	}
	if c.Tools == host.Embedded {
		return usageError{Err: errors.New("new: no tools directory found; give --tools DIR")}
	} else if err := operator.RefuseServed(ctx, c.State, c.Tools, *force); err != nil {
		return exitError{Code: exitRefused, Msg: "new: " + err.Error()}
	}
	if *author == "" {
		*author = "unknown"
	}
	file, err := c.NewTool(pos[0], *author, *intent, *why, time.Now())
	switch {
	case errors.Is(err, os.ErrExist):
		return exitError{Code: exitFailed, Msg: fmt.Sprintf("new: %s already exists; not overwriting it", file)}
	case errors.Is(err, host.ErrToolName):
		return usageError{Err: fmt.Errorf("new: %w", err)}
	case err != nil:
		return err
	}
	fmt.Fprintf(e.stdout, "created %s\n", file)
	return nil
}
