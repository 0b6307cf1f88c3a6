package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"unicode"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/match"
)

// Fusion constants (docs/matching.md, "Embeddings").
const (
	// RRFK is the k of reciprocal rank fusion: a tool's fused score is
	// the sum over the two rankings of 1/(RRFK + its rank there), 0 for a
	// ranking it is not in. 60 is the value of Cormack, Clarke and
	// Büttcher (SIGIR 2009), used unchanged by most hybrid search engines.
	RRFK = 60
	// LexicalDepth bounds how deep the lexical ranking is read (see
	// lexicalDepth): past it a tool counts as lexically unranked, its
	// share there being below 1/(RRFK+LexicalDepth+1). Reading the whole
	// ranking of a request touching 5,000 of 10,000 tools costs 30 ms
	// (the lexical matcher explains every candidate).
	LexicalDepth = 100
)

// lexicalDepth is how deep the lexical ranking must be read for the
// limit best fused tools to be those of the full rankings: a tool past
// it has at most 1/(RRFK+depth+1) + weight/(RRFK+1), below the least the
// limit-th lexical tool has, 1/(RRFK+limit). 11 at weight 0.1 and 3
// candidates; at a weight of (RRFK+1)/(RRFK+limit) or more no depth is
// enough, and LexicalDepth applies.
func lexicalDepth(weight float64, limit int) int {
	room := 1/float64(RRFK+limit) - weight/float64(RRFK+1)
	if room <= 0 {
		return LexicalDepth
	}
	return min(LexicalDepth, max(limit, int(math.Ceil(1/room))-RRFK))
}

// Status words of MatchResponse.Embeddings.
const (
	StatusUsed = "used"
)

// Match answers an intent query as snap.MatchIntentOn does, with the
// lexical ranking fused with the ranking of the tools by the cosine of
// their vectors and the request's, when the endpoint answers within the
// timeout (see docs/matching.md). resp.Embeddings says which it was.
// Found is always the lexical decision. It never waits on the endpoint past Options.Timeout, nor at all
// while the circuit breaker is open.
func (m *Matcher) Match(ctx context.Context, snap *catalog.Snapshot, q string, limit int, sf catalog.Surface) catalog.MatchResponse {
	if limit <= 0 || limit > catalog.MaxCandidates {
		limit = catalog.MaxCandidates
	}
	lex := snap.Ranking(q, sf, lexicalDepth(m.opts.Weight, limit))
	set := m.set.Load()
	var qv []float32
	status := ""
	if lang := Language(q); len(m.opts.Languages) > 0 && !slices.Contains(m.opts.Languages, lang) {
		status = fmt.Sprintf("skipped: the request is in %s, not in the model's languages (%s)", lang, strings.Join(m.opts.Languages, ", "))
	} else {
		qv, status = m.queryVector(ctx, q, set)
	}
	if qv == nil {
		lex.Candidates = lex.Candidates[:min(limit, len(lex.Candidates))]
		resp := snap.Respond(q, lex)
		resp.Embeddings = status
		return resp
	}
	res, _ := fuse(snap, sf, set, lex, qv, limit, m.opts.Weight)
	resp := snap.Respond(q, res.Result)
	resp.Embeddings = status
	for i := range resp.Candidates {
		if s, ok := res.sim[resp.Candidates[i].Name]; ok {
			f := float64(s)
			resp.Candidates[i].Similarity = &f
		}
	}
	return resp
}

// queryVector returns the request's vector, or nil and why not.
func (m *Matcher) queryVector(ctx context.Context, q string, set *toolSet) ([]float32, string) {
	if set == nil || len(set.names) == 0 {
		return nil, "unavailable: no tool has a vector yet (the endpoint has not answered since the catalog was loaded)"
	}
	ok, why := m.br.allow()
	if !ok {
		return nil, why
	}
	qctx, cancel := context.WithTimeout(ctx, m.opts.Timeout)
	defer cancel()
	vecs, err := m.c.Embed(qctx, []string{q}, set.dims)
	if err != nil && qctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("timeout after %s", m.opts.Timeout)
	}
	if err != nil && ctx.Err() != nil {
		m.br.done(nil) // the caller went away: no sign of the endpoint's health
		return nil, "unavailable: the request was canceled"
	}
	m.br.done(err)
	if err != nil {
		return nil, "unavailable: " + describe(err)
	}
	status := StatusUsed
	if set.missing > 0 {
		status = fmt.Sprintf("used; %d of %d tools have no vector yet and are ranked lexically alone", set.missing, set.missing+len(set.names))
	}
	return vecs[0], status
}

