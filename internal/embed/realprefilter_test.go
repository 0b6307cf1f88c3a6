package embed

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/match/matcheval"
)

// TestRealModelPrefilter: with the real model's vectors, the fusion read
// through the sign prefilter answers the requests of the development set
// and of split b as the exact fusion does (the same top three, in
// order), but for near ties (agrees) in at most 1 in 100, in a catalog of 10,000 tools: the development set's 55 with
// their real vectors and distractors whose vectors are mixtures of the
// real ones (the tools' and the requests'), so that they lie where the
// model's vectors lie, and whose words match no request.
func TestRealModelPrefilter(t *testing.T) {
	dev, qs := devSet(t)
	f, err := os.Open(filepath.Join("..", "match", "matcheval", "testdata", "intent-b.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	qb, err := matcheval.ReadQueries(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	qs = append(qs, qb...)
	url := startRealServer(t)
	m, err := New(Options{URL: url, Model: "universal-sentence-encoder-lite-en", Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(t.Context(), dev); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, q := range qs {
		texts = append(texts, q.Query)
	}
	var qvs [][]float32
	for len(texts) > 0 {
		n := min(batchSize, len(texts))
		vs, err := m.c.Embed(t.Context(), texts[:n], 0)
		if err != nil {
			t.Fatal(err)
		}
		qvs, texts = append(qvs, vs...), texts[n:]
	}
	// The distractors: a random mixture of two real vectors and noise.
	real := slices.Clone(qvs)
	set := m.set.Load()
	for i := range set.names {
		real = append(real, set.vecs[i*set.dims:(i+1)*set.dims])
	}
	var tools []*hldp.Tool
	for e := range dev.Tools {
		tools = append(tools, e.Tool)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := len(tools); i < 10000; i++ {
		d := tool(fmt.Sprintf("zq-%d", i), "zq", fmt.Sprintf("zq%d xv%d", i, i%97))
		tools = append(tools, d)
		a, b := real[r.IntN(len(real))], real[r.IntN(len(real))]
		wa, wb := r.Float64(), r.Float64()
		v := make([]float64, set.dims)
		for j := range v {
			v[j] = wa*float64(a[j]) + wb*float64(b[j]) + 0.3*r.NormFloat64()/float64(set.dims)
		}
		u, _ := unit(v)
		m.cache[m.textKey(ToolText(d))] = u
	}
	snap := snapshot("padded", tools...)
	if err := m.Refresh(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	set = m.set.Load()
	if k := prefilterSize(DefaultWeight, 3); len(set.names) < prefilterMin*k {
		t.Fatalf("%d tools: fuse does not use the prefilter", len(set.names))
	}
	differ := 0
	for i, q := range qs {
		if !agrees(t, snap, set, q.Query, qvs[i], 3) {
			differ++
		}
	}
	if differ*100 > len(qs) {
		t.Errorf("%d of %d requests answered otherwise through the prefilter: more than 1 in 100", differ, len(qs))
	}
	t.Logf("%d requests (development set and split b) at %d tools: %d answered otherwise through the prefilter", len(qs), len(set.names), differ)
}
