package embed

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"

	"github.com/toolagent/toolagent/internal/catalog"
)

// The cosine ranking of a large catalog is read through a prefilter: each
// tool's vector is kept beside as its signs, one bit a dimension (64
// bytes at 512 dimensions, against 2 KB of float32), the request's signs
// are compared with all of them by XOR and popcount (the Hamming distance
// estimates the angle), and only the nearest by that estimate get their
// exact cosine. A tool's rank is then the number of those above its
// cosine, plus an estimate of the others above it from the exact cosines
// of a sample of them. The estimate errs deep in the ranking, where a
// rank moves a fused score by little (weight/(RRFK+rank)): the fused
// answer is the exact one's but for near ties. TestPrefilterAgrees
// measures that on random vectors, TestRealModelPrefilter with the real
// model (docs/matching.md, "Embeddings", Cost).

// prefilterMin is the fewest tools per prefiltered one for which the
// prefilter is used: below, the exact ranking costs little more.
const prefilterMin = 8

// prefilterSample is about how many of the tools the prefilter does not
// pass get their exact cosine, as a sample for the ranks past it.
const prefilterSample = 256

// prefilterFloor is the fewest tools the prefilter passes.
const prefilterFloor = 512

// prefilterSize is how many tools the prefilter passes for limit
// candidates at weight: enough that two tools the lexical ranking holds
// within lexicalDepth would keep their order whatever their ranks past
// them (the share of a rank past them, weight/(RRFK+k+1), is below the
// least gap of two lexical ranks, 1/((RRFK+d)(RRFK+d+1))), and at least
// prefilterFloor. At weights near 1 that is more than a catalog holds,
// and the ranking is exact.
func prefilterSize(weight float64, limit int) int {
	d := lexicalDepth(weight, limit)
	k := int(math.Ceil(weight*float64(RRFK+d)*float64(RRFK+d+1))) - RRFK
	return max(k, prefilterFloor, 4*(RRFK+2*limit))
}

// signBits sets set.signs to the signs of its vectors.
func (s *toolSet) signBits() {
	if s.dims == 0 {
		return
	}
	s.words = (s.dims + 63) / 64
	s.signs = make([]uint64, len(s.names)*s.words)
	for i := range s.names {
		signsOf(s.vecs[i*s.dims:(i+1)*s.dims], s.signs[i*s.words:(i+1)*s.words])
	}
}

// signsOf sets bit j of out when v[j] is negative.
func signsOf(v []float32, out []uint64) {
	clear(out)
	for j, x := range v {
		if x < 0 {
			out[j/64] |= 1 << (j % 64)
		}
	}
}

// scored is a tool (its row in a toolSet) and its cosine.
type scored struct {
	i   int
	sim float32
}

// embRanking is the cosine ranking of one request, as far as the fusion
// reads it.
type embRanking struct {
	// near holds the tools the embeddings rank within the fusion's
	// depth, best first.
	near []scored
	// best is the best cosines, best first, as deep as near or deeper.
	best []float32
	// sims holds every tool's cosine (exact ranking) or is nil.
	sims []float32
	// sample holds the cosines of a sample of the tools the prefilter
	// did not pass, best first, each standing for per of them.
	sample []float32
	per    float64
	buf    *rankBuf
}

// rankBuf is the memory of one ranking, kept across requests.
type rankBuf struct {
	sims   []float32
	dist   []uint16
	hist   []int32
	qbits  []uint64
	cand   []scored
	best   []float32
	sample []float32
}

var rankPool = sync.Pool{New: func() any { return new(rankBuf) }}

func (r *embRanking) release() {
	if r.buf != nil {
		rankPool.Put(r.buf)
		r.buf = nil
	}
}

// sim is tool i's cosine with qv.
func (r *embRanking) sim(s *toolSet, qv []float32, i int) float32 {
	if r.sims != nil {
		return r.sims[i]
	}
	return dot(qv, s.vecs[i*s.dims:(i+1)*s.dims])
}

// rank is the 1-based rank of a tool of cosine x (ties share the best):
// exact within best, and past it counted over all tools (exact ranking)
// or, through the prefilter, the tools it passed above x and an estimate
// of the others above x from the sample.
func (r *embRanking) rank(x float32) int {
	above := func(s []float32) int { return sort.Search(len(s), func(j int) bool { return s[j] <= x }) }
	if r.sims == nil {
		return 1 + above(r.best) + int(math.Round(r.per*float64(above(r.sample))))
	}
	if n := len(r.best); n > 0 && x >= r.best[n-1] {
		return 1 + above(r.best)
	}
	n := 1
	for _, y := range r.sims {
		if y > x {
			n++
		}
	}
	return n
}

