package main

import (
	"fmt"
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/toolagent/toolagent/internal/catalog"
)

// Profile is a named MCP surface of the config (profiles: NAME: {tools,
// tags}): the tools a client of /mcp/NAME or `toolagent mcp --profile
// NAME` sees, intersected with its token's scope. Tools are name globs,
// tags tool tags; a tool is in the profile when it matches one glob (or
// there are none) and carries one of the tags (or there are none).
type Profile struct {
	Tools []string `yaml:"tools"`
	Tags  []string `yaml:"tags"`
}

var profileName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

func (p Profile) scope() catalog.Scope { return catalog.Scope{Tools: p.Tools, Tags: p.Tags} }

// UnmarshalYAML decodes a profile strictly: unknown keys are errors, and
// a profile that names nothing would be every tool, so it is refused.
func (p *Profile) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping {tools: [GLOB...], tags: [TAG...]}", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var dst *[]string
		switch k.Value {
		case "tools":
			dst = &p.Tools
		case "tags":
			dst = &p.Tags
		default:
			return fmt.Errorf("line %d: unknown key %q; want tools or tags", k.Line, k.Value)
		}
		if err := v.Decode(dst); err != nil {
			return fmt.Errorf("line %d: %s: want a list of strings", v.Line, k.Value)
		}
	}
	if len(p.Tools) == 0 && len(p.Tags) == 0 {
		return fmt.Errorf("line %d: a profile names its tools, its tags or both; an empty one would be every tool", n.Line)
	}
	return nil
}
