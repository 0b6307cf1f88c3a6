// Package otlptest is an OTLP/HTTP trace receiver for tests: a real HTTP
// server on loopback that decodes the protobuf ExportTraceServiceRequest
// an exporter posts to /v1/traces, keeps the spans and the raw bytes, and
// answers as a collector does. Imports no internal package.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	Service  string
	Name     string
	TraceID  string // hex
	SpanID   string
	ParentID string // "" for a root
	Kind     tracepb.Span_SpanKind
	Attrs    map[string]string // values as text
	Links    []string          // "traceid/spanid" of each link
	Error    bool              // status code error
}

// Receiver is a running OTLP/HTTP trace receiver.
type Receiver struct {
	URL string // base URL: set OTEL_EXPORTER_OTLP_ENDPOINT to it

	mu    sync.Mutex
	spans []Span
	raw   [][]byte
	bad   []string
	wake  chan struct{}
}

// Start starts a receiver on 127.0.0.1 for the length of t.
func Start(t testing.TB) *Receiver {
	r := &Receiver{wake: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		r.problem(fmt.Sprintf("%s %s: want POST /v1/traces", req.Method, req.URL.Path))
		http.Error(w, "not an OTLP trace request", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.problem("gzip: " + err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.problem("Content-Type " + ct + ": want application/x-protobuf")
		http.Error(w, "want protobuf", http.StatusUnsupportedMediaType)
		return
	}
	var msg coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		r.problem("decode: " + err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg, b)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// add keeps the spans of msg, received as b.
func (r *Receiver) add(msg *coltrace.ExportTraceServiceRequest, b []byte) {
	var got []Span
	for _, rs := range msg.ResourceSpans {
		svc := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Service: svc, Name: s.Name, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					Kind: s.Kind, Attrs: attrs(s.Attributes), Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR}
				if len(s.ParentSpanId) > 0 {
					sp.ParentID = hex.EncodeToString(s.ParentSpanId)
				}
				for _, l := range s.Links {
					sp.Links = append(sp.Links, hex.EncodeToString(l.TraceId)+"/"+hex.EncodeToString(l.SpanId))
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.raw = append(r.raw, b)
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()
}

// StartGRPC starts a receiver of OTLP over gRPC (the collector's
// TraceService) on 127.0.0.1 for the length of t; its URL is
// http://ADDRESS (plain text).
func StartGRPC(t testing.TB) *Receiver {
	r := &Receiver{wake: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, grpcService{r: r})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	r.URL = "http://" + ln.Addr().String()
	return r
}

type grpcService struct {
	coltrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(_ context.Context, msg *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	b, _ := proto.Marshal(msg)
	g.r.add(msg, b)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) problem(s string) {
	r.mu.Lock()
	r.bad = append(r.bad, s)
	r.mu.Unlock()
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = value(kv.Value)
	}
	return m
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.Values {
			parts = append(parts, value(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *commonpb.AnyValue_BytesValue:
		return string(x.BytesValue)
	}
	return fmt.Sprint(v)
}

// Spans returns the spans received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Raw returns every request body received, decoded from gzip: the bytes
// a test greps for what must never leave.
func (r *Receiver) Raw() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Join(r.raw, nil)
}

// Problems lists the requests the receiver refused (wrong path, type or
// encoding): an exporter misconfigured, which a test reports.
func (r *Receiver) Problems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}

// Wait returns the spans once ok holds for them, or, at the deadline of
// ctx, the last spans and false.
func (r *Receiver) Wait(ctx context.Context, ok func([]Span) bool) ([]Span, bool) {
	for {
		r.mu.Lock()
		spans, wake := append([]Span(nil), r.spans...), r.wake
		r.mu.Unlock()
		if ok(spans) {
			return spans, true
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return spans, false
		case <-time.After(time.Second): // a flush may land between the read and the wait
		}
	}
}

// Tree renders the spans of trace id as an indented tree of names (the
// children in name order), for a test's failure message and comparison.
func Tree(spans []Span, traceID string) string {
	kids := map[string][]Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		if s.TraceID == traceID {
			ids[s.SpanID] = true
		}
	}
	for _, s := range spans {
		if s.TraceID != traceID {
			continue
		}
		p := s.ParentID
		if !ids[p] {
			p = "" // its parent is remote (the caller's) or not exported
		}
		kids[p] = append(kids[p], s)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		list := kids[parent]
		sort.SliceStable(list, func(i, j int) bool { return list[i].Name < list[j].Name })
		for _, s := range list {
			fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth), s.Name)
			walk(s.SpanID, depth+1)
		}
	}
	walk("", 0)
	return b.String()
}
