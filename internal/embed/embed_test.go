package embed

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/hldp"
)

// concepts maps words to the dimension of the test endpoint's vectors
// they add to: a deterministic toy model in which "bounce" means
// "restart" and "alive" means "running", which the lexical matcher does
// not know.
var concepts = map[string]int{
	"restart": 0, "bounce": 0, "reboot": 0,
	"service": 1, "systemd": 1, "daemon": 1,
	"disk": 2, "space": 2, "storage": 2,
	"log": 3, "lines": 3, "journal": 3,
	"running": 4, "alive": 4, "status": 4, "whether": 4,
	"free": 5, "report": 5,
	"zorp": 0, "flimb": 4, // words the lexical matcher cannot know
}

const testDims = 8

// toyVector is the test model: concept counts, plus a small constant so
// that no vector is zero.
func toyVector(text string) []float64 {
	v := make([]float64, testDims)
	v[testDims-1] = 0.05
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !('a' <= r && r <= 'z') }) {
		if d, ok := concepts[w]; ok {
			v[d]++
		}
	}
	return v
}

// endpoint is a real OpenAI-compatible embeddings server on loopback
// whose answers a test can turn bad.
type endpoint struct {
	srv      *httptest.Server
	requests atomic.Int32 // requests answered or refused
	texts    atomic.Int32 // texts asked for
	key      string       // the bearer token it wants ("" none)

	mu      sync.Mutex
	mode    string        // "" good; see ServeHTTP for the others
	release chan struct{} // closed to let hung requests go
	arrived chan struct{} // gets a value when a hung request arrives
}

func newEndpoint(t *testing.T) *endpoint {
	e := &endpoint{release: make(chan struct{}), arrived: make(chan struct{}, 16)}
	e.srv = httptest.NewServer(e)
	t.Cleanup(func() {
		e.unhang()
		e.srv.Close()
	})
	return e
}

func (e *endpoint) set(mode string) {
	e.mu.Lock()
	e.mode = mode
	e.mu.Unlock()
}

