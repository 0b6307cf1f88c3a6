// Reading YAML nodes for the parser: a mapping's keys (duplicates,
// unknown keys), what a node is for messages, and scalars, dates and
// lists of strings, each reporting a node of the wrong kind.

package hldp

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// entry is one key/value pair of a mapping, after duplicate and unknown-key
// checks.
type entry struct {
	key   string
	k, v  *yaml.Node
	field string
}

// mapping checks the keys of mapping node n and returns its entries in file
// order. known == nil accepts any key (params_schema); keys that are not
// strings, duplicates and unknown keys are reported and left out.
func (p *parser) mapping(n *yaml.Node, prefix string, known []string) []entry {
	var out []entry
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			if k.Tag == "!!merge" {
				p.add(k, prefix, "merge keys (<<) are not supported", "keys written out", "", "")
			} else {
				p.add(k, prefix, "invalid key", "a string key", describe(k), "")
			}
			continue
		}
		field := join(prefix, k.Value)
		if first, dup := seen[k.Value]; dup {
			p.add(k, field, "duplicate key", "each key once", "", fmt.Sprintf("first defined at line %d", first))
			continue
		}
		seen[k.Value] = k.Line
		if known != nil && !slices.Contains(known, k.Value) {
			p.add(k, field, "unknown key", "one of "+strings.Join(known, ", "), "", didYouMean(k.Value, known))
			continue
		}
		if v.Kind == yaml.AliasNode || v.Anchor != "" {
			p.add(v, field, "YAML anchors and aliases are not supported", "the value written out", "", "")
			continue
		}
		out = append(out, entry{key: k.Value, k: k, v: v, field: field})
	}
	return out
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// describe says what a node is, for the "got" part of a message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	v := n.Value
	if len(v) > 60 {
		v = v[:57] + "..."
	}
	switch n.Tag {
	case "!!str":
		return "string " + strconv.Quote(v)
	case "!!int":
		return "integer " + v
	case "!!float":
		return "float " + v
	case "!!bool":
		return "boolean " + v
	case "!!null":
		return "null"
	case "!!timestamp":
		return "date " + v
	}
	return n.Tag + " " + strconv.Quote(v)
}

// quoteHint is the hint for a plain scalar YAML read as something other
// than the string the author meant.
func quoteHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!str" && n.Tag != "!!null" && n.Style == 0 {
		return "put the value in quotes to make it a string"
	}
	return ""
}

// str returns the string value of n, reporting anything else.
func (p *parser) str(n *yaml.Node, field, want string, nonEmpty bool) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.add(n, field, "", want, describe(n), quoteHint(n))
		return "", false
	}
	if nonEmpty && strings.TrimSpace(n.Value) == "" {
		p.add(n, field, "", want, "an empty string", "")
		return "", false
	}
	return n.Value, true
}

// integer returns the integer value of n, reporting anything else.
func (p *parser) integer(n *yaml.Node, field, want string) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		p.add(n, field, "", want, describe(n), "")
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		p.add(n, field, "out of range", want, describe(n), "")
		return 0, false
	}
	return v, true
}

// boolean returns the boolean value of n, reporting anything else.
func (p *parser) boolean(n *yaml.Node, field string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.add(n, field, "", "boolean true or false", describe(n), "")
		return false, false
	}
	var v bool
	if err := n.Decode(&v); err != nil {
		p.add(n, field, "", "boolean true or false", describe(n), "")
		return false, false
	}
	return v, true
}

// number returns the numeric value of an int or float node.
func (p *parser) number(n *yaml.Node, field string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		p.add(n, field, "", "a number", describe(n), "")
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		p.add(n, field, "", "a finite number", describe(n), "")
		return 0, false
	}
	return v, true
}

// dateLayouts are the timestamp forms YAML accepts (as go-yaml resolves
// them), tried on both YAML dates and quoted strings.
var dateLayouts = []string{
	"2006-1-2T15:4:5.999999999Z07:00",
	"2006-1-2t15:4:5.999999999Z07:00",
	"2006-1-2 15:4:5.999999999",
	"2006-1-2",
}

// date returns the YYYY-MM-DD form of a YAML date or a string holding one.
func (p *parser) date(n *yaml.Node, field string) (string, bool) {
	const want = "a date like 2026-05-31"
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!timestamp" && n.Tag != "!!str") {
		p.add(n, field, "", want, describe(n), "")
		return "", false
	}
	s := strings.TrimSpace(n.Value)
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.Format(time.DateOnly), true
		}
	}
	p.add(n, field, "", want, describe(n), "")
	return "", false
}

func (p *parser) keywords(n *yaml.Node, field string) []string {
	if n.Kind != yaml.SequenceNode {
		p.add(n, field, "", "a list of strings", describe(n), "")
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, w := range n.Content {
		if s, ok := p.str(w, fmt.Sprintf("%s[%d]", field, i), "a non-empty string", true); ok {
			out = append(out, s)
		}
	}
	return out
}
