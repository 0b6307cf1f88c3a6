package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/host"
)

func runMatch(ctx context.Context, e env, args []string) error {
	var c common
	fs := newFlagSet("match", e)
	c.register(fs, e)
	limit := fs.Int("limit", 3, "most candidates to return (1..3)")
	var sf serverFlag
	sf.register(fs, e)
	vocabFile := fs.String("vocab", e.getenv("TOOLAGENT_VOCAB"), "extra vocabulary `FILE` merged with the built-in one (env TOOLAGENT_VOCAB)")
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError{Err: errors.New(`match: want the intent in words, e.g. toolagent match "查看最近的提交记录"`)}
	}
	if len(pos) >= 2 && pos[0] == "feedback" && (pos[1] == "list" || pos[1] == "clear") {
		return matchFeedback(ctx, e, &c, sf, pos[1], pos[2:])
	}
	if *limit < 1 || *limit > 3 {
		return usageError{Err: errors.New("match: --limit must be 1, 2 or 3")}
	}
	rd, err := c.daemonFor(ctx, e, sf)
	if err != nil {
		return err
	}
	if rd != nil {
		body, err := ask(ctx, e, rd, "POST", "/v1/match", map[string]any{"intent": strings.Join(pos, " "), "limit": *limit})
		if err != nil {
			return err
		}
		var resp struct{ Found bool }
		if json.Unmarshal(body, &resp) == nil && !resp.Found {
			return exitError{Code: exitNotFound}
		}
		return nil
	}
	if c.Vocab, err = host.LoadVocab(*vocabFile); err != nil {
		return err
	}
	l, err := c.load(e, false)
	if err != nil {
		return err
	}
	resp := l.Snap.MatchIntent(strings.Join(pos, " "), *limit)
	if err := cli.PrintJSON(e.stdout, resp); err != nil {
		return err
	}
	if !resp.Found {
		return exitError{Code: exitNotFound}
	}
	return nil
}

// matchFeedback is `toolagent match feedback list|clear [TOOL]`: what
// was learned from use, through the running daemon (which holds it), or
// from the state directory's file when none runs.
func matchFeedback(ctx context.Context, e env, c *common, sf serverFlag, verb string, rest []string) error {
	if len(rest) > 1 {
		return usageError{Err: fmt.Errorf("match feedback %s: want at most one TOOL, got %q", verb, rest)}
	}
	tool := ""
	if len(rest) == 1 {
		tool = rest[0]
	}
	rd, err := c.daemonFor(ctx, e, sf)
	if err != nil {
		return err
	}
	if rd != nil {
		method := map[string]string{"list": "GET", "clear": "DELETE"}[verb]
		_, err := ask(ctx, e, rd, method, "/v1/feedback?tool="+url.QueryEscape(tool), nil)
		return err
	}
	v, err := c.Feedback(verb == "clear", tool)
	if err != nil {
		return err
	}
	return cli.PrintJSON(e.stdout, v)
}
