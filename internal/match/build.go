package match

import "sync"

// Building an index: the documents analysed into terms and postings
// (New, NewFunc). match.go has the index and its queries.

// New builds an index over docs. A nil vocab means DefaultVocab. Building
// reads every document once; do it off the request path.
func New(docs []Doc, vocab *Vocab) *Index { return build(docs, vocab, nil) }

// NewFunc is New over the n documents doc(0) to doc(n-1). It asks for
// each document twice (it reads them twice) and keeps none, so a caller
// that makes its documents (catalog.ToolDoc) need not hold all of them
// while the index is built (bench catalog's 10,000 tools: 3.5 MB). doc
// must give the same document each time it is asked for it.
func NewFunc(n int, doc func(i int) Doc, vocab *Vocab) *Index { return buildFunc(n, doc, vocab, nil) }

// build is New; avgLen, when set, replaces the mean field lengths measured
// on docs (for tests: an Update scores against the averages of its New).
func build(docs []Doc, vocab *Vocab, avgLen map[string]float64) *Index {
	return buildFunc(len(docs), func(i int) Doc { return docs[i] }, vocab, avgLen)
}

// buildFunc is NewFunc, with build's avgLen.
func buildFunc(ndocs int, docAt func(i int) Doc, vocab *Vocab, avgLen map[string]float64) *Index {
	if vocab == nil {
		vocab = DefaultVocab()
	}
	ix := &Index{
		an:         analyzer{v: vocab},
		ids:        make([]string, ndocs),
		actions:    make([]titleActs, ndocs),
		family:     make([][]int32, ndocs),
		fields:     make([][]string, ndocs),
		threshold:  DefaultThreshold,
		offCore:    offCoreFactor,
		offAction:  offActionFactor,
		famRatio:   familyRatio,
		onlyAction: onlyActionFactor,
		margin:     standoutMargin,
	}
	// The maps grow as they fill: sized from the text's length (a term
	// for 64 bytes), they had 3.5 times the room bench catalog's 10,000
	// tools needed, and 100 times that of BenchmarkBuild10k's, 1.7 and
	// 3.4 MB each while the index was built; growing them took no
	// measurable time (min of three runs of BenchmarkBuild10k and
	// BenchmarkBuildBench10k: 393 and 224 ms sized, 333 and 192 ms grown).
	ix.terms = map[string]int32{}
	surfID := map[string]int32{}
	intern := func(s string) int32 {
		id, ok := surfID[s]
		if !ok {
			id = int32(len(ix.surfs))
			ix.surfs = append(ix.surfs, s)
			surfID[s] = id
		}
		return id
	}
	// descDoc is, by term id, the last document counted in described.
	var descDoc []int32
	termID := func(key string) int32 {
		id, ok := ix.terms[key]
		if !ok {
			id = int32(len(ix.postings))
			ix.terms[key] = id
			ix.postings = append(ix.postings, nil)
			ix.described = append(ix.described, 0)
			descDoc = append(descDoc, -1)
		}
		return id
	}

	// Pass 1: analyse every field once into compact tokens and sum the
	// lengths of each field name, for length normalisation.
	// ctok holds no pointers, so the garbage collector need not scan the
	// arena. The arena is made in chunks of arenaChunk tokens, each
	// document's tokens in one of them: one array sized from the text's
	// length either left much of it unused or was outgrown and copied
	// (bench catalog's Chinese text: 690,000 tokens, one 6.4 MB array
	// grown to a second of 8 MB, both live while it was copied).
	type ctok struct {
		term   int32
		weight float32
		surf   int32 // interned surface
	}
	type fieldStat struct {
		sum float64
		n   int
	}
	an := analyzer{v: vocab, buf: &abuf{memo: map[string]string{}}}
	stats := map[string]*fieldStat{}
	var chunk, dtoks []ctok         // the arena's last chunk; the tokens of the document analysed
	arena := make([][]ctok, ndocs)  // per doc: its tokens, in arena's chunks
	spans := make([][]int32, ndocs) // per doc: offsets in arena[d] of its fields, plus the end
	lens := make([][]float64, ndocs)
	words := map[string]bool{}
	var toks []token
	for d := range ndocs {
		doc := docAt(d)
		spans[d] = make([]int32, 0, len(doc.Fields)+1)
		lens[d] = make([]float64, len(doc.Fields))
		dtoks = dtoks[:0]
		for f, fl := range doc.Fields {
			spans[d] = append(spans[d], int32(len(dtoks)))
			toks = an.analyze(toks[:0], fl.Text, false)
			var l float64
			for _, t := range toks {
				if fl.Learned {
					// Apart from the document's own terms; see Field.Learned.
					ix.hasLearned = true
					id := termID(learnedPrefix + t.key)
					dtoks = append(dtoks, ctok{term: id, weight: float32(t.weight), surf: intern(t.surface)})
					l += t.weight
					continue
				}
				id := termID(t.key)
				if !fl.Example && descDoc[id] != int32(d) {
					descDoc[id] = int32(d)
					ix.described[id]++
				}
				dtoks = append(dtoks, ctok{term: id, weight: float32(t.weight), surf: intern(t.surface)})
				l += t.weight
				if t.kind == kindWord {
					words[t.surface] = true
				}
			}
			lens[d][f] = l
			st := stats[fl.Name]
			if st == nil {
				st = &fieldStat{}
				stats[fl.Name] = st
			}
			st.sum += l
			st.n++
		}
		spans[d] = append(spans[d], int32(len(dtoks)))
		if cap(chunk)-len(chunk) < len(dtoks) {
			chunk = make([]ctok, 0, max(arenaChunk, len(dtoks)))
		}
		chunk = append(chunk, dtoks...)
		arena[d] = chunk[len(chunk)-len(dtoks) : len(chunk) : len(chunk)]
	}
	dtoks = nil

	ix.avgLen = make(map[string]float64, len(stats))
	for name, st := range stats {
		ix.avgLen[name] = st.sum / float64(st.n)
		if a, ok := avgLen[name]; ok {
			ix.avgLen[name] = a
		}
	}

	// Count each term's documents, so that every posting list is cut to
	// its length from one array: appending term by term left a third of
	// the lists' capacity unused, the largest part of the index.
	counts := make([]int32, len(ix.postings))
	lastDoc := make([]int32, len(ix.postings))
	for i := range lastDoc {
		lastDoc[i] = -1
	}
	total := 0
	for d := range ndocs {
		for _, t := range arena[d] {
			if lastDoc[t.term] != int32(d) {
				lastDoc[t.term] = int32(d)
				counts[t.term]++
				total++
			}
		}
	}
	ix.termSurfs = make([][]int32, len(ix.postings))
	n := float64(ndocs)
	keep := make([]bool, len(counts))
	for id, c := range counts {
		if keep[id] = specificity(float64(c), n) >= pruneBelow; !keep[id] {
			if ix.pruned == nil {
				ix.pruned = map[int32]int32{}
			}
			ix.pruned[int32(id)] = c
			total -= int(c)
		}
	}
	all := make([]posting, total)
	for id, c := range counts {
		if keep[id] {
			ix.postings[id], all = all[:0:c], all[c:]
		}
	}

	// Pass 2: BM25F term frequencies per document, then postings.
	type acc struct {
		term  int32
		tf    float64
		best  float64
		field int
		core  bool
		surf  int32
	}
	pos := make([]int32, len(ix.postings)) // term -> index in accs, -1 when absent
	for i := range pos {
		pos[i] = -1
	}
	var accs []acc
	var fieldTF []float64 // per acc, contribution of the current field
	layouts := fieldLayouts{}
	for d := range ndocs {
		doc := docAt(d)
		ix.ids[d] = doc.ID
		ix.fields[d] = layouts.of(doc)
		var fam []string
		ix.actions[d], fam = an.title(doc)
		ix.family[d] = familyTerms(fam, func(k string) (int32, bool) { id, ok := ix.terms[k]; return id, ok })
		accs, fieldTF = accs[:0], fieldTF[:0]
		for f, fl := range doc.Fields {
			w := fl.Weight
			if w == 0 {
				w = 1
			}
			norm := lengthNorm(lens[d][f], ix.avgLen[fl.Name])
			for i := range fieldTF {
				fieldTF[i] = 0
			}
			for _, t := range arena[d][spans[d][f]:spans[d][f+1]] {
				c := w * float64(t.weight) / norm
				k := pos[t.term]
				if k < 0 {
					k = int32(len(accs))
					pos[t.term] = k
					accs = append(accs, acc{term: t.term, surf: t.surf})
					fieldTF = append(fieldTF, 0)
				}
				a := &accs[k]
				a.core = a.core || !fl.Context
				a.tf += c
				fieldTF[k] += c
				if fieldTF[k] > a.best {
					a.best, a.field = fieldTF[k], f
				}
			}
		}
		for _, a := range accs {
			pos[a.term] = -1
			if !keep[a.term] {
				continue
			}
			p := posting{doc: int32(d), sat: saturate(a.tf)}
			p.setField(a.field, a.core)
			ix.setSurf(a.term, &p, a.surf)
			ix.postings[a.term] = append(ix.postings[a.term], p)
		}
	}
	ix.dead, ix.live = make([]bool, ndocs), ndocs
	for ix.sorted < ndocs && (ix.sorted == 0 || ix.ids[ix.sorted-1] < ix.ids[ix.sorted]) {
		ix.sorted++
	}
	ix.idf = make([]float64, len(ix.postings))
	for id := range ix.postings {
		ix.idf[id] = specificity(float64(ix.df(int32(id))), n)
	}
	for _, w := range vocab.words {
		words[w] = true
	}
	ix.typos = newTypoIndex(words)
	vocab.sounds() // built once per vocabulary; keep it off the request path
	// The closure captures the count, not docAt: the pool would keep the
	// whole input alive (about 470 bytes a tool at 10,000 tools).
	ix.scratch = &sync.Pool{New: func() any {
		return &scratch{scores: make([]float32, ndocs), learned: make([]float32, ndocs), unit: make([]int32, ndocs), roles: make([]role, ndocs)}
	}}
	ix.pinyinWords = sync.OnceValue(ix.newPinyinWords)
	return ix
}

// arenaChunk is how many tokens build's arena makes room for at a time
// (768 kB): few enough that its last chunk's unused room is small, many
// enough that a chunk holds many documents.
const arenaChunk = 1 << 16
