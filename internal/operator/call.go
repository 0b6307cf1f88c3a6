package operator

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/runs"
)

// AnswerError is an answer of the daemon that is not what was asked
// for: a refusal (401, 403), not found, a bad request.
type AnswerError struct {
	Code int
	Body []byte
}

func (e *AnswerError) Error() string {
	return fmt.Sprintf("answered %d: %s", e.Code, strings.TrimSpace(string(e.Body)))
}

// Anonymous reports whether a call through c goes without its token: on
// an open daemon the operator calls as every other caller there does, so
// the operator (who approves with the operator token) is not approving
// their own call; a token given by the user is always sent.
func (c *Client) Anonymous() bool { return c.Operator && c.Info.Open }

// ParamTypes returns the declared type of each param of tool (JSON
// Schema words), read from its params_schema; nil when the daemon does
// not say.
func (c *Client) ParamTypes(ctx context.Context, tool string) map[string]string {
	code, body, err := c.Do(ctx, "GET", "/v1/tools/"+url.PathEscape(tool), nil, c.Anonymous())
	if err != nil || code != http.StatusOK {
		return nil
	}
	return schemaTypes(body)
}

// schemaTypes reads the declared type of each param from a tool view's
// params_schema.
func schemaTypes(view []byte) map[string]string {
	var v struct {
		Schema struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		} `json:"params_schema"`
	}
	if json.Unmarshal(view, &v) != nil {
		return nil
	}
	types := make(map[string]string, len(v.Schema.Properties))
	for k, p := range v.Schema.Properties {
		if t, ok := p.Type.(string); ok {
			types[k] = t
		}
	}
	return types
}

// Call calls tool with params through the daemon (POST /v1/call) and
// returns its result as the daemon wrote it, with its status. With out
// (and not dryRun) the call streams: out gets the tool's stdout and
// stderr as they come (stream is runs.EventStdout or runs.EventStderr).
// An answer that is not a result is an *AnswerError.
func (c *Client) Call(ctx context.Context, tool string, params json.RawMessage, dryRun bool, out func(stream string, p []byte)) (dispatch.ResultStatus, []byte, error) {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if out != nil && !dryRun {
		return c.follow(ctx, map[string]any{"tool": tool, "params": params}, out)
	}
	code, body, err := c.Do(ctx, "POST", "/v1/call", map[string]any{"tool": tool, "params": params, "dry_run": dryRun}, c.Anonymous())
	if err != nil {
		return "", nil, err
	}
	var res struct {
		Status dispatch.ResultStatus `json:"status"`
	}
	if json.Unmarshal(body, &res) != nil || res.Status == "" {
		return "", nil, &AnswerError{code, body} // not a result: 401, 403, 400, 413…
	}
	return res.Status, body, nil
}

// follow makes a streaming call (POST /v1/call with Accept NDJSON),
// writes the tool's output to out as its events come, and returns the
// result.
func (c *Client) follow(ctx context.Context, body map[string]any, out func(stream string, p []byte)) (dispatch.ResultStatus, []byte, error) {
	resp, err := c.Stream(ctx, "/v1/call", body, c.Anonymous())
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return "", nil, &AnswerError{resp.StatusCode, b}
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev runs.Event
		if err := dec.Decode(&ev); err != nil {
			return "", nil, fmt.Errorf("daemon %s: the call's stream ended before its result (%v); its run: GET /v1/runs/%s", c.URL, err, resp.Header.Get("X-Run-Id"))
		}
		switch ev.Event {
		case runs.EventStdout, runs.EventStderr:
			p := []byte(ev.Data)
			if ev.Encoding == "base64" {
				if p, err = base64.StdEncoding.DecodeString(ev.Data); err != nil {
					return "", nil, fmt.Errorf("daemon %s: a %s event of bad base64: %v", c.URL, ev.Event, err)
				}
			}
			out(ev.Event, p)
		case runs.EventResult:
			var res struct {
				Status dispatch.ResultStatus `json:"status"`
			}
			if err := json.Unmarshal(ev.Result, &res); err != nil {
				return "", nil, fmt.Errorf("daemon %s: a result event that is not a result: %v", c.URL, err)
			}
			return res.Status, ev.Result, nil
		}
	}
}

// ApprovalRequest is the request of an approvals action — list (every
// one with all, else the pending), show ID, approve ID (with edited
// params, a JSON object, when not ""), deny ID — on a daemon's API
// (prefix "/v1") or a control socket (prefix "").
func ApprovalRequest(prefix, verb, id string, all bool, edits string) (method, path string, body any) {
	switch verb {
	case "list":
		q := ""
		if all {
			q = "?all=1"
		}
		return "GET", prefix + "/approvals" + q, nil
	case "show":
		return "GET", prefix + "/approvals/" + url.PathEscape(id), nil
	}
	d := Decision{Decision: verb}
	if edits != "" {
		d.Params = json.RawMessage(edits)
	}
	return "POST", prefix + "/approvals/" + url.PathEscape(id), d
}

// Approvals runs an approvals action (see ApprovalRequest) with do — a
// Client's Do without its anonymity, or a ControlClient's Do — and
// returns the answer decoded, and for an approval that ran its call, the
// call's status ("" otherwise). An answer other than 200 is an
// *AnswerError.
func Approvals(ctx context.Context, do func(ctx context.Context, method, path string, body any) (int, []byte, error), prefix, verb, id string, all bool, edits string) (any, dispatch.ResultStatus, error) {
	method, path, req := ApprovalRequest(prefix, verb, id, all, edits)
	code, body, err := do(ctx, method, path, req)
	if err != nil {
		return nil, "", err
	}
	if code != http.StatusOK {
		return nil, "", &AnswerError{code, body}
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, "", fmt.Errorf("the approvals control socket answered %q: %w", body, err)
	}
	var a struct {
		Result *struct {
			Status dispatch.ResultStatus `json:"status"`
		} `json:"result"`
	}
	if verb == "approve" && json.Unmarshal(body, &a) == nil && a.Result != nil {
		return v, a.Result.Status, nil
	}
	return v, "", nil
}
