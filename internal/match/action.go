package match

// offActionFactor multiplies a document's coverage, for ranking and
// score, when the request asks for actions (vocabulary concepts of class
// Action, of weight absentActionMinWeight or more, that some document
// holds) and the document's title names actions, none of them asked:
// within a family of tools about one object (deploy and roll back, open
// and close an issue, list and create pull requests, commit and log), the
// action decides. A document's title is its heaviest fields that are
// neither Context, Example nor Learned (for a tool: its name, display
// name and keywords); a document whose title names no action is not
// judged, nor are weak actions (below absentActionMinWeight: show, list,
// check) on either side. It reorders candidates only: the verdict is the
// one of the documents' own coverage. 0.9 raised served recall@1 of the
// development set's Chinese requests from 0.738 to 0.762 and of the
// second split's from 0.745 to 0.764 and lowered no figure; 0.75 and
// below lowered some (a verb read as an action where it names a state or
// a thing, 能正常打开吗, "user deploy"), so it decides near ties only.
const offActionFactor = 0.9

// rerankWide is how many candidates past the ones kept the action check
// and learned requests reorder (see MatchIn).
const rerankWide = 16

// titleActions returns the action concepts of doc's title: its heaviest
// fields that are neither Context, Example nor Learned (see
// offActionFactor).
func (a analyzer) titleActions(doc Doc) actionSet {
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
	var out actionSet
	for _, fl := range doc.Fields {
		if w := weight(fl); w == 0 || w < top {
			continue
		}
		for _, t := range a.analyze(nil, fl.Text, false) {
			if t.kind == kindConcept && t.class == Action && t.weight >= absentActionMinWeight {
				out.add(t.abit)
			}
		}
	}
	return out
}
