// Parsing the constraints section: timeout, output cap and keep,
// confirmation, concurrency, shell policy and the per-argument rules
// (allow, confirm, deny patterns), whose params are checked against
// params_schema.

package hldp

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

func (p *parser) constraints(n *yaml.Node, field string, c *Constraints) {
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "", "a mapping with "+strings.Join(constraintKs, ", "), describe(n), "")
		return
	}
	for _, e := range p.mapping(n, field, constraintKs) {
		switch e.key {
		case "timeout_ms":
			const want = "integer milliseconds > 0 and <= 3600000"
			if v, ok := p.integer(e.v, e.field, want); ok {
				if v <= 0 || v > MaxTimeout.Milliseconds() {
					p.add(e.v, e.field, "out of range", want, describe(e.v), "")
				} else {
					c.Timeout = time.Duration(v) * time.Millisecond
				}
			}
		case "max_output_bytes":
			want := fmt.Sprintf("integer bytes > 0 and <= %d", MaxOutputBytesLimit)
			if v, ok := p.integer(e.v, e.field, want); ok {
				if v <= 0 || v > MaxOutputBytesLimit {
					p.add(e.v, e.field, "out of range", want, describe(e.v), "")
				} else {
					c.MaxOutputBytes = v
				}
			}
		case "output":
			if e.v.Kind != yaml.MappingNode {
				p.add(e.v, e.field, "", "a mapping with keep", describe(e.v), "")
				continue
			}
			for _, o := range p.mapping(e.v, e.field, outputKs) {
				want := "one of " + strings.Join(OutputKeeps, ", ")
				if s, ok := p.str(o.v, o.field, want, true); ok {
					if !slices.Contains(OutputKeeps, s) {
						p.add(o.v, o.field, "unknown output keep", want, describe(o.v), didYouMean(s, OutputKeeps))
					} else {
						c.OutputKeep = s
					}
				}
			}
		case "require_confirm":
			c.RequireConfirm, _ = p.boolean(e.v, e.field)
		case "max_concurrency":
			const want = "integer >= 0 (0 = no cap)"
			if v, ok := p.integer(e.v, e.field, want); ok {
				if v < 0 || v > math.MaxInt32 {
					p.add(e.v, e.field, "out of range", want, describe(e.v), "")
				} else {
					c.MaxConcurrency = int(v)
				}
			}
		case "rules":
			c.Rules = p.rules(e.v, e.field)
		case "shell_policy":
			want := "one of " + strings.Join(ShellPolicies, ", ")
			if s, ok := p.str(e.v, e.field, want, true); ok {
				if !slices.Contains(ShellPolicies, s) {
					p.add(e.v, e.field, "unknown shell policy", want, describe(e.v), didYouMean(s, ShellPolicies))
				} else {
					c.ShellPolicy = s
					p.shellPolicy = &e
				}
			}
		}
	}
}

// rules parses constraints.rules: a mapping of param name to a mapping
// with allow, confirm and deny lists of Go regular expressions. Param
// names are checked against params_schema later (checkRules).
func (p *parser) rules(n *yaml.Node, field string) map[string]ArgRules {
	const want = "a mapping of param name to { allow: [...], confirm: [...], deny: [...] }"
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "", want, describe(n), "")
		return nil
	}
	out := map[string]ArgRules{}
	for _, e := range p.mapping(n, field, nil) {
		p.ruleKeys = append(p.ruleKeys, e)
		if e.v.Kind != yaml.MappingNode {
			p.add(e.v, e.field, "", "a mapping with allow, confirm, deny (lists of regular expressions)", describe(e.v), "")
			continue
		}
		var r ArgRules
		for _, le := range p.mapping(e.v, e.field, ruleKeys) {
			pats := p.patterns(le.v, le.field)
			switch le.key {
			case "allow":
				r.Allow = pats
			case "confirm":
				r.Confirm = pats
			case "deny":
				r.Deny = pats
			}
		}
		out[e.key] = r
	}
	return out
}

// patterns parses a list of Go regular expressions, reporting each one
// that does not compile.
func (p *parser) patterns(n *yaml.Node, field string) []string {
	if n.Kind != yaml.SequenceNode {
		p.add(n, field, "", "a list of regular expressions (Go RE2 syntax)", describe(n), quoteHint(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, ok := p.str(c, f, "a regular expression string (Go RE2 syntax)", true)
		if !ok {
			continue
		}
		if _, err := regexp.Compile(s); err != nil {
			p.add(c, f, "invalid regular expression", "Go RE2 syntax", strconv.Quote(s), strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			continue
		}
		out = append(out, s)
	}
	return out
}

// checkRules reports the keys of constraints.rules that name no declared
// param: a rule on a misspelt param would silently guard nothing.
func (p *parser) checkRules(t *Tool, byKey map[string]entry) {
	if _, ok := byKey["params_schema"]; !ok {
		return // the missing params_schema is already reported
	}
	names := make([]string, len(t.Params))
	for i, pr := range t.Params {
		names[i] = pr.Name
	}
	for _, e := range p.ruleKeys {
		if !slices.Contains(names, e.key) {
			want := "a param declared in params_schema"
			if len(names) > 0 {
				want += " (" + strings.Join(names, ", ") + ")"
			}
			p.add(e.k, e.field, "rule for an undeclared param", want, strconv.Quote(e.key), didYouMean(e.key, names))
		}
	}
}
