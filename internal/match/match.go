// Package match ranks documents (in toolagent: tools) for a request written
// in Chinese, English or a mix of both, and says honestly when nothing fits.
//
// An Index is built once per catalog snapshot, off the request path, from
// Docs: an ID and weighted text fields. Text is analysed into tokens:
// English words are case-folded, stemmed (Porter) and stripped of stop
// words; Chinese text is segmented by leftmost-longest match against a
// bilingual vocabulary, the remainder becoming character bigrams, with
// character unigrams as a weak fallback; URLs, paths, hosts, versions and
// hashes count as their class ("url", "path", ...). Every vocabulary term
// becomes a language-neutral concept token, so "restart" finds a tool
// described as "重启". Unknown English words one edit from a known word are
// corrected ("restar" -> "restart"; under six letters only a doubled
// letter, "isues", since without a dictionary "lunch" cannot be told from a
// misspelt "launch").
//
// Scores are BM25F term weights normalised by the query's own maximum, so a
// score is the weighted share of the query that the document covers, in
// [0, 1], and comparable across queries and across catalog sizes: a term's
// weight is its specificity, an idf blended with a fixed background and
// capped, not raw idf, which grows with the number of tools (see
// specificity); Result.Found compares the best score
// with the index's threshold (DefaultThreshold unless WithThreshold), or,
// below it, asks how far the best candidate stands above the catalog's
// background for that request (see standoutMargin).
// Vocabulary concepts carry a class (action, object or other): a requested
// action or object that no document mentions weighs double, and every
// requested action no document offers lowers the score by a fixed factor,
// because "do X" where no tool does X is the usual way a near-domain
// request fails to fit. Two more checks go beyond coverage: a document
// whose core fields (Field.Context unset) hold none of the objects a
// request names ranks lower, and when the best document matches nothing but
// the request's verbs ("write me a poem"), every score is lowered. Verbs
// that describe rather than request (English past forms, "who committed";
// a Chinese verb before 的 or 过, 谁写的) count as words, not actions. A
// verb read as a state ("is it still open", 一直在反复重启) asks for a
// status; a question about what a text says (写的是什么, 怎么写的) asks to
// read it. A document's examples (Field.Example: requests it answers)
// count like its other fields, but a concept that only examples hold is
// not taken as offered by the catalog, since a request names its context
// too. Known words joined by '/' ("issue/PR") are alternatives, not
// the weak parts of an identifier; a path ending in a file type names a
// file.
// Chinese two-character words the vocabulary lacks are read as homophone
// misspellings of a vocabulary word when they share one character and
// sound the same (重起 -> 重启; pinyin from github.com/mozillazg/go-pinyin).
// Traditional script reaches the vocabulary through the same pinyin (讀取 ->
// 读取), as does pinyin typed in Latin letters (tijiao -> 提交): see
// pinyin.go.
//
// An Index is immutable after New and safe for concurrent use by any number
// of goroutines calling Match. A Vocab is immutable too.
//
// match is a leaf package: it imports the standard library and two
// libraries (go-pinyin; golang.org/x/text for the GB2312 character set) and knows nothing of the TOOL.hdlp format. internal/catalog
// turns tools into Docs (catalog.ToolDoc) and holds one Index per snapshot;
// internal/match/matcheval evaluates it.
package match

import (
	"math"
	"slices"
	"sync"
)

// DefaultThreshold is the score a query's best candidate must reach for
// Result.Found. It was calibrated on the development set
// (shared/eval/intent) so that 95 % of answerable requests pass, and
// checked by calibrating on one half of it and measuring the other; raise
// it to refuse more often.
const DefaultThreshold = 0.38