// describe returns what a caller may read of a failure: without the
// endpoint's address, which is the operator's business.
func describe(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return "cannot reach the endpoint: " + op.Err.Error()
	}
	s := err.Error()
	if i := strings.Index(s, "\": "); strings.HasPrefix(s, "Post \"") && i > 0 {
		s = s[i+3:]
	}
	return s
}

// fused is a fused ranking: the candidates, and the similarity of each
// tool with a vector among them.
type fused struct {
	match.Result
	sim map[string]float32
}

// fuse ranks the tools by reciprocal rank fusion of lex and the cosine
// ranking of set's vectors against qv, over the tools of snap on sf, and
// returns the limit best (Found as lex's) and the cosines of the best
// tools by the embeddings, best first. The cosine ranking is exact in
// small catalogs and read through the sign prefilter in large ones
// (nearest, prefilter.go).
func fuse(snap *catalog.Snapshot, sf catalog.Surface, set *toolSet, lex match.Result, qv []float32, limit int, weight float64) (fused, []float32) {
	k := prefilterSize(weight, limit)
	if len(set.names) < prefilterMin*k {
		k = 0
	}
	return fuseWith(snap, sf, set, lex, qv, limit, weight, k)
}

// fuseWith is fuse with a prefilter passing k tools (0: none).
func fuseWith(snap *catalog.Snapshot, sf catalog.Surface, set *toolSet, lex match.Result, qv []float32, limit int, weight float64, k int) (fused, []float32) {
	depth := RRFK + 2*limit
	var er embRanking
	if k == 0 || !set.nearest(&er, snap, sf, qv, k, depth) {
		set.exact(&er, snap, sf, qv, depth)
	}
	defer er.release()
	type entry struct {
		c           match.Candidate
		score       float64
		lexR        int
		sim         float32
		hasSim      bool
		fromLexical bool
	}
	byName := make(map[string]int, len(lex.Candidates)+depth)
	all := make([]entry, 0, len(lex.Candidates)+depth)
	for i, c := range lex.Candidates {
		byName[c.ID] = len(all)
		e := entry{c: c, lexR: i + 1, fromLexical: true}
		if j, ok := set.index[c.ID]; ok {
			e.sim, e.hasSim = er.sim(set, qv, j), true
		}
		all = append(all, e)
	}
	// The tools the embeddings rank within depth (RRFK+2*limit): past it
	// a tool has at most weight/(RRFK+RRFK+2*limit+1) there; unless the
	// lexical ranking holds it, it cannot pass the limit-th tool of the
	// lexical ranking, which has at least 1/(RRFK+limit) (weight <= 1;
	// above, fewer lexical tools than limit, it may be missed:
	// DefaultWeight is 0.1).
	for _, t := range er.near {
		if _, ok := byName[set.names[t.i]]; ok {
			continue
		}
		byName[set.names[t.i]] = len(all)
		all = append(all, entry{c: match.Candidate{ID: set.names[t.i]}, sim: t.sim, hasSim: true})
	}
	for j := range all {
		e := &all[j]
		if e.fromLexical {
			e.score += 1 / float64(RRFK+e.lexR)
			if !e.hasSim {
				// No vector yet: its lexical rank stands for both.
				e.score += weight / float64(RRFK+e.lexR)
			}
		}
		if e.hasSim {
			e.score += weight / float64(RRFK+er.rank(e.sim))
		}
	}
	slices.SortFunc(all, func(a, b entry) int {
		switch {
		case a.score != b.score:
			if a.score > b.score {
				return -1
			}
			return 1
		case a.fromLexical != b.fromLexical:
			if a.fromLexical {
				return -1
			}
			return 1
		case a.lexR != b.lexR:
			return a.lexR - b.lexR
		}
		return strings.Compare(a.c.ID, b.c.ID)
	})
	out := fused{Result: match.Result{Found: lex.Found}, sim: map[string]float32{}}
	for _, e := range all[:min(limit, len(all))] {
		out.Candidates = append(out.Candidates, e.c)
		if e.hasSim {
			out.sim[e.c.ID] = e.sim
		}
	}
	return out, slices.Clone(er.best[:min(len(er.best), 2)])
}

// dot is the dot product of two vectors of one length: their cosine, as
// both are unit vectors.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// Language tells a request's language as far as Options.Languages needs:
// "zh" when it holds Han characters at least a third as many as Latin
// letters (a Han character is about a word), else "en" when it holds
// Latin letters, else "".
func Language(q string) string {
	han, latin := 0, 0
	for _, r := range q {
		switch {
		case unicode.Is(unicode.Han, r):
			han++
		case unicode.Is(unicode.Latin, r):
			latin++
		}
	}
	switch {
	case han > 0 && 3*han >= latin:
		return "zh"
	case latin > 0:
		return "en"
	}
	return ""
}
