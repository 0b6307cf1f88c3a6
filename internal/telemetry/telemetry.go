// Package telemetry sets up OpenTelemetry tracing for the process from
// the standard OTEL_* environment variables, and holds the few helpers
// the doors and executors share: the HTTP server and client wrappers, the
// W3C trace context of an MCP request's _meta and of an approval, and the
// trace id of a Prometheus exemplar.
//
// Tracing is off unless an OTLP endpoint is named
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
// OTEL_TRACES_EXPORTER is otlp; OTEL_TRACES_EXPORTER=none and
// OTEL_SDK_DISABLED=true turn it off whatever else is set. Off, the
// global tracer provider stays OpenTelemetry's no-op one, no propagator
// is installed (an incoming traceparent is not read, none is sent), and
// the wrappers pass requests straight through: the cost is an atomic load
// per request and a no-op span per call.
//
// The exporter is OTLP over HTTP/protobuf (the default) or gRPC
// (OTEL_EXPORTER_OTLP_PROTOCOL or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL);
// the exporters read their own variables (endpoint, headers, timeout,
// certificate, compression), the SDK the sampler (OTEL_TRACES_SAMPLER,
// OTEL_TRACES_SAMPLER_ARG), the batch processor (OTEL_BSP_*) and the
// resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES). Imports no
// internal package.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceName is the service.name of the spans when OTEL_SERVICE_NAME
// does not name one.
const ServiceName = "toolagent"

// Scope is the instrumentation scope of the spans toolagent makes.
const Scope = "github.com/toolagent/toolagent"

var (
	enabled atomic.Bool

	mu       sync.Mutex
	users    int
	provider *sdktrace.TracerProvider
)

// Enabled reports whether tracing is on in this process.
func Enabled() bool { return enabled.Load() }

// Tracer is the tracer of toolagent's spans: the global provider's while
// tracing is on; off, one whose spans cost nothing (ctx is returned as it
// is, with a no-op span: no lookup, no allocation).
func Tracer() trace.Tracer {
	if !enabled.Load() {
		return off{}
	}
	return otel.Tracer(Scope)
}

type off struct{ embedded.Tracer }

func (off) Start(ctx context.Context, _ string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	return ctx, noop.Span{}
}

// Config is what the OTEL_* variables ask for, read by ReadEnv.
type Config struct {
	On       bool
	Protocol string // "http/protobuf" or "grpc"
}

// ReadEnv reads the variables that decide whether tracing is on and how
// spans leave; an error names the variable and what it accepts.
func ReadEnv(getenv func(string) string) (Config, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Config{}, nil
	}
	var c Config
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return Config{}, nil
	case "otlp":
		c.On = true
	case "":
		c.On = getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return Config{}, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: toolagent exports traces by otlp only; want otlp or none", exp)
	}
	if !c.On {
		return Config{}, nil
	}
	c.Protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if c.Protocol == "" {
		c.Protocol, name = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL")), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	switch c.Protocol {
	case "":
		c.Protocol = "http/protobuf"
	case "http/protobuf", "grpc":
	default:
		return Config{}, fmt.Errorf("%s=%q: want http/protobuf or grpc (http/json is not supported)", name, c.Protocol)
	}
	return c, nil
}

// Setup turns tracing on for the process when the OTEL_* environment asks
// for it (see the package comment), once: later calls share the first
// one's provider. stop flushes the spans still queued and, at the last
// user's stop, shuts the provider down; call it once. log gets the
// exporter's errors (a collector that does not answer) as warnings.
func Setup(log *slog.Logger) (stop func(), err error) {
	cfg, err := ReadEnv(os.Getenv)
	if err != nil || !cfg.On {
		return func() {}, err
	}
	mu.Lock()
	defer mu.Unlock()
	if provider == nil {
		ctx := context.Background()
		var exp sdktrace.SpanExporter
		if cfg.Protocol == "grpc" {
			exp, err = otlptracegrpc.New(ctx)
		} else {
			exp, err = otlptracehttp.New(ctx)
		}
		if err != nil {
			return func() {}, fmt.Errorf("OpenTelemetry OTLP trace exporter (%s): %w", cfg.Protocol, err)
		}
		res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", ServiceName)), resource.Environment())
		if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
			return func() {}, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
		}
		// The sampler is the SDK's from OTEL_TRACES_SAMPLER (default:
		// parent-based, always on).
		provider = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		if log != nil {
			otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("OpenTelemetry", "err", err) }))
		}
		otel.SetTracerProvider(provider)
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
		enabled.Store(true)
		if log != nil {
			log.Info("tracing on: spans are exported by OTLP", "protocol", cfg.Protocol)
		}
	}
	users++
	p := provider
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			p.ForceFlush(ctx)
			mu.Lock()
			defer mu.Unlock()
			if users--; users == 0 && provider == p {
				enabled.Store(false)
				otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
				otel.SetTracerProvider(noopProvider)
				provider = nil
				p.Shutdown(ctx)
			}
		})
	}, nil
}

// noopProvider is what the global provider is again after the last stop.
var noopProvider trace.TracerProvider = noop.NewTracerProvider()

// Flush exports the spans ended so far (tests wait on the receiver after
// it; nothing when tracing is off).
func Flush(ctx context.Context) {
	mu.Lock()
	p := provider
	mu.Unlock()
	if p != nil {
		p.ForceFlush(ctx)
	}
}