// A best candidate that scores below the threshold is still found when it
// stands out from the catalog's background for the request: when it
// scores at least standoutFloor times the threshold and at least
// standoutMargin above the background, it matches more than the request's
// verbs (see onlyActionFactor), and the request names no concept that only
// examples hold (see Field.Example). The background is the mean score of
// the candidates ranked 2 to 1+backgroundRanks (0 for ranks no document
// reaches) blended with a prior of priorScore weighing as priorRanks
// candidates, so that a catalog of one or two tools, whose other ranks are
// empty, does not make every weak match stand out.
//
// Why: a request full of words no tool holds (a host, an identifier to
// search for, a vendor's name) scores low against the tool that fits it,
// yet that tool is the only one it touches ("grep the repo for
// MAX_POOL_SIZE"); a request that no tool fits touches several tools a
// little, or one tool through its verbs alone. The rule is a threshold that
// follows the catalog: strict where look-alike tools crowd a request, lax
// where a request touches one tool. In random sub-catalogs of the
// development set (matcheval's TestSizeGenerality) it lowers the share of
// answerable requests refused at 5, 10 and 20 tools from 0.106, 0.085 and
// 0.067 to 0.058, 0.062 and 0.061 (at 1 and 2 tools from 0.187 and 0.153
// to 0.069 and 0.054), and no-fit recall from 0.981, 0.962 and 0.943 to
// 0.954, 0.929 and 0.918; on the whole development set (55 tools) no
// figure changes. A smaller margin refuses less and lets more no-fit
// requests through, alike on both halves of the development set
// (TestStandoutHalves); 0.20 keeps no-fit recall at 0.90 or more on each.
const (
	standoutFloor   = 0.68
	standoutMargin  = 0.20
	backgroundRanks = 4
	priorScore      = 0.2
	priorRanks      = 2
)

// BM25F parameters.
const (
	k1 = 1.2
	b  = 0.75
)

// specificity is the weight of a term that df of n documents hold: how
// much a match on it says, in [0, 1], whatever the size of the catalog. It
// is an inverse document frequency measured on the catalog blended with a
// background of backgroundDocs tools in which every term occurs at the rate
// backgroundRate, divided by the inverse frequency at specificRate and
// capped at 1: a term that at most one tool in 1/specificRate holds is
// fully specific, one that every tool holds says nothing.
//
// Plain BM25 idf, log(1 + (n-df+0.5)/(df+0.5)), grows with the catalog
// (0.29 for the terms of a one-tool catalog, 3.6 for a 55-tool catalog's
// rare terms, 9.1 at 10,000 tools) while unknownWeight and evidenceScale
// are fixed, so the same request scored 0.34 against a tool in a 2-tool
// catalog and 0.6 against it among 55: a 2-tool catalog refused "restart a
// service". The background keeps a small catalog's few tools from making
// every term look rare or common on their own; the cap keeps a big
// catalog's rare terms from outweighing the rest of a request.
func specificity(df, n float64) float64 {
	rate := (df + backgroundDocs*backgroundRate) / (n + backgroundDocs)
	return min(1, max(0, math.Log(rate)/math.Log(specificRate)))
}

// The background of specificity: backgroundDocs imagined tools in which
// any term occurs at backgroundRate (half a tool in all), and the rate
// specificRate at or below which a term is fully specific.
const (
	backgroundDocs = 20
	backgroundRate = 0.025
	specificRate   = 0.05
)

// negligible is the specificity below which a term the request holds is
// not looked up: nearly every document holds it ("服务" in a catalog of
// services: df/n above 0.97), so it raises every document alike, and at
// 100,000 tools its posting list was most of a query's time. It still
// counts in the query's maximum score.
const negligible = 0.01

// prunedBelow is the specificity below which New keeps a term's count of
// documents and not its posting list (Index.pruned): such a term is never
// looked up, and in a catalog whose tools share text (a why, a param's
// description, generated from one template) those lists were most of the
// index. Half of negligible, so that updates move a term across
// negligible only after many documents changed (Update then asks for a
// new build).
const prunedBelow = negligible / 2

// pruneBelow is prunedBelow, but for tests that compare with an index
// that keeps every list (0).
var pruneBelow = prunedBelow

// unknownWeight is the weight (in specificity units) of a query token that
// no document and no vocabulary term contains (a host, a product, a name):
// it counts towards the query's maximum score, but less than a word the
// catalog knows.
const unknownWeight = 0.6

// evidenceScale is the matched weight (in specificity units, about one
// specific term) at which the evidence factor of a score reaches 1 - 1/e.
const evidenceScale = 0.83

// fuzzyGain is the share of a term's weight that a corrected typo earns:
// the correction is a guess.
const fuzzyGain = 0.6

// uncoveredWeight is the weight (in specificity units) of a vocabulary
// concept that no document contains: the request names an operation the
// catalog does not offer. It is more than a fully specific term's 1.
const uncoveredWeight = 1.31

