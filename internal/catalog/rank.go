package catalog

import (
	"context"

	"github.com/toolagent/toolagent/internal/match"
)

// MatchFunc answers an intent query on a snapshot for the tools on the
// surface sf, as Snapshot.MatchIntentOn does; the API and MCP servers take
// one so that the daemon can put a matcher with more evidence (an
// embeddings backend, internal/embed) in front of the lexical one.
type MatchFunc func(ctx context.Context, s *Snapshot, q string, limit int, sf Surface) MatchResponse

// Ranking returns the lexical ranking of every callable tool on the
// surface sf that shares a term with q (best first; Found as for
// MatchIntentOn), with at most depth candidates (depth <= 0: all).
func (s *Snapshot) Ranking(q string, sf Surface, depth int) match.Result {
	s.BuildIndex()
	if depth <= 0 || depth > s.index.Len() {
		depth = s.index.Len()
	}
	var allow func(string) bool
	if len(sf) > 0 {
		allow = func(id string) bool { e, ok := s.Lookup(id); return ok && sf.AllowsEntry(e) }
	}
	return s.index.MatchIn(q, depth, allow)
}

// Tools yields the callable tools' entries, sorted by name, without
// copying them (see Enabled).
func (s *Snapshot) Tools(yield func(Entry) bool) {
	for _, k := range s.enabled {
		if !yield(s.entries[k]) {
			return
		}
	}
}
