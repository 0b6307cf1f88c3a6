package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/operator"
)

// approvalsVia runs an approvals action through the control socket of a
// `toolagent mcp` (prefix "") or a daemon's API (prefix "/v1"), and prints
// what the local queue would print; exit codes as there.
func approvalsVia(ctx context.Context, e env, do func(ctx context.Context, method, path string, body any) (int, []byte, error), prefix, verb, id string, all bool, edits string) error {
	var (
		code int
		body []byte
		err  error
	)
	switch verb {
	case "list":
		q := ""
		if all {
			q = "?all=1"
		}
		code, body, err = do(ctx, "GET", prefix+"/approvals"+q, nil)
	case "show":
		code, body, err = do(ctx, "GET", prefix+"/approvals/"+url.PathEscape(id), nil)
	default:
		d := operator.Decision{Decision: verb}
		if edits != "" {
			d.Params = json.RawMessage(edits)
		}
		code, body, err = do(ctx, "POST", prefix+"/approvals/"+url.PathEscape(id), d)
	}
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		var eb struct{ Error string }
		json.Unmarshal(body, &eb)
		msg := strings.TrimSpace(eb.Error)
		switch code {
		case http.StatusNotFound:
			return exitError{code: exitNotFound, msg: msg}
		case http.StatusUnprocessableEntity, http.StatusBadRequest:
			return exitError{code: exitUsage, msg: msg}
		case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable:
			return exitError{code: exitFailed, msg: msg}
		default:
			return exitError{code: exitRefused, msg: msg}
		}
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("the approvals control socket answered %q: %w", body, err)
	}
	if err := cli.PrintJSON(e.stdout, v); err != nil {
		return err
	}
	if verb == "approve" {
		var a struct {
			Result *struct {
				Status dispatch.ResultStatus `json:"status"`
			} `json:"result"`
		}
		if json.Unmarshal(body, &a) == nil && a.Result != nil {
			return statusExit(a.Result.Status)
		}
	}
	return nil
}
