package hldp

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// segment is one piece of an argv word: literal text, or a placeholder
// naming a param.
type segment struct {
	lit   string
	param string // non-empty for a placeholder
}

// parseWord splits an argv word into literal text and {param}
// placeholders; "{{" and "}}" are literal braces.
func parseWord(w string) ([]segment, error) {
	var segs []segment
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			segs = append(segs, segment{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(w); {
		switch w[i] {
		case '{':
			if i+1 < len(w) && w[i+1] == '{' {
				lit.WriteByte('{')
				i += 2
				continue
			}
			j := strings.IndexByte(w[i+1:], '}')
			if j < 0 {
				return nil, errors.New("unclosed { (write {{ for a literal brace)")
			}
			name := w[i+1 : i+1+j]
			if !paramNameRE.MatchString(name) {
				return nil, fmt.Errorf("invalid placeholder %q (write {{ and }} for literal braces)", "{"+name+"}")
			}
			flush()
			segs = append(segs, segment{param: name})
			i += j + 2
		case '}':
			if i+1 < len(w) && w[i+1] == '}' {
				lit.WriteByte('}')
				i += 2
				continue
			}
			return nil, errors.New("unmatched } (write }} for a literal brace)")
		default:
			lit.WriteByte(w[i])
			i++
		}
	}
	flush()
	return segs, nil
}

// wholeWord returns the param name when segs is exactly one placeholder.
func wholeWord(segs []segment) (string, bool) {
	if len(segs) == 1 && segs[0].param != "" {
		return segs[0].param, true
	}
	return "", false
}

// argv parses and validates the argv template against the tool's params.
func (p *parser) argv(n *yaml.Node, field string, t *Tool) []ArgvItem {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.add(n, field, "", "a non-empty list of words (the program first)", describe(n), "")
		return nil
	}
	params := make(map[string]Param, len(t.Params))
	for _, pr := range t.Params {
		params[pr.Name] = pr
	}
	out := make([]ArgvItem, 0, len(n.Content))
	for i, c := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch c.Kind {
		case yaml.MappingNode:
			if i == 0 {
				p.add(c, f, "", "the program as a plain word", describe(c), "")
				continue
			}
			if it, ok := p.argvCond(c, f, params); ok {
				out = append(out, it)
			}
		case yaml.SequenceNode:
			if i == 0 {
				p.add(c, f, "", "the program as a plain word", describe(c), "")
				continue
			}
			if len(c.Content) == 0 {
				p.add(c, f, "empty group", "a list of one or more words", "", "")
				continue
			}
			group := make([]string, 0, len(c.Content))
			ok := true
			for j, w := range c.Content {
				gf := fmt.Sprintf("%s[%d]", f, j)
				if w.Kind == yaml.SequenceNode {
					p.add(w, gf, "groups may not nest", "a word", describe(w), "")
					ok = false
					continue
				}
				s, good := p.argvWord(w, gf, params)
				ok = ok && good
				group = append(group, s)
			}
			if ok {
				out = append(out, ArgvItem{Group: &ArgvGroup{Words: group}})
			}
		default:
			s, ok := p.argvWord(c, f, params)
			if !ok {
				continue
			}
			if i == 0 {
				segs, _ := parseWord(s)
				if s == "" || len(segs) != 1 || segs[0].param != "" || strings.ContainsAny(s, "{}") {
					p.add(c, f, "the program must be a plain word", "a program name or path without placeholders or braces", describe(c), "")
					continue
				}
			}
			out = append(out, ArgvItem{Word: s})
		}
	}
	return out
}

