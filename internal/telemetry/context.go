package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// FromMeta returns ctx continuing the trace an MCP request's _meta names
// (its traceparent and tracestate, W3C trace context, as the MCP
// specification carries them); ctx itself when tracing is off or meta
// names no valid one.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	if !Enabled() || meta == nil {
		return ctx
	}
	tp, _ := meta["traceparent"].(string)
	if tp == "" {
		return ctx
	}
	c := propagation.MapCarrier{"traceparent": tp}
	if ts, ok := meta["tracestate"].(string); ok {
		c["tracestate"] = ts
	}
	out := otel.GetTextMapPropagator().Extract(ctx, c)
	if !trace.SpanContextFromContext(out).IsValid() {
		return ctx
	}
	return out
}

// TraceParent is the W3C traceparent of ctx's span ("" without a valid
// one): what an approval keeps of the call it held.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// Link is a link to the span a W3C traceparent names (an approval's hold),
// and false when tp names none.
func Link(tp string) (trace.Link, bool) {
	if tp == "" {
		return trace.Link{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}

// SampledTraceID is the trace id of ctx's span when it is sampled (its
// spans are exported), for a Prometheus exemplar; "" otherwise.
func SampledTraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}