func (e *endpoint) unhang() {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.release:
	default:
		close(e.release)
	}
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.requests.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if e.key != "" && r.Header.Get("Authorization") != "Bearer "+e.key {
		// A hostile endpoint echoes what it got.
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"bad token %q"}}`, r.Header.Get("Authorization"))
		return
	}
	var req embedRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Input) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	e.texts.Add(int32(len(req.Input)))
	e.mu.Lock()
	mode, release := e.mode, e.release
	e.mu.Unlock()
	type item struct {
		Embedding []float64 `json:"embedding"`
		Index     int       `json:"index"`
	}
	var data []item
	for i, s := range req.Input {
		data = append(data, item{toyVector(s), i})
	}
	switch mode {
	case "hang": // until released or the client goes
		e.arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	case "die": // the connection drops mid-answer
		e.arrived <- struct{}{}
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte(`{"data":[`))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	case "dims":
		data[0].Embedding = append(data[0].Embedding, 1)
	case "nan":
		w.Write([]byte(`{"data":[{"embedding":[1e999,0,0,0,0,0,0,1],"index":0}]}`))
		return
	case "count":
		data = append(data, data[0])
	case "index":
		data[0].Index = 7
	case "zero":
		data[0].Embedding = make([]float64, testDims)
	case "huge":
		w.Write([]byte(`{"data":[{"embedding":[`))
		chunk := []byte(strings.Repeat("0.1234567890123,", 4096))
		for range 400 { // 26 MB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		return
	case "500":
		http.Error(w, `{"error":{"message":"model not loaded"}}`, http.StatusInternalServerError)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"data": data, "model": req.Model})
}

func tool(name, display, intent string) *hldp.Tool {
	return &hldp.Tool{Name: name, Display: display, Intent: intent, Method: "exec", Executor: hldp.Shell}
}

var baseTools = []*hldp.Tool{
	tool("svc-restart", "restart service", "restart a systemd service on the host"),
	tool("svc-status", "service status", "show whether a systemd service is running"),
	tool("disk-usage", "disk usage", "report free disk space on a mount"),
	tool("log-tail", "log tail", "show the last lines of a log file"),
}

func snapshot(rev string, tools ...*hldp.Tool) *catalog.Snapshot {
	var es []catalog.Entry
	for _, t := range tools {
		es = append(es, catalog.Entry{Name: t.Name, Tool: t, Rev: rev, Status: catalog.Enabled})
	}
	return catalog.New(rev, es, catalog.Options{})
}

func newMatcher(t *testing.T, e *endpoint, opts Options) *Matcher {
	t.Helper()
	opts.URL, opts.Model = e.srv.URL, "toy"
	opts.Key = e.key
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func names(r catalog.MatchResponse) []string {
	var out []string
	for _, c := range r.Candidates {
		out = append(out, c.Name)
	}
	return out
}

// TestFusionReordersAsDocumented: the fused ranking is the reciprocal
// rank fusion (k=60) of the lexical ranking and the cosine ranking,
// recomputed here from the two rankings, and differs from the lexical
// order for a request whose words the lexical matcher reads otherwise
// (at weight 1; at the default weight 0.1 the same formula holds).
func TestFusionReordersAsDocumented(t *testing.T) {
	e := newEndpoint(t)
	m := newMatcher(t, e, Options{Weight: 1})
	snap := snapshot("r1", baseTools...)
	if err := m.Refresh(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	// "zorp" is "restart" to the toy model and nothing to the lexical
	// matcher: svc-restart rises above svc-status.
	const q = "zorp the log service"
	lex := snap.MatchIntent(q, 3)
	got := m.Match(t.Context(), snap, q, 3, nil)
	if got.Embeddings != StatusUsed {
		t.Fatalf("embeddings = %q, want %q", got.Embeddings, StatusUsed)
	}
	// The oracle: both full rankings, fused by the formula of the docs.
	full := snap.Ranking(q, nil, 0)
	score := map[string]float64{}
	for i, c := range full.Candidates {
		score[c.ID] += 1 / float64(RRFK+i+1)
	}
	qv := toyVector(q)
	cos := func(t *hldp.Tool) float64 {
		v := toyVector(ToolText(t))
		var d, nq, nv float64
		for i := range v {
			d, nq, nv = d+qv[i]*v[i], nq+qv[i]*qv[i], nv+v[i]*v[i]
		}
		return d / math.Sqrt(nq*nv)
	}
	byCos := slices.Clone(baseTools)
	slices.SortStableFunc(byCos, func(a, b *hldp.Tool) int {
		if cos(a) > cos(b) {
			return -1
		} else if cos(a) < cos(b) {
			return 1
		}
		return 0
	})
	for i, tl := range byCos {
		score[tl.Name] += m.opts.Weight / float64(RRFK+i+1)
	}
	want := slices.Collect(func(yield func(string) bool) {
		for _, tl := range baseTools {
			yield(tl.Name)
		}
	})
	slices.SortStableFunc(want, func(a, b string) int {
		if score[a] > score[b] {
			return -1
		} else if score[a] < score[b] {
			return 1
		}
		return strings.Compare(a, b)
	})
	want = want[:3]
	if !slices.Equal(names(got), want) {
		t.Fatalf("fused = %v, want %v (scores %v)", names(got), want, score)
	}
	if slices.Equal(names(got), names(lex)) || slices.Index(names(got), "svc-restart") > slices.Index(names(got), "svc-status") {
		t.Fatalf("fusion did not reorder: lexical %v, fused %v; want svc-restart above svc-status", names(lex), names(got))
	}
	if got.Found != lex.Found {
		t.Fatalf("found = %v, lexical found %v: the lexical decision should stand", got.Found, lex.Found)
	}
	if got.Candidates[0].Similarity == nil || *got.Candidates[0].Similarity < 0.5 {
		t.Fatalf("similarity of the top candidate = %v, want it reported", got.Candidates[0].Similarity)
	}
}

// TestVectorsCachedByDefinition: a second reload with the same tools asks
// the endpoint for nothing, a changed tool is the one text asked, and a
// new Matcher over the same cache file asks for nothing either.
func TestVectorsCachedByDefinition(t *testing.T) {
	e := newEndpoint(t)
	file := filepath.Join(t.TempDir(), "embeddings.cache")
	m := newMatcher(t, e, Options{CacheFile: file})
	if err := m.Refresh(t.Context(), snapshot("r1", baseTools...)); err != nil {
		t.Fatal(err)
	}
	if n := e.texts.Load(); n != int32(len(baseTools)) {
		t.Fatalf("first reload embedded %d texts, want %d", n, len(baseTools))
	}
	before := e.requests.Load()
	if err := m.Refresh(t.Context(), snapshot("r2", baseTools...)); err != nil {
		t.Fatal(err)
	}
	if n := e.requests.Load() - before; n != 0 {
		t.Fatalf("a reload of unchanged tools made %d requests, want 0", n)
	}
	changed := slices.Clone(baseTools)
	changed[2] = tool("disk-usage", "disk usage", "report free storage space on a mount")
	if err := m.Refresh(t.Context(), snapshot("r3", changed...)); err != nil {
		t.Fatal(err)
	}
	if n := e.texts.Load(); n != int32(len(baseTools))+1 {
		t.Fatalf("after one changed tool %d texts were embedded in all, want %d", n, len(baseTools)+1)
	}
	before = e.requests.Load()
	m2 := newMatcher(t, e, Options{CacheFile: file})
	if err := m2.Refresh(t.Context(), snapshot("r4", changed...)); err != nil {
		t.Fatal(err)
	}
	if n := e.requests.Load() - before; n != 0 {
		t.Fatalf("a restart over the cache file made %d requests, want 0", n)
	}
	if with, without := m2.Status(); with != len(changed) || without != 0 {
		t.Fatalf("status = %d with, %d without vectors; want %d, 0", with, without, len(changed))
	}
}

// TestEndpointDiesMidQuery: a request hung past the deadline, a
// connection dropped mid-answer and a closed listener each leave the
// lexical answer served and say so; then the breaker stops asking.
func TestEndpointDiesMidQuery(t *testing.T) {
	e := newEndpoint(t)
	clock := time.Unix(1e9, 0)
	var clockMu sync.Mutex
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	m := newMatcher(t, e, Options{Timeout: 200 * time.Millisecond, Now: now})
	snap := snapshot("r1", baseTools...)
	if err := m.Refresh(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	const q = "restart the nginx service"
	lex := snap.MatchIntent(q, 3)
	check := func(what string, got catalog.MatchResponse, wantStatus string) {
		t.Helper()
		if !strings.HasPrefix(got.Embeddings, "unavailable: ") || !strings.Contains(got.Embeddings, wantStatus) {
			t.Fatalf("%s: embeddings = %q, want unavailable: …%s…", what, got.Embeddings, wantStatus)
		}
		if got.Found != lex.Found || !slices.Equal(names(got), names(lex)) {
			t.Fatalf("%s: answer %v found=%v, want the lexical %v found=%v", what, names(got), got.Found, names(lex), lex.Found)
		}
		if strings.Contains(got.Embeddings, e.srv.Listener.Addr().String()) {
			t.Fatalf("%s: the status %q names the endpoint's address", what, got.Embeddings)
		}
	}

	// Hung: Match returns while the endpoint holds the request (hung
	// requests are released only when the test ends), so it did not wait
	// for it past the deadline.
	e.set("hang")
	got := m.Match(t.Context(), snap, q, 3, nil)
	check("hung endpoint", got, "timeout after 200ms")

	// The connection drops mid-answer (or, on a loaded machine, the
	// deadline comes first: unavailable either way).
	e.set("die")
	got = m.Match(t.Context(), snap, q, 3, nil)
	check("dropped connection", got, "")

	// The listener is gone: the third failure in a row opens the breaker.
	e.srv.Close()
	got = m.Match(t.Context(), snap, q, 3, nil)
	check("closed listener", got, "cannot reach the endpoint")

	// Open: not asked (no request can reach a closed server, so the
	// status is what shows it).
	got = m.Match(t.Context(), snap, q, 3, nil)
	check("open breaker", got, "failures in a row, not asked again")

	// After the cooldown one probe goes; it fails, and the breaker
	// opens again for twice as long.
	clockMu.Lock()
	clock = clock.Add(breakerCooldown)
	clockMu.Unlock()
	got = m.Match(t.Context(), snap, q, 3, nil)
	check("probe", got, "cannot reach the endpoint")
	got = m.Match(t.Context(), snap, q, 3, nil)
	check("reopened", got, fmt.Sprintf("not asked again for %s", 2*breakerCooldown))
}

// TestBreakerClosesOnSuccess: once the endpoint is back, the probe after
// the cooldown succeeds and embeddings are used again.
func TestBreakerClosesOnSuccess(t *testing.T) {
	e := newEndpoint(t)
	clock := time.Unix(1e9, 0)
	var clockMu sync.Mutex
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	m := newMatcher(t, e, Options{Now: now})
	snap := snapshot("r1", baseTools...)
	if err := m.Refresh(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	e.set("500")
	for range breakerFailures {
		if got := m.Match(t.Context(), snap, "disk space", 3, nil); !strings.Contains(got.Embeddings, "HTTP 500: model not loaded") {
			t.Fatalf("embeddings = %q, want the endpoint's error", got.Embeddings)
		}
	}
	e.set("")
	before := e.requests.Load()
	if got := m.Match(t.Context(), snap, "disk space", 3, nil); !strings.Contains(got.Embeddings, "not asked again") {
		t.Fatalf("embeddings = %q, want the breaker open", got.Embeddings)
	}
	if n := e.requests.Load() - before; n != 0 {
		t.Fatalf("the open breaker let %d requests through", n)
	}
	clockMu.Lock()
	clock = clock.Add(breakerCooldown)
	clockMu.Unlock()
	if got := m.Match(t.Context(), snap, "disk space", 3, nil); got.Embeddings != StatusUsed {
		t.Fatalf("after the cooldown embeddings = %q, want used", got.Embeddings)
	}
}

// TestReloadDuringOutage: tools embedded before keep their vectors; a
// tool added while the endpoint is down is ranked lexically alone, the
// answers say so, and the next refresh once it is back embeds it.
func TestReloadDuringOutage(t *testing.T) {
	e := newEndpoint(t)
	m := newMatcher(t, e, Options{})
	if err := m.Refresh(t.Context(), snapshot("r1", baseTools...)); err != nil {
		t.Fatal(err)
	}
	more := append(slices.Clone(baseTools), tool("journal-read", "journal", "read the systemd journal"))
	snap := snapshot("r2", more...)
	e.set("500")
	err := m.Refresh(t.Context(), snap)
	if err == nil || !strings.Contains(err.Error(), "HTTP 500") {
		t.Fatalf("refresh during the outage: err = %v, want the endpoint's failure", err)
	}
	if with, without := m.Status(); with != len(baseTools) || without != 1 {
		t.Fatalf("status = %d with, %d without; want %d, 1", with, without, len(baseTools))
	}
	e.set("")
	got := m.Match(t.Context(), snap, "read the systemd journal", 3, nil)
	if !strings.HasPrefix(got.Embeddings, "used; 1 of 5 tools have no vector") {
		t.Fatalf("embeddings = %q, want used with one tool missing", got.Embeddings)
	}
	for _, c := range got.Candidates {
		if (c.Similarity == nil) != (c.Name == "journal-read") {
			t.Fatalf("candidate %s similarity %v: want none for journal-read alone", c.Name, c.Similarity)
		}
	}
	if !slices.Contains(names(got), "journal-read") {
		t.Fatalf("candidates %v: want journal-read, ranked lexically", names(got))
	}
	if err := m.Refresh(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	if _, without := m.Status(); without != 0 {
		t.Fatalf("after the endpoint came back %d tools still lack a vector", without)
	}
}

// TestHostileAnswers: every malformed answer is rejected with an error
// that says what was wrong, and the lexical answer is served.
func TestHostileAnswers(t *testing.T) {
	e := newEndpoint(t)
	e.key = "sk-secret-0123456789"
	m := newMatcher(t, e, Options{})
	snap := snapshot("r1", baseTools...)
	if err := m.Refresh(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	const q = "how much disk space is free"
	lex := snap.MatchIntent(q, 3)
	for _, c := range []struct{ mode, want string }{
		{"dims", "has 9 dimensions; want 8"},
		{"nan", "not an embeddings list"},
		{"count", "2 vectors for 1 text"},
		{"index", "index 7 is out of range"},
		{"zero", "no usable length"},
		{"huge", "over 209920 bytes"},
	} {
		e.set(c.mode)
		m.br = breaker{now: time.Now} // each case on its own
		got := m.Match(t.Context(), snap, q, 3, nil)
		if !strings.HasPrefix(got.Embeddings, "unavailable: ") || !strings.Contains(got.Embeddings, c.want) {
			t.Errorf("%s: embeddings = %q, want …%s…", c.mode, got.Embeddings, c.want)
		}
		if got.Found != lex.Found || !slices.Equal(names(got), names(lex)) {
			t.Errorf("%s: answer %v, want the lexical %v", c.mode, names(got), names(lex))
		}
	}
	// An endpoint that echoes the key never gets it into the answer.
	e.set("")
	m2, err := New(Options{URL: e.srv.URL, Model: "toy", Key: "sk-wrong-key-99"})
	if err != nil {
		t.Fatal(err)
	}
	err = m2.Refresh(t.Context(), snap)
	if err == nil || strings.Contains(err.Error(), "sk-wrong-key-99") || !strings.Contains(err.Error(), "[key]") {
		t.Fatalf("refresh with a rejected key: err = %v; want the 401 with the key blanked", err)
	}
}

// TestBadSettings: settings that cannot work are refused with the key
// named.
func TestBadSettings(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{URL: "ftp://h", Model: "m"}, "match_embeddings.url"},
		{Options{URL: "http://user:pw@h", Model: "m"}, "without credentials"},
		{Options{URL: "http://h"}, "match_embeddings.model is required"},
	} {
		_, err := New(c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "pw@") {
			t.Errorf("New(%+v) = %v, want …%s…", c.opts, err, c.want)
		}
	}
}

// TestCanceledCaller: a caller that goes away does not count against the
// endpoint.
func TestCanceledCaller(t *testing.T) {
	e := newEndpoint(t)
	m := newMatcher(t, e, Options{})
	snap := snapshot("r1", baseTools...)
	if err := m.Refresh(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for range breakerFailures + 1 {
		got := m.Match(ctx, snap, "disk space", 3, nil)
		if got.Embeddings != "unavailable: the request was canceled" {
			t.Fatalf("embeddings = %q, want unavailable (canceled), not a timeout", got.Embeddings)
		}
	}
	if got := m.Match(t.Context(), snap, "disk space", 3, nil); got.Embeddings != StatusUsed {
		t.Fatalf("after canceled callers embeddings = %q, want used: they are no sign of the endpoint's health", got.Embeddings)
	}
}

// TestLexicalDepthIsExact: reading the lexical ranking only as deep as
// lexicalDepth says gives the same fused candidates as reading all of
// it, at every weight.
func TestLexicalDepthIsExact(t *testing.T) {
	snap, m, _ := benchCatalog(t, 400)
	set := m.set.Load()
	for _, w := range []float64{0.05, 0.1, 0.3, 0.6, 0.95, 1} {
		for i, q := range append(benchRequests, "restart", "show the table", "delete file log container", "merge") {
			qv := set.vecs[(i%len(set.names))*set.dims : (i%len(set.names)+1)*set.dims]
			for limit := 1; limit <= 3; limit++ {
				d := lexicalDepth(w, limit)
				part, _ := fuse(snap, nil, set, snap.Ranking(q, nil, d), qv, limit, w)
				full, _ := fuse(snap, nil, set, snap.Ranking(q, nil, 0), qv, limit, w)
				var a, b []string
				for _, c := range part.Candidates {
					a = append(a, c.ID)
				}
				for _, c := range full.Candidates {
					b = append(b, c.ID)
				}
				if !slices.Equal(a, b) {
					t.Errorf("weight %g, limit %d, %q: depth %d gives %v, the full ranking %v", w, limit, q, d, a, b)
				}
			}
		}
	}
}

// TestSurfaceHoldsWithEmbeddings: a tool off the caller's surface is
// never a candidate, however close its vector.
func TestSurfaceHoldsWithEmbeddings(t *testing.T) {
	e := newEndpoint(t)
	m := newMatcher(t, e, Options{Weight: 1})
	snap := snapshot("r1", baseTools...)
	if err := m.Refresh(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	sf := catalog.Surface{{Tools: []string{"svc-status", "log-tail", "disk-usage"}}}
	for _, q := range []string{"zorp the service", "restart the systemd service", "zorp zorp zorp"} {
		got := m.Match(t.Context(), snap, q, 3, sf)
		if got.Embeddings != StatusUsed {
			t.Fatalf("%q: embeddings = %q", q, got.Embeddings)
		}
		if slices.Contains(names(got), "svc-restart") {
			t.Errorf("%q: candidates %v hold svc-restart, which is off the surface", q, names(got))
		}
	}
}