// uncoveredClassWeight further scales an uncovered concept that is an
// action or an object (see Class): a request to do something no tool does
// ("silence an alert", "扩容云盘"), or to something no tool touches ("add a
// webhook"), is the clearest sign that no tool fits, clearer than an
// uncovered qualifier ("nightly", "周末").
const uncoveredClassWeight = 2.0

// absentActionFactor multiplies a candidate's score once for every action
// the request asks for that no document offers at all ("push the tag",
// "silence the alert", "扩容"): whatever else matches, the catalog cannot
// do what was asked. Only actions of vocabulary weight absentActionMinWeight
// or more count; weaker ones ("show", "list") say little. It is a factor,
// not a veto, because requests also mention actions as context ("the
// config moved", "pull the request rate").
const (
	absentActionFactor    = 0.8
	absentActionMinWeight = 0.5
)

// offCoreFactor multiplies a document's coverage, for ranking and score,
// when the request names objects (vocabulary concepts of class Object) that
// the catalog knows but the document's core fields (those not marked
// Context) hold none of them: a tool is about what its name, title and
// summary say, and a request's object found only in why it exists or in a
// parameter's description ("root" in a scheduling tool's "run as user")
// is weak evidence that it fits. 0.8 is among the best values on each half
// of the development set (odd and even lines) chosen alone
// (TestDevSetSplit).
const offCoreFactor = 0.8

// onlyActionFactor multiplies every candidate's score when the best one
// matches nothing but actions: "write me a poem" hits a file-writing tool
// through "write" alone, and a tool that offers the verb but nothing the
// request is about is weak evidence of fit. It lowers scores, not ranks.
// 0.6 is among the best values on each half of the development set (odd
// and even lines) chosen alone (TestDevSetSplit). It was 0.7 with plain
// BM25 idf; with specificity a verb that few tools of a small catalog
// offer weighs fully, and 0.7 let "write a poem about autumn" through to
// the shipped file-write tool (5 tools).
const onlyActionFactor = 0.6

// Doc is one document to index: a tool, for toolagent.
type Doc struct {
	// ID names the document in results; IDs should be unique.
	ID string
	// Fields hold the document's text.
	Fields []Field
}

// Field is one piece of a document's text with its weight.
type Field struct {
	// Name says which part of the document this is ("intent", "keywords");
	// it appears in Candidate.Matched.
	Name string
	// Text is the field's content, in any language.
	Text string
	// Weight multiplies the field's term frequencies (BM25F); 0 means 1.
	Weight float64
	// Context marks a field that only gives background, such as why a tool
	// exists or what its parameters mean, as opposed to the core fields
	// that say what the document is (a name, a title, a summary). A
	// requested object that a document mentions only in context fields is
	// weak evidence that the document fits (see offCoreFactor).
	Context bool
	// Example marks a request the document answers, as a user would type
	// it (a tool's examples), as opposed to a description. Its words count
	// like any field's, but a vocabulary concept that only Example fields
	// hold is not taken as something the catalog offers: a request names
	// its context too ("before the migration, back up the db"), so a
	// concept known only from examples still weighs as uncovered in a
	// query's maximum (see uncoveredWeight and absentActionFactor), and
	// only the documents holding it earn it.
	Example bool
	// Learned marks a request learned from use (a caller asked it and
	// then called this document's tool). Its words are indexed apart from
	// the document's own text: they never change how the document or any
	// other scores on its own text, nor what the catalog offers. A query's
	// learned coverage of a document (the share of its weight that the
	// document's learned requests hold) raises the document's rank, the
	// more the less its own text covers (see learnedGain), and lifts a
	// document that its own text does not match at all only when most of
	// the query was learned for it (learnedAlone). It never turns a
	// refusal into an answer unless the query is nearly a learned request
	// (learnedSure): learning cannot make the catalog answer what it
	// refused before, so it cannot lower no-fit recall.
	Learned bool
}

// Result is the answer to a query.
type Result struct {
	// Found reports whether the best candidate reached the threshold; when
	// false, no document fits the query and Candidates are only the closest.
	Found bool
	// Candidates are the best documents, best first, at most k.
	Candidates []Candidate
}