// argvCond parses a conditional group, {if: {PARAM: [VALUES]}, then:
// [WORDS]}: PARAM a declared string param, each value one it may have
// (one of its enum when it has one), WORDS as in a group.
func (p *parser) argvCond(n *yaml.Node, field string, params map[string]Param) (ArgvItem, bool) {
	it := &ArgvGroup{}
	ok := true
	entries := p.mapping(n, field, []string{"if", "then"})
	have := map[string]bool{}
	for _, e := range entries {
		have[e.key] = true
		switch e.key {
		case "if":
			if e.v.Kind != yaml.MappingNode || len(e.v.Content) != 2 {
				p.add(e.v, e.field, "", "a mapping of one string param to the list of its values that keep the group, like {op: [branch, tag]}", describe(e.v), "")
				ok = false
				continue
			}
			name, vals := e.v.Content[0].Value, e.v.Content[1]
			vf := e.field + "." + name
			pr, declared := params[name]
			switch {
			case !declared:
				p.add(e.v.Content[0], vf, "condition on an undeclared param", "a param declared in params_schema", strconv.Quote(name), didYouMean(name, paramNames(params)))
				ok = false
				continue
			case pr.Type != TypeString:
				p.add(e.v.Content[0], vf, "condition on a non-string param", "a string param", "type "+string(pr.Type), "")
				ok = false
				continue
			}
			if vals.Kind != yaml.SequenceNode || len(vals.Content) == 0 {
				p.add(vals, vf, "", "a non-empty list of values", describe(vals), "")
				ok = false
				continue
			}
			cond := &ArgvCond{Param: name}
			for j, v := range vals.Content {
				s, good := p.str(v, fmt.Sprintf("%s[%d]", vf, j), "a value of "+name, false)
				if !good {
					ok = false
					continue
				}
				if len(pr.Enum()) > 0 && !slices.Contains(pr.Enum(), any(s)) {
					p.add(v, fmt.Sprintf("%s[%d]", vf, j), "not one of the param's enum values", fmt.Sprintf("one of %v", pr.Enum()), strconv.Quote(s), "")
					ok = false
					continue
				}
				cond.Values = append(cond.Values, s)
			}
			it.If = cond
		case "then":
			if e.v.Kind != yaml.SequenceNode || len(e.v.Content) == 0 {
				p.add(e.v, e.field, "", "a list of one or more words", describe(e.v), "")
				ok = false
				continue
			}
			for j, w := range e.v.Content {
				gf := fmt.Sprintf("%s[%d]", e.field, j)
				if w.Kind == yaml.SequenceNode || w.Kind == yaml.MappingNode {
					p.add(w, gf, "groups may not nest", "a word", describe(w), "")
					ok = false
					continue
				}
				s, good := p.argvWord(w, gf, params)
				ok = ok && good
				it.Words = append(it.Words, s)
			}
		}
	}
	for _, k := range []string{"if", "then"} {
		if !have[k] {
			p.add(n, field+"."+k, "missing required field", "a conditional group has if and then", "", "")
			ok = false
		}
	}
	return ArgvItem{Group: it}, ok && it.If != nil && len(it.Words) > 0
}

// argvWord checks one word of the template: a scalar (numbers and booleans
// are taken as written), with valid placeholders naming declared params,
// and array params only as a whole word.
func (p *parser) argvWord(n *yaml.Node, field string, params map[string]Param) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Anchor != "" {
		p.add(n, field, "", "a word (string)", describe(n), "")
		return "", false
	}
	segs, err := parseWord(n.Value)
	if err != nil {
		p.add(n, field, "invalid placeholder", "{param} naming a declared param", strconv.Quote(n.Value), err.Error())
		return "", false
	}
	_, whole := wholeWord(segs)
	ok := true
	for _, s := range segs {
		if s.param == "" {
			continue
		}
		pr, declared := params[s.param]
		if !declared {
			p.add(n, field, "placeholder of an undeclared param", "a param declared in params_schema", "{"+s.param+"}", didYouMean(s.param, paramNames(params)))
			ok = false
			continue
		}
		if pr.Type == TypeArray && !whole {
			p.add(n, field, "array param inside a word", "{"+s.param+"} as a whole word (it expands to one element per item)", strconv.Quote(n.Value), "")
			ok = false
		}
	}
	return n.Value, ok
}

