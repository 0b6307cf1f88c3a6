package catalog

import (
	"strings"

	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/match"
)

// Field weights of a tool's text for intent matching (BM25F). The name and
// the display name are short and chosen with care; the intent sentence is
// the main description; keywords are the author's own hints; why and the
// parameters add context. Examples are requests the tool answers in its
// users' words, the author's way to teach the matcher, and the strongest
// field. Measured on the development set split in halves (each tool given
// the other half's requests as examples, TestDevSetExamplesFromOtherHalf,
// which logs the figures), weight 3 keeps Hit@3 but costs Hit@1 and no-fit
// recall: requests share an example's context words more than its tool's.
// Issue 19's later items (refusing by how far the best candidate stands
// out) are where that is to be won back.
const (
	weightExamples = 3
	weightName     = 2.5
	weightDisplay  = 2.5
	weightIntent   = 2
	weightKeywords = 2.5
	weightWhy      = 0.7
	weightParams   = 0.5
)

// ExamplesField is the name of the match.Field that holds one of a tool's
// examples; a Doc has one such field per example, in file order, so that
// each is normalised by the length of an example, not of all of them, and
// a caller can leave one out (toolagent validate --match) or all of them
// (toolagent eval) by name.
const ExamplesField = "examples"

// LearnedField is the name of the match.Field that holds a request
// learned from use for a tool (see Options.Learned).
const LearnedField = "learned"

// ToolDoc turns a tool into the match.Doc its intent matching indexes: the
// name split on '-' and '_', the display name, the intent, the keywords,
// each example, the why sentence and the parameters' names and
// descriptions, each as a field with its weight. Fields with no text are
// left out. The Doc's ID is the tool's name.
func ToolDoc(t *hldp.Tool) match.Doc {
	// The fields at most, so that the slice is made once: at 10,000
	// tools, growing it made 3.4 MB of garbage while the index was built.
	d := match.Doc{ID: t.Name, Fields: make([]match.Field, 0, fieldsMax(t))}
	add := func(name, text string, w float64, context bool) {
		if strings.TrimSpace(text) != "" {
			d.Fields = append(d.Fields, match.Field{Name: name, Text: text, Weight: w, Context: context})
		}
	}
	add("name", splitName(t.Name), weightName, false)
	add("display", t.Display, weightDisplay, false)
	add("intent", t.Intent, weightIntent, false)
	add("keywords", strings.Join(t.Keywords, ", "), weightKeywords, false)
	for _, ex := range t.Examples() {
		if strings.TrimSpace(ex) != "" {
			d.Fields = append(d.Fields, match.Field{Name: ExamplesField, Text: ex, Weight: weightExamples, Example: true})
		}
	}
	add("why", t.Why, weightWhy, true)
	var params []string
	for _, p := range t.Params {
		params = append(params, splitName(p.Name)+": "+p.Description+".")
	}
	add("params", strings.Join(params, " "), weightParams, true)
	return d
}

// fieldsMax is how many fields ToolDoc makes of t at most: the six
// fields of its text and one per example. Snapshot.doc's learned requests,
// when a tool has some, grow the slice once.
func fieldsMax(t *hldp.Tool) int { return 6 + len(t.Examples()) }

// splitName turns "git-commit_detail" into "git commit detail".
func splitName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' {
			return ' '
		}
		return r
	}, s)
}