// Candidate is one ranked document.
type Candidate struct {
	// ID is the document's ID.
	ID string
	// Score is the share of the query's weight the document covers, in
	// [0, 1]; comparable across queries.
	Score float64
	// Matched says why: one entry per query term that hit, as
	// "term@field" for a direct hit ("提交@intent"), "term@vocab:docterm"
	// for a hit through the vocabulary ("commit@vocab:提交") and
	// "term@fuzzy:word" for a corrected typo; and what the action check
	// found (see offActionFactor): "revert@action" when the title offers
	// the asked action, "@action:other" or "@action:below" when it names
	// others. A term nearly every document
	// holds, which adds nothing to a score, may be left out (its hits are
	// not kept: see prunedBelow).
	Matched []string
}

// posting is one document's weight for one term, in 8 bytes: postings are
// most of an index's memory (about 57 a tool in bench catalog's).
type posting struct {
	doc int32
	sat uint16 // saturated BM25F term frequency, in [0, 1), in units of 1/satScale
	// fc is the index of the field that contributed most (the high 7
	// bits; see maxField) and whether the term occurs in a field that is
	// not Context (the low bit).
	fc uint8
	// surf is the document-side text of the term: an index into the
	// term's surfaces (Index.termSurfs), or manySurfs when the term has
	// more than fit and Index.moreSurfs holds it.
	surf uint8
}

// maxField is the highest field index a posting records; a document's
// later fields (none has so many) count as that one.
const maxField = 127

// manySurfs marks a posting whose surface Index.moreSurfs holds.
const manySurfs = 255

func (p posting) field() int { return int(p.fc >> 1) }
func (p posting) core() bool { return p.fc&1 != 0 }

// setField records field f (see maxField) and core.
func (p *posting) setField(f int, core bool) {
	p.fc = uint8(min(f, maxField)) << 1
	if core {
		p.fc |= 1
	}
}

// satScale is the unit of posting.sat: 1/65536 of a term's weight, far
// below any difference between two documents' scores that ranking or the
// threshold could tell.
const satScale = 1 << 16

// Index ranks documents for queries. It is immutable after New and safe for
// concurrent use.
type Index struct {
	an       analyzer
	ids      []string
	fields   [][]string // per document, the field names
	terms    map[string]int32
	postings [][]posting // by term id, sorted by doc; nil for a pruned term
	// pruned holds, by term id, how many documents hold each term whose
	// posting list New did not keep (see prunedBelow).
	pruned map[int32]int32
	// termSurfs lists, by term id, the term's distinct document-side
	// texts (indexes into surfs), which its postings' surf index;
	// moreSurfs holds those of postings past the first manySurfs, by
	// term id << 32 | doc.
	termSurfs [][]int32
	moreSurfs map[uint64]int32
	idf       []float64 // by term id
	surfs     []string
	typos     *typoIndex
	// described counts, by term id, the documents in which a field that
	// is not Example holds the term (see Field.Example).
	described []int32
	// extra holds the terms an Update added (ids from len(terms) on):
	// terms itself is shared by every index updated from one New.
	extra map[string]int32
	// avgLen is each field name's mean length over the documents of the
	// New this index comes from: Update scores added documents against it,
	// so that they weigh as those of that build do.
	avgLen map[string]float64
	// sorted is how many ids, from the first, are in ascending order (all
	// of a New's when the caller gives them sorted, as catalog does, and
	// no more than that); Update appends
	// after them. dead marks the slots of removed documents, which no
	// posting names any more; live counts the others.
	sorted    int
	dead      []bool
	live      int
	threshold float64
	// offCore and onlyAction are offCoreFactor and onlyActionFactor, and
	// margin is standoutMargin (a negative margin turns the rule off);
	// fields so that tests can check the constants against the development
	// set.
	offCore, onlyAction, margin float64
	// offAction is offActionFactor; famRatio is familyRatio.
	offAction, famRatio float64
	// zhThreshold, when set, replaces threshold for Chinese requests
	// (see Calibrate).
	zhThreshold float64
	enThreshold float64 // the same for other requests
	// hasLearned is set when some document has a Learned field.
	hasLearned bool
	// actions holds, by slot, the action concepts of each document's
	// title (see offActionFactor).
	actions []titleActs
	// family holds, by slot, the sorted ids of the other terms of each
	// document's title (see familyRatio).
	family  [][]int32
	scratch *sync.Pool
	// pinyinWords indexes the catalog's two-character Han words by
	// pinyin (see pinyinTerm), built on first use.
	pinyinWords func() pinyinIndex
}

