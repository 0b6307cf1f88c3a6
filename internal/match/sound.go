package match

import (
	"unicode/utf8"

	"github.com/mozillazg/go-pinyin"
)

// Chinese is mostly typed through pinyin input methods, so its typical
// misspelling is a homophone: the right syllables, the wrong character
// (重起 for 重启, 备分 for 备份, 部属 for 部署). A soundIndex finds, for
// a two-character word that the vocabulary lacks, the vocabulary word that
// keeps one of its characters and sounds the same in the other (pinyin
// without tones, every reading of a polyphone). Requiring one shared
// character keeps chance homophones out: two unrelated words rarely share
// both a character and the other syllable.
type soundIndex map[string][]string // "X|pinyin" or "pinyin|Y" -> vocabulary words

// pinyinArgs asks for every reading, without tones.
var pinyinArgs = pinyin.Args{Style: pinyin.Normal, Heteronym: true}

// newSoundIndex indexes the two-character Chinese terms of a vocabulary.
func newSoundIndex(han map[string][]int32) soundIndex {
	si := soundIndex{}
	for term := range han {
		if utf8.RuneCountInString(term) != 2 {
			continue
		}
		x, n := utf8.DecodeRuneInString(term)
		y, _ := utf8.DecodeRuneInString(term[n:])
		for _, p := range pinyin.SinglePinyin(y, pinyinArgs) {
			k := string(x) + "|" + p
			si[k] = appendUniqueString(si[k], term)
		}
		for _, p := range pinyin.SinglePinyin(x, pinyinArgs) {
			k := p + "|" + string(y)
			si[k] = appendUniqueString(si[k], term)
		}
	}
	return si
}

// lookup returns the one vocabulary word that the two-character word w
// (not itself a vocabulary word) is a homophone misspelling of.
func (si soundIndex) lookup(w string) (string, bool) {
	x, n := utf8.DecodeRuneInString(w)
	y, _ := utf8.DecodeRuneInString(w[n:])
	found := ""
	for _, k := range si.keys(x, y) {
		for _, t := range si[k] {
			switch {
			case found == "":
				found = t
			case t != found:
				return "", false
			}
		}
	}
	return found, found != ""
}

func (si soundIndex) keys(x, y rune) []string {
	var ks []string
	for _, p := range pinyin.SinglePinyin(y, pinyinArgs) {
		ks = append(ks, string(x)+"|"+p)
	}
	for _, p := range pinyin.SinglePinyin(x, pinyinArgs) {
		ks = append(ks, p+"|"+string(y))
	}
	return ks
}

func appendUniqueString(s []string, x string) []string {
	for _, y := range s {
		if y == x {
			return s
		}
	}
	return append(s, x)
}
