package telemetry

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Handler wraps a server's handler: while tracing is on, every request
// gets a server span (otelhttp) continuing the trace its traceparent
// header names; off, requests go straight to h. The span records the
// method, the path (never the query) and the status, not headers.
func Handler(h http.Handler, server string) http.Handler {
	traced := otelhttp.NewHandler(h, server,
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
