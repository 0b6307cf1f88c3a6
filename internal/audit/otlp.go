package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	logs "go.opentelemetry.io/proto/otlp/logs/v1"
	resource "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPSink posts records to an OTLP/HTTP logs endpoint (protobuf,
// ExportLogsServiceRequest): one log record each, its body the record's
// JSON, with the seq, msg, tool, caller and status as attributes, under
// the resource service.name=toolagent.
type OTLPSink struct {
	URL    string // e.g. http://collector:4318/v1/logs
	Client *http.Client
	// Headers are sent with every request (an API key the collector
	// wants).
	Headers map[string]string
}

// Send implements Sink.
func (s *OTLPSink) Send(ctx context.Context, es []Entry) error {
	host, _ := os.Hostname()
	recs := make([]*logs.LogRecord, 0, len(es))
	now := uint64(time.Now().UnixNano())
	for _, e := range es {
		var r map[string]any
		json.Unmarshal(e.Line, &r)
		lr := &logs.LogRecord{
			ObservedTimeUnixNano: now,
			SeverityNumber:       logs.SeverityNumber_SEVERITY_NUMBER_INFO,
			SeverityText:         "INFO",
			EventName:            "toolagent.audit." + str(r["msg"]),
			Body:                 &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: string(e.Line)}},
			Attributes:           []*common.KeyValue{{Key: "toolagent.audit.seq", Value: &common.AnyValue{Value: &common.AnyValue_IntValue{IntValue: e.Seq}}}},
		}
		if t := e.Time(); !t.IsZero() {
			lr.TimeUnixNano = uint64(t.UnixNano())
		}
		for _, k := range []string{"msg", "event", "tool", "caller", "status", "run_id", "approval_id"} {
			if v := str(r[k]); v != "" {
				lr.Attributes = append(lr.Attributes, &common.KeyValue{Key: "toolagent." + k, Value: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: v}}})
			}
		}
		recs = append(recs, lr)
	}
	req := &collogs.ExportLogsServiceRequest{ResourceLogs: []*logs.ResourceLogs{{
		Resource: &resource.Resource{Attributes: []*common.KeyValue{
			{Key: "service.name", Value: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: "toolagent"}}},
			{Key: "host.name", Value: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: host}}},
		}},
		ScopeLogs: []*logs.ScopeLogs{{Scope: &common.InstrumentationScope{Name: "toolagent/audit"}, LogRecords: recs}},
	}}}
	body, err := proto.Marshal(req)
	if err != nil {
		return fmt.Errorf("otlp logs: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("otlp logs: %w", err)
	}
	hr.Header.Set("Content-Type", "application/x-protobuf")
	for k, v := range s.Headers {
		hr.Header.Set(k, v)
	}
	c := s.Client
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := c.Do(hr)
	if err != nil {
		return fmt.Errorf("otlp logs: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("otlp logs %s: HTTP %d: %.200s", s.URL, resp.StatusCode, b)
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// Close implements Sink.
func (s *OTLPSink) Close() error { return nil }
