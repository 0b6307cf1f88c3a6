package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/settings"
)

// TestServeWithEmbeddings: a daemon with match_embeddings embeds its
// tools from a real loopback endpoint (with its key), answers
// POST /v1/match with "embeddings": "used", and once the endpoint hangs
// answers lexically within the timeout, saying so.
func TestServeWithEmbeddings(t *testing.T) {
	var hang atomic.Bool
	var badKey atomic.Int32
	release := make(chan struct{})
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-test-key" {
			badKey.Add(1)
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		var in struct{ Input []string }
		json.NewDecoder(r.Body).Decode(&in)
		if hang.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		data := []map[string]any{}
		for i, s := range in.Input {
			v := []float64{0.1, 0, 0}
			if strings.Contains(s, "greeting") {
				v[1] = 1
			}
			data = append(data, map[string]any{"embedding": v, "index": i})
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	defer ep.Close()
	defer close(release)

	tools, state := t.TempDir(), t.TempDir()
	writeTestTool(t, tools, "hello", testTool("hello", "intent: print a friendly greeting on the console\nmethod: run\nexecutor: shell\nargv: [echo, hello]\nparams_schema: {}\n"))
	var cfg Config
	settings.New(&cfg, settings.Options{})
	cfg.Listen, cfg.Tools, cfg.State, cfg.Sandbox = "127.0.0.1:0", tools, state, host.SandboxOff
	cfg.EmbeddingsURL, cfg.EmbeddingsModel, cfg.EmbeddingsKey, cfg.EmbeddingsTimeout = ep.URL, "toy", "sk-test-key", 200*time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	info, err := operator.ReadInfo(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	match := func() catalog.MatchResponse {
		var resp catalog.MatchResponse
		r, err := http.Post(info.URL+"/v1/match", "application/json", strings.NewReader(`{"intent":"print a greeting on the console"}`))
		if err == nil {
			json.NewDecoder(r.Body).Decode(&resp)
			r.Body.Close()
		}
		return resp
	}
	var resp catalog.MatchResponse
	for deadline := time.Now().Add(30 * time.Second); resp.Embeddings != "used" && time.Now().Before(deadline); {
		if resp = match(); resp.Embeddings != "used" {
			time.Sleep(20 * time.Millisecond) // the first reload and its vectors may not be in yet
		}
	}
	if resp.Embeddings != "used" || !resp.Found || resp.Candidates[0].Name != "hello" || resp.Candidates[0].Similarity == nil {
		t.Fatalf("POST /v1/match = %+v; want hello found with the embeddings used", resp)
	}
	if n := badKey.Load(); n != 0 {
		t.Fatalf("%d requests came without the key", n)
	}
	// The vectors are published to matching first and saved after, so
	// the file may come a moment after the first "used".
	kept := filepath.Join(filepath.Dir(host.CacheFile(state)), embeddingsCacheFile)
	_, err = os.Stat(kept)
	for deadline := time.Now().Add(30 * time.Second); err != nil && time.Now().Before(deadline); _, err = os.Stat(kept) {
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the vectors were not kept beside the parse cache within 30 s: %v", err)
	}
	hang.Store(true)
	resp = match()
	if resp.Embeddings != "unavailable: timeout after 200ms" || !resp.Found || resp.Candidates[0].Name != "hello" || resp.Candidates[0].Similarity != nil {
		t.Fatalf("with the endpoint hung, POST /v1/match = %+v; want the lexical answer, saying why", resp)
	}
}
