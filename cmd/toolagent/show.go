package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/toolagent/toolagent/internal/cli"
)

func runShow(ctx context.Context, e env, args []string) error {
	var c common
	fs := newFlagSet("show", e)
	c.register(fs, e)
	var sf serverFlag
	sf.register(fs, e)
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{Err: errors.New("show: want exactly one tool NAME")}
	}
	rd, err := c.daemonFor(ctx, e, sf)
	if err != nil {
		return err
	}
	if rd != nil {
		_, err := ask(ctx, e, rd, "GET", "/v1/tools/"+url.PathEscape(pos[0]), nil)
		return err
	}
	l, err := c.load(e, true)
	if err != nil {
		return err
	}
	en, ok := l.Snap.Lookup(pos[0])
	if !ok {
		return exitError{Code: exitNotFound, Msg: fmt.Sprintf("no tool named %q in %s", pos[0], c.Tools)}
	}
	return cli.PrintJSON(e.stdout, en.View(true))
}
