package embed

import (
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// TestRealModelShippedTools runs without the development set, so CI
// (which installs scripts/embed-server) always puts a real model behind
// the matcher: the shipped tools are embedded through the OpenAI
// embeddings API, plain English requests find their tool by cosine
// alone, and a fused answer says the embeddings were used.
func TestRealModelShippedTools(t *testing.T) {
	url := startRealServer(t)
	tools := parseTools(t, filepath.Join("..", "..", "native-repo", "tools"))
	if len(tools) < 5 {
		t.Fatalf("shipped tools: %d; want the 5 of native-repo/tools", len(tools))
	}
	snap := snapshot("shipped", tools...)
	m, err := New(Options{URL: url, Model: "universal-sentence-encoder-lite-en", Timeout: 30 * time.Second, Languages: []string{"en"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	set := m.set.Load()
	if set == nil || len(set.names) != len(tools) || set.dims < 100 {
		t.Fatalf("after Refresh: %+v; want a vector of the model's size for each of %d tools", set, len(tools))
	}
	for q, want := range map[string]string{
		"read the contents of a text file":            "file-read",
		"send an HTTP GET request to a web address":   "http-request",
		"show the latest commits of a git repository": "git-ops",
	} {
		vs, err := m.c.Embed(t.Context(), []string{q}, 0)
		if err != nil {
			t.Fatal(err)
		}
		type ns struct {
			name string
			sim  float32
		}
		var all []ns
		for i, n := range set.names {
			all = append(all, ns{n, dot(vs[0], set.vecs[i*set.dims:(i+1)*set.dims])})
		}
		sort.Slice(all, func(i, j int) bool { return all[i].sim > all[j].sim })
		if all[0].name != want {
			t.Errorf("%q: nearest tool by the model %s (%.3f); want %s — ranking %v", q, all[0].name, all[0].sim, want, all)
		}
		r := m.Match(t.Context(), snap, q, 3, nil)
		if r.Embeddings != StatusUsed || !r.Found || r.Candidates[0].Name != want {
			t.Errorf("%q: fused answer %+v (embeddings %q); want %s first, embeddings used", q, r.Candidates, r.Embeddings, want)
		}
	}
}
