package match

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind says how a token was made; each kind has its own weight.
type tokKind uint8

const (
	kindWord    tokKind = iota // an English (or identifier) word, stemmed
	kindConcept                // a vocabulary concept, language-neutral
	kindBigram                 // two adjacent CJK characters outside the vocabulary
	kindUnigram                // one CJK character (typo and partial-word fallback)
)

// kindWeight is the weight of one token of each kind, in documents and in
// queries. Unigrams are weak on purpose: they only break ties and catch
// misspelt Chinese words (瓷盘 still shares 盘 with 磁盘).
var kindWeight = [...]float64{
	kindWord:    1,
	kindConcept: 1,
	kindBigram:  0.5, // each character sits in two bigrams
	kindUnigram: 0.25,
}

// token is one unit of analysed text.
type token struct {
	key     string  // index key: a stem, "@<concept id>", a bigram or a character
	surface string  // the text as written, for explanations
	kind    tokKind //
	weight  float64 // kindWeight times the concept's own weight
	class   Class   // the concept's class; Other for other kinds
	fix     string  // the word a misspelling was read as, if any
	abit    uint8   // the concept's action bit (see actionSet); 0 for none
	// noun marks an action read as a thing or an event ("the last deploy",
	// "the production release", 上次的发布): when the request asks for another action, it asks for
	// that one (see nounActions).
	noun bool
}

// analyzer turns text into tokens using a vocabulary. It holds no mutable
// state and is safe for concurrent use.
type analyzer struct {
	v   *Vocab
	buf *abuf // reusable buffers and a stem memo while building; nil at query time
}

// abuf holds an analyzer's reusable buffers. One goroutine only.
type abuf struct {
	words   []string
	stems   []string
	weak    []bool
	offs    []int
	covered []bool
	stop    []bool
	memo    map[string]string // word -> stem, and character -> unigram key
	title   []token           // the tokens title analyses a field into
}

func (a analyzer) stem(w string) string {
	if a.buf == nil {
		return stem(w)
	}
	s, ok := a.buf.memo[w]
	if !ok {
		s = stem(w)
		a.buf.memo[w] = s
	}
	return s
}

func (a analyzer) unigramKey(c string) string {
	if a.buf == nil {
		return "~" + c
	}
	k, ok := a.buf.memo["~"+c]
	if !ok {
		k = "~" + c
		a.buf.memo[k] = k
	}
	return k
}

// analyze appends the tokens of text to dst. With query set, CJK unigrams
// are produced only for characters the vocabulary did not cover, so that a
// query's maximum score does not depend on the language it is written in.
func (a analyzer) analyze(dst []token, text string, query bool) []token {
	text = fold(text)
	var words []string // pending ASCII words, processed as one sequence
	if a.buf != nil {
		words = a.buf.words[:0]
		defer func() { a.buf.words = words }()
	}
	flush := func() {
		if len(words) > 0 {
			dst = a.english(dst, words)
			words = words[:0]
		}
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case isHan(r):
			flush()
			j := i
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if !isHan(r2) {
					break
				}
				j += s2
			}
			dst = a.han(dst, a.v.simplify(text[i:j]), query)
			i = j
		case unicode.IsSpace(r) || isCJKPunct(r):
			if isCJKPunct(r) {
				flush()
			}
			i += size
		default:
			j := i
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if isHan(r2) || unicode.IsSpace(r2) || isCJKPunct(r2) {
					break
				}
				j += s2
			}
			chunk := text[i:j]
			trimmed := strings.TrimRightFunc(chunk, isClosingPunct)
			if c := strings.TrimLeftFunc(trimmed, isOpeningPunct); a.alternatives(c) {
				words = append(words, strings.Split(c, "/")...)
			} else {
				words = chunkWords(words, c)
			}
			if len(trimmed) < len(chunk) && strings.ContainsAny(chunk[len(trimmed):], ",.;!?") {
				flush() // a sentence or clause ends here: no phrase spans it
			}
			i = j
		}
	}
	flush()
	return dst
}

