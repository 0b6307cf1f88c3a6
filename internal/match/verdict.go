package match

import "math"

// examplesOnly reports whether the request names a concept that only
// examples hold (see Field.Example): the catalog does not offer it, so the
// documents whose examples hold it are judged by the threshold alone.
func examplesOnly(units []unit) bool {
	for _, u := range units {
		if u.term >= 0 && u.uncovered > 0 {
			return true
		}
	}
	return false
}

// standsOut reports whether a best score below the threshold stands out
// from the background of the request: the scores of the next candidates,
// rest (best first, possibly fewer than backgroundRanks), blended with the
// prior (see standoutMargin).
func (ix *Index) standsOut(best, threshold float64, rest []hit, score func(hit) float64) bool {
	if ix.margin < 0 || best < standoutFloor*threshold {
		return false
	}
	bg := priorScore * priorRanks
	for _, h := range rest[:min(len(rest), backgroundRanks)] {
		bg += score(h)
	}
	bg /= backgroundRanks + priorRanks
	return best-bg >= ix.margin
}

// confidence turns a document's coverage of the query (the share of the
// query's weight it matches, in [0, 1]) into the candidate score. Coverage
// alone overrates a short query that hits one generic word ("write me a
// poem"); the matched weight alone overrates a long query that hits many
// weak words. The score is their geometric blend, the matched weight
// saturated so that both factors lie in [0, 1]:
//
//	score = coverage^0.3 * (1 - exp(-coverage*total/evidenceScale))^0.7
//
// Within one query both factors grow with coverage, so the blend does not
// change the ranking; it makes scores comparable across queries.
func confidence(coverage, total float64) float64 {
	if coverage <= 0 {
		return 0
	}
	return math.Pow(coverage, 0.3) * math.Pow(1-math.Exp(-coverage*total/evidenceScale), 0.7)
}
