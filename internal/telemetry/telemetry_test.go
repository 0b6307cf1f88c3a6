package telemetry

import (
	"strings"
	"testing"
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
