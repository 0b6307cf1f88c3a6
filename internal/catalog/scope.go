package catalog

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/toolagent/toolagent/internal/hldp"
)

// Scope narrows the catalog a caller sees and calls: tool name globs
// (path.Match patterns, e.g. deploy-*) and tags. A tool is in the scope
// when its name matches one of Tools (or Tools is empty) and it carries
// one of Tags (or Tags is empty); the zero Scope holds every tool. A
// scope names what it grants, never what it withholds.
type Scope struct {
	Tools []string `json:"tools,omitempty" yaml:"tools"`
	Tags  []string `json:"tags,omitempty" yaml:"tags"`
}

// Check reports the first malformed pattern or tag of s, naming it.
func (s Scope) Check() error {
	for _, g := range s.Tools {
		if g == "" {
			return fmt.Errorf("tools: an empty pattern")
		}
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("tools: %q is not a name pattern (want letters, digits, -, and * ? [...] as in path.Match): %v", g, err)
		}
	}
	for _, t := range s.Tags {
		if !hldp.ValidTag(t) {
			return fmt.Errorf("tags: %q is not a tag; a tag is a lowercase word of letters, digits and - (git, read-only)", t)
		}
	}
	return nil
}

// IsZero reports whether s holds every tool.
func (s Scope) IsZero() bool { return len(s.Tools) == 0 && len(s.Tags) == 0 }

// Allows reports whether the tool named name, with tool t (nil when its
// definition does not load: it then carries no tags), is in s.
func (s Scope) Allows(name string, t *hldp.Tool) bool {
	if len(s.Tools) > 0 && !slices.ContainsFunc(s.Tools, func(g string) bool {
		ok, _ := path.Match(g, name)
		return ok
	}) {
		return false
	}
	if len(s.Tags) > 0 && (t == nil || !slices.ContainsFunc(s.Tags, func(tag string) bool { return t.HasTags(tag) })) {
		return false
	}
	return true
}

// String writes s the way a token's scope is written: tools=a|b:tags=c.
func (s Scope) String() string {
	var parts []string
	if len(s.Tools) > 0 {
		parts = append(parts, "tools="+strings.Join(s.Tools, "|"))
	}
	if len(s.Tags) > 0 {
		parts = append(parts, "tags="+strings.Join(s.Tags, "|"))
	}
	return strings.Join(parts, ":")
}

// Surface is what one caller may see: the intersection of scopes (a
// token's and a profile's); a tool is on it when every scope allows it.
// The nil Surface holds every tool.
type Surface []Scope

// With returns the surface narrowed by s as well (a zero s narrows
// nothing).
func (sf Surface) With(s Scope) Surface {
	if s.IsZero() {
		return sf
	}
	return append(slices.Clip(sf), s)
}

// Allows reports whether the tool named name (tool t) is on the surface.
func (sf Surface) Allows(name string, t *hldp.Tool) bool {
	for _, s := range sf {
		if !s.Allows(name, t) {
			return false
		}
	}
	return true
}

// AllowsEntry is Allows for a catalog entry.
func (sf Surface) AllowsEntry(e Entry) bool { return sf.Allows(e.Name, e.Tool) }

// Filter returns the entries on the surface, in their order.
func (sf Surface) Filter(entries []Entry) []Entry {
	if len(sf) == 0 {
		return entries
	}
	out := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if sf.AllowsEntry(e) {
			out = append(out, e)
		}
	}
	return out
}

// Key identifies the surface (equal surfaces, equal keys), for caching
// what is built per surface.
func (sf Surface) Key() string {
	parts := make([]string, len(sf))
	for i, s := range sf {
		parts[i] = s.String()
	}
	return strings.Join(parts, " & ")
}

// ParseScope reads a scope written as in a token entry: one or more
// fields separated by ':', each tools=GLOB|GLOB... or tags=TAG|TAG...
func ParseScope(text string) (Scope, error) {
	var s Scope
	for _, field := range strings.Split(text, ":") {
		k, v, ok := strings.Cut(field, "=")
		if !ok || v == "" {
			return Scope{}, fmt.Errorf("scope %q: want tools=GLOB|GLOB... and/or tags=TAG|TAG..., separated by ':'", field)
		}
		items := strings.Split(v, "|")
		switch k {
		case "tools":
			s.Tools = append(s.Tools, items...)
		case "tags":
			s.Tags = append(s.Tags, items...)
		default:
			return Scope{}, fmt.Errorf("scope %q: unknown key %q; want tools or tags", field, k)
		}
	}
	if err := s.Check(); err != nil {
		return Scope{}, fmt.Errorf("scope: %w", err)
	}
	return s, nil
}
