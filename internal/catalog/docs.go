package catalog

import (
	"strings"

	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/match"
)

// Field weights of a tool's text for intent matching (BM25F). The name and
// the display name are short and chosen with care, so a word there says
// most; the intent sentence is the main description; keywords are the
// author's own hints; why and the parameters add context.
const (
	weightName     = 2.5
	weightDisplay  = 2.5
	weightIntent   = 2
	weightKeywords = 2.5
	weightWhy      = 0.7
	weightParams   = 0.5
)

// ToolDoc turns a tool into the match.Doc its intent matching indexes: the
// name split on '-' and '_', the display name, the intent, the why
// sentence, the parameters' names and descriptions, and the keywords, each
// as a field with its weight. Fields with no text are left out. The Doc's
// ID is the tool's name.
func ToolDoc(t *hldp.Tool) match.Doc {
	d := match.Doc{ID: t.Name}
	add := func(name, text string, w float64, context bool) {
		if strings.TrimSpace(text) != "" {
			d.Fields = append(d.Fields, match.Field{Name: name, Text: text, Weight: w, Context: context})
		}
	}
	add("name", splitName(t.Name), weightName, false)
	add("display", t.Display, weightDisplay, false)
	add("intent", t.Intent, weightIntent, false)
	add("keywords", strings.Join(t.Keywords, ", "), weightKeywords, false)
	add("why", t.Why, weightWhy, true)
	var params []string
	for _, p := range t.Params {
		params = append(params, splitName(p.Name)+": "+p.Description+".")
	}
	add("params", strings.Join(params, " "), weightParams, true)
	return d
}

// splitName turns "git-commit_detail" into "git commit detail".
func splitName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' {
			return ' '
		}
		return r
	}, s)
}
