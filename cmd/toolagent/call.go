package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/runs"
)

// runCall calls a tool: through the running daemon when there is one
// (operator.Client.Call), else on the tools tree here (host.Setup.Call).
// k=v params take the types the tool's params_schema declares. It
// prints the result and exits by its status.
func runCall(ctx context.Context, e env, args []string) error {
	if err := cli.NoSelfApprovalFlag("call", args); err != nil {
		return err
	}
	var c common
	fs := newFlagSet("call", e)
	c.register(fs, e)
	c.registerRun(fs, e)
	var af approvalFlags
	af.register(fs, e)
	var sf serverFlag
	sf.register(fs, e)
	paramsJSON := fs.String("params", "", "params as one JSON `object` (instead of k=v arguments)")
	dryRun := fs.Bool("dry-run", false, "validate and print exactly what would run (argv, cwd, limits) without running it")
	follow := fs.Bool("follow", false, "print the tool's stdout and stderr as it writes them, then the result")
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError{Err: errors.New("call: want a tool NAME, then k=v params or --params JSON")}
	}
	name, kvs := pos[0], pos[1:]
	if *paramsJSON != "" && len(kvs) > 0 {
		return usageError{Err: errors.New("call: give params either as k=v arguments or as --params JSON, not both")}
	}
	raw, err := cli.ParamsJSON(*paramsJSON)
	if err != nil {
		return err
	}
	out := followWriter(e, *follow)
	rd, err := c.daemonFor(ctx, e, sf)
	if err != nil {
		return err
	}
	if rd != nil {
		if len(kvs) > 0 {
			if raw, err = kvJSON(cli.KVParamsTyped(rd.ParamTypes(ctx, name), kvs)); err != nil {
				return err
			}
		}
		status, body, err := rd.Call(ctx, name, raw, *dryRun, out)
		if err != nil {
			return answerExit(rd, err)
		}
		if err := cli.PrintRaw(e.stdout, body); err != nil {
			return err
		}
		return cli.StatusExit(status)
	}
	c.RunsTools = true
	l, err := c.load(e, true)
	if err != nil {
		return err
	}
	defer l.Close()
	if len(kvs) > 0 {
		var t *hldp.Tool
		if en, ok := l.Snap.Lookup(name); ok {
			t = en.Tool
		}
		if raw, err = kvJSON(cli.KVParams(t, kvs)); err != nil {
			return err
		}
	}
	call := dispatch.Call{Tool: name, Params: raw, Caller: cliCaller(e), Door: dispatch.DoorCLI, DryRun: *dryRun, Output: out}
	res, err := c.Call(ctx, l, call, host.Approvals{TTL: af.ttl})
	if err != nil {
		return err
	}
	if err := cli.PrintJSON(e.stdout, res); err != nil {
		return err
	}
	return cli.StatusExit(res.Status)
}

// kvJSON is the params object of k=v arguments, or their usage error.
func kvJSON(m map[string]any, err error) (json.RawMessage, error) {
	if err != nil {
		return nil, usageError{Err: err}
	}
	return json.Marshal(m)
}

// followWriter writes a call's output as it comes: stdout to stdout,
// stderr to stderr; nil unless on.
func followWriter(e env, on bool) func(stream string, p []byte) {
	if !on {
		return nil
	}
	var mu sync.Mutex
	return func(stream string, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		if stream == runs.EventStderr {
			e.stderr.Write(p)
		} else {
			e.stdout.Write(p)
		}
	}
}
