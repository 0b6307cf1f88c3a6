package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/host"
)

func runList(ctx context.Context, e env, args []string) error {
	var c common
	fs := newFlagSet("list", e)
	c.register(fs, e)
	all := fs.Bool("all", false, "include disabled, failed and stale tools with their reasons")
	var sf serverFlag
	sf.register(fs, e)
	var tagArgs cli.ListFlag
	fs.Var(&tagArgs, "tag", "list only the tools carrying this `TAG`; repeatable, or a comma list: --tag git --tag read-only and --tag git,read-only both keep the tools with both tags")
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return cli.TooManyArgs("list", pos)
	}
	tags, err := catalog.ParseTagFilter(tagArgs)
	if err != nil {
		return usageError{Err: fmt.Errorf("--tag: %w", err)}
	}
	rd, err := c.daemonFor(ctx, e, sf)
	if err != nil {
		return err
	}
	if rd != nil {
		q := url.Values{}
		if *all {
			q.Set("all", "1")
		}
		for _, t := range tagArgs {
			q.Add("tag", t)
		}
		path := "/v1/tools"
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		_, err := ask(ctx, e, rd, "GET", path, nil)
		return err
	}
	l, err := c.load(e, true)
	if err != nil {
		return err
	}
	entries := l.Snap.Enabled()
	if *all {
		entries = l.Snap.All()
	}
	out := struct {
		// Tree is the tools tree used (found as findTools says).
		Tree     string             `json:"tools_tree"`
		Revision string             `json:"revision"`
		Tools    []catalog.ToolView `json:"tools"`
		Problems []string           `json:"problems,omitempty"`
	}{Tree: c.Tools, Revision: l.Snap.Rev(), Tools: []catalog.ToolView{}}
	for _, en := range catalog.FilterTags(entries, tags) {
		out.Tools = append(out.Tools, en.View(false))
	}
	if *all {
		out.Problems = host.ProblemLines(l.Report.Problems)
	}
	return cli.PrintJSON(e.stdout, out)
}