func paramNames(m map[string]Param) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// RenderArgv fills the tool's argv template with params and returns the
// argv to execute (program first). Call it with the map CheckParams
// returned.
//
//   - A word that is exactly "{p}" becomes the value of p as ONE element; an
//     array value becomes one element per item. If p has no value (absent,
//     nil, or an empty array) the word is dropped.
//   - A word with placeholders inside ("--since={since}") is substituted
//     within that one element, and dropped if any param it names has no value.
//   - A group is kept only if every param it references has a value; else
//     all its words are dropped.
//   - A conditional group ({if: {p: [v1, v2]}, then: [...]}) is kept only
//     when p has one of those values, and then like a group.
//
// Values are formatted as: strings as they are, integers in decimal,
// numbers with strconv 'g', booleans true/false, objects (and other
// composite values) as compact JSON.
//
// The result is meant for execve, never for a shell: each value lands
// inside the element(s) its placeholder produced and is never split on
// spaces or re-parsed, so "; rm -rf /", "$(id)", quotes and newlines stay
// literal bytes of one argument. Command injection through params is
// impossible by construction; option injection (a value starting with "-")
// is the template author's to prevent, e.g. with "--flag={p}" or a pattern.
func (t *Tool) RenderArgv(params map[string]any) ([]string, error) {
	if len(t.Argv) == 0 {
		return nil, fmt.Errorf("tool %s has no argv template", t.Name)
	}
	out := make([]string, 0, len(t.Argv))
	for i, it := range t.Argv {
		if g := it.Group; g != nil && g.If != nil {
			if v, _ := params[g.If.Param].(string); !slices.Contains(g.If.Values, v) {
				continue
			}
		}
		if it.Group != nil {
			var words []string
			keep := true
			for _, w := range it.Group.Words {
				got, present, err := renderWord(w, params)
				if err != nil {
					return nil, fmt.Errorf("argv[%d]: %w", i, err)
				}
				if !present {
					keep = false
					break
				}
				words = append(words, got...)
			}
			if keep {
				out = append(out, words...)
			}
			continue
		}
		got, present, err := renderWord(it.Word, params)
		if err != nil {
			return nil, fmt.Errorf("argv[%d]: %w", i, err)
		}
		if present {
			out = append(out, got...)
		}
	}
	return out, nil
}

// renderWord fills one word; present is false when a param it names has
// no value.
func renderWord(w string, params map[string]any) (words []string, present bool, err error) {
	segs, err := parseWord(w)
	if err != nil {
		return nil, false, err
	}
	if name, ok := wholeWord(segs); ok {
		v := params[name]
		if v == nil {
			return nil, false, nil
		}
		if arr, isArr := v.([]any); isArr {
			if len(arr) == 0 {
				return nil, false, nil
			}
			out := make([]string, 0, len(arr))
			for _, e := range arr {
				s, err := argString(name, e)
				if err != nil {
					return nil, false, err
				}
				out = append(out, s)
			}
			return out, true, nil
		}
		s, err := argString(name, v)
		if err != nil {
			return nil, false, err
		}
		return []string{s}, true, nil
	}
	var b strings.Builder
	for _, s := range segs {
		if s.param == "" {
			b.WriteString(s.lit)
			continue
		}
		v := params[s.param]
		if v == nil {
			return nil, false, nil
		}
		if _, isArr := v.([]any); isArr {
			return nil, false, fmt.Errorf("param %s: an array can only fill a whole word {%s}", s.param, s.param)
		}
		str, err := argString(s.param, v)
		if err != nil {
			return nil, false, err
		}
		b.WriteString(str)
	}
	return []string{b.String()}, true, nil
}

// argString formats one value as an argv element.
func argString(name string, v any) (string, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case bool:
		s = strconv.FormatBool(x)
	case int:
		s = strconv.Itoa(x)
	case int32:
		s = strconv.FormatInt(int64(x), 10)
	case int64:
		s = strconv.FormatInt(x, 10)
	case uint:
		s = strconv.FormatUint(uint64(x), 10)
	case uint32:
		s = strconv.FormatUint(uint64(x), 10)
	case uint64:
		s = strconv.FormatUint(x, 10)
	case float32:
		s = strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	case json.Number:
		s = x.String()
	case nil:
		s = "null"
	default:
		j, err := marshalCompact(x)
		if err != nil {
			return "", fmt.Errorf("param %s: cannot format %T as an argument: %w", name, v, err)
		}
		s = j
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("param %s: value contains a NUL byte", name)
	}
	return s, nil
}
