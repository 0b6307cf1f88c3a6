package matcheval

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolagent/toolagent/internal/match"
)

// ExampleResult is how one example of a document fared as a query against
// the catalog with that example left out (see LeaveOneOut).
type ExampleResult struct {
	// Doc is the ID of the document the example belongs to.
	Doc string
	// Index is the example's position among the document's examples,
	// from 0, in field order (a tool's examples[Index]).
	Index int
	// Example is the example's text, the query.
	Example string
	// Candidates are what the query found, best first.
	Candidates []match.Candidate
	// Found is the index's verdict: false means no document fits.
	Found bool
	// Threshold is the score Found was judged against.
	Threshold float64
}

// Rank returns the 1-based rank of the example's own document among the
// candidates, or 0 when it is not among them.
func (r ExampleResult) Rank() int {
	return slices.IndexFunc(r.Candidates, func(c match.Candidate) bool { return c.ID == r.Doc }) + 1
}

// OK reports whether the example finds its own document first and is not
// refused.
func (r ExampleResult) OK() bool { return r.Found && r.Rank() == 1 }

// LeaveOneOut runs every example of docs (each field with Field.Example
// set) as a query against an index of docs in which that one field is left
// out: the example's document keeps its other text and other examples,
// every other document is as given. An example that finds its document
// only because it is part of its text says nothing; one that finds it
// without itself shows that the document's other text and examples carry
// the request, and one that finds another document first shows that two
// documents read alike. It asks for limit candidates (3 when <= 0) and
// returns one result per example, in document then field order.
//
// It builds one index per example, so its cost is the number of examples
// times the cost of indexing docs: a second or so for a few hundred tools
// with a handful of examples each.
func LeaveOneOut(docs []match.Doc, vocab *match.Vocab, limit int) []ExampleResult {
	if limit <= 0 {
		limit = 3
	}
	var out []ExampleResult
	trial := slices.Clone(docs)
	for d, doc := range docs {
		n := 0
		for f, fl := range doc.Fields {
			if !fl.Example {
				continue
			}
			trial[d] = match.Doc{ID: doc.ID, Fields: slices.Delete(slices.Clone(doc.Fields), f, f+1)}
			ix := match.New(trial, vocab)
			res := ix.Match(fl.Text, limit)
			out = append(out, ExampleResult{Doc: doc.ID, Index: n, Example: fl.Text, Candidates: res.Candidates, Found: res.Found, Threshold: ix.Threshold()})
			n++
		}
		trial[d] = doc
	}
	return out
}

// ExampleSummary holds the figures of a LeaveOneOut run.
type ExampleSummary struct {
	// Examples is the number of examples run; Docs the number of
	// documents that have any.
	Examples int `json:"examples"`
	Docs     int `json:"docs"`
	// HitAt1 and HitAt3 are the shares of examples whose own document
	// ranks first, and among the first three, found or not.
	HitAt1 float64 `json:"hit_at_1"`
	HitAt3 float64 `json:"hit_at_3"`
	// Refused is the share of examples answered with found=false.
	Refused float64 `json:"refused"`
}

// SummarizeExamples computes the figures of results.
func SummarizeExamples(results []ExampleResult) ExampleSummary {
	var s ExampleSummary
	docs := map[string]bool{}
	for _, r := range results {
		s.Examples++
		docs[r.Doc] = true
		switch rank := r.Rank(); {
		case rank == 1:
			s.HitAt1++
			s.HitAt3++
		case rank > 1 && rank <= 3:
			s.HitAt3++
		}
		if !r.Found {
			s.Refused++
		}
	}
	s.Docs = len(docs)
	if n := float64(s.Examples); n > 0 {
		s.HitAt1 /= n
		s.HitAt3 /= n
		s.Refused /= n
	}
	return s
}

// WithoutExamples returns docs with every Example field removed: the
// catalog as it would be had no tool any examples. docs is not changed.
func WithoutExamples(docs []match.Doc) []match.Doc {
	out := make([]match.Doc, len(docs))
	for i, d := range docs {
		out[i] = match.Doc{ID: d.ID, Fields: slices.DeleteFunc(slices.Clone(d.Fields), func(f match.Field) bool { return f.Example })}
	}
	return out
}

// Verdict says what went wrong with an example (r.OK is false), naming
// its document and the one found in its place.
func (r ExampleResult) Verdict() string {
	if len(r.Candidates) == 0 {
		return fmt.Sprintf("finds no tool; %s does not match it without this example", r.Doc)
	}
	first := r.Candidates[0]
	var s string
	switch rank := r.Rank(); rank {
	case 0:
		var ids []string
		for _, c := range r.Candidates {
			ids = append(ids, c.ID)
		}
		s = fmt.Sprintf("%s is not among the %d candidates (%s); %s ranks first", r.Doc, len(r.Candidates), strings.Join(ids, ", "), first.ID)
	case 1:
		s = fmt.Sprintf("%s ranks first", r.Doc)
	default:
		s = fmt.Sprintf("%s ranks first (%.2f), %s is #%d (%.2f)", first.ID, first.Score, r.Doc, rank, r.Candidates[rank-1].Score)
	}
	if !r.Found {
		s += fmt.Sprintf(", but refused: the best score %.3f is below %.3f", first.Score, r.Threshold)
	}
	return s
}

// Teach returns docs with each answerable query of teach added to its
// first expected document as a request learned from use (a Field with
// Learned set, weighing weight), as if a caller had asked it and then
// called that tool: what internal/feedback hands the catalog. docs is not
// changed.
func Teach(docs []match.Doc, teach []Query, weight float64) []match.Doc {
	out := make([]match.Doc, len(docs))
	at := map[string]int{}
	for i, d := range docs {
		out[i] = match.Doc{ID: d.ID, Fields: slices.Clone(d.Fields)}
		at[d.ID] = i
	}
	for _, q := range teach {
		if len(q.Expected) == 0 {
			continue
		}
		if i, ok := at[q.Expected[0]]; ok {
			out[i].Fields = append(out[i].Fields, match.Field{Name: "learned", Text: q.Query, Weight: weight, Learned: true})
		}
	}
	return out
}

// LeftOut runs every example of docs as a query against the catalog
// without the example's own document (it is never a candidate): a request
// for a tool the catalog lacks, which should be refused. Its share refused
// (NoFitRecall) is a no-fit recall of the catalog's own making; it counts
// as answered an example that a sibling rightly answers, so it is a lower
// bound, for comparing two versions of one catalog (with and without
// learned requests, say) rather than catalogs. One index serves every
// example.
func LeftOut(docs []match.Doc, vocab *match.Vocab, limit int) []ExampleResult {
	if limit <= 0 {
		limit = 3
	}
	ix := match.New(docs, vocab)
	var out []ExampleResult
	for _, doc := range docs {
		n := 0
		for _, fl := range doc.Fields {
			if !fl.Example {
				continue
			}
			res := ix.MatchIn(fl.Text, limit, func(id string) bool { return id != doc.ID })
			out = append(out, ExampleResult{Doc: doc.ID, Index: n, Example: fl.Text, Candidates: res.Candidates, Found: res.Found, Threshold: ix.Threshold()})
			n++
		}
	}
	return out
}

// NoFitRecall is the share of results refused (0 for none).
func NoFitRecall(results []ExampleResult) float64 {
	if len(results) == 0 {
		return 0
	}
	n := 0
	for _, r := range results {
		if !r.Found {
			n++
		}
	}
	return float64(n) / float64(len(results))
}
