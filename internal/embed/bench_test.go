package embed

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/hldp"
)

// benchDims is the dimension of the benchmark's vectors: Universal
// Sentence Encoder's (many served models have 384 to 1,024).
const benchDims = 512

// benchCatalog returns n synthetic tools and a Matcher holding a random
// unit vector for each, as after a reload.
func benchCatalog(b testing.TB, n int) (*catalog.Snapshot, *Matcher, *httptest.Server) {
	r := rand.New(rand.NewPCG(1, 2))
	verbs := []string{"restart", "list", "show", "delete", "create", "renew", "export", "restore", "search", "tail", "deploy", "merge"}
	objs := []string{"service", "file", "certificate", "database", "table", "issue", "log", "port", "process", "disk", "container", "backup"}
	var tools []*hldp.Tool
	for i := range n {
		v, o := verbs[r.IntN(len(verbs))], objs[r.IntN(len(objs))]
		tools = append(tools, tool(fmt.Sprintf("%s-%s-%d", v, o, i), v+" "+o, fmt.Sprintf("%s the %s on a host, then %s its %s for team%d", v, o, verbs[r.IntN(len(verbs))], objs[r.IntN(len(objs))], r.IntN(500))))
	}
	snap := snapshot("bench", tools...)
	vec := func() []float64 {
		v := make([]float64, benchDims)
		for j := range v {
			v[j] = r.NormFloat64()
		}
		return v
	}
	// An endpoint that answers at once with a fixed vector: its time is
	// the loopback round trip, measured apart (BenchmarkEndpointAlone).
	qv := vec()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var in embedRequest
		json.NewDecoder(req.Body).Decode(&in)
		data := make([]map[string]any, len(in.Input))
		for i := range data {
			data[i] = map[string]any{"embedding": qv, "index": i}
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	b.Cleanup(srv.Close)
	m, err := New(Options{URL: srv.URL, Model: "bench", Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	for e := range snap.Tools {
		u, _ := unit(vec())
		m.cache[m.textKey(ToolText(e.Tool))] = u
	}
	m.dims = benchDims
	if err := m.Refresh(context.Background(), snap); err != nil {
		b.Fatal(err)
	}
	return snap, m, srv
}

var benchRequests = []string{
	"restart the nginx service on web-02",
	"export the users table as csv",
	"deploy order-service 1.12.0 to production and tell me when the health check passes",
	"show the last lines of the log of the backup job",
}

// BenchmarkMatchEmbeddings10k is a query at 10,000 tools with the
// embeddings: the endpoint's round trip (BenchmarkEndpointAlone) plus the
// lexical ranking, the 10,000 cosines and the fusion.
func BenchmarkMatchEmbeddings10k(b *testing.B) {
	snap, m, _ := benchCatalog(b, 10000)
	benchTimes(b, func(i int) {
		if r := m.Match(context.Background(), snap, benchRequests[i%len(benchRequests)], 3, nil); r.Embeddings != StatusUsed {
			b.Fatal(r.Embeddings)
		}
	})
}

// BenchmarkEndpointAlone is the endpoint's part of a query: one request
// for one vector on loopback.
func BenchmarkEndpointAlone(b *testing.B) {
	_, m, _ := benchCatalog(b, 10)
	benchTimes(b, func(i int) {
		if _, err := m.c.Embed(context.Background(), []string{benchRequests[i%len(benchRequests)]}, benchDims); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkFusion10k is what the embeddings add to a query beyond the
// endpoint at 10,000 tools: the lexical ranking to LexicalDepth, the
// cosines and the fusion, with the request's vector at hand.
func BenchmarkFusion10k(b *testing.B) { benchFusion(b, 10000, true) }

// BenchmarkFusion1k is BenchmarkFusion10k at 1,000 tools.
func BenchmarkFusion1k(b *testing.B) { benchFusion(b, 1000, true) }

// BenchmarkFusionExact10k is BenchmarkFusion10k without the sign
// prefilter: every tool's exact cosine.
func BenchmarkFusionExact10k(b *testing.B) { benchFusion(b, 10000, false) }

func benchFusion(b *testing.B, n int, prefilter bool) {
	snap, m, _ := benchCatalog(b, n)
	set := m.set.Load()
	qv := set.vecs[:benchDims]
	benchTimes(b, func(i int) {
		q := benchRequests[i%len(benchRequests)]
		lex := snap.Ranking(q, nil, lexicalDepth(DefaultWeight, 3))
		var res fused
		if prefilter {
			res, _ = fuse(snap, nil, set, lex, qv, 3, DefaultWeight)
		} else {
			res, _ = fuseWith(snap, nil, set, lex, qv, 3, DefaultWeight, 0)
		}
		snap.Respond(q, res.Result)
	})
}

// BenchmarkLexical10k is the lexical answer alone, for comparison.
func BenchmarkLexical10k(b *testing.B) {
	snap, _, _ := benchCatalog(b, 10000)
	benchTimes(b, func(i int) { snap.MatchIntent(benchRequests[i%len(benchRequests)], 3) })
}

// benchTimes runs f in b's loop and reports the 99th percentile of its
// wall time, and its mean CPU time on the benchmark's thread (cpu-ns/op:
// on a loaded machine the wall time is mostly waiting for a CPU; work done
// on other threads, such as the endpoint's, is not in it).
func benchTimes(b *testing.B, f func(i int)) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	var durs []time.Duration
	var cpu time.Duration
	i := 0
	for b.Loop() {
		c0 := threadCPU()
		t0 := time.Now()
		f(i)
		durs = append(durs, time.Since(t0))
		cpu += threadCPU() - c0
		i++
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(i), "cpu-ns/op")
}

// threadCPU is the CPU time the calling thread used (Linux).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
