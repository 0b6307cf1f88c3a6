package match

import (
	"cmp"
	"maps"
	"slices"
	"sync"
)

// Update returns an index over ix's documents less removed plus added,
// sharing what did not change with ix, which stays as it was: a reload
// that changes a few tools of a large catalog updates its index in time
// proportional to those tools' postings, not to the catalog. removed must
// be documents of ix exactly as they were indexed (their text says which
// postings to take out); a document of added replaces one of removed with
// the same ID, and its ID must not be indexed otherwise.
//
// An updated index ranks and scores exactly as New over the same documents
// would if New measured the mean field lengths where ix's New did (so the
// added documents' lengths are normalised as their neighbours' were), with
// one more exception: the typo corrections know the words of ix's New, not
// those of added documents, and may still offer a removed document's word.
// Ask for a new index with New after many updates: Drift says how far this
// one has come. Update returns nil when only New can give that index: a
// term whose posting list New did not keep (nearly every document held
// it) is no longer negligible.
func (ix *Index) Update(removed, added []Doc) *Index {
	c := *ix
	c.ids = slices.Clone(ix.ids)
	c.fields = slices.Clone(ix.fields)
	c.actions = slices.Clone(ix.actions)
	c.family = slices.Clone(ix.family)
	c.dead = slices.Clone(ix.dead)
	c.postings = slices.Clone(ix.postings)
	c.described = slices.Clone(ix.described)
	c.idf = slices.Clone(ix.idf)
	c.termSurfs = slices.Clone(ix.termSurfs)
	c.moreSurfs = maps.Clone(ix.moreSurfs)
	c.extra = maps.Clone(ix.extra)
	c.pruned = maps.Clone(ix.pruned)
	c.pinyinWords = sync.OnceValue(c.newPinyinWords)
	if c.extra == nil {
		c.extra = map[string]int32{}
	}
	c.surfs = ix.surfs[:len(ix.surfs):len(ix.surfs)]
	an := analyzer{v: ix.an.v, buf: &abuf{memo: map[string]string{}}}

	// Per term touched: the slots whose postings go and the postings that
	// come (in slot order, after every existing slot).
	type change struct {
		gone []int32
		come []posting
	}
	changes := map[int32]*change{}
	at := func(id int32) *change {
		ch := changes[id]
		if ch == nil {
			ch = &change{}
			changes[id] = ch
		}
		return ch
	}
	termID := func(key string) int32 {
		if id, ok := c.terms[key]; ok {
			return id
		}
		if id, ok := c.extra[key]; ok {
			return id
		}
		id := int32(len(c.postings))
		c.extra[key] = id
		c.postings = append(c.postings, nil)
		c.termSurfs = append(c.termSurfs, nil)
		c.described = append(c.described, 0)
		c.idf = append(c.idf, 0)
		return id
	}
	surf := func(s string) int32 {
		c.surfs = append(c.surfs, s)
		return int32(len(c.surfs) - 1)
	}
	// The terms whose surfaces this copy owns: the others' it shares with
	// ix, and clips before it adds one (see setSurf).
	owned := map[int32]bool{}
	for _, doc := range removed {
		d, ok := c.slot(doc.ID)
		if !ok {
			continue
		}
		c.dead[d] = true
		c.live--
		for _, t := range docTerms(an, doc, c.avgLen, termID, func(string) int32 { return 0 }) {
			if _, ok := c.pruned[t.term]; ok {
				c.pruned[t.term]--
				at(t.term) // its specificity is computed again
			} else {
				at(t.term).gone = append(at(t.term).gone, d)
			}
			if t.described {
				c.described[t.term]--
			}
		}
	}
	for _, doc := range added {
		d := int32(len(c.ids))
		c.ids = append(c.ids, doc.ID)
		c.dead = append(c.dead, false)
		c.live++
		c.fields = append(c.fields, fieldLayouts{}.of(doc))
		acts, fam := an.title(doc)
		c.actions = append(c.actions, acts)
		c.family = append(c.family, familyTerms(fam, func(k string) (int32, bool) { return termID(k), true }))
		for _, fl := range doc.Fields {
			c.hasLearned = c.hasLearned || fl.Learned
		}
		for _, t := range docTerms(an, doc, c.avgLen, termID, surf) {
			if t.described {
				c.described[t.term]++
			}
			if _, ok := c.pruned[t.term]; ok {
				c.pruned[t.term]++
				at(t.term)
				continue
			}
			p := posting{doc: d, sat: t.sat}
			p.setField(t.field, t.core)
			if !owned[t.term] {
				owned[t.term] = true
				c.termSurfs[t.term] = slices.Clip(c.termSurfs[t.term])
			}
			c.setSurf(t.term, &p, t.surf)
			at(t.term).come = append(at(t.term).come, p)
		}
	}
	for id, ch := range changes {
		if _, ok := c.pruned[id]; !ok {
			c.postings[id] = edited(c.postings[id], ch.gone, ch.come)
		}
	}
	n := float64(c.live)
	if c.live == ix.live {
		for id := range changes {
			c.idf[id] = specificity(float64(c.df(id)), n)
		}
	} else {
		for id := range c.postings {
			c.idf[id] = specificity(float64(c.df(int32(id))), n)
		}
	}
	for id := range c.pruned {
		if c.idf[id] >= negligible {
			return nil
		}
	}
	slots := len(c.ids)
	c.scratch = &sync.Pool{New: func() any {
		return &scratch{scores: make([]float32, slots), learned: make([]float32, slots), unit: make([]int32, slots), roles: make([]role, slots)}
	}}
	return &c
}

