// Package matcheval measures intent matching against a set of labelled
// queries: ranking quality (recall, hit rate, MRR over the top 1 and 3) and
// how well "no tool fits" is told apart, overall and by query language.
//
// It knows nothing of the TOOL.hdlp format: callers hand it match.Docs (the
// eval command turns tools into Docs with catalog.ToolDoc) or any ranking
// function. Its functions hold no state and are safe for concurrent use.
// Imported by internal/lint (validate --match, eval), cmd/toolagent and
// tests.
package matcheval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/toolagent/toolagent/internal/match"
)

// Query is one labelled request.
type Query struct {
	// Query is the request as a person wrote it.
	Query string `json:"query"`
	// Expected lists the tools that answer it; either one is a correct
	// answer. Empty means no tool fits.
	Expected []string `json:"expected"`
	// Lang is the query's language label ("zh", "en", "mixed"), free text.
	Lang string `json:"lang"`
}

// ReadQueries reads queries as JSON Lines, one object per line; blank lines
// are skipped. Errors name the line.
func ReadQueries(r io.Reader) ([]Query, error) {
	var qs []Query
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var raw struct {
			Query    *string   `json:"query"`
			Expected *[]string `json:"expected"`
			Lang     string    `json:"lang"`
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		switch {
		case raw.Query == nil || strings.TrimSpace(*raw.Query) == "":
			return nil, fmt.Errorf("line %d: missing query", n)
		case raw.Expected == nil:
			return nil, fmt.Errorf("line %d: missing expected (use [] when no tool fits)", n)
		}
		qs = append(qs, Query{Query: *raw.Query, Expected: *raw.Expected, Lang: raw.Lang})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read queries: %w", err)
	}
	return qs, nil
}

// Report holds the figures of one evaluation. Ranking figures (recall, hit,
// MRR) are averaged over the answerable queries and measure the ranked names
// whether or not the ranker also said found; refusals are counted apart in
// AnswerableRefused and in the no-fit figures.
type Report struct {
	// Queries is the number of queries evaluated.
	Queries int `json:"queries"`
	// Answerable is the number of queries with at least one expected tool.
	Answerable int `json:"answerable"`
	// NoFit is the number of queries with no expected tool.
	NoFit int `json:"nofit"`
	// RecallAt1 and RecallAt3 are the mean share of a query's expected
	// tools found in the top 1 and top 3.
	RecallAt1 float64 `json:"recall_at_1"`
	RecallAt3 float64 `json:"recall_at_3"`
	// HitAt1 and HitAt3 are the share of answerable queries with an
	// expected tool in the top 1 and top 3.
	HitAt1 float64 `json:"hit_at_1"`
	HitAt3 float64 `json:"hit_at_3"`
	// MRRAt3 is the mean of 1/rank of the first expected tool in the top 3
	// (0 when none is there).
	MRRAt3 float64 `json:"mrr_at_3"`
	// ServedRecallAt1 and ServedRecallAt3 are RecallAt1 and RecallAt3 of
	// what a caller is served: a refused query (found=false) counts as a
	// miss whatever was ranked. They lead the report.
	ServedRecallAt1 float64 `json:"served_recall_at_1"`
	ServedRecallAt3 float64 `json:"served_recall_at_3"`
	// AnsweredHitAt3 is the share of answerable queries that were answered
	// (found) with an expected tool in the top 3: what a caller sees.
	AnsweredHitAt3 float64 `json:"answered_hit_at_3"`
	// AnswerableRefused is the share of answerable queries answered with
	// found=false.
	AnswerableRefused float64 `json:"answerable_refused"`
	// NoFitPrecision is the share of found=false answers given to no-fit
	// queries; NoFitRecall the share of no-fit queries answered found=false.
	NoFitPrecision float64 `json:"nofit_precision"`
	NoFitRecall    float64 `json:"nofit_recall"`
	// ByLang holds the same figures per query language. Callers that were
	// not asked for it set it to nil; it is then left out of the JSON.
	ByLang map[string]Report `json:"by_lang,omitempty"`
	// Misses lists the queries answered wrongly (not in the JSON).
	Misses []Miss `json:"-"`
}

// Miss is one query the ranker got wrong: an answerable query with no
// expected tool at rank 1 or refused, or a no-fit query that was answered.
type Miss struct {
	Query Query
	Got   []string
	Found bool
}

