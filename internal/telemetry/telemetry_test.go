package telemetry

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/telemetry/otlptest"
)

// TestReadEnv: tracing is on only when the OTEL_* environment names an
// OTLP endpoint or the otlp exporter, off with none or the SDK disabled;
// a protocol or exporter toolagent does not have is an error naming the
// variable and what it accepts.
func TestReadEnv(t *testing.T) {
	tests := []struct {
		env     map[string]string
		on      bool
		proto   string
		wantErr string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: true, proto: "http/protobuf"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, on: true, proto: "http/protobuf"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, proto: "grpc"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, on: true, proto: "http/protobuf"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": want http/protobuf or grpc`},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER="zipkin"`},
	}
	for _, tc := range tests {
		c, err := ReadEnv(func(k string) string { return tc.env[k] })
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err = %v; want %q", tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil || c.On != tc.on || c.Protocol != tc.proto {
			t.Errorf("%v: %+v, %v; want on %v protocol %q", tc.env, c, err, tc.on, tc.proto)
		}
	}
}

// TestSetupExports: Setup with an endpoint exports the spans of the
// process by the protocol asked for (a real receiver of each in the test),
// continues a traceparent of an MCP _meta, and its stop turns tracing off.
func TestSetupExports(t *testing.T) {
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			rcv := otlptest.Start(t)
			if proto == "grpc" {
				rcv = otlptest.StartGRPC(t)
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			stop, err := Setup(nil)
			if err != nil || !Enabled() {
				t.Fatalf("Setup: %v, enabled %v", err, Enabled())
			}
			ctx := FromMeta(context.Background(), map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "k=v"})
			_, span := Tracer().Start(ctx, "test span")
			span.End()
			stop()
			if Enabled() {
				t.Error("still enabled after stop")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			spans, ok := rcv.Wait(ctx, func(s []otlptest.Span) bool { return len(s) > 0 })
			if !ok || spans[0].Name != "test span" || spans[0].TraceID != "0af7651916cd43dd8448eb211c80319c" || spans[0].ParentID != "b7ad6b7169203331" || spans[0].Service != ServiceName {
				t.Errorf("received %+v (problems %v); want the span under the _meta's trace, service %s", spans, rcv.Problems(), ServiceName)
			}
		})
	}
}