// english matches vocabulary phrases (longest first) over a word sequence and
// emits concepts for them and stems for the other words.
func (a analyzer) english(dst []token, words []string) []token {
	var stems []string
	var weak []bool
	if a.buf != nil {
		stems, weak = a.buf.stems[:0], a.buf.weak[:0]
		defer func() { a.buf.stems, a.buf.weak = stems, weak }()
	}
	for i, w := range words {
		wk := strings.HasPrefix(w, weakMark)
		if wk {
			w = w[len(weakMark):]
			words[i] = w
		}
		stems = append(stems, a.stem(w))
		weak = append(weak, wk)
	}
	objEnd := -1 // where the last phrase naming an object ended
	for i := 0; i < len(words); {
		n, cs := a.v.matchEnglish(stems[i:])
		if n > 0 {
			surface := strings.Join(words[i:i+n], " ")
			k := len(dst)
			for _, c := range cs {
				dst = a.concept(dst, c, surface)
			}
			after := objEnd == i
			if slices.ContainsFunc(dst[k:], func(t token) bool { return t.class == Object }) {
				objEnd = i + n
			}
			switch {
			case n == 1 && weak[i]:
				// A part of an identifier names a thing; it asks for no
				// action ("feature/export-csv" is a branch, not an export).
				for j := k; j < len(dst); j++ {
					dst[j].weight *= identWeight
					dst[j].class = Other
				}
			case i > 0 && stateMarker(words[i-1]) && a.stateReading(dst[k:]):
				// "is it still open", "are they running": the verb names a
				// state the request asks about, not an action to take.
				dst = a.appendState(dst, surface)
			case pastForm(words[i+n-1]):
				// A request asks in the base form ("restart it"); a past
				// form describes what happened ("who committed", "it
				// crashed", "the merged PRs"), so it is no requested action.
				demote(dst[k:])
			case i > 0 && (nounMarker(words[i-1]) || after) && words[i] != "new":
				// "the last deploy", "yesterday's release", "the
				// production release"; "a new issue" names no event: new
				// is an adjective.
				markNoun(dst[k:])
			}
			i += n
			continue
		}
		if len(words[i]) > 1 {
			w := kindWeight[kindWord]
			if weak[i] {
				w *= identWeight
			}
			dst = append(dst, token{key: stems[i], surface: words[i], kind: kindWord, weight: w})
		}
		i++
	}
	return dst
}

// concept appends the token of concept c unless it is a stop concept.
func (a analyzer) concept(dst []token, c int32, surface string) []token {
	w := a.v.concepts[c].weight
	if w == 0 {
		return dst
	}
	return append(dst, token{key: a.v.concepts[c].key, surface: surface, kind: kindConcept, weight: w * kindWeight[kindConcept], class: a.v.concepts[c].class, abit: a.v.concepts[c].abit})
}

