package hldp

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// requiresKs are the keys of a requires mapping.
var requiresKs = []string{"programs", "files", "check"}

// requiresHint says why requires is for shell tools only.
func requiresHint(k ExecutorKind) string {
	if k == Gatekeeper {
		return "a gatekeeper tool runs on the gatekeeper's host, which this daemon cannot inspect; the gatekeeper's allowlist says what runs there"
	}
	return "only shell tools start processes on this host; remove requires"
}

// requires parses the top-level requires key: a mapping with programs
// (a list of program names), files (a list of absolute paths) and check
// (an argv).
func (p *parser) requires(n *yaml.Node, field string) Requires {
	const want = "a mapping with programs (a list of program names), files (a list of absolute paths) and check (an argv list)"
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "", want, describe(n), "")
		return Requires{}
	}
	var r Requires
	for _, e := range p.mapping(n, field, requiresKs) {
		switch e.key {
		case "programs":
			r.Programs = p.pathList(e.v, e.field, "a list of program names (kubectl) or absolute paths (/opt/tool/bin/tool)", p.program)
		case "files":
			r.Files = p.pathList(e.v, e.field, "a list of absolute paths", p.absFile)
		case "check":
			r.Check = p.check(e.v, e.field)
		}
	}
	return r
}

// pathList parses a list of strings, each checked by one (which reports
// its own problems), without duplicates.
func (p *parser) pathList(n *yaml.Node, field, want string, one func(n *yaml.Node, field string) (string, bool)) []string {
	if n.Kind != yaml.SequenceNode {
		p.add(n, field, "", want, describe(n), listHint(n))
		return nil
	}
	var out []string
	for i, c := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, ok := one(c, f)
		switch {
		case !ok:
		case slices.Contains(out, s):
			p.add(c, f, "duplicate entry", "each entry once", strconv.Quote(s), "")
		default:
			out = append(out, s)
		}
	}
	return out
}

// program checks a program: a bare name, looked up on the PATH of the
// tool's processes, or a clean absolute path.
func (p *parser) program(n *yaml.Node, field string) (string, bool) {
	const want = "a program name like kubectl, or an absolute path like /opt/tool/bin/tool"
	s, ok := p.str(n, field, want, true)
	if !ok {
		return "", false
	}
	switch {
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		hint := "a program name has no spaces; name the program alone"
		if strings.HasPrefix(field, "requires.check") {
			hint = "a program name has no spaces; its arguments are the following words of check"
		}
		p.add(n, field, "not a program name", want, strconv.Quote(s), hint)
	case strings.HasPrefix(s, "/"):
		if path.Clean(s) != s || s == "/" {
			p.add(n, field, "not a clean absolute path", want, strconv.Quote(s), "")
			return "", false
		}
		return s, true
	case strings.Contains(s, "/"):
		p.add(n, field, "relative program path", want, strconv.Quote(s), "a relative path would depend on the daemon's working directory; give a bare name (looked up on the PATH) or an absolute path")
	case s == "." || s == "..":
		p.add(n, field, "not a program name", want, strconv.Quote(s), "")
	default:
		return s, true
	}
	return "", false
}

// absFile checks a file of requires.files: a clean absolute path.
func (p *parser) absFile(n *yaml.Node, field string) (string, bool) {
	const want = "a clean absolute path like /etc/nginx/nginx.conf"
	s, ok := p.str(n, field, want, true)
	if !ok {
		return "", false
	}
	if !path.IsAbs(s) || path.Clean(s) != s {
		hint := ""
		if !path.IsAbs(s) {
			hint = "a relative path would depend on the daemon's working directory"
		}
		p.add(n, field, "not a clean absolute path", want, strconv.Quote(s), hint)
		return "", false
	}
	return s, true
}

// check parses requires.check: a non-empty list of literal words, the
// program first. Scalars are taken as written, as in argv.
func (p *parser) check(n *yaml.Node, field string) []string {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		got := describe(n)
		if n.Kind == yaml.SequenceNode {
			got = "an empty list"
		}
		p.add(n, field, "", "a non-empty argv list, the program first, like [kubectl, version, --client]", got, listHint(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	ok := true
	for i, c := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		if i == 0 {
			s, good := p.program(c, f)
			ok = ok && good
			out = append(out, s)
			continue
		}
		if c.Kind != yaml.ScalarNode || c.Tag == "!!null" {
			p.add(c, f, "", "a word (string)", describe(c), "")
			ok = false
			continue
		}
		out = append(out, c.Value)
	}
	if !ok {
		return nil
	}
	return out
}

// tags parses the top-level tags key: distinct tags (see ValidTag).
func (p *parser) tags(n *yaml.Node, field string) []string {
	const want = "a list of tags (lowercase words of letters, digits and -, like git or read-only)"
	if n.Kind != yaml.SequenceNode {
		p.add(n, field, "", want, describe(n), listHint(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, ok := p.str(c, f, "a tag (a lowercase word of letters, digits and -)", true)
		switch {
		case !ok:
		case !ValidTag(s):
			hint := ""
			if fixed := tagFix(s); fixed != s && ValidTag(fixed) {
				hint = "did you mean " + strconv.Quote(fixed) + "?"
			}
			p.add(c, f, "invalid tag", fmt.Sprintf("lowercase letters, digits and single - between them, at most %d bytes", MaxTagLen), strconv.Quote(s), hint)
		case slices.Contains(out, s):
			p.add(c, f, "duplicate tag", "each tag once", strconv.Quote(s), "")
		default:
			out = append(out, s)
		}
	}
	return out
}

// tagFix is the tag an author probably meant: lowercase, with spaces and
// underscores as '-'.
func tagFix(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == ' ' {
			return '-'
		}
		return unicode.ToLower(r)
	}, strings.TrimSpace(s))
}

// listHint is the hint for a scalar written where a list belongs.
func listHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Value != "" {
		return "write a list: [" + n.Value + "]"
	}
	return ""
}
