package hldp

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Limits of the examples key. An example is one request as a user would
// type it, so a long one is a description in disguise; a tool with more
// than a handful of examples drowns its own intent sentence and is better
// split or given keywords.
const (
	// MaxExamples is the most examples a tool may give.
	MaxExamples = 20
	// MaxExampleLen is the longest example, in characters (runes).
	MaxExampleLen = 200
)

// examples parses the top-level examples key: a list of distinct one-line
// requests (see Tool.Examples). Every bad item is reported, also when the
// list is too long.
func (p *parser) examples(n *yaml.Node, field string) []string {
	const want = "a list of requests the tool answers, like [\"show me the last five commits\", 查看最近的提交记录]"
	if n.Kind != yaml.SequenceNode {
		p.add(n, field, "", want, describe(n), listHint(n))
		return nil
	}
	if len(n.Content) > MaxExamples {
		p.add(n, field, "too many examples", fmt.Sprintf("at most %d", MaxExamples), strconv.Itoa(len(n.Content)),
			"keep the requests that differ most from each other; put single words in keywords")
	}
	out := make([]string, 0, len(n.Content))
	first := make(map[string]int, len(n.Content)) // normalised example -> its index
	for i, c := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, ok := p.str(c, f, "a request (a non-empty string)", true)
		if !ok {
			continue
		}
		if r, bad := controlRune(s); bad {
			p.add(c, f, "not one line of text", "one request on one line", fmt.Sprintf("%U in %s", r, describe(c)), "")
			continue
		}
		if l := utf8.RuneCountInString(s); l > MaxExampleLen {
			p.add(c, f, "example too long", fmt.Sprintf("at most %d characters", MaxExampleLen), fmt.Sprintf("%d characters", l),
				"an example is one request as a user would type it; the intent sentence describes the tool")
			continue
		}
		key := normExample(s)
		if j, dup := first[key]; dup {
			p.add(c, f, "duplicate example", "each request once (case and spacing aside)", strconv.Quote(s), fmt.Sprintf("same as %s[%d]", field, j))
			continue
		}
		first[key] = i
		out = append(out, s)
	}
	return out
}

// controlRune returns the first control character of s (a line break, a
// tab), if any.
func controlRune(s string) (rune, bool) {
	for _, r := range s {
		if unicode.IsControl(r) {
			return r, true
		}
	}
	return 0, false
}

// normExample is the form two examples are compared in: lowercase, with
// runs of spaces as one.
func normExample(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}