// han segments a run of CJK characters: vocabulary terms by leftmost-longest
// match, the rest as bigrams (or a lone character), plus unigrams.
func (a analyzer) han(dst []token, run string, query bool) []token {
	var offs []int // byte offset of each character, and len(run)
	var covered, stop []bool
	if a.buf != nil {
		offs, covered, stop = a.buf.offs[:0], a.buf.covered[:0], a.buf.stop[:0]
		defer func() { a.buf.offs, a.buf.covered, a.buf.stop = offs, covered, stop }()
	}
	for i := range run {
		offs = append(offs, i)
		covered = append(covered, false)
		stop = append(stop, false)
	}
	n := len(offs)
	offs = append(offs, len(run))
	sub := func(i, j int) string { return run[offs[i]:offs[j]] }
	for i := 0; i < n; {
		m, cs := a.v.matchHan(run[offs[i]:], n-i, func(k int) string { return sub(i, i+k) })
		if m == 0 {
			i++
			continue
		}
		surface := sub(i, i+m)
		content := false
		if contentVerb(surface) && contentQuestion(run[:offs[i]], run[offs[i+m]:]) {
			// 写的是什么, 怎么写的, 记了什么: the request asks what a text
			// says, so it asks to read it, not to write it.
			if read := a.v.en[a.stem(readTerm)]; len(read) > 0 {
				cs, content = read, true
			}
		}
		isStop := true
		k := len(dst)
		for _, c := range cs {
			if a.v.concepts[c].weight != 0 {
				isStop = false
			}
			dst = a.concept(dst, c, surface)
		}
		if content {
			// The verb became the reading the request asks for.
		} else if progressive(run[:offs[i]]) && a.stateReading(dst[k:]) {
			// 在跑, 一直在反复重启: the verb names what is going on, a state
			// the request asks about.
			dst = a.appendState(dst, surface)
		} else if i+m < n && descriptive(sub(i+m, i+m+1)) {
			// 写的是什么, 我提的 PR, 有人记过: the verb describes a thing
			// or a past event; it is not what the request asks to do.
			demote(dst[k:])
		} else if nounBefore(run[:offs[i]]) {
			// 上次的发布, 最近一次部署: the verb names an event, a thing.
			markNoun(dst[k:])
		}
		for j := i; j < i+m; j++ {
			covered[j] = true
			stop[j] = isStop
		}
		i += m
	}
	if query {
		// A two-character word the vocabulary lacks, standing alone
		// between known words, may be a homophone misspelling of one it
		// has (服务重起一下: 重起 -> 重启). A negation is a phrase, not a
		// misspelt word (不通, 没含).
		for i := 0; i+1 < n; i++ {
			if covered[i] || covered[i+1] || i > 0 && !covered[i-1] || i+2 < n && !covered[i+2] {
				continue
			}
			w := sub(i, i+2)
			if strings.ContainsAny(w, "不没未别无非") {
				continue
			}
			term, ok := a.v.sounds().lookup(w)
			if !ok {
				continue
			}
			k := len(dst)
			for _, c := range a.v.han[term] {
				dst = a.concept(dst, c, w)
			}
			for j := k; j < len(dst); j++ {
				dst[j].fix = term
			}
			covered[i], covered[i+1] = true, true
			i++
		}
	}
	// Leftover spans: bigrams, or the character itself when alone.
	for i := 0; i < n; {
		if covered[i] {
			i++
			continue
		}
		j := i
		for j < n && !covered[j] {
			j++
		}
		if j-i == 1 {
			s := sub(i, j)
			dst = append(dst, token{key: s, surface: s, kind: kindBigram, weight: kindWeight[kindBigram]})
		}
		for k := i; k+1 < j; k++ {
			s := sub(k, k+2)
			dst = append(dst, token{key: s, surface: s, kind: kindBigram, weight: kindWeight[kindBigram]})
		}
		i = j
	}
	for i := range n {
		if stop[i] || (query && covered[i]) {
			continue
		}
		s := sub(i, i+1)
		dst = append(dst, token{key: a.unigramKey(s), surface: s, kind: kindUnigram, weight: kindWeight[kindUnigram]})
	}
	return dst
}

// alternatives reports whether c is a list of known words joined by '/'
// ("issue/PR", "start/stop", "Feishu/Lark"): it then says "one or the
// other" in prose, and its parts are words, not the weak parts of an
// identifier. A part the vocabulary does not know ("src/api",
// "kv/staging") makes c a path or a name.
func (a analyzer) alternatives(c string) bool {
	if strings.IndexByte(c, '/') <= 0 || c[len(c)-1] == '/' {
		return false
	}
	for p := range strings.SplitSeq(c, "/") {
		if !isLetters(p) {
			return false
		}
		if _, ok := a.v.en[a.stem(p)]; !ok {
			return false
		}
	}
	return true
}

// demote turns requested actions among toks into plain words: they still
// match, but ask nothing of a fitting document.
func demote(toks []token) {
	for j := range toks {
		if toks[j].class == Action {
			toks[j].class = Other
		}
	}
}

// markNoun marks the actions among toks as read as nouns (see token.noun).
func markNoun(toks []token) {
	for j := range toks {
		if toks[j].class == Action {
			toks[j].noun = true
		}
	}
}

// nounMarker reports whether an English word before a verb makes the verb
// a noun naming a thing or an event: a determiner, a possessive ("its",
// the "s" of "yesterday's") or an adjective of time or state ("the last
// deploy", "yesterday's release", "a failed rollout").
func nounMarker(w string) bool {
	switch w {
	case "the", "a", "an", "this", "that", "my", "our", "your", "its", "their", "his", "her", "s",
		"last", "latest", "previous", "prior", "recent", "current", "next", "failed", "broken", "bad":
		return true
	}
	return false
}

