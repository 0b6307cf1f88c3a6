package mcpserver

import (
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/dispatch"
)

// isError is the one mapping of a call's status to MCP's isError. no_data
// is not an error: the tool ran and succeeded, and said nothing.
func isError(st dispatch.ResultStatus) bool {
	switch st {
	case dispatch.Success, dispatch.NoData, dispatch.DryRun:
		return false
	default: // error, timeout, invalid_params, approval_required, denied, not_found, disabled, busy, and any new status
		return true
	}
}

// headline says in words what a status means for the caller.
func headline(st dispatch.ResultStatus) string {
	switch st {
	case dispatch.Error:
		return "the tool ran and failed"
	case dispatch.Timeout:
		return "the tool was killed at its timeout (its whole process group); partial output is kept"
	case dispatch.InvalidParams:
		return "the call did not run: the arguments do not match the tool's input schema"
	case dispatch.ApprovalRequired:
		return "the call did not run: it needs an approval before it runs"
	case dispatch.Denied:
		return "the call did not run: a policy rule refuses it, and no approval can change that"
	case dispatch.NotFound:
		return "the call did not run: no tool of this name is registered"
	case dispatch.Disabled:
		return "the call did not run: the tool exists but cannot run here"
	case dispatch.Busy:
		return "the call did not run: too many calls are running; retry later"
	case dispatch.Unavailable:
		return "the call did not run: it needs the store (an approval, or a concurrency slot shared by the replicas), which does not answer now; retry later"
	case dispatch.Cancelled:
		return "the call was cancelled before it finished (the server shut down, or the client cancelled it)"
	}
	return "the call did not succeed"
}

// callResult is callResult with the server's approval page.
func (s *Server) callResult(r dispatch.Result) *mcp.CallToolResult {
	return callResult(r, s.opts.ApprovalURL)
}

// callResult maps a dispatch result to MCP. The whole Result is the
// structured content. A successful call's first text block is the raw
// output, as it came; stderr, truncation and everything about a failure
// follow in labelled blocks, never merged into the output.
// approvalURL, when not nil, names the web page of a held call's
// approval.
func callResult(r dispatch.Result, approvalURL func(id string) string) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: isError(r.Status), StructuredContent: r}
	text := func(s string) { res.Content = append(res.Content, &mcp.TextContent{Text: s}) }
	if res.IsError {
		text(failureText(r, approvalURL))
		return res
	}
	switch {
	case r.Output == "":
		text(fmt.Sprintf("(%s: the tool ran successfully, exit code %d, and wrote nothing to stdout)", r.Status, r.ExitCode))
	case r.OutputEncoding != "":
		text(fmt.Sprintf("output (%s; the raw bytes are not valid UTF-8):\n%s", r.OutputEncoding, r.Output))
	default:
		text(r.Output)
	}
	if r.Stderr != "" {
		text(labelled("stderr", r.StderrEncoding, r.Stderr))
	}
	if r.Truncated {
		text(fmt.Sprintf("truncated: output was cut at the tool's max_output_bytes (%d bytes written to stdout)", r.OutputBytes))
	}
	return res
}

// failureText is one block saying what went wrong, every field labelled:
// status and what it means, the error, the exit code, the real stderr, the
// output, the params problems, and what to do next.
func failureText(r dispatch.Result, approvalURL func(id string) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s — %s\n", r.Tool, r.Status, headline(r.Status))
	if r.Rule != "" {
		fmt.Fprintf(&b, "rule: %s\n", r.Rule)
		if r.Reason != "" {
			fmt.Fprintf(&b, "reason: %s\n", r.Reason)
		}
	}
	if r.Status == dispatch.ApprovalRequired && r.ApprovalID != "" {
		fmt.Fprintf(&b, "approval_id: %s\n", r.ApprovalID)
		if approvalURL != nil {
			fmt.Fprintf(&b, "approve in the web console: %s\n", approvalURL(r.ApprovalID))
		}
		// Every MCP call is a dispatch.Call with CollectHeld: the retry
		// is how a client without tasks gets the result, on any transport.
		b.WriteString("result: once approved, the call runs once on the server; call this tool again with the same arguments to get its result (until then the same call returns this approval, never a new one)")
		if !r.ExpiresAt.IsZero() {
			fmt.Fprintf(&b, "; the request expires at %s", r.ExpiresAt.UTC().Format(time.RFC3339))
		}
		b.WriteString("\n")
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", r.Error)
	}
	if r.ExitCode >= 0 {
		fmt.Fprintf(&b, "exit_code: %d\n", r.ExitCode)
	}
	if r.HTTPStatus != 0 {
		fmt.Fprintf(&b, "http_status: %d\n", r.HTTPStatus)
	}
	if len(r.Problems) > 0 {
		b.WriteString("problems:\n")
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	if r.Stderr != "" {
		b.WriteString(labelled("stderr", r.StderrEncoding, r.Stderr))
		b.WriteString("\n")
	}
	if r.Output != "" {
		b.WriteString(labelled("output", r.OutputEncoding, r.Output))
		b.WriteString("\n")
	}
	if r.Truncated {
		fmt.Fprintf(&b, "truncated: true (%d bytes written to stdout)\n", r.OutputBytes)
	}
	if r.Suggestion != "" {
		label := "suggestion"
		if r.Status == dispatch.ApprovalRequired {
			// The dispatcher (and later the approval queue) says how this
			// daemon grants approvals; pass it on verbatim.
			label = "how to get it approved"
		}
		fmt.Fprintf(&b, "%s: %s\n", label, r.Suggestion)
	}
	if r.Revision != "" {
		fmt.Fprintf(&b, "revision: %s\n", r.Revision)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// labelled is "name:\n<text>", saying so when text is base64.
func labelled(name, encoding, text string) string {
	if encoding != "" {
		return fmt.Sprintf("%s (%s; the raw bytes are not valid UTF-8):\n%s", name, encoding, strings.TrimSuffix(text, "\n"))
	}
	return fmt.Sprintf("%s:\n%s", name, strings.TrimSuffix(text, "\n"))
}