// term returns the id of the term key if some document holds it.
func (ix *Index) term(key string) (int32, bool) {
	id, ok := ix.terms[key]
	if !ok {
		id, ok = ix.extra[key]
	}
	return id, ok && ix.df(id) > 0
}

// WithThreshold returns an index that shares ix's data but uses threshold t
// for Result.Found. ix itself is unchanged.
func (ix *Index) WithThreshold(t float64) *Index {
	c := *ix
	c.threshold, c.zhThreshold, c.enThreshold = t, 0, 0
	return &c
}

// Threshold returns the score the best candidate must reach for Found.
func (ix *Index) Threshold() float64 { return ix.threshold }

// Len returns the number of indexed documents.
func (ix *Index) Len() int { return ix.live }

// unit is one distinct token of a query with its weight.
type unit struct {
	term    int32 // -1 when no document holds it
	lterm   int32 // the term of learned requests (Field.Learned); -1 when none holds it
	abit    uint8 // the bit of an action the query asks for (see offActionFactor); 0 for none
	weakAct bool  // abit is a weak action (see askedActions)
	surface string
	qw      float64 // the weight a document holding the unit earns
	// uncovered is the unit's weight in the query's maximum when the
	// catalog does not offer it (0 when it does); see Field.Example.
	uncovered float64
	fuzzy     string // the known word a typo was corrected to
	class     Class
	gain      float64 // share of qw a hit earns: 1, less for a corrected typo
	role      role    // what the unit asks a fitting document to offer
}

// role says what a query unit is, as bits, for the checks of fit beyond
// coverage (see offCoreFactor and onlyActionFactor).
type role uint8

const (
	roleObject role = 1 << iota // an object, matched in a core field
	roleThing                   // a word that is no action, matched in any field
)

// hit is a document's coverage of a query while it is ranked.
type hit struct {
	doc     int32
	roles   role
	act     int8 // what the action check found (actOffered, actOther; 0: not judged)
	score   float64
	learned float64 // learned coverage (Field.Learned)
}

type scratch struct {
	scores  []float32
	learned []float32 // per document, its learned coverage (Field.Learned)
	unit    []int32   // per document, 1 + the last query unit its own text holds
	roles   []role    // per document, the roles of the units it matched
	touched []int32
	toks    []token
	key     []byte // a learned term's key (see learnedTerm)
}

// Match returns the k best documents for q. Found is false when the best
// score is below the threshold (or nothing matched at all).
func (ix *Index) Match(q string, k int) Result { return ix.MatchIn(q, k, nil) }

