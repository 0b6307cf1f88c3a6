package api

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/telemetry"
)

// unknownTool is the tool label of calls to names not in the catalog, so
// that a caller cannot grow the label set without bound.
const unknownTool = "_unknown"

// metrics are the daemon's Prometheus metrics, registered on the registry
// given to New. Counters live here; catalog and reload figures are read at
// scrape time by statsCollector.
type metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, store *catalog.Store, sync Syncer, now func() time.Time) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolagent_calls_total",
			Help: "Tool calls through the HTTP API, by tool and result status.",
		}, []string{"tool", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolagent_call_duration_seconds",
			Help:    "Wall time of tool calls through the HTTP API, by tool.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"tool"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolagent_calls_in_flight",
			Help: "Tool calls running now.",
		}),
	}
	reg.MustRegister(m.calls, m.duration, m.inFlight, &statsCollector{store: store, sync: sync, now: now})
	return m
}

// observe counts one finished call. The duration carries the trace id of
// ctx's span as its exemplar when the span is sampled (tracing on).
func (m *metrics) observe(ctx context.Context, res dispatch.Result, took time.Duration) {
	tool := res.Tool
	if res.Status == dispatch.NotFound {
		tool = unknownTool
	}
	m.calls.WithLabelValues(tool, string(res.Status)).Inc()
	h := m.duration.WithLabelValues(tool)
	if id := telemetry.SampledTraceID(ctx); id != "" {
		h.(prometheus.ExemplarObserver).ObserveWithExemplar(took.Seconds(), prometheus.Labels{"trace_id": id})
		return
	}
	h.Observe(took.Seconds())
}

var (
	descTools = prometheus.NewDesc("toolagent_tools",
		"Tools in the current snapshot, by catalog status.", []string{"status"}, nil)
	descAge = prometheus.NewDesc("toolagent_snapshot_age_seconds",
		"Seconds since the current snapshot was built.", nil, nil)
	descGen = prometheus.NewDesc("toolagent_snapshot_generation",
		"Generation of the current snapshot; increases with every swap.", nil, nil)
	descReloads = prometheus.NewDesc("toolagent_reloads_total",
		"Snapshots published by the reload loop since start.", nil, nil)
	descReloadFailures = prometheus.NewDesc("toolagent_reload_failures_total",
		"Failed syncs or builds since start; the last good snapshot kept serving.", nil, nil)
	descLastOK = prometheus.NewDesc("toolagent_reload_last_success_timestamp_seconds",
		"Unix time of the last successful sync.", nil, nil)
	descParses = prometheus.NewDesc("toolagent_tool_parses_total",
		"TOOL.hdlp files parsed since start (cache misses); a restart at an unchanged commit adds none.", nil, nil)
	descBuildFiles = prometheus.NewDesc("toolagent_last_build_files",
		"Files of the last build, by how their outcome was got: parsed, or reused from the previous snapshot or the parse cache.", []string{"how"}, nil)
	descNextSync = prometheus.NewDesc("toolagent_next_sync_timestamp_seconds",
		"Unix time of the next scheduled sync (git sources).", nil, nil)
	descFailures = prometheus.NewDesc("toolagent_consecutive_sync_failures",
		"Failed sync or build attempts since the last success.", nil, nil)
	descInfo = prometheus.NewDesc("toolagent_snapshot_info",
		"Always 1; the revision label names the commit (or content hash) being served.", []string{"revision"}, nil)
)

// statsCollector reads the store and the reload status at scrape time.
type statsCollector struct {
	store *catalog.Store
	sync  Syncer
	now   func() time.Time
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTools, descAge, descGen, descReloads, descReloadFailures, descLastOK,
		descParses, descBuildFiles, descNextSync, descFailures, descInfo} {
		ch <- d
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	if snap := c.store.Load(); snap != nil {
		counts := snap.Counts()
		for _, st := range catalog.Statuses {
			ch <- prometheus.MustNewConstMetric(descTools, prometheus.GaugeValue, float64(counts[st]), st.String())
		}
		ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue, c.now().Sub(snap.BuiltAt()).Seconds())
		ch <- prometheus.MustNewConstMetric(descGen, prometheus.GaugeValue, float64(snap.Gen()))
		ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, snap.Rev())
	}
	if c.sync != nil {
		st := c.sync.Status()
		ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(st.Reloads))
		ch <- prometheus.MustNewConstMetric(descReloadFailures, prometheus.CounterValue, float64(st.ReloadFailures))
		if !st.LastOK.IsZero() {
			ch <- prometheus.MustNewConstMetric(descLastOK, prometheus.GaugeValue, float64(st.LastOK.UnixNano())/1e9)
		}
		ch <- prometheus.MustNewConstMetric(descParses, prometheus.CounterValue, float64(st.ParsedTotal))
		ch <- prometheus.MustNewConstMetric(descBuildFiles, prometheus.GaugeValue, float64(st.Parsed), "parsed")
		ch <- prometheus.MustNewConstMetric(descBuildFiles, prometheus.GaugeValue, float64(st.Reused), "reused")
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.GaugeValue, float64(st.Failures))
		if !st.NextSync.IsZero() {
			ch <- prometheus.MustNewConstMetric(descNextSync, prometheus.GaugeValue, float64(st.NextSync.UnixNano())/1e9)
		}
	}
}
