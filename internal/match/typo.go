package match

import "slices"

// typoIndex corrects misspelt English words against the words an index
// knows (its documents' words and the vocabulary's), by edit distance, using
// a deletion neighbourhood (as in SymSpell) so that a lookup costs a few
// map probes instead of a scan.
type typoIndex struct {
	dels map[string][]int32 // a word or one of its one-letter deletions -> words
	list []string
}

// minTypoLen is the shortest word that is corrected; shorter words have too
// many neighbours to guess from.
const minTypoLen = 5

// minFreeTypoLen is the shortest word corrected by any one edit. A shorter
// word (of minTypoLen letters or more) is corrected only for a doubled or
// undoubled letter ("isues", "memmory"): without a dictionary the matcher
// cannot tell a misspelling from another real word, and short real words
// are often one edit from a catalog word ("lunch"/"launch",
// "movie"/"move"), while a slip of a repeated letter rarely makes a real
// word.
const minFreeTypoLen = 6

func newTypoIndex(words map[string]bool) *typoIndex {
	t := &typoIndex{dels: map[string][]int32{}}
	for w := range words {
		if len(w) < minTypoLen || !isLetters(w) {
			continue
		}
		t.list = append(t.list, w)
	}
	slices.Sort(t.list) // deterministic ties
	for i, w := range t.list {
		t.dels[w] = append(t.dels[w], int32(i))
		for j := range len(w) {
			d := w[:j] + w[j+1:]
			t.dels[d] = appendUnique(t.dels[d], int32(i))
		}
	}
	return t
}

// correct returns the known word within one edit (insertion, deletion,
// substitution or transposition of adjacent letters) of w. It reports false
// when w is short, holds non-letters, or has no single best correction.
func (t *typoIndex) correct(w string) (string, bool) {
	if len(w) < minTypoLen || !isLetters(w) {
		return "", false
	}
	best, n := "", 0
	consider := func(ids []int32) {
		for _, id := range ids {
			c := t.list[id]
			if c == best || editDistance(w, c) > 1 || len(w) < minFreeTypoLen && !doubledSlip(w, c) {
				continue
			}
			// Prefer the candidate sharing the first letter.
			switch {
			case n == 0:
				best, n = c, 1
			case c[0] == w[0] && best[0] != w[0]:
				best = c
			case (c[0] == w[0]) == (best[0] == w[0]) && stem(c) != stem(best):
				n++
			}
		}
	}
	consider(t.dels[w])
	for j := range len(w) {
		consider(t.dels[w[:j]+w[j+1:]])
	}
	return best, n == 1
}

// doubledSlip reports whether a and b differ by one letter that repeats its
// neighbour in the longer of the two ("isues"/"issues").
func doubledSlip(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(b) != len(a)+1 {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	if a[i:] != b[i+1:] {
		return false
	}
	return i > 0 && b[i-1] == b[i] || i+1 < len(b) && b[i+1] == b[i]
}

// editDistance is the optimal-string-alignment distance of a and b (ASCII).
func editDistance(a, b string) int {
	if a == b {
		return 0
	}
	if d := len(a) - len(b); d > 2 || d < -2 {
		return 3
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func isLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return s != ""
}