// allowed reports whether the tool of row i is a candidate on sf in snap
// (check false: every tool of the set is).
func (s *toolSet) allowed(snap *catalog.Snapshot, sf catalog.Surface, check bool, i int) bool {
	if !check {
		return true
	}
	e, ok := snap.Lookup(s.names[i])
	return ok && e.Status.Callable() && e.Tool != nil && (len(sf) == 0 || sf.AllowsEntry(e))
}

// exact sets r to the exact cosine ranking: every tool's cosine, and the
// depth best.
func (s *toolSet) exact(r *embRanking, snap *catalog.Snapshot, sf catalog.Surface, qv []float32, depth int) {
	n, d := len(s.names), s.dims
	r.buf = rankPool.Get().(*rankBuf)
	sims := slices.Grow(r.buf.sims[:0], n)[:n]
	r.buf.sims = sims
	check := s.gen != snap.Gen() || len(sf) > 0
	top := r.buf.cand[:0]
	for i := range n {
		if !s.allowed(snap, sf, check, i) {
			sims[i] = -2 // never a candidate, never counted
			continue
		}
		x := dot(qv, s.vecs[i*d:(i+1)*d])
		sims[i] = x
		if len(top) == depth && x <= top[depth-1].sim {
			continue
		}
		j := len(top)
		for j > 0 && top[j-1].sim < x {
			j--
		}
		top = slices.Insert(top, j, scored{i, x})
		if len(top) > depth {
			top = top[:depth]
		}
	}
	r.buf.cand = top
	r.sims, r.near = sims, top
	r.best = r.buf.best[:0]
	for _, t := range top {
		r.best = append(r.best, t.sim)
	}
	r.buf.best = r.best
}

// nearest sets r to the cosine ranking read through a prefilter passing
// k tools and reports true, or reports false when the set has no signs
// or sf leaves too few of the prefiltered tools (the caller then ranks
// exactly).
func (s *toolSet) nearest(r *embRanking, snap *catalog.Snapshot, sf catalog.Surface, qv []float32, k, depth int) bool {
	n := len(s.names)
	if s.words == 0 || k >= n {
		return false
	}
	b := rankPool.Get().(*rankBuf)
	w := s.words
	b.qbits = slices.Grow(b.qbits[:0], w)[:w]
	signsOf(qv, b.qbits)
	dist := slices.Grow(b.dist[:0], n)[:n]
	b.dist = dist
	hist := slices.Grow(b.hist[:0], 64*w+1)[:64*w+1]
	clear(hist)
	b.hist = hist
	q := b.qbits
	for i := range n {
		row := s.signs[i*w : (i+1)*w]
		h := 0
		for j, x := range row {
			h += bits.OnesCount64(x ^ q[j])
		}
		dist[i] = uint16(h)
		hist[h]++
	}
	// The k nearest by Hamming distance, and those tied with the last.
	cut, seen := 0, int32(0)
	for ; cut < len(hist); cut++ {
		if seen += hist[cut]; int(seen) >= k {
			break
		}
	}
	check := s.gen != snap.Gen() || len(sf) > 0
	cand := b.cand[:0]
	d := s.dims
	for i, h := range dist {
		if int(h) > cut || !s.allowed(snap, sf, check, i) {
			continue
		}
		cand = append(cand, scored{i, dot(qv, s.vecs[i*d:(i+1)*d])})
	}
	b.cand = cand
	if len(cand) < k/2 {
		rankPool.Put(b)
		return false
	}
	// A sample of the others, every stride-th, for the ranks past them.
	out := n - int(seen)
	stride := max(1, out/prefilterSample)
	sample, seenOut, tried := b.sample[:0], 0, 0
	for i, h := range dist {
		if int(h) <= cut {
			continue
		}
		if seenOut++; seenOut%stride != 0 {
			continue
		}
		tried++
		if s.allowed(snap, sf, check, i) {
			sample = append(sample, dot(qv, s.vecs[i*d:(i+1)*d]))
		}
	}
	slices.SortFunc(sample, func(x, y float32) int { return cmp.Compare(y, x) })
	b.sample = sample
	r.sample, r.per = sample, 0
	if tried > 0 {
		r.per = float64(out) / float64(tried)
	}
	slices.SortFunc(cand, func(x, y scored) int {
		switch {
		case x.sim > y.sim:
			return -1
		case x.sim < y.sim:
			return 1
		}
		return x.i - y.i
	})
	r.buf = b
	r.best = b.best[:0]
	for _, t := range cand {
		r.best = append(r.best, t.sim)
	}
	b.best = r.best
	r.near = cand[:min(depth, len(cand))]
	r.sims = nil
	return true
}
