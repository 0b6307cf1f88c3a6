package match

import (
	"math"
	"slices"
)

// offActionFactor multiplies a document's coverage, for ranking and
// score, when the request asks for actions (vocabulary concepts of class
// Action, of weight absentActionMinWeight or more, that some document
// holds) and the document's title names actions, none of them asked:
// within a family of tools about one object (deploy and roll back, open
// and close an issue, list and create pull requests, commit and log), the
// action decides. A document's title is its heaviest fields that are
// neither Context, Example nor Learned (for a tool: its name, display
// name and keywords); a document whose title names no action is not
// judged. Weak actions (below absentActionMinWeight: show, list, check)
// are asked only by a request that asks for no other action ("list the
// commits", 列出最近的提交), and a title's weak actions offer what they
// name but never make it one of other actions (see askedActions and
// judge). It reorders candidates only: the verdict is the
// one of the documents' own coverage. 0.9 raised served recall@1 of the
// development set's Chinese requests from 0.738 to 0.762 and of the
// second split's from 0.745 to 0.764 and lowered no figure; 0.75 and
// below lowered some (a verb read as an action where it names a state or
// a thing, 能正常打开吗, "user deploy"), so it decides near ties only.
const offActionFactor = 0.9

// familyRatio says when the action decides outright: a candidate whose
// title names actions, none of them asked, ranks below the best candidate
// whose title offers an asked action when that one scores at least
// familyRatio of it (after offActionFactor). Within a family of tools
// about one object, the one that does what was asked differs from its
// siblings by its verb alone, while the siblings may share more of the
// request's other words ("revert the production build": the deploy tool's
// description speaks of builds and production). On the development set and
// the second split no figure changes from 1 (off) down to 0.5: their
// requests rarely pit siblings against each other this closely; 0.4
// lowered the second split's served recall@1 and @3 by one request (a
// mixed-language one), so 0.6 keeps a margin above that.
const familyRatio = 0.6

// actionDecides places each hit whose title names other actions
// (actOther) below the best hit of its family (their titles share a term
// that is no action: see title) whose title offers an asked action, when
// that one scores at least familyRatio of it.
func (ix *Index) actionDecides(hs []hit) {
	for i := range hs {
		w := &hs[i]
		if w.act != actOther {
			continue
		}
		best := -1.0
		for _, r := range hs {
			if r.act == actOffered && r.score > best && sameFamily(ix.family[w.doc], ix.family[r.doc]) {
				best = r.score
			}
		}
		if best >= 0 && w.score >= best && best >= ix.famRatio*w.score {
			w.score = math.Nextafter(best, 0)
			w.act = actBelow
		}
	}
}

// What the action check found of a document's title (see offActionFactor).
const (
	actOffered = 1  // it names an action the request asks for
	actOther   = -1 // it names actions, none of them asked
	actBelow   = -2 // actOther, and it was placed below one that offers it
)

// titleActs is what a document's title says it does (see title): its
// actions, and apart, its weak ones (below absentActionMinWeight: show,
// list, check).
type titleActs struct{ strong, weak actionSet }

// askedActions returns the actions units ask for (those some document
// holds): the strong ones, or when there are none, the weak ones ("list
// the commits", 列出最近的提交: the request asks for nothing else).
func askedActions(units []unit) actionSet {
	var strong, weak actionSet
	for _, u := range units {
		switch {
		case u.term < 0 || u.abit == 0:
		case u.weakAct:
			weak.add(u.abit)
		default:
			strong.add(u.abit)
		}
	}
	if strong.empty() {
		return weak
	}
	return strong
}

// judge applies the action check to h (see offActionFactor): a title
// that offers an asked action, strong or weak, is actOffered; one that
// names strong actions, none asked, is actOther and lowered.
func (ix *Index) judge(h hit, acts actionSet) hit {
	t := ix.actions[h.doc]
	switch {
	case acts.empty():
	case t.strong.meets(acts) || t.weak.meets(acts):
		h.act = actOffered
	case !t.strong.empty():
		h.act = actOther
		h.score *= ix.offAction
	}
	return h
}

// rerankWide is how many candidates past the ones kept the action check
// and learned requests reorder (see MatchIn).
const rerankWide = 16

// title returns the action concepts of doc's title: its heaviest
// fields that are neither Context, Example nor Learned (see
// offActionFactor), and the index keys of its other terms (words,
// concepts and bigrams that are no action), which tell its family (see
// familyRatio).
func (a analyzer) title(doc Doc) (titleActs, []string) {
	weight := func(fl Field) float64 {
		if fl.Context || fl.Example || fl.Learned {
			return 0
		}
		if fl.Weight == 0 {
			return 1
		}
		return fl.Weight
	}
	top := 0.0
	for _, fl := range doc.Fields {
		top = max(top, weight(fl))
	}
	var out titleActs
	var others []string
	// The tokens are analysed into the analyzer's buffer when it has
	// one: a new slice for each field made 34 MB of garbage while bench
	// catalog's 10,000 tools were indexed.
	var toks []token
	if a.buf != nil {
		toks = a.buf.title
	}
	for _, fl := range doc.Fields {
		if w := weight(fl); w == 0 || w < top {
			continue
		}
		toks = a.analyze(toks[:0], fl.Text, false)
		for _, t := range toks {
			switch {
			case t.kind == kindConcept && t.class == Action:
				if t.weight >= absentActionMinWeight {
					out.strong.add(t.abit)
				} else {
					out.weak.add(t.abit)
				}
			case t.kind != kindUnigram && !slices.Contains(others, t.key):
				others = append(others, t.key)
			}
		}
	}
	if a.buf != nil {
		a.buf.title = toks
	}
	return out, others
}

// familyTerms returns the ids of keys (see title) that termID gives,
// sorted.
func familyTerms(keys []string, termID func(string) (int32, bool)) []int32 {
	var ids []int32
	for _, k := range keys {
		if id, ok := termID(k); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// sameFamily reports whether two sorted term id lists (see familyTerms)
// share an id.
func sameFamily(a, b []int32) bool {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			return true
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return false
}