// nounBefore reports whether Chinese text before a verb makes it a noun
// naming a thing or an event: it ends in 的 (上次的发布) or names one
// occasion (上次发布, 最近一次部署; not 再次, again).
func nounBefore(before string) bool {
	if strings.HasSuffix(before, "的") {
		return true
	}
	for _, w := range []string{"上次", "这次", "那次", "上回", "一次"} {
		if strings.HasSuffix(before, w) {
			return !strings.HasSuffix(before, "再一次")
		}
	}
	return false
}

// nounActions keeps the noun readings of actions among toks (token.noun)
// only when toks also ask for an action that is no noun ("revert the last
// deploy" asks to revert): a request asks for one thing, and the event it
// names is what to act on. Alone, a noun reading still asks ("do a
// rollback"). A noun reading asks nothing of the action check (see
// offActionFactor) but still counts as an action the catalog may lack.
func nounActions(toks []token) {
	for _, t := range toks {
		if t.class == Action && !t.noun && t.weight >= absentActionMinWeight && t.kind == kindConcept {
			return
		}
	}
	for j := range toks {
		toks[j].noun = false
	}
}

// statusTerm is the vocabulary term whose concepts a state reading of a
// verb (see stateReading) adds: a question whether something is running or
// still open asks for its status.
const statusTerm = "status"

// stateWeight scales the status concept a state reading adds: the request
// implies it rather than says it.
const stateWeight = 0.5

// stateReading demotes the actions among toks, the tokens of one verb read
// as a state, and reports whether there were any.
func (a analyzer) stateReading(toks []token) bool {
	found := false
	for j := range toks {
		if toks[j].class == Action {
			toks[j].class = Other
			found = true
		}
	}
	return found
}

// appendState appends the tokens of the status concept, implied by a verb
// read as a state.
func (a analyzer) appendState(dst []token, surface string) []token {
	for _, c := range a.v.en[a.stem(statusTerm)] {
		k := len(dst)
		dst = a.concept(dst, c, surface)
		for j := k; j < len(dst); j++ {
			dst[j].weight *= stateWeight
			dst[j].class = Other
		}
	}
	return dst
}

// stateMarker reports whether an English word before a verb makes the verb
// name a state: a form of "be" ("is open", "are running") or "still".
func stateMarker(w string) bool {
	switch w {
	case "is", "are", "was", "were", "be", "been", "am", "still":
		return true
	}
	return false
}

// progressive reports whether Chinese text before a verb ends in the
// progressive aspect, 在 or 正在, optionally followed by an adverb of
// duration (一直在反复重启, 还在跑): the verb then says what is going on.
func progressive(before string) bool {
	for _, adv := range []string{"反复", "不停", "不断", "持续", "一直"} {
		if b, ok := strings.CutSuffix(before, adv); ok {
			before = b
			break
		}
	}
	b, ok := strings.CutSuffix(before, "在")
	if !ok {
		return false
	}
	// 现在 (now), 存在 (exist), 所在 (where), 实在 (really) end in 在
	// but are words of their own.
	for _, w := range []string{"现", "存", "所", "实", "自", "好"} {
		if strings.HasSuffix(b, w) {
			return false
		}
	}
	return true
}

// readTerm is the vocabulary term whose concepts a content question (see
// contentQuestion) asks for.
const readTerm = "read"

// contentVerb reports whether a Chinese word is a verb of writing or saying,
// whose product is a text: 写 (write), 记 (note down), 说 and 讲 (say), 填
// (fill in), 配 (configure).
func contentVerb(w string) bool {
	switch w {
	case "写", "记", "说", "讲", "填", "配":
		return true
	}
	return false
}

