package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/hldp"
)

func runCall(ctx context.Context, e env, args []string) error {
	var c common
	fs := newFlagSet("call", e)
	c.register(fs, e)
	var af approvalFlags
	af.register(fs, e)
	paramsJSON := fs.String("params", "", "params as one JSON `object` (instead of k=v arguments)")
	dryRun := fs.Bool("dry-run", false, "validate and print exactly what would run (argv, cwd, limits) without running it")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError{errors.New("call: want a tool NAME, then k=v params or --params JSON")}
	}
	name, kvs := pos[0], pos[1:]
	if *paramsJSON != "" && len(kvs) > 0 {
		return usageError{errors.New("call: give params either as k=v arguments or as --params JSON, not both")}
	}
	c.runsTools = true
	l, err := c.load(e, true)
	if err != nil {
		return err
	}
	raw := json.RawMessage(*paramsJSON)
	if len(kvs) > 0 {
		var t *hldp.Tool
		if en, ok := l.snap.Lookup(name); ok {
			t = en.Tool
		}
		m, err := kvParams(t, kvs)
		if err != nil {
			return usageError{err}
		}
		raw, _ = json.Marshal(m)
	}
	store := new(catalog.Store)
	store.Swap(l.snap)
	// A call the policy holds goes into the local approval queue,
	// STATE/approvals, for `toolagent approvals approve ID`. When a daemon
	// owns that queue the call is held without an id: ask the daemon.
	var ap *approval.Store
	var apErr error
	if !*dryRun {
		ap, apErr = openApprovals(c.state, af.ttl, af.allowSelf, slog.New(slog.DiscardHandler))
		if apErr == nil {
			defer ap.Close()
		} else if !errors.Is(apErr, approval.ErrLocked) {
			return apErr
		}
	}
	d := dispatch.New(store, l.execs, dispatch.Options{
		Audit:     slog.New(slog.DiscardHandler),
		Approvals: ap,
		// The CLI holds the call in the local queue: approvers use the CLI.
		ApproveHint: func(id string) string {
			return fmt.Sprintf("an approver on this host: `toolagent approvals approve %s` (or `deny`; --params JSON to approve with edits)", id)
		},
	})
	res := d.Invoke(ctx, dispatch.Call{Tool: name, Params: raw, Caller: cliCaller(e), Door: dispatch.DoorCLI, DryRun: *dryRun})
	if res.Status == dispatch.ApprovalRequired && apErr != nil {
		res.Suggestion = fmt.Sprintf("an approver must confirm this call, and this command cannot hold it: %v. Call the tool through that daemon (POST /v1/call) to get an approval id", apErr)
	}
	if err := printJSON(e.stdout, res); err != nil {
		return err
	}
	return statusExit(res.Status)
}

// statusExit maps a result status to the command's exit code.
func statusExit(s dispatch.ResultStatus) error {
	switch s {
	case dispatch.Success, dispatch.NoData, dispatch.DryRun:
		return nil
	case dispatch.InvalidParams:
		return exitError{code: exitUsage}
	case dispatch.NotFound:
		return exitError{code: exitNotFound}
	case dispatch.Timeout:
		return exitError{code: exitTimeout}
	case dispatch.Cancelled:
		return exitError{code: exitFailed}
	case dispatch.Disabled, dispatch.ApprovalRequired, dispatch.Denied, dispatch.Busy:
		return exitError{code: exitRefused}
	default:
		return exitError{code: exitFailed}
	}
}

// kvParams turns k=v arguments into a params object. Values are converted
// to the type params_schema declares (integer, number, boolean; array and
// object as JSON); k:=JSON always takes raw JSON.
func kvParams(t *hldp.Tool, kvs []string) (map[string]any, error) {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		if i := strings.Index(kv, ":="); i > 0 && !strings.Contains(kv[:i], "=") {
			var v any
			if err := json.Unmarshal([]byte(kv[i+2:]), &v); err != nil {
				return nil, fmt.Errorf("param %s: value after := must be JSON: %v", kv[:i], err)
			}
			m[kv[:i]] = v
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("argument %q: want k=v (or k:=JSON)", kv)
		}
		m[k] = convertValue(t, k, v)
	}
	return m, nil
}

// convertValue converts v to the declared type of param k when it parses
// as that type; otherwise the string goes through and params validation
// says what was expected.
func convertValue(t *hldp.Tool, k, v string) any {
	if t == nil {
		return v
	}
	p, ok := t.Param(k)
	if !ok {
		return v
	}
	switch p.Type {
	case hldp.TypeInteger:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	case hldp.TypeNumber:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	case hldp.TypeBoolean:
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	case hldp.TypeArray, hldp.TypeObject:
		var x any
		if json.Unmarshal([]byte(v), &x) == nil {
			return x
		}
	}
	return v
}
