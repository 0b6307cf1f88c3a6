package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/operator"
)

// approvalFlags are the approval settings of the CLI commands that open
// the queue themselves (call, approvals); the same variable as serve's.
type approvalFlags struct {
	ttl time.Duration
}

func (a *approvalFlags) register(fs *flag.FlagSet, e env) {
	a.ttl = approval.DefaultTTL
	if d, err := time.ParseDuration(e.getenv("TOOLAGENT_APPROVAL_TTL")); err == nil && d > 0 {
		a.ttl = d
	}
	fs.DurationVar(&a.ttl, "approval-ttl", a.ttl, "how long a held call waits for a decision (env TOOLAGENT_APPROVAL_TTL)")
}

// cliCaller is who a CLI command acts as: $USER (cli.Caller).
func cliCaller(e env) string { return cli.Caller(e.getenv) }

// runApprovals decides the approvals of the local queue, STATE/approvals,
// as the operator on the host: the ones `toolagent call` held, and those
// of a running `toolagent mcp`, through its control socket. A running
// daemon owns its state directory's queue; decide those through its API.
func runApprovals(ctx context.Context, e env, args []string) error {
	if err := cli.NoSelfApprovalFlag("approvals", args); err != nil {
		return err
	}
	var c common
	var af approvalFlags
	fs := newFlagSet("approvals", e)
	c.register(fs, e)
	c.registerRun(fs, e)
	af.register(fs, e)
	var sf serverFlag
	sf.register(fs, e)
	all := fs.Bool("all", false, "list: every approval, not only the pending ones")
	edits := fs.String("params", "", "approve: edited params as one JSON `object`, validated and judged again, in place of the asked ones")
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	const want = "approvals: want list [--all] | show ID | approve ID [--params JSON] | deny ID"
	if len(pos) == 0 {
		return usageError{Err: errors.New(want)}
	}
	verb, rest := pos[0], pos[1:]
	wantArgs := 1
	if verb == "list" {
		wantArgs = 0
	}
	switch {
	case !slices.Contains([]string{"list", "show", "approve", "deny"}, verb):
		return usageError{Err: fmt.Errorf("approvals: unknown action %q; %s", verb, want)}
	case len(rest) != wantArgs:
		return usageError{Err: fmt.Errorf("approvals %s: want %d argument(s), got %q", verb, wantArgs, rest)}
	case *edits != "" && verb != "approve":
		return usageError{Err: errors.New("approvals: --params goes with approve only")}
	}
	// A running daemon owns its state directory's queue: decide through
	// its API, as the operator (or the token in TOOLAGENT_TOKEN).
	rd, err := findDaemon(ctx, e, &c, sf.url)
	if err != nil {
		return err
	}
	id := strings.Join(rest, "")
	if rd != nil {
		do := func(ctx context.Context, method, path string, body any) (int, []byte, error) {
			return rd.Do(ctx, method, path, body, false)
		}
		return approvalsVia(ctx, e, do, "/v1", verb, id, *all, *edits)
	}
	// Only approve runs a call, so only approve loads the catalog. The
	// decision's audit line goes to stderr. The user here holds the state
	// directory: the operator, who confirms their own calls (host.Queue.Act).
	d, err := c.OpenQueue(host.Approvals{TTL: af.ttl}, slog.New(slog.NewTextHandler(e.stderr, nil)),
		slog.New(slog.NewJSONHandler(e.stderr, nil)).With(slog.String("log", "audit")), verb == "approve")
	if errors.Is(err, approval.ErrLocked) {
		// A running `toolagent mcp` owns the queue: decide through it.
		if cc, ok := operator.DialControl(host.ApprovalsDir(c.State)); ok {
			return approvalsVia(ctx, e, cc.Do, "", verb, id, *all, *edits)
		}
	}
	if err != nil {
		return err
	}
	defer d.Close()
	v, status, err := d.Act(ctx, verb, id, *all, json.RawMessage(*edits), cliCaller(e))
	return printApproval(e, v, status, cli.ApprovalExit(err))
}

// printApproval prints what an approvals action answered and exits by
// the status of the call an approval ran.
func printApproval(e env, v any, status dispatch.ResultStatus, err error) error {
	if err != nil {
		return err
	}
	if err := cli.PrintJSON(e.stdout, v); err != nil {
		return err
	}
	if status != "" {
		return cli.StatusExit(status)
	}
	return nil
}

// approvalsVia runs an approvals action through the control socket of a
// `toolagent mcp` (prefix "") or a daemon's API (prefix "/v1"), and prints
// what the local queue would print; exit codes as there.
func approvalsVia(ctx context.Context, e env, do func(ctx context.Context, method, path string, body any) (int, []byte, error), prefix, verb, id string, all bool, edits string) error {
	v, status, err := operator.Approvals(ctx, do, prefix, verb, id, all, edits)
	var ae *operator.AnswerError
	if errors.As(err, &ae) {
		err = cli.ApprovalAnswerExit(ae.Code, ae.Body)
	}
	return printApproval(e, v, status, err)
}