// contentQuestion reports whether a verb of writing between before and
// after asks what a text says rather than asking to write one: "V 的是什么"
// / "V 的啥" / "V 了什么" (what was V-ed), "V 的内容" (the V-ed content) and
// "怎么 V 的" (how it was V-ed, which, unlike "怎么 V" without 的, asks
// about a text that exists).
func contentQuestion(before, after string) bool {
	for _, s := range []string{"的是什么", "的是啥", "的啥", "的什么", "了什么", "了啥", "了些什么", "的内容", "了哪些"} {
		if strings.HasPrefix(after, s) {
			return true
		}
	}
	if strings.HasPrefix(after, "的") {
		for _, s := range []string{"怎么", "咋", "如何"} {
			if strings.HasSuffix(before, s) {
				return true
			}
		}
	}
	return false
}

// pastForm reports whether an English word is a regular past tense or past
// participle ("restarted", "deployed").
func pastForm(w string) bool {
	return len(w) > 4 && strings.HasSuffix(w, "ed")
}

// descriptive reports whether a Chinese character after a verb makes the
// verb describe rather than request: 的 turns it into a modifier or a noun
// phrase (谁写的, 写的是什么, 我提的 PR), 过 into a past experience (记过,
// 改过), 完 into work already done (定位完, 改完了).
func descriptive(c string) bool {
	return c == "的" || c == "过" || c == "完"
}

// fileExts are name suffixes that mark a word as a file name.
var fileExts = map[string]bool{
	"go": true, "py": true, "js": true, "ts": true, "java": true, "c": true, "h": true, "rb": true,
	"rs": true, "sh": true, "yml": true, "yaml": true, "json": true, "toml": true, "ini": true,
	"conf": true, "cfg": true, "xml": true, "md": true, "txt": true, "log": true, "sql": true,
	"csv": true, "env": true, "pub": true, "pem": true, "crt": true, "key": true, "html": true,
	"php": true, "tar": true, "gz": true, "tgz": true, "zip": true, "out": true, "lock": true,
	"bak": true, "tf": true, "properties": true, "example": true,
}

// chunkWords appends the words of one whitespace-free ASCII chunk. Chunks
// that look like URLs, paths, e-mail addresses, IP addresses, versions,
// commit hashes or host names become a word naming their class, so that
// "https://x.example.com" counts as "url" and "web-02" as "host".
func chunkWords(dst []string, c string) []string {
	if c == "" {
		return dst
	}
	switch {
	case strings.Contains(c, "://"):
		return append(dst, "url")
	case c[0] == '@' && len(c) > 1:
		return append(dst, "mention")
	case c[0] == '#' && len(c) > 1 && isDigits(c[1:]):
		return append(dst, "number")
	case strings.IndexByte(c, '@') > 0 && strings.IndexByte(c[strings.IndexByte(c, '@'):], '.') > 0:
		return append(dst, "email")
	case c[0] == '/' || strings.HasPrefix(c, "~/") || strings.HasPrefix(c, "./"):
		if len(c) == 1 {
			return dst
		}
		dst = append(dst, "path")
		return splitWords(dst, c, true)
	}
	host, port, hasPort := strings.Cut(c, ":")
	if hasPort && !isDigits(port) {
		host, hasPort = c, false
	}
	switch {
	case isIPv4(host):
		dst = append(dst, "ip")
	case isVersion(host):
		return append(dst, "version")
	case isHash(host):
		return append(dst, "hash")
	case isHostName(host):
		dst = append(dst, "host")
	case isDomain(host):
		dst = append(dst, "domain")
	default:
		if !hasPort {
			return splitWords(dst, c, false)
		}
		dst = splitWords(dst, host, false)
	}
	if hasPort {
		dst = append(dst, "port")
	}
	return dst
}

// weakMark prefixes a word that is one part of a compound identifier
// ("api-gateway", "audit_log", "feature/export-csv", a path): such parts
// name things rather than say what to do, so they weigh identWeight.
const weakMark = "\x00"

// identWeight is the weight of a part of a compound identifier.
const identWeight = 0.5

