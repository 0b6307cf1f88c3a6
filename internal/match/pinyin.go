package match

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mozillazg/go-pinyin"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// Two ways of writing Chinese reach the vocabulary through pinyin, the
// sound of a word, which both share with the simplified script:
//
// Traditional script (讀取, 寫入, 執行, 內容). A character outside GB2312,
// the simplified character set, is read as a traditional (or variant)
// form: a word of the request of one to four characters holding such a
// character becomes the one vocabulary term that sounds the same and has
// the same characters wherever the request's are in GB2312 (讀取 -> 读取:
// 取 is kept, 讀 sounds du like 读). Simplified text is never changed, so
// homophones of it (事实, 实施) cannot be confused; the vocabulary decides
// which of several simplified characters a traditional one stands for
// (only the term that fits the whole word counts), as a character table
// would not (乾 is 干 and 乾). No conversion table is shipped: the OpenCC
// ports for Go (github.com/longbridgeapp/opencc, github.com/liuzl/gocc)
// build on a double-array trie under the GPL v2, which this project's
// Apache 2.0 licence cannot take in.
//
// Pinyin typed as Latin letters ("zuijin de tijiao jilu"). A word the
// catalog does not hold that is the pinyin, without tones or spaces, of a
// vocabulary term of two or more characters, or of a two-character word
// of the catalog's tools (Index.pinyinWords), is read as that term (tijiao
// -> 提交); one that is the pinyin of stop words only (de: 的, 地, 得) is
// dropped.

// simplifiedOnly tells, by code point from firstHan, the CJK unified
// ideographs that GB2312 holds.
var simplifiedOnly = sync.OnceValue(gb2312Set)

// gb2312Set asks GB2312's encoder about each CJK unified ideograph, in
// fixed buffers: its String made about 250 bytes of garbage a character,
// 5.4 MB the first time a catalog's text held a Han character.
func gb2312Set() []bool {
	enc := simplifiedchinese.HZGB2312.NewEncoder()
	set := make([]bool, lastHan-firstHan+1)
	var src [utf8.UTFMax]byte
	var dst [16]byte // HZ: "~{", two bytes, "~}"
	for r := rune(firstHan); r <= lastHan; r++ {
		n := utf8.EncodeRune(src[:], r)
		enc.Reset()
		_, _, err := enc.Transform(dst[:], src[:n], true)
		set[r-firstHan] = err == nil
	}
	return set
}

const (
	firstHan = 0x4E00
	lastHan  = 0x9FFF
)

// traditional reports whether r is a Han character outside GB2312.
func traditional(r rune) bool {
	if r < firstHan || r > lastHan {
		return isHan(r)
	}
	return !simplifiedOnly()[r-firstHan]
}

// pinyinIndex maps the toneless pinyin of a term, without separators
// ("tijiao"), to the terms of that sound.
type pinyinIndex map[string][]string

// maxReadings bounds the readings of one word tried (every combination of
// its polyphones' readings).
const maxReadings = 16

// readings returns the toneless pinyin of the characters rs joined, for
// every combination of readings (at most maxReadings); none when a
// character has no reading.
func readings(rs []rune) []string {
	out := []string{""}
	for _, r := range rs {
		ps := pinyin.SinglePinyin(r, pinyinArgs)
		if len(ps) == 0 {
			return nil
		}
		var next []string
		for _, o := range out {
			for _, p := range ps {
				if len(next) < maxReadings {
					next = append(next, o+p)
				}
			}
		}
		out = next
	}
	return out
}

// add indexes term under each of its readings.
func (pi pinyinIndex) add(term string) {
	for _, k := range readings([]rune(term)) {
		pi[k] = appendUniqueString(pi[k], term)
	}
}

func newPinyinIndex(han map[string][]int32) pinyinIndex {
	pi := pinyinIndex{}
	for term := range han {
		pi.add(term)
	}
	return pi
}

// simplify returns run with its words in traditional script replaced by
// the vocabulary terms they stand for (see the top of this file); run
// itself when it holds no character outside GB2312.
func (v *Vocab) simplify(run string) string {
	has := false
	for _, r := range run {
		if traditional(r) {
			has = true
			break
		}
	}
	if !has {
		return run
	}
	rs := []rune(run)
	done := make([]bool, len(rs))
	pi := v.pinyins()
	for i, r := range rs {
		if done[i] || !traditional(r) {
			continue
		}
	window:
		for l := min(4, len(rs)); l >= 1; l-- {
			for s := max(0, i-l+1); s <= i && s+l <= len(rs); s++ {
				w := rs[s : s+l]
				if t, ok := v.traditionalTerm(pi, w, done[s:s+l]); ok {
					copy(rs[s:s+l], []rune(t))
					for k := s; k < s+l; k++ {
						done[k] = true
					}
					break window
				}
			}
		}
	}
	return string(rs)
}

// traditionalTerm returns the one term that the word w (whose characters
// done already became simplified ones) writes in traditional script. A
// lone character is read only as a term that is no stop word: 寫 (xie) is
// 写, not 些, and a traditional stop word left as it is says nothing
// anyway.
func (v *Vocab) traditionalTerm(pi pinyinIndex, w []rune, done []bool) (string, bool) {
	found := ""
	for _, k := range readings(w) {
	terms:
		for _, t := range pi[k] {
			tr := []rune(t)
			if len(tr) != len(w) || t == found || len(w) == 1 && v.stopTerm(t) {
				continue
			}
			for j, r := range w {
				if r != tr[j] && (done[j] || !traditional(r)) {
					continue terms
				}
			}
			if found != "" {
				return "", false
			}
			found = t
		}
	}
	return found, found != ""
}

// pinyinTerm returns the vocabulary term (of two or more characters) whose
// pinyin the Latin word w is, and stop when w is the pinyin of stop words
// only.
func (v *Vocab) pinyinTerm(w string) (term string, stop bool) {
	if len(w) < 2 || strings.ContainsFunc(w, func(r rune) bool { return r < 'a' || r > 'z' }) {
		return "", false
	}
	terms := v.pinyins()[w]
	if len(terms) == 0 {
		return "", false
	}
	stop = true
	for _, t := range terms {
		stop = stop && v.stopTerm(t)
		if utf8.RuneCountInString(t) < 2 {
			continue
		}
		switch {
		case term == "":
			term = t
		case !sameConcepts(v.han[term], v.han[t]):
			return "", false
		}
	}
	if stop {
		return "", true
	}
	return term, false
}

// stopTerm reports whether every concept of the Han term t is a stop word.
func (v *Vocab) stopTerm(t string) bool {
	for _, c := range v.han[t] {
		if v.concepts[c].weight != 0 {
			return false
		}
	}
	return true
}

func sameConcepts(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// pinyinWords indexes the two-character Han words of the catalog's text
// (its bigrams) by pinyin, for Latin pinyin the vocabulary lacks.
func (ix *Index) newPinyinWords() pinyinIndex {
	pi := pinyinIndex{}
	add := func(k string) {
		if utf8.RuneCountInString(k) != 2 {
			return
		}
		for _, r := range k {
			if !isHan(r) {
				return
			}
		}
		pi.add(k)
	}
	for k := range ix.terms {
		add(k)
	}
	for k := range ix.extra {
		add(k)
	}
	return pi
}
