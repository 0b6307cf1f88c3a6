package match

import (
	"slices"
	"unicode"
)

// Calibrate returns ix with its refusal threshold for Chinese requests
// tuned on the catalog's own examples (Field.Example), by leave-one-out:
// each Chinese example is asked of an index of docs without it, and when
// more than calibrateRefused of those that find their own document first
// would be refused at ix's threshold, the Chinese threshold is lowered to
// the score that refuses that share, never below standoutFloor times the
// threshold. English requests keep ix's threshold: it was set on them, and
// the bar is that Chinese requests are refused no more often. ix is not
// changed; a catalog with fewer than calibrateMin Chinese examples, or
// whose examples times documents pass calibrateMax (one index is built
// per example), is returned as it is. docs and vocab must be those of ix.
func Calibrate(ix *Index, docs []Doc, vocab *Vocab) *Index {
	total := 0
	for _, d := range docs {
		for _, f := range d.Fields {
			if f.Example {
				total++
			}
		}
	}
	if total*len(docs) > calibrateMax {
		return ix
	}
	var scores []float64
	trial := slices.Clone(docs)
	for i, d := range docs {
		for f, fl := range d.Fields {
			if !fl.Example || !chinese(fl.Text) {
				continue
			}
			trial[i] = Doc{ID: d.ID, Fields: slices.Delete(slices.Clone(d.Fields), f, f+1)}
			res := New(trial, vocab).WithThreshold(ix.threshold).Match(fl.Text, 1)
			if len(res.Candidates) > 0 && res.Candidates[0].ID == d.ID {
				scores = append(scores, res.Candidates[0].Score)
			}
		}
		trial[i] = d
	}
	if len(scores) < calibrateMin {
		return ix
	}
	slices.Sort(scores)
	q := scores[int(calibrateRefused*float64(len(scores)))]
	if q >= ix.threshold {
		return ix
	}
	c := *ix
	c.zhThreshold = max(q, standoutFloor*ix.threshold)
	return &c
}

// How Calibrate works: at most calibrateRefused of the Chinese examples
// that find their own tool are refused; it needs calibrateMin of them,
// and builds one index per example while examples times documents stay
// within calibrateMax (a few hundred tools with a few examples each).
const (
	calibrateRefused = 0.05
	calibrateMin     = 5
	calibrateMax     = 20000
)

// thresholdFor returns the threshold for request q: zhThreshold for a
// Chinese one when set (see Calibrate).
func (ix *Index) thresholdFor(q string) float64 {
	if ix.zhThreshold > 0 && chinese(q) {
		return ix.zhThreshold
	}
	return ix.threshold
}

// chinese reports whether s is written mostly in Chinese: a Han
// character counts as four Latin letters (about a word).
func chinese(s string) bool {
	han, latin := 0, 0
	for _, r := range s {
		switch {
		case isHan(r):
			han++
		case unicode.IsLetter(r):
			latin++
		}
	}
	return han > 0 && 4*han >= latin
}
