package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/toolagent/toolagent/internal/operator"
)

// serverFlag is the --server flag of the commands that can talk to a
// daemon.
type serverFlag struct{ url string }

func (s *serverFlag) register(fs interface {
	StringVar(p *string, name, value, usage string)
}, e env) {
	fs.StringVar(&s.url, "server", e.getenv("TOOLAGENT_SERVER"), "ask the daemon at `URL` (env TOOLAGENT_SERVER; its token from TOOLAGENT_TOKEN); default: the daemon that owns the state directory, if one runs")
}

// findDaemon returns the daemon a CLI command talks to: the one at
// --server (TOOLAGENT_SERVER) with the token in TOOLAGENT_TOKEN, or the
// one that owns the state directory c names, when it runs; nil: none.
func findDaemon(ctx context.Context, e env, c *common, server string) (*operator.Client, error) {
	if err := c.resolve(e); err != nil {
		return nil, err
	}
	return operator.Find(ctx, c.State, server, e.getenv("TOOLAGENT_TOKEN"))
}

// apiErr turns a daemon's error answer into the CLI's: 401/403 refused (5),
// 404 not found (3), others failed (1), with the daemon's own message.
func apiErr(r *operator.Client, code int, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	msg = fmt.Sprintf("daemon %s answered %d: %s", r.URL, code, msg)
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		if r.Token == "" {
			msg += " (set TOOLAGENT_TOKEN to a token of that daemon)"
		}
		return exitError{code: exitRefused, msg: msg}
	case http.StatusNotFound:
		return exitError{code: exitNotFound, msg: msg}
	}
	return exitError{code: exitFailed, msg: msg}
}

// daemonFor returns the daemon a catalog command (list, show, match,
// call) asks instead of reading the tools tree itself: the one at
// --server, or the one owning the state directory, unless the tree was
// named (--tools, TOOLAGENT_TOOLS) or found from the working directory and
// differs from the daemon's; then it says on stderr that a daemon runs and
// how to ask it. nil: use the tree.
func (c *common) daemonFor(ctx context.Context, e env, sf serverFlag) (*operator.Client, error) {
	rd, err := findDaemon(ctx, e, c, sf.url)
	if rd == nil || err != nil || sf.url != "" {
		return rd, err
	}
	if c.ToolsChosen {
		return nil, nil
	}
	if c.ToolsFromWorkDir && c.Tools != rd.Info.Tools {
		fmt.Fprintf(e.stderr, "toolagent: using the tools tree %s (found from the working directory); the daemon of this state directory, %s, serves %s: give --server %s to ask it\n",
			c.Tools, rd.URL, rd.Info.Source, rd.URL)
		return nil, nil
	}
	return rd, nil
}
