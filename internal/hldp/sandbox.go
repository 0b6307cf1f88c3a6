// Parsing the top-level sandbox key.

package hldp

import (
	"fmt"
	"path"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// sandboxKs are the keys of a sandbox mapping.
var sandboxKs = []string{"write", "network"}

// sandbox parses the top-level sandbox key: the word none, or a mapping
// with write (a list of absolute paths) and network (a boolean).
func (p *parser) sandbox(n *yaml.Node, field string) Sandbox {
	const want = "none, or a mapping with write (a list of absolute paths or ${files_root}) and network (true or false)"
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		if n.Value == SandboxNone {
			return Sandbox{None: true}
		}
		p.add(n, field, "", want, describe(n), didYouMean(n.Value, []string{SandboxNone}))
		return Sandbox{}
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "", want, describe(n), "")
		return Sandbox{}
	}
	var sb Sandbox
	for _, e := range p.mapping(n, field, sandboxKs) {
		switch e.key {
		case "network":
			sb.Network, _ = p.boolean(e.v, e.field)
		case "write":
			if e.v.Kind != yaml.SequenceNode {
				p.add(e.v, e.field, "", "a list of absolute paths", describe(e.v), "")
				continue
			}
			for i, w := range e.v.Content {
				f := fmt.Sprintf("%s[%d]", e.field, i)
				s, ok := p.str(w, f, "an absolute path", true)
				if !ok {
					continue
				}
				switch {
				case s == SandboxFilesRoot:
					if slices.Contains(sb.Write, s) {
						p.add(w, f, "duplicate path", "each path once", strconv.Quote(s), "")
					} else {
						sb.Write = append(sb.Write, s)
					}
				case !path.IsAbs(s) || path.Clean(s) != s:
					p.add(w, f, "not a clean absolute path", "an absolute path without . or .. or a trailing /, like /srv/reports, or ${files_root}", strconv.Quote(s), "")
				case s == "/":
					p.add(w, f, "the whole filesystem cannot be granted", "a directory or file below /", strconv.Quote(s), "")
				case slices.Contains(sb.Write, s):
					p.add(w, f, "duplicate path", "each path once", strconv.Quote(s), "")
				default:
					sb.Write = append(sb.Write, s)
				}
			}
		}
	}
	return sb
}