// Evaluate runs rank on every query and computes the report, including
// per-language reports in ByLang.
func Evaluate(rank func(q string) (names []string, found bool), qs []Query) Report {
	type outcome struct {
		q     Query
		names []string
		found bool
	}
	outs := make([]outcome, len(qs))
	for i, q := range qs {
		names, found := rank(q.Query)
		outs[i] = outcome{q, names, found}
	}
	compute := func(keep func(Query) bool) Report {
		var r Report
		var refusedRight, refused, answered int
		for _, o := range outs {
			if !keep(o.q) {
				continue
			}
			r.Queries++
			if !o.found {
				refused++
			}
			if len(o.q.Expected) == 0 {
				r.NoFit++
				if !o.found {
					refusedRight++
				} else {
					r.Misses = append(r.Misses, Miss{o.q, o.names, o.found})
				}
				continue
			}
			r.Answerable++
			first := 0 // rank of the first expected tool, 1-based; 0 = none in top 3
			var in1, in3 int
			for i, n := range o.names {
				if !slices.Contains(o.q.Expected, n) {
					continue
				}
				if i < 1 {
					in1++
				}
				if i < 3 {
					in3++
					if first == 0 {
						first = i + 1
					}
				}
			}
			exp := float64(len(o.q.Expected))
			r.RecallAt1 += float64(in1) / exp
			r.RecallAt3 += float64(in3) / exp
			if o.found {
				r.ServedRecallAt1 += float64(in1) / exp
				r.ServedRecallAt3 += float64(in3) / exp
			}
			if in1 > 0 {
				r.HitAt1++
			}
			if first > 0 {
				r.HitAt3++
				r.MRRAt3 += 1 / float64(first)
				if o.found {
					answered++
				}
			}
			if !o.found {
				r.AnswerableRefused++
			}
			if in1 == 0 || !o.found {
				r.Misses = append(r.Misses, Miss{o.q, o.names, o.found})
			}
		}
		if a := float64(r.Answerable); a > 0 {
			r.RecallAt1 /= a
			r.RecallAt3 /= a
			r.ServedRecallAt1 /= a
			r.ServedRecallAt3 /= a
			r.HitAt1 /= a
			r.HitAt3 /= a
			r.MRRAt3 /= a
			r.AnswerableRefused /= a
			r.AnsweredHitAt3 = float64(answered) / a
		}
		if refused > 0 {
			r.NoFitPrecision = float64(refusedRight) / float64(refused)
		}
		if r.NoFit > 0 {
			r.NoFitRecall = float64(refusedRight) / float64(r.NoFit)
		}
		return r
	}
	r := compute(func(Query) bool { return true })
	langs := map[string]bool{}
	for _, q := range qs {
		langs[q.Lang] = true
	}
	if len(langs) > 0 {
		r.ByLang = map[string]Report{}
		for l := range langs {
			r.ByLang[l] = compute(func(q Query) bool { return q.Lang == l })
		}
	}
	return r
}

// RunDocs indexes docs with vocab (nil: match.DefaultVocab), calibrated
// on their examples as the daemon's catalog is (match.Calibrate), and evaluates
// the index on qs, asking for limit candidates per query (3 when <= 0).
func RunDocs(docs []match.Doc, vocab *match.Vocab, qs []Query, limit int) Report {
	if limit <= 0 {
		limit = 3
	}
	ix := match.Calibrate(match.New(docs, vocab), docs, vocab)
	return Evaluate(Ranker(ix, limit), qs)
}

// Ranker adapts an index to Evaluate: the IDs of the top limit candidates
// and whether the index found a fit.
func Ranker(ix *match.Index, limit int) func(q string) ([]string, bool) {
	return func(q string) ([]string, bool) {
		res := ix.Match(q, limit)
		names := make([]string, len(res.Candidates))
		for i, c := range res.Candidates {
			names[i] = c.ID
		}
		return names, res.Found
	}
}

// WriteText writes the report as two aligned tables, each with all
// queries first, then one row per language when ByLang is set: first what
// callers are served (a refusal is a miss) with the no-fit figures, then
// the ranking alone (refusals ignored).
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	langs := make([]string, 0, len(r.ByLang))
	for l := range r.ByLang {
		langs = append(langs, l)
	}
	slices.Sort(langs)
	rows := func(row func(name string, r Report)) {
		row("all", r)
		for _, l := range langs {
			name := l
			if name == "" {
				name = "(none)"
			}
			row("lang="+name, r.ByLang[l])
		}
	}
	fmt.Fprintf(&b, "%-10s %5s %5s %5s  %7s %7s %7s  %8s  %7s %7s   (served: a refusal is a miss)\n",
		"served", "n", "ans", "nofit", "sR@1", "sR@3", "sHit@3", "refused", "nofitP", "nofitR")
	rows(func(name string, r Report) {
		fmt.Fprintf(&b, "%-10s %5d %5d %5d  %7.3f %7.3f %7.3f  %8.3f  %7.3f %7.3f\n",
			name, r.Queries, r.Answerable, r.NoFit, r.ServedRecallAt1, r.ServedRecallAt3, r.AnsweredHitAt3,
			r.AnswerableRefused, r.NoFitPrecision, r.NoFitRecall)
	})
	fmt.Fprintf(&b, "%-10s %5s %5s %5s  %6s %6s %6s %6s %6s   (ranked: refusals ignored)\n",
		"subset", "n", "ans", "nofit", "R@1", "R@3", "Hit@1", "Hit@3", "MRR@3")
	rows(func(name string, r Report) {
		fmt.Fprintf(&b, "%-10s %5d %5d %5d  %6.3f %6.3f %6.3f %6.3f %6.3f\n",
			name, r.Queries, r.Answerable, r.NoFit, r.RecallAt1, r.RecallAt3, r.HitAt1, r.HitAt3, r.MRRAt3)
	})
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMisses writes one line per missed query: the query, what was
// expected and what came back.
func (r Report) WriteMisses(w io.Writer) error {
	var b strings.Builder
	for _, m := range r.Misses {
		exp := strings.Join(m.Query.Expected, "|")
		if exp == "" {
			exp = "(none)"
		}
		verdict := "found"
		if !m.Found {
			verdict = "refused"
		}
		fmt.Fprintf(&b, "%-5s want %-30s got %-7s %v  %s\n", m.Query.Lang, exp, verdict, m.Got, m.Query.Query)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
