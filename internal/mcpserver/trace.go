package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolagent/toolagent/internal/telemetry"
)

// traceCalls is the outermost middleware: a tools/call continues the
// trace its params._meta names (traceparent, tracestate: W3C trace
// context as the MCP specification carries it) and gets a server span,
// "tools/call <tool>", that the dispatcher's call span sits under.
// Other methods pass through. Tracing off, it costs a type switch.
func traceCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		r, ok := req.(*mcp.CallToolRequest)
		if !ok || r.Params == nil || !telemetry.Enabled() {
			return next(ctx, method, req)
		}
		ctx, span := startCallSpan(ctx, r.Params.Name, r.Params.Meta)
		defer span.End()
		return next(ctx, method, req)
	}
}

// startCallSpan starts the server span of a tools/call of tool whose
// _meta is meta.
func startCallSpan(ctx context.Context, tool string, meta map[string]any) (context.Context, trace.Span) {
	ctx = telemetry.FromMeta(ctx, meta)
	return telemetry.Tracer().Start(ctx, "tools/call "+clipName(tool), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", clipName(tool))))
}

// taskMeta reads params._meta of a task-augmented tools/call, which is
// served below the SDK's middleware.
func taskMeta(params json.RawMessage) map[string]any {
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	json.Unmarshal(params, &p)
	return p.Meta
}

// clipName caps a caller-chosen tool name in a span.
func clipName(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}
