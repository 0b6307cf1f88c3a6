package main

import (
	"context"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/operator"
)

// runStatus prints the status of a running daemon (GET /v1/status): the
// one that owns the state directory, or the one at --server.
func runStatus(ctx context.Context, e env, args []string) error {
	var c common
	fs := newFlagSet("status", e)
	c.registerState(fs, e)
	var sf serverFlag
	sf.register(fs, e)
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return cli.TooManyArgs("status", pos)
	}
	rd, err := findDaemon(ctx, e, &c, sf.url)
	if err != nil {
		return err
	}
	if rd == nil {
		return exitError{Code: exitFailed, Msg: "no daemon runs on the state directory " + c.State +
			" (no live " + operator.InfoPath(c.State) + "): start one with `toolagent serve`, give its --state, or ask another with --server URL"}
	}
	_, err = ask(ctx, e, rd, "GET", "/v1/status", nil)
	return err
}
