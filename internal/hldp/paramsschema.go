// Parsing params_schema: each param, its type, enum, default, pattern and
// bounds, with its values converted to Go and checked against the param.

package hldp

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

func (p *parser) params(n *yaml.Node, field string) []Param {
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "", fieldWant["params_schema"], describe(n), "")
		return nil
	}
	var out []Param
	for _, e := range p.mapping(n, field, nil) {
		if !paramNameRE.MatchString(e.key) {
			p.add(e.k, e.field, "invalid param name", "a name matching [A-Za-z_][A-Za-z0-9_]*", strconv.Quote(e.key), "")
			continue
		}
		if pr := p.param(e.v, e.field, false); pr != nil {
			pr.Name = e.key
			out = append(out, *pr)
		}
	}
	return out
}

// param parses one param mapping; inItems is true for the element schema
// under items, which has no required or default.
func (p *parser) param(n *yaml.Node, field string, inItems bool) *Param {
	known := paramKeys
	if inItems {
		known = itemKeys
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "", "a mapping like { type: string, required: false, description: ... }", describe(n), "")
		return nil
	}
	entries := p.mapping(n, field, known)
	by := make(map[string]entry, len(entries))
	for _, e := range entries {
		by[e.key] = e
	}
	pr := &Param{}
	ok := true
	if e, has := by["type"]; !has {
		if !hasKey(n, "type") && !hasUnknownNearIn(n, "type", known) {
			p.add(n, join(field, "type"), "missing required field", "one of "+strings.Join(paramTypes, ", "), "", "")
		}
		ok = false
	} else if s, good := p.str(e.v, e.field, "one of "+strings.Join(paramTypes, ", "), true); good {
		if !slices.Contains(paramTypes, s) {
			hint := didYouMean(s, paramTypes)
			if a, isAlias := typeAliases[strings.ToLower(s)]; isAlias {
				hint = "did you mean " + strconv.Quote(string(a)) + "?"
			}
			p.add(e.v, e.field, "unknown type", "one of "+strings.Join(paramTypes, ", "), describe(e.v), hint)
			ok = false
		} else {
			pr.Type = ParamType(s)
		}
	} else {
		ok = false
	}
	if e, has := by["required"]; has {
		pr.Required, _ = p.boolean(e.v, e.field)
	}
	if e, has := by["description"]; has {
		pr.Description, _ = p.str(e.v, e.field, "a string", false)
	}
	// The keys below depend on the type; without one, stop here (the type
	// problem is already reported).
	if !ok {
		return nil
	}
	x := new(ParamExt)
	pr.Ext = x // read by checkValue below; dropped at the end if empty
	if e, has := by["pattern"]; has {
		if pr.Type != TypeString {
			p.add(e.k, e.field, "only allowed on string params", "", "type "+string(pr.Type), "")
		} else if s, good := p.str(e.v, e.field, "a regular expression string", false); good {
			if _, err := regexp.Compile(s); err != nil {
				p.add(e.v, e.field, "invalid regular expression", "Go RE2 syntax", strconv.Quote(s), strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			} else {
				x.Pattern = s
			}
		}
	}
	if e, has := by["secret"]; has {
		if pr.Type != TypeString {
			p.add(e.k, e.field, "only allowed on string params", "secret on a param of type string", "type "+string(pr.Type), "")
		} else {
			pr.Secret, _ = p.boolean(e.v, e.field)
		}
	}
	numeric := pr.Type == TypeInteger || pr.Type == TypeNumber
	for _, k := range []string{"minimum", "maximum"} {
		e, has := by[k]
		if !has {
			continue
		}
		if !numeric {
			p.add(e.k, e.field, "only allowed on integer and number params", "", "type "+string(pr.Type), "")
			continue
		}
		if v, good := p.number(e.v, e.field); good {
			if k == "minimum" {
				x.Min = &v
			} else {
				x.Max = &v
			}
		}
	}
	if x.Min != nil && x.Max != nil && *x.Min > *x.Max {
		e := by["maximum"]
		p.add(e.v, e.field, "maximum below minimum", fmt.Sprintf(">= minimum %s", fmtNum(*x.Min)), fmtNum(*x.Max), "")
		x.Max = nil
	}
	if e, has := by["items"]; has {
		if pr.Type != TypeArray {
			p.add(e.k, e.field, "only allowed on array params", "", "type "+string(pr.Type), "")
		} else if it := p.param(e.v, e.field, true); it != nil {
			x.Items = it
		}
	}
	if e, has := by["enum"]; has {
		x.Enum = p.enum(e.v, e.field, pr)
	}
	if e, has := by["default"]; has {
		if v, good := p.value(e.v, e.field, pr); good {
			if prob := checkValue(pr, v); prob != "" {
				p.add(e.v, e.field, prob, describeParam(pr), describe(e.v), "")
			} else {
				x.Default = v
			}
		}
	}
	if x.isZero() {
		pr.Ext = nil
	}
	return pr
}

// hasKey reports whether mapping n has the key k (valid or not).
func hasKey(n *yaml.Node, k string) bool {
	for i := 0; i < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return true
		}
	}
	return false
}

