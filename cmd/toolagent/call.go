package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/runs"
)

func runCall(ctx context.Context, e env, args []string) error {
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
	rd, err := c.daemonFor(ctx, e, sf)
	if err != nil {
		return err
	}
	if rd != nil {
		return callRemote(ctx, e, rd, name, kvs, *paramsJSON, *dryRun, *follow)
	}
	c.RunsTools = true
	l, err := c.load(e, true)
	if err != nil {
		return err
	}
	raw := json.RawMessage(*paramsJSON)
	if len(kvs) > 0 {
		var t *hldp.Tool
		if en, ok := l.Snap.Lookup(name); ok {
			t = en.Tool
		}
		m, err := cli.KVParams(t, kvs)
		if err != nil {
			return usageError{Err: err}
		}
		raw, _ = json.Marshal(m)
	}
	store := new(catalog.Store)
	store.Swap(l.Snap)
	// A call the policy holds goes into the local approval queue,
	// STATE/approvals, for `toolagent approvals approve ID`. When a daemon
	// owns that queue the call is held without an id: ask the daemon.
	var ap *approval.Store
	var apErr error
	if !*dryRun {
		ap, apErr = host.OpenApprovals(c.State, af.ttl, af.allowSelf, slog.New(slog.DiscardHandler))
		if apErr == nil {
			defer ap.Close()
		} else if !errors.Is(apErr, approval.ErrLocked) {
			return apErr
		}
	}
	d := dispatch.New(store, l.Execs, dispatch.Options{
		Audit:     slog.New(slog.DiscardHandler),
		Approvals: host.QueueOf(ap),
		// The CLI holds the call in the local queue: approvers use the CLI.
		ApproveHint: func(id string) string {
			return fmt.Sprintf("an approver on this host: `toolagent approvals approve %s` (or `deny`; --params JSON to approve with edits)", id)
		},
	})
	call := dispatch.Call{Tool: name, Params: raw, Caller: cliCaller(e), Door: dispatch.DoorCLI, DryRun: *dryRun}
	if *follow {
		call.Output = followWriter(e)
	}
	res := d.Invoke(ctx, call)
	if res.Status == dispatch.ApprovalRequired && apErr != nil {
		res.Suggestion = fmt.Sprintf("an approver must confirm this call, and this command cannot hold it: %v. Call the tool through that daemon (POST /v1/call) to get an approval id", apErr)
	}
	if err := cli.PrintJSON(e.stdout, res); err != nil {
		return err
	}
	return statusExit(res.Status)
}

// callRemote calls a tool through a running daemon, prints its result as
// it came and exits by its status. k=v params are converted to the types
// the daemon's params_schema declares. On an open daemon the call is
// anonymous, as every other caller there, so the operator (who approves
// with the operator token) is not approving their own call; a token in
// TOOLAGENT_TOKEN is sent as given.
func callRemote(ctx context.Context, e env, rd *operator.Client, name string, kvs []string, paramsJSON string, dryRun, follow bool) error {
	anonymous := rd.Operator && rd.Info.Open
	raw := json.RawMessage(paramsJSON)
	if len(kvs) > 0 {
		var types map[string]string
		if code, body, err := rd.Do(ctx, "GET", "/v1/tools/"+url.PathEscape(name), nil, anonymous); err == nil && code == http.StatusOK {
			types = cli.SchemaTypes(body)
		}
		m, err := cli.KVParamsTyped(types, kvs)
		if err != nil {
			return usageError{Err: err}
		}
		raw, _ = json.Marshal(m)
	}
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if follow && !dryRun {
		return followRemote(ctx, e, rd, map[string]any{"tool": name, "params": raw}, anonymous)
	}
	code, body, err := rd.Do(ctx, "POST", "/v1/call", map[string]any{"tool": name, "params": raw, "dry_run": dryRun}, anonymous)
	if err != nil {
		return err
	}
	var res struct {
		Status dispatch.ResultStatus `json:"status"`
	}
	if json.Unmarshal(body, &res) != nil || res.Status == "" {
		return apiErr(rd, code, body) // not a result: 401, 403, 400, 413…
	}
	if err := cli.PrintRaw(e.stdout, body); err != nil {
		return err
	}
	return statusExit(res.Status)
}

// followWriter writes a call's output as it comes: stdout to stdout,
// stderr to stderr.
func followWriter(e env) func(stream string, p []byte) {
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

// followRemote makes a streaming call (POST /v1/call with Accept NDJSON),
// writes the tool's output as its events come, then prints the result and
// exits by its status.
func followRemote(ctx context.Context, e env, rd *operator.Client, body map[string]any, anonymous bool) error {
	resp, err := rd.Stream(ctx, "/v1/call", body, anonymous)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return apiErr(rd, resp.StatusCode, b)
	}
	out := followWriter(e)
	dec := json.NewDecoder(resp.Body)
	for {
		var ev runs.Event
		if err := dec.Decode(&ev); err != nil {
			return fmt.Errorf("daemon %s: the call's stream ended before its result (%v); its run: GET /v1/runs/%s", rd.URL, err, resp.Header.Get("X-Run-Id"))
		}
		switch ev.Event {
		case runs.EventStdout, runs.EventStderr:
			p := []byte(ev.Data)
			if ev.Encoding == "base64" {
				if p, err = base64.StdEncoding.DecodeString(ev.Data); err != nil {
					return fmt.Errorf("daemon %s: a %s event of bad base64: %v", rd.URL, ev.Event, err)
				}
			}
			out(ev.Event, p)
		case runs.EventResult:
			var res struct {
				Status dispatch.ResultStatus `json:"status"`
			}
			if err := json.Unmarshal(ev.Result, &res); err != nil {
				return fmt.Errorf("daemon %s: a result event that is not a result: %v", rd.URL, err)
			}
			if err := cli.PrintRaw(e.stdout, ev.Result); err != nil {
				return err
			}
			return statusExit(res.Status)
		}
	}
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