// edited returns a new posting list: old (sorted by slot) without the
// postings of the slots gone, then come. It copies the runs between the
// slots gone whole: a term that most of 100,000 documents hold has as
// many postings, and a reload that edits one of them copies them all.
func edited(old []posting, gone []int32, come []posting) []posting {
	slices.Sort(gone)
	ps := make([]posting, 0, len(old)-len(gone)+len(come))
	for _, d := range gone {
		i, found := slices.BinarySearchFunc(old, d, func(p posting, d int32) int { return cmp.Compare(p.doc, d) })
		ps = append(ps, old[:i]...)
		if found {
			i++
		}
		old = old[i:]
	}
	ps = append(ps, old...)
	return append(ps, come...)
}

// Drift is the share of the index's slots that Updates changed since its
// New: removed documents' slots and added ones, over the live documents.
func (ix *Index) Drift() float64 {
	if ix.live == 0 {
		return 0
	}
	changed := len(ix.ids) - ix.sorted
	for _, d := range ix.dead[:ix.sorted] {
		if d {
			changed++
		}
	}
	return float64(changed) / float64(ix.live)
}

// slot returns the live slot of the document id: among the slots Updates
// added, newest first, then by binary search among New's.
func (ix *Index) slot(id string) (int32, bool) {
	for d := len(ix.ids) - 1; d >= ix.sorted; d-- {
		if ix.ids[d] == id && !ix.dead[d] {
			return int32(d), true
		}
	}
	d, ok := slices.BinarySearch(ix.ids[:ix.sorted], id)
	if !ok || ix.dead[d] {
		return 0, false
	}
	return int32(d), true
}

// docTerm is one distinct term of a document with what its posting
// records (the surface as an index into surfs) and whether a field that
// is not Example holds it.
type docTerm struct {
	term      int32
	surf      int32
	sat       uint16
	field     int
	core      bool
	described bool
}

// docTerms analyses one document as New does, with the mean field lengths
// avgLen, and returns its distinct terms in the order they first occur.
func docTerms(an analyzer, doc Doc, avgLen map[string]float64, termID func(string) int32, intern func(string) int32) []docTerm {
	type acc struct {
		tf, best, fieldTF float64
	}
	var out []docTerm
	var accs []acc
	pos := map[int32]int{}
	var toks []token
	for f, fl := range doc.Fields {
		w := fl.Weight
		if w == 0 {
			w = 1
		}
		toks = an.analyze(toks[:0], fl.Text, false)
		var l float64
		for _, t := range toks {
			l += t.weight
		}
		norm := lengthNorm(l, avgLen[fl.Name])
		for i := range accs {
			accs[i].fieldTF = 0
		}
		for _, t := range toks {
			key := t.key
			if fl.Learned {
				key = learnedPrefix + key // see Field.Learned
			}
			id := termID(key)
			k, ok := pos[id]
			if !ok {
				k = len(out)
				pos[id] = k
				out = append(out, docTerm{term: id, surf: intern(t.surface)})
				accs = append(accs, acc{})
			}
			c := w * float64(float32(t.weight)) / norm
			a, o := &accs[k], &out[k]
			o.core = o.core || !fl.Context
			o.described = o.described || !fl.Example && !fl.Learned
			a.tf += c
			a.fieldTF += c
			if a.fieldTF > a.best {
				a.best, o.field = a.fieldTF, f
			}
		}
	}
	for k := range out {
		out[k].sat = saturate(accs[k].tf)
	}
	return out
}