// hasUnknownNearIn reports whether mapping n has an unknown key that is a
// likely misspelling of k.
func hasUnknownNearIn(n *yaml.Node, k string, known []string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i]
		if key.Kind == yaml.ScalarNode && !slices.Contains(known, key.Value) && suggest(key.Value, known) == k {
			return true
		}
	}
	return false
}

func (p *parser) enum(n *yaml.Node, field string, pr *Param) []any {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.add(n, field, "", "a non-empty list of "+string(pr.Type)+" values", describe(n), "")
		return nil
	}
	out := make([]any, 0, len(n.Content))
	for i, c := range n.Content {
		if v, ok := p.value(c, fmt.Sprintf("%s[%d]", field, i), &Param{Type: pr.Type, Ext: &ParamExt{Items: pr.Items()}}); ok {
			out = append(out, v)
		}
	}
	return out
}

// value converts node n to a Go value of the param's type (string, int64,
// float64, bool, []any, map[string]any), reporting a mismatch.
func (p *parser) value(n *yaml.Node, field string, pr *Param) (any, bool) {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		p.add(n, field, "YAML anchors and aliases are not supported", "the value written out", "", "")
		return nil, false
	}
	bad := func() (any, bool) {
		p.add(n, field, "", "a value of type "+string(pr.Type), describe(n), "")
		return nil, false
	}
	switch pr.Type {
	case TypeString:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!timestamp") {
			return bad()
		}
		return n.Value, true
	case TypeInteger:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return bad()
		}
		var v int64
		if err := n.Decode(&v); err != nil {
			return bad()
		}
		return v, true
	case TypeNumber:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			return bad()
		}
		var v float64
		if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return bad()
		}
		return v, true
	case TypeBoolean:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			return bad()
		}
		var v bool
		if err := n.Decode(&v); err != nil {
			return bad()
		}
		return v, true
	case TypeArray:
		if n.Kind != yaml.SequenceNode {
			return bad()
		}
		out := make([]any, 0, len(n.Content))
		ok := true
		for i, c := range n.Content {
			var v any
			var good bool
			f := fmt.Sprintf("%s[%d]", field, i)
			if pr.Items() != nil {
				v, good = p.value(c, f, pr.Items())
			} else {
				v, good = p.anyValue(c, f)
			}
			ok = ok && good
			out = append(out, v)
		}
		return out, ok
	case TypeObject:
		if n.Kind != yaml.MappingNode {
			return bad()
		}
		return p.anyValue(n, field)
	}
	return bad()
}

// anyValue converts node n to an untyped JSON-like Go value.
func (p *parser) anyValue(n *yaml.Node, field string) (any, bool) {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		p.add(n, field, "YAML anchors and aliases are not supported", "the value written out", "", "")
		return nil, false
	}
	switch n.Kind {
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		ok := true
		for i, c := range n.Content {
			v, good := p.anyValue(c, fmt.Sprintf("%s[%d]", field, i))
			ok = ok && good
			out = append(out, v)
		}
		return out, ok
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		ok := true
		for _, e := range p.mapping(n, field, nil) {
			v, good := p.anyValue(e.v, e.field)
			ok = ok && good
			out[e.key] = v
		}
		return out, ok && len(out)*2 == len(n.Content)
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str", "!!timestamp":
			return n.Value, true
		case "!!null":
			return nil, true
		case "!!int":
			return p.value(n, field, &Param{Type: TypeInteger})
		case "!!float":
			return p.value(n, field, &Param{Type: TypeNumber})
		case "!!bool":
			return p.value(n, field, &Param{Type: TypeBoolean})
		}
	}
	p.add(n, field, "", "a JSON-like value", describe(n), "")
	return nil, false
}

// checkValue checks a value already of the param's type against its enum,
// pattern and bounds; it returns the problem or "".
func checkValue(pr *Param, v any) string {
	if len(pr.Enum()) > 0 && !slices.ContainsFunc(pr.Enum(), func(e any) bool { return equalValue(e, v) }) {
		return "not in enum"
	}
	switch x := v.(type) {
	case string:
		if pr.Pattern() != "" {
			if re, err := regexp.Compile(pr.Pattern()); err == nil && !re.MatchString(x) {
				return "does not match pattern"
			}
		}
	case int64:
		return checkBounds(pr, float64(x))
	case float64:
		return checkBounds(pr, x)
	case []any:
		if pr.Items() != nil {
			for _, e := range x {
				if prob := checkValue(pr.Items(), e); prob != "" {
					return "item " + prob
				}
			}
		}
	}
	return ""
}

func checkBounds(pr *Param, f float64) string {
	if pr.Min() != nil && f < *pr.Min() {
		return "below minimum"
	}
	if pr.Max() != nil && f > *pr.Max() {
		return "above maximum"
	}
	return ""
}

// equalValue compares two normalised values (numbers across int64 and
// float64).
func equalValue(a, b any) bool {
	if fa, ok := asFloat(a); ok {
		fb, ok := asFloat(b)
		return ok && fa == fb
	}
	switch x := a.(type) {
	case []any, map[string]any:
		ja, _ := marshalCompact(x)
		jb, _ := marshalCompact(b)
		return ja != "" && ja == jb
	}
	return a == b
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
