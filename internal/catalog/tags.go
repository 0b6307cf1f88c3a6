package catalog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolagent/toolagent/internal/hldp"
)

// ParseTagFilter reads a tag filter the way GET /v1/tools?tag= and
// `toolagent list --tag` take it: each value is one tag or a
// comma-separated list of tags, and values may repeat; the result holds
// each tag once, in the order given. A tool matches the filter when it
// carries every tag in it (see FilterTags). A value that is not a tag
// (hldp.ValidTag) is an error naming it; empty items are ignored.
func ParseTagFilter(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimSpace(tag)
			switch {
			case tag == "":
			case !hldp.ValidTag(tag):
				return nil, fmt.Errorf("%q is not a tag; a tag is a lowercase word of letters, digits and - (git, read-only)", tag)
			case !slices.Contains(out, tag):
				out = append(out, tag)
			}
		}
	}
	return out, nil
}

// FilterTags returns the entries whose tool carries every tag in tags, in
// their order; all of them when tags is empty. Entries without a parsed
// tool carry no tags.
func FilterTags(entries []Entry, tags []string) []Entry {
	if len(tags) == 0 {
		return entries
	}
	var out []Entry
	for _, e := range entries {
		if e.Tool != nil && e.Tool.HasTags(tags...) {
			out = append(out, e)
		}
	}
	return out
}