// MatchIn is Match over the documents allow accepts (nil: all): the others
// are never candidates, and Found is judged on the accepted ones alone, so
// a caller who may see only some documents gets the best of those, and no
// sign of the rest.
func (ix *Index) MatchIn(q string, k int, allow func(id string) bool) Result {
	if k <= 0 || ix.live == 0 {
		return Result{}
	}
	s := ix.scratch.Get().(*scratch)
	defer ix.scratch.Put(s)
	units, total, absent := ix.units(s, q)
	if total == 0 {
		return Result{}
	}
	s.touched = s.touched[:0]
	acts := askedActions(units) // see offActionFactor
	var asked role              // the roles of the query's units that some document holds
	learned := false
	for i, u := range units {
		if u.term >= 0 && ix.idf[u.term] >= negligible {
			asked |= u.role
			w := float32(u.qw * u.gain / total / satScale)
			for _, p := range ix.postings[u.term] {
				if s.scores[p.doc] == 0 && s.learned[p.doc] == 0 {
					s.touched = append(s.touched, p.doc)
				}
				s.scores[p.doc] += w * float32(p.sat)
				if u.lterm >= 0 {
					s.unit[p.doc] = int32(i) + 1
				}
				if p.core() {
					s.roles[p.doc] |= u.role & roleObject
				}
				s.roles[p.doc] |= u.role & roleThing
			}
		}
		if u.lterm >= 0 && ix.idf[u.lterm] >= negligible {
			// A learned request teaches a document what its own text
			// lacks: a unit the document's text holds gains nothing more.
			// A learned request holds a word or not: its frequency says
			// nothing, so the coverage is the share of the query's weight
			// held, weighed by how specific it is among learned requests
			// and by the field's weight (its age: see learnedFull).
			learned = true
			w := float32(max(u.qw, u.uncovered) * u.gain * ix.idf[u.lterm] / total)
			for _, p := range ix.postings[u.lterm] {
				if s.unit[p.doc] == int32(i)+1 {
					continue
				}
				if s.scores[p.doc] == 0 && s.learned[p.doc] == 0 {
					s.touched = append(s.touched, p.doc)
				}
				s.learned[p.doc] += w * min(1, float32(p.sat)/learnedFull)
			}
		}
	}
	// before orders hits: higher score first, then ID. New's slots are in
	// ID order, so two of them compare by slot; thousands of tools may
	// tie on a score, and comparing their IDs was most of a query.
	before := func(a, b hit) bool {
		if a.score != b.score {
			return a.score > b.score
		}
		if int(a.doc) < ix.sorted && int(b.doc) < ix.sorted {
			return a.doc < b.doc
		}
		return ix.ids[a.doc] < ix.ids[b.doc]
	}
	// The ranks past k are kept for the background (see standoutMargin).
	keep := max(k, 1+backgroundRanks)
	// rtop ranks by own and learned coverage with the action check (see
	// offActionFactor), when the query meets learned requests or asks for
	// an action; top, by own coverage alone, gives the verdict. rtop is
	// drawn from the documents with learned coverage and the first
	// rerankWide of top (the action check lowers a document by a tenth:
	// one ranked lower than that does not reach the first three), so top
	// then keeps that many.
	rerank := learned || !acts.empty()
	wide := keep
	if rerank {
		wide = keep + rerankWide
	}
	insert := func(top []hit, h hit, n int) []hit {
		if len(top) == n && !before(h, top[n-1]) {
			return top
		}
		i := len(top)
		for i > 0 && before(h, top[i-1]) {
			i--
		}
		top = slices.Insert(top, i, h)
		if len(top) > n {
			top = top[:n]
		}
		return top
	}
	top := make([]hit, 0, wide+1)
	var rtop, lhits []hit
	if rerank {
		rtop = make([]hit, 0, keep+1)
		lhits = make([]hit, 0, keep+wide+1)
	}
	reranked := func(h hit) hit {
		h = ix.judge(h, acts)
		h.score += (1 - min(1, h.score)) * learnedGain * h.learned
		return h
	}
	own := func(d int32) float64 {
		sc := float64(s.scores[d])
		if asked&roleObject != 0 && s.roles[d]&roleObject == 0 {
			sc *= ix.offCore
		}
		return sc
	}
	for _, d := range s.touched {
		h := hit{doc: d, score: own(d), roles: s.roles[d], learned: float64(s.learned[d])}
		s.scores[d], s.roles[d], s.learned[d], s.unit[d] = 0, 0, 0, 0
		if allow != nil && !allow(ix.ids[d]) {
			continue
		}
		if h.score > 0 {
			top = insert(top, h, wide)
		}
		if h.learned > 0 && (h.score > 0 || h.learned >= learnedAlone) {
			lhits = insert(lhits, reranked(h), keep)
		}
	}
	if rerank {
		for _, h := range top {
			if h.learned == 0 {
				lhits = append(lhits, reranked(h))
			}
		}
		ix.actionDecides(lhits)
		for _, h := range lhits {
			rtop = insert(rtop, h, keep)
		}
		top = top[:min(len(top), keep)]
	}
	qf := math.Pow(absentActionFactor, float64(absent))
	if len(top) > 0 && top[0].roles&roleThing == 0 {
		qf *= ix.onlyAction
	}
	score := func(h hit) float64 { return confidence(h.score, total) * qf }
	var res Result
	if len(top) > 0 {
		best, t := score(top[0]), ix.ThresholdFor(q)
		res.Found = best >= t ||
			top[0].roles&roleThing != 0 && !examplesOnly(units) && ix.standsOut(best, t, top[1:], score)
	}
	if rerank && len(rtop) > 0 {
		// Learned requests and the action reorder the candidates; the
		// verdict stays the one of the documents' own text unless the
		// query is nearly a request learned for the best (see
		// Field.Learned).
		top = rtop
		res.Found = res.Found || top[0].learned >= learnedSure
	}
	res.Candidates = make([]Candidate, min(k, len(top)))
	for i := range res.Candidates {
		h := top[i]
		res.Candidates[i] = Candidate{ID: ix.ids[h.doc], Score: score(h), Matched: ix.explain(units, h.doc, h.act, acts)}
	}
	return res
}