// splitWords appends the alphanumeric words of s, dropping pure numbers. A
// final ".ext" naming a known file type adds the word "file". The parts of
// a compound (joined by '-', '_', '/' or '.') are marked weak.
func splitWords(dst []string, s string, isPath bool) []string {
	file := false
	if k := strings.LastIndexByte(s, '.'); k > 0 && k < len(s)-1 && fileExts[s[k+1:]] {
		file = true
	}
	start, n := -1, len(dst)
	for i := 0; i <= len(s); i++ {
		alnum := i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= '0' && s[i] <= '9' || s[i] >= 0x80)
		if alnum && start < 0 {
			start = i
		}
		if !alnum && start >= 0 {
			if w := s[start:i]; !isDigits(w) {
				dst = append(dst, w)
			}
			start = -1
		}
	}
	if len(dst)-n > 1 || isPath && len(dst) > n {
		if strings.ContainsAny(s, "-_/.") {
			for i := n; i < len(dst); i++ {
				dst[i] = weakMark + dst[i]
			}
		}
	}
	if file {
		dst = append(dst, "file")
	}
	return dst
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isIPv4(s string) bool {
	return dottedDigits(s) == 4
}

// dottedDigits returns how many dot-separated runs of digits s is made of,
// or 0 when s holds anything else or an empty run.
func dottedDigits(s string) int {
	n, run := 1, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			run++
		case c == '.' && run > 0:
			n, run = n+1, 0
		default:
			return 0
		}
	}
	if run == 0 {
		return 0
	}
	return n
}

// isVersion matches v1.2, 1.12.0, v2.4.1-rc1.
func isVersion(s string) bool {
	s = strings.TrimPrefix(s, "v")
	main, _, _ := strings.Cut(s, "-")
	return dottedDigits(main) >= 2
}

// isHash matches abbreviated or full hex object names holding both a digit
// and a letter.
func isHash(s string) bool {
	if len(s) < 7 || len(s) > 64 {
		return false
	}
	digit, letter := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'f':
			letter = true
		default:
			return false
		}
	}
	return digit && letter
}

// isHostName matches numbered machine names such as web-02 or worker-7.
func isHostName(s string) bool {
	k := strings.LastIndexByte(s, '-')
	if k <= 0 || k == len(s)-1 {
		return false
	}
	tail := strings.TrimRight(s[k+1:], "abcdefghijklmnopqrstuvwxyz")
	if !isDigits(tail) || !(s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for i := 0; i < k; i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isDomain matches dotted names whose last label is alphabetic and not a
// file extension (example.com, redis.internal).
func isDomain(s string) bool {
	k := strings.LastIndexByte(s, '.')
	if k <= 0 || k == len(s)-1 || fileExts[s[k+1:]] {
		return false
	}
	for i := k + 1; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// isClosingPunct reports whether r is punctuation that may end a word
// ("nginx," "(TERM)"); isOpeningPunct whether it may start one. Functions
// rather than cutsets: strings.Trim with a cutset rebuilds its set per call,
// which showed in profiles of building a 10k-tool index.
func isClosingPunct(r rune) bool {
	switch r {
	case ',', '.', ';', ':', '!', '?', ')', ']', '}', '\'', '"', '`':
		return true
	}
	return false
}

func isOpeningPunct(r rune) bool {
	switch r {
	case '(', '[', '{', '\'', '"', '`', '<':
		return true
	}
	return false
}

// isHan reports whether r is a CJK ideograph.
func isHan(r rune) bool {
	return r >= 0x4E00 && r <= 0x9FFF || r >= 0x3400 && r <= 0x4DBF || r >= 0xF900 && r <= 0xFAFF
}

// isCJKPunct reports whether r is CJK or full-width punctuation.
func isCJKPunct(r rune) bool {
	return r >= 0x3000 && r <= 0x303F || r >= 0xFF00 && r <= 0xFFEF || r >= 0x2010 && r <= 0x206F
}

// fold lower-cases text and maps full-width ASCII to ASCII.
func fold(s string) string {
	needs := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 0x80 {
			needs = true
			break
		}
	}
	if !needs {
		return s
	}
	return strings.Map(func(r rune) rune {
		// Full-width letters and digits; full-width punctuation stays
		// CJK punctuation (a separator).
		if r >= 0xFF10 && r <= 0xFF19 || r >= 0xFF21 && r <= 0xFF3A || r >= 0xFF41 && r <= 0xFF5A {
			r -= 0xFEE0
		}
		return unicode.ToLower(r)
	}, s)
}
