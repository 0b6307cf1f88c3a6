package main

import (
	"context"
	"errors"
	"net/http"

	"github.com/toolagent/toolagent/internal/cli"
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
	return operator.FindSay(ctx, c.State, server, e.getenv("TOOLAGENT_TOKEN"), e.stderr)
}

// ask sends a request to the daemon rd and prints its answer as it came
// (cli.PrintRaw); an answer other than 200 is the CLI's error
// (cli.AnswerExit). It returns the answer's body.
func ask(ctx context.Context, e env, rd *operator.Client, method, path string, body any) ([]byte, error) {
	code, b, err := rd.Do(ctx, method, path, body, false)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, cli.AnswerExit(rd.URL, rd.Token != "", code, b)
	}
	return b, cli.PrintRaw(e.stdout, b)
}

// answerExit is err, or the CLI's error for an answer of rd that was not
// what was asked for (*operator.AnswerError).
func answerExit(rd *operator.Client, err error) error {
	var ae *operator.AnswerError
	if errors.As(err, &ae) {
		return cli.AnswerExit(rd.URL, rd.Token != "", ae.Code, ae.Body)
	}
	return err
}

// daemonFor returns the daemon a catalog command (list, show, match,
// call) asks instead of reading the tools tree itself (operator.FindFor);
// nil: use the tree.
func (c *common) daemonFor(ctx context.Context, e env, sf serverFlag) (*operator.Client, error) {
	if err := c.resolve(e); err != nil {
		return nil, err
	}
	return operator.FindFor(ctx, &c.Paths, sf.url, e.getenv("TOOLAGENT_TOKEN"), e.stderr)
}
