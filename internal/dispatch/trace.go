package dispatch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolagent/toolagent/internal/telemetry"
)

// The spans of a call (docs/observability.md lists them). A span carries
// names, ids, statuses and counts, never a param's value, a policy rule
// (a shell rule quotes the command), the output or an error text: those
// may hold what the caller sent.

// startCall starts the span of one call through a door, or of an approved
// call's run (approval id set; linked to the span that held it).
func startCall(ctx context.Context, c Call, approvalID, heldAt string) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithAttributes(
		attribute.String("toolagent.tool", clip(c.Tool)),
		attribute.String("toolagent.door", c.Door),
		attribute.String("toolagent.caller", c.Caller),
	)}
	name := "call " + clip(c.Tool)
	if approvalID != "" {
		name = "approved call " + clip(c.Tool)
		opts = append(opts, trace.WithAttributes(attribute.String("toolagent.approval_id", approvalID)))
		if l, ok := telemetry.Link(heldAt); ok {
			opts = append(opts, trace.WithLinks(l))
		}
	}
	return telemetry.Tracer().Start(ctx, name, opts...)
}

// endCall records r on the call's span and ends it.
func endCall(span trace.Span, r Result, dryRun bool) {
	if !span.IsRecording() {
		span.End()
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("toolagent.status", string(r.Status)),
		attribute.Int("toolagent.exit_code", r.ExitCode),
		attribute.Int64("toolagent.output_bytes", r.OutputBytes),
		attribute.String("toolagent.run_id", r.RunID),
	}
	if r.Method != "" {
		attrs = append(attrs, attribute.String("toolagent.method", r.Method))
	}
	if r.Executor != "" {
		attrs = append(attrs, attribute.String("toolagent.executor", r.Executor))
	}
	if r.Revision != "" {
		attrs = append(attrs, attribute.String("toolagent.revision", r.Revision))
	}
	if r.ApprovalID != "" {
		attrs = append(attrs, attribute.String("toolagent.approval_id", r.ApprovalID))
	}
	if r.Decision != "" {
		attrs = append(attrs, attribute.String("toolagent.decision", r.Decision))
	}
	if r.HTTPStatus != 0 {
		attrs = append(attrs, attribute.Int("toolagent.http_status", r.HTTPStatus))
	}
	if dryRun {
		attrs = append(attrs, attribute.Bool("toolagent.dry_run", true))
	}
	if r.Collected {
		attrs = append(attrs, attribute.Bool("toolagent.collected", true))
	}
	span.SetAttributes(attrs...)
	switch r.Status {
	case Error, Timeout, Unavailable, Cancelled:
		span.SetStatus(codes.Error, string(r.Status))
	}
	span.End()
}

// step starts a child span of a call's step (params, policy, ...).
func step(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return telemetry.Tracer().Start(ctx, name, trace.WithAttributes(attrs...))
}

// sandboxStarted records the span from an executor's start to the moment
// it reports the tool's process started (executors.Request.Started): the
// sandbox's start.
func sandboxStarted(ctx context.Context, since time.Time) {
	if !telemetry.Enabled() {
		return
	}
	_, span := telemetry.Tracer().Start(ctx, "sandbox start", trace.WithTimestamp(since))
	span.End()
}

// heldKey is the context key of the traceparent of the span that held an
// approved call, which its execute span links to.
type heldKey struct{}

func withHeldAt(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return context.WithValue(ctx, heldKey{}, tp)
}

func heldAt(ctx context.Context) string {
	tp, _ := ctx.Value(heldKey{}).(string)
	return tp
}
