package match

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// defaultVocabText is the built-in bilingual operations vocabulary. Its
// format is described at ParseVocab.
//
//go:embed vocab.txt
var defaultVocabText string

// Vocab is a bilingual vocabulary of concepts: each concept is a set of
// terms (English words or phrases, Chinese words) that mean the same thing
// for matching, such as "restart, bounce, 重启". A query term and a document
// term of the same concept match each other whatever their language.
// Concepts of weight 0 are stop words. A Vocab is immutable once built and
// safe for concurrent use.
type Vocab struct {
	concepts []concept
	en       map[string][]int32 // space-joined stems of a phrase -> concepts
	enFirst  map[string]int     // first stem of a phrase -> longest phrase, in words
	han      map[string][]int32 // CJK term -> concepts
	hanFirst map[rune]int       // first character -> longest term, in characters
	words    []string           // single English words, unstemmed (typo correction)
	sounds   func() soundIndex  // homophones of two-character terms, built on first use
	pinyins  func() pinyinIndex // terms by pinyin, built on first use
	actions  int                // action concepts so far (see actionSet)
}

// concept is one line of a vocabulary file.
type concept struct {
	key    string  // index key, "@<id>"
	label  string  // first term of the line, for explanations
	weight float64 // 0 for stop words
	class  Class
	abit   uint8 // for an action: 1 + its bit in an actionSet; 0 otherwise
}

// actionSet holds actions as bits: action concepts are numbered in
// vocabulary order, modulo 128 (a vocabulary with more actions shares
// bits, which only makes the action check lenient).
type actionSet [2]uint64

func (a *actionSet) add(abit uint8) {
	if abit > 0 {
		a[(abit-1)/64] |= 1 << ((abit - 1) % 64)
	}
}

func (a actionSet) empty() bool { return a[0]|a[1] == 0 }

func (a actionSet) meets(b actionSet) bool { return a[0]&b[0]|a[1]&b[1] != 0 }

// Class says what role a concept plays in a request. Requests to an
// operations agent are mostly "do ACTION to OBJECT": a tool fits only if it
// offers the action the request asks for on the object it names, so the
// matcher weighs actions and objects apart from other words.
type Class uint8

// The concept classes, as written after the weight in a vocabulary line.
const (
	// Other is any concept that is neither an action nor an object: a
	// qualifier (time, state, severity), a product name, a generic word.
	Other Class = iota
	// Action is something a tool does: restart, list, delete, renew.
	Action
	// Object is something a tool acts on: service, file, certificate.
	Object
)

var classNames = [...]string{Other: "other", Action: "action", Object: "object"}

// String returns the class's word in a vocabulary file.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// parseClass parses the class word of a vocabulary line.
func parseClass(s string) (Class, bool) {
	for c, n := range classNames {
		if n == s {
			return Class(c), true
		}
	}
	return Other, false
}

var defaultVocab = sync.OnceValue(func() *Vocab {
	v, err := ParseVocab(strings.NewReader(defaultVocabText))
	if err != nil {
		panic("match: built-in vocab.txt: " + err.Error())
	}
	return v
})

// DefaultVocab returns the built-in vocabulary (vocab.txt, embedded). It is
// parsed once, on first use.
func DefaultVocab() *Vocab { return defaultVocab() }

// LoadVocab parses an extra vocabulary (format as in ParseVocab) and returns
// it merged with the built-in one; this is how the daemon extends matching
// without code changes.
func LoadVocab(r io.Reader) (*Vocab, error) {
	extra, err := ParseVocab(r)
	if err != nil {
		return nil, err
	}
	return MergeVocab(DefaultVocab(), extra), nil
}

// ParseVocab reads a vocabulary in this line format:
//
//	# a comment line; blank lines are ignored
//	restart, bounce, 重启, 重新启动
//	today, 今天, 今日 ; 0.3
//	the, a, 的, 一下 ; 0
//	restart, bounce, 重启 ; 1 action
//	certificate, cert, 证书 ; 1 object
//
// One concept per line: terms separated by commas, the first one naming the
// concept in explanations. A term is either English (one or more words,
// matched after case folding and stemming, so "log" also matches "logs") or
// Chinese (matched as a word by leftmost-longest segmentation); a term may
// not mix the two scripts. An optional "; W" sets the concept's weight (the
// default is 1): lower for words that say little about which tool fits, 0
// for stop words, which are dropped. After the weight, an optional class,
// "action" or "object" (see Class), says that the concept names something
// a tool does or something it acts on; the matcher requires a fitting tool
// to offer the actions a request asks for. A term may appear in several concepts;
// it then stands for all of them. Errors name the line.
func ParseVocab(r io.Reader) (*Vocab, error) {
	b := newVocabBuilder()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		weight, class := 1.0, Other
		if list, attrs, ok := strings.Cut(line, ";"); ok {
			f := strings.Fields(attrs)
			if len(f) == 0 || len(f) > 2 {
				return nil, fmt.Errorf("vocab line %d: %q after ';': want a weight and an optional class", n, strings.TrimSpace(attrs))
			}
			w, err := strconv.ParseFloat(f[0], 64)
			if err != nil || w < 0 {
				return nil, fmt.Errorf("vocab line %d: weight %q: want a number >= 0", n, f[0])
			}
			if len(f) == 2 {
				if class, ok = parseClass(f[1]); !ok {
					return nil, fmt.Errorf("vocab line %d: class %q: want action, object or other", n, f[1])
				}
			}
			line, weight = list, w
		}
		var terms []string
		for t := range strings.SplitSeq(line, ",") {
			if t = strings.TrimSpace(t); t != "" {
				terms = append(terms, t)
			}
		}
		if len(terms) == 0 {
			return nil, fmt.Errorf("vocab line %d: no terms", n)
		}
		if err := b.add(terms, weight, class); err != nil {
			return nil, fmt.Errorf("vocab line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read vocab: %w", err)
	}
	return b.v, nil
}

