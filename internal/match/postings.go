package match

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// fieldLayouts shares the field names of documents: most documents of a
// catalog have the same fields in the same order, and a slice of a
// dozen names each was a tenth of a 10,000-tool index.
type fieldLayouts map[string][]string

// of returns doc's field names, shared with earlier documents of the same
// layout.
func (l fieldLayouts) of(doc Doc) []string {
	var key strings.Builder
	for _, fl := range doc.Fields {
		key.WriteString(fl.Name)
		key.WriteByte(0)
	}
	if names, ok := l[key.String()]; ok {
		return names
	}
	names := make([]string, len(doc.Fields))
	for f, fl := range doc.Fields {
		names[f] = fl.Name
	}
	l[key.String()] = names
	return names
}

// lengthNorm is BM25's length normalisation of a field of length l whose
// name has the mean length avg.
func lengthNorm(l, avg float64) float64 {
	if avg <= 0 {
		return 1
	}
	return 1 - b + b*l/avg
}

// saturate is a posting's sat for the BM25F term frequency tf.
func saturate(tf float64) uint16 {
	return uint16(min(satScale-1, math.Round(tf/(k1+tf)*satScale)))
}

// setSurf records in p, a posting of term, the surface s (an index into
// surfs). It may add s to the term's surfaces: an Update's copy of the
// index clips what it shares first (see Update), so that this appends to
// a copy of its own.
func (ix *Index) setSurf(term int32, p *posting, s int32) {
	ss := ix.termSurfs[term]
	if i := slices.Index(ss, s); i >= 0 {
		p.surf = uint8(i)
		return
	}
	if len(ss) < manySurfs {
		p.surf = uint8(len(ss))
		ix.termSurfs[term] = append(ss, s)
		return
	}
	p.surf = manySurfs
	if ix.moreSurfs == nil {
		ix.moreSurfs = map[uint64]int32{}
	}
	ix.moreSurfs[uint64(term)<<32|uint64(uint32(p.doc))] = s
}

// surfOf returns the surface (an index into surfs) of p, a posting of term.
func (ix *Index) surfOf(term int32, p posting) int32 {
	if p.surf == manySurfs {
		return ix.moreSurfs[uint64(term)<<32|uint64(uint32(p.doc))]
	}
	return ix.termSurfs[term][p.surf]
}

// df is how many documents hold term id.
func (ix *Index) df(id int32) int {
	if n, ok := ix.pruned[id]; ok {
		return int(n)
	}
	return len(ix.postings[id])
}

// explain lists the query units that hit document id (a pruned term's
// hits are not known, and not listed: it added nothing to the score).
func (ix *Index) explain(units []unit, d int32, act int8, acts actionSet) []string {
	var out []string
	for _, u := range units {
		if u.lterm >= 0 {
			ps := ix.postings[u.lterm]
			if _, ok := slices.BinarySearchFunc(ps, d, func(p posting, d int32) int { return cmp.Compare(p.doc, d) }); ok {
				out = append(out, u.surface+"@learned")
			}
		}
		if u.term < 0 {
			continue
		}
		ps := ix.postings[u.term]
		i, ok := slices.BinarySearchFunc(ps, d, func(p posting, d int32) int { return cmp.Compare(p.doc, d) })
		if !ok {
			continue
		}
		p := ps[i]
		docText := ix.surfs[ix.surfOf(u.term, p)]
		switch {
		case u.fuzzy != "":
			out = append(out, u.surface+"@fuzzy:"+u.fuzzy)
		case docText == u.surface:
			out = append(out, u.surface+"@"+ix.fields[d][p.field()])
		default:
			out = append(out, u.surface+"@vocab:"+docText)
		}
	}
	return ix.explainAction(out, units, d, act, acts)
}

// explainAction appends to out what the action check (see
// offActionFactor) found of document d: "revert@action" for an asked
// action its title offers, "revert@action:other" when its title names
// other actions, "revert@action:below" when it was also placed below a
// candidate that offers it (see familyRatio).
func (ix *Index) explainAction(out []string, units []unit, d int32, act int8, acts actionSet) []string {
	if act == 0 {
		return out
	}
	title := ix.actions[d]
	for _, u := range units {
		var one actionSet
		one.add(u.abit)
		if u.term < 0 || u.abit == 0 || !one.meets(acts) {
			continue
		}
		switch {
		case act == actOffered && (title.strong.meets(one) || title.weak.meets(one)):
			out = append(out, u.surface+"@action")
		case act == actOther:
			out = append(out, u.surface+"@action:other")
		case act == actBelow:
			out = append(out, u.surface+"@action:below")
		}
	}
	return out
}