// units analyses q into distinct weighted units and returns them with the
// query's maximum score (the sum of their weights).
func (ix *Index) units(s *scratch, q string) ([]unit, float64, int) {
	s.toks = ix.an.analyze(s.toks[:0], q, true)
	nounActions(s.toks)
	var units []unit
	seen := map[string]int{}
	var total float64
	absent := 0
	add := func(key, surface, fuzzy string, kw float64, concept, char bool, class Class, abit uint8) {
		if i, ok := seen[key]; ok {
			// A repeated token adds nothing; keep the larger weight.
			if u := &units[i]; u.term >= 0 && kw*ix.idf[u.term] > u.qw {
				total -= max(u.qw, u.uncovered)
				u.qw = kw * ix.idf[u.term]
				total += max(u.qw, u.uncovered)
			}
			return
		}
		u := unit{term: -1, lterm: -1, surface: surface, fuzzy: fuzzy, gain: 1, class: class}
		if id, ok := ix.learnedTerm(s, key); ok && !char {
			// A lone character is no word a request was learned by.
			u.lterm = id
		}
		if fuzzy != "" {
			u.gain = fuzzyGain
		}
		switch class {
		case Object:
			u.role = roleObject
		case Action:
			if !char {
				u.abit, u.weakAct = abit, kw < absentActionMinWeight
			}
		}
		if class != Action && !char {
			// A lone character is a fallback for misspelt words, not
			// evidence of what a request is about (一 in 写一首诗).
			u.role |= roleThing
		}
		id, known := ix.term(key)
		if known {
			u.term = id
			u.qw = kw * ix.idf[id]
		}
		// uncovered is the unit's weight when the catalog does not offer
		// it: a concept no document holds, or (Field.Example) one only
		// examples hold, which the documents holding it still earn.
		var uncovered float64
		switch {
		case known && ix.described[id] > 0:
		case concept:
			uncovered = kw * uncoveredWeight
			if class != Other {
				uncovered *= uncoveredClassWeight
			}
			if class == Action && kw >= absentActionMinWeight {
				absent++
			}
		case !known:
			uncovered = kw * unknownWeight
		}
		if !known {
			u.qw = uncovered
		}
		u.uncovered = uncovered
		seen[key] = len(units)
		units = append(units, u)
		total += max(u.qw, uncovered)
	}
	for _, t := range s.toks {
		if _, ok := ix.term(t.key); !ok && t.kind == kindWord {
			// Pinyin in Latin letters (tijiao: 提交): see pinyin.go.
			han, stop := ix.an.v.pinyinTerm(t.surface)
			if stop {
				continue
			}
			if han == "" {
				if ws := ix.pinyinWords()[t.surface]; len(ws) == 1 && len(t.surface) >= 4 {
					han = ws[0]
				}
			}
			if han != "" {
				for _, ft := range ix.an.analyze(nil, han, true) {
					add(ft.key, t.surface, "", ft.weight, ft.kind == kindConcept, ft.kind == kindUnigram, ft.class, ft.abit)
				}
				continue
			}
			if fix, ok := ix.typos.correct(t.surface); ok {
				for _, ft := range ix.an.analyze(nil, fix, true) {
					add(ft.key, t.surface, fix, ft.weight, ft.kind == kindConcept, ft.kind == kindUnigram, ft.class, ft.abit)
				}
				continue
			}
		}
		abit := t.abit
		if t.noun {
			abit = 0 // see nounActions
		}
		add(t.key, t.surface, t.fix, t.weight, t.kind == kindConcept, t.kind == kindUnigram, t.class, abit)
	}
	return units, total, absent
}