// MergeVocab returns a vocabulary holding the concepts of all vs. Concepts
// are not unified: a term present in two of them stands for both concepts.
func MergeVocab(vs ...*Vocab) *Vocab {
	b := newVocabBuilder()
	for _, v := range vs {
		if v == nil {
			continue
		}
		for _, c := range v.concepts {
			b.newConcept(c.label, c.weight, c.class)
		}
		base := int32(len(b.v.concepts) - len(v.concepts))
		for k, cs := range v.en {
			for _, c := range cs {
				b.v.en[k] = appendUnique(b.v.en[k], base+c)
			}
		}
		for k, n := range v.enFirst {
			b.v.enFirst[k] = max(b.v.enFirst[k], n)
		}
		for k, cs := range v.han {
			for _, c := range cs {
				b.v.han[k] = appendUnique(b.v.han[k], base+c)
			}
		}
		for k, n := range v.hanFirst {
			b.v.hanFirst[k] = max(b.v.hanFirst[k], n)
		}
		b.v.words = append(b.v.words, v.words...)
	}
	return b.v
}

// Len returns the number of concepts, stop-word lines included.
func (v *Vocab) Len() int { return len(v.concepts) }

type vocabBuilder struct{ v *Vocab }

func newVocabBuilder() vocabBuilder {
	v := &Vocab{
		en: map[string][]int32{}, enFirst: map[string]int{},
		han: map[string][]int32{}, hanFirst: map[rune]int{},
	}
	v.sounds = sync.OnceValue(func() soundIndex { return newSoundIndex(v.han) })
	v.pinyins = sync.OnceValue(func() pinyinIndex { return newPinyinIndex(v.han) })
	return vocabBuilder{v: v}
}

func (b vocabBuilder) newConcept(label string, weight float64, class Class) int32 {
	id := int32(len(b.v.concepts))
	c := concept{key: "@" + strconv.Itoa(int(id)), label: label, weight: weight, class: class}
	if class == Action {
		c.abit = 1 + uint8(b.v.actions%128)
		b.v.actions++
	}
	b.v.concepts = append(b.v.concepts, c)
	return id
}

func (b vocabBuilder) add(terms []string, weight float64, class Class) error {
	id := b.newConcept(terms[0], weight, class)
	for _, t := range terms {
		t = fold(t)
		han, other := false, false
		for _, r := range t {
			if isHan(r) {
				han = true
			} else if r != ' ' {
				other = true
			}
		}
		switch {
		case han && other:
			return fmt.Errorf("term %q mixes Chinese and other characters", t)
		case han:
			rs := []rune(strings.ReplaceAll(t, " ", ""))
			k := string(rs)
			b.v.han[k] = appendUnique(b.v.han[k], id)
			b.v.hanFirst[rs[0]] = max(b.v.hanFirst[rs[0]], len(rs))
		default:
			var words []string
			for f := range strings.FieldsSeq(t) {
				words = splitWords(words, f, true)
			}
			if len(words) == 0 {
				return fmt.Errorf("term %q has no letters", t)
			}
			stems := make([]string, len(words))
			for i, w := range words {
				words[i] = strings.TrimPrefix(w, weakMark)
				stems[i] = stem(words[i])
			}
			k := strings.Join(stems, " ")
			b.v.en[k] = appendUnique(b.v.en[k], id)
			b.v.enFirst[stems[0]] = max(b.v.enFirst[stems[0]], len(stems))
			if len(words) == 1 && weight > 0 {
				b.v.words = append(b.v.words, words[0])
			}
		}
	}
	return nil
}

func appendUnique(s []int32, x int32) []int32 {
	for _, y := range s {
		if y == x {
			return s
		}
	}
	return append(s, x)
}

// matchEnglish returns the length in words of the longest vocabulary phrase
// at the start of stems, and its concepts; 0 when none.
func (v *Vocab) matchEnglish(stems []string) (int, []int32) {
	longest := min(v.enFirst[stems[0]], len(stems))
	for n := longest; n > 1; n-- {
		if cs, ok := v.en[strings.Join(stems[:n], " ")]; ok {
			return n, cs
		}
	}
	if cs, ok := v.en[stems[0]]; ok {
		return 1, cs
	}
	return 0, nil
}

// matchHan returns the length in characters of the longest vocabulary term
// at the start of run (which holds n characters; prefix(k) is its first k
// characters), and its concepts; 0 when none.
func (v *Vocab) matchHan(run string, n int, prefix func(k int) string) (int, []int32) {
	r, _ := utf8.DecodeRuneInString(run)
	for k := min(v.hanFirst[r], n); k > 0; k-- {
		if cs, ok := v.han[prefix(k)]; ok {
			return k, cs
		}
	}
	return 0, nil
}
