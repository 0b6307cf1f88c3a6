package match

import (
	"slices"
	"unicode"
)

// Calibrate returns ix with its refusal thresholds tuned per language on
// the catalog's own examples (Field.Example), by leave-one-out: each
// example is asked of an index of docs without it, and the scores of
// those that find their own document first are kept per language
// (Chinese, see chinese, or English: the rest). When more than
// calibrateRefused of the English ones would be refused at ix's
// threshold, the English threshold is lowered to the score that refuses
// that share; the Chinese threshold is lowered likewise, to refuse no
// greater share of the Chinese examples than calibrateRefused nor than
// the English examples' share at their threshold (when there are
// calibrateMin of those): Chinese requests are refused no more often than
// English ones. Neither threshold goes below standoutFloor times ix's, or
// above it. ix is not changed; a language with fewer than calibrateMin
// examples that find their document keeps ix's threshold, and a catalog
// whose examples times documents pass calibrateMax (one index is built
// per example) is returned as it is. docs and vocab must be those of ix.
func Calibrate(ix *Index, docs []Doc, vocab *Vocab) *Index {
	return CalibrateFunc(ix, len(docs), func(i int) Doc { return docs[i] }, vocab)
}

// CalibrateFunc is Calibrate over the n documents doc(0) to doc(n-1),
// those NewFunc built ix of. It holds them all only for a catalog it
// calibrates (see calibrateMax); a larger one's are counted one by one.
func CalibrateFunc(ix *Index, n int, doc func(i int) Doc, vocab *Vocab) *Index {
	total := 0
	for i := range n {
		for _, f := range doc(i).Fields {
			if f.Example {
				total++
			}
		}
		if total*n > calibrateMax {
			return ix
		}
	}
	if total == 0 {
		return ix
	}
	docs := make([]Doc, n)
	for i := range docs {
		docs[i] = doc(i)
	}
	var zh, en []float64
	trial := slices.Clone(docs)
	for i, d := range docs {
		for f, fl := range d.Fields {
			if !fl.Example {
				continue
			}
			left := Doc{ID: d.ID, Fields: slices.Delete(slices.Clone(d.Fields), f, f+1)}
			// An update of ix costs a few of its postings; New rebuilds
			// the typo index, most of its time.
			lix := ix.WithThreshold(ix.threshold).Update([]Doc{d}, []Doc{left})
			if lix == nil {
				trial[i] = left
				lix = New(trial, vocab).WithThreshold(ix.threshold)
				trial[i] = d
			}
			res := lix.Match(fl.Text, 1)
			if len(res.Candidates) > 0 && res.Candidates[0].ID == d.ID {
				if chinese(fl.Text) {
					zh = append(zh, res.Candidates[0].Score)
				} else {
					en = append(en, res.Candidates[0].Score)
				}
			}
		}
	}
	c := *ix
	c.enThreshold = lowered(en, ix.threshold, calibrateRefused)
	share := calibrateRefused
	if len(en) >= calibrateMin {
		share = min(share, refusedShare(en, c.ThresholdFor("")))
	}
	c.zhThreshold = lowered(zh, ix.threshold, share)
	if c.enThreshold == 0 && c.zhThreshold == 0 {
		return ix
	}
	return &c
}

// lowered returns the threshold, below t, that refuses share of scores
// (never below standoutFloor times t), or 0 when t refuses no more than
// that or there are fewer than calibrateMin scores. It sorts scores.
func lowered(scores []float64, t, share float64) float64 {
	if len(scores) < calibrateMin {
		return 0
	}
	slices.Sort(scores)
	q := scores[min(len(scores)-1, int(share*float64(len(scores))))]
	if q >= t {
		return 0
	}
	return max(q, standoutFloor*t)
}

// refusedShare is the share of scores below t.
func refusedShare(scores []float64, t float64) float64 {
	n := 0
	for _, s := range scores {
		if s < t {
			n++
		}
	}
	return float64(n) / float64(len(scores))
}

// How Calibrate works: at most calibrateRefused of the examples of a
// language that find their own tool are refused; it needs calibrateMin of them,
// and builds one index per example while examples times documents stay
// within calibrateMax (a few hundred tools with a few examples each).
const (
	calibrateRefused = 0.05
	calibrateMin     = 5
	calibrateMax     = 20000
)

// ThresholdFor returns the refusal threshold for request q: the one
// Calibrate tuned for its language (Chinese or not), or Threshold.
func (ix *Index) ThresholdFor(q string) float64 {
	if chinese(q) {
		if ix.zhThreshold > 0 {
			return ix.zhThreshold
		}
	} else if ix.enThreshold > 0 {
		return ix.enThreshold
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

// Chinese reports whether request s counts as Chinese for the refusal
// thresholds (see Calibrate, ThresholdFor).
func Chinese(s string) bool { return chinese(s) }
