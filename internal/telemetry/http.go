package telemetry

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// Handler wraps a server's handler: while tracing is on, every request
// gets a server span (otelhttp) continuing the trace its traceparent
// header names; off, requests go straight to h. The span records the
// method, the path (never the query) and the status, not headers.
func Handler(h http.Handler, server string) http.Handler {
	traced := otelhttp.NewHandler(h, server, otelhttp.WithTracerProvider(current{}), otelhttp.WithPropagators(currentPropagator{}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Enabled() {
			traced.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Transport wraps a client's transport (nil: http.DefaultTransport):
// while tracing is on, every request gets a client span and carries the
// trace context (traceparent) to the server; off, requests go straight
// through. The span records the method, the server's host and port and
// the response status, never the URL's path or query: an executor's
// route template puts param values there (otelhttp's transport records
// the full URL, so it is not used here).
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return transport{base}
}

type transport struct{ base http.RoundTripper }

// current is the global tracer provider as it is at each span's start
// (otelhttp takes its provider and propagator when a handler is built,
// which may be before Setup, or after a stop).
type current struct{ embedded.TracerProvider }

func (current) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return currentTracer{name: name, opts: opts}
}

type currentTracer struct {
	embedded.Tracer
	name string
	opts []trace.TracerOption
}

func (t currentTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return otel.GetTracerProvider().Tracer(t.name, t.opts...).Start(ctx, name, opts...)
}

// currentPropagator is the global propagator as it is at each request.
type currentPropagator struct{}

func (currentPropagator) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	otel.GetTextMapPropagator().Inject(ctx, c)
}

func (currentPropagator) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, c)
}

func (currentPropagator) Fields() []string { return otel.GetTextMapPropagator().Fields() }

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !Enabled() {
		return t.base.RoundTrip(r)
	}
	attrs := []attribute.KeyValue{attribute.String("http.request.method", r.Method), attribute.String("server.address", r.URL.Hostname())}
	if p, err := strconv.Atoi(r.URL.Port()); err == nil {
		attrs = append(attrs, attribute.Int("server.port", p))
	}
	ctx, span := Tracer().Start(r.Context(), r.Method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	r = r.Clone(ctx)
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(r.Header))
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		span.SetStatus(codes.Error, "no response")
		return resp, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetStatus(codes.Error, strconv.Itoa(resp.StatusCode))
	}
	return resp, nil
}
