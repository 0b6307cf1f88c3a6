package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ParamRules are the per-argument rules of one param
// (constraints.rules.<param> in TOOL.hdlp). Each entry is a Go regular
// expression (RE2 syntax) searched for anywhere in the value, as grep
// does; anchor it with ^ and $ to match the whole value.
//
// Semantics, in this order:
//  1. a value matching any Deny pattern is denied;
//  2. if Allow is not empty, a value matching none of its patterns is
//     denied (Allow is an allowlist, not a shortcut past Confirm);
//  3. a value matching any Confirm pattern needs an approval;
//  4. otherwise the param allows the call.
//
// Only strings are matched directly; numbers and booleans are matched in
// their JSON spelling, an array element by element (the strictest element
// decides), and an object as its canonical JSON. A param that is absent
// from the call is not judged.
type ParamRules struct {
	Allow   []string `json:"allow,omitempty"`
	Confirm []string `json:"confirm,omitempty"`
	Deny    []string `json:"deny,omitempty"`
}

// Shell policy modes, the words of constraints.shell_policy.
const (
	// ShellDefault judges the cmd of an exec tool with DefaultShellPolicy.
	ShellDefault = "default"
	// ShellStrict judges it with StrictShellPolicy.
	ShellStrict = "strict"
	// ShellNone does not judge the command at all: only the param rules
	// and require_confirm apply. Use it only for tools whose params rules
	// already guard the command.
	ShellNone = "none"
)

// Rules is the whole policy of one tool: its per-param rules and, for
// method exec, how its shell command is judged.
//
// A Rules value must be compiled (Compile) before use; Evaluate compiles an
// uncompiled copy itself and denies when that fails. After Compile a Rules
// value is read-only and safe for concurrent use.
type Rules struct {
	// Params maps a param name to its rules.
	Params map[string]ParamRules
	// ShellMode is constraints.shell_policy: "" or "default", "strict" or
	// "none". It matters for method exec only ("" means default there).
	ShellMode string
	// Shell, when not nil, replaces the policy ShellMode names (unless
	// ShellMode is "none"). An operator sets it to override the built-in
	// default, e.g. DefaultShellPolicy() with Commands["kubectl"] = Confirm.
	Shell *ShellPolicy

	compiled map[string]compiledParam
	ok       bool
}

type compiledParam struct {
	allow, confirm, deny []*regexp.Regexp
}

// Compile checks every pattern and the shell mode. Its error is an
// errors.Join naming each bad param, list and pattern.
func (r *Rules) Compile() error {
	var errs []error
	switch r.ShellMode {
	case "", ShellDefault, ShellStrict, ShellNone:
	default:
		errs = append(errs, fmt.Errorf("shell_policy: unknown policy %q (want default, strict or none)", r.ShellMode))
	}
	comp := make(map[string]compiledParam, len(r.Params))
	for _, name := range sortedKeys(r.Params) {
		pr := r.Params[name]
		var c compiledParam
		for _, l := range []struct {
			kind string
			src  []string
			dst  *[]*regexp.Regexp
		}{{"deny", pr.Deny, &c.deny}, {"allow", pr.Allow, &c.allow}, {"confirm", pr.Confirm, &c.confirm}} {
			for i, p := range l.src {
				re, err := regexp.Compile(p)
				if err != nil {
					errs = append(errs, fmt.Errorf("rules.%s.%s[%d]: pattern `%s` is not a valid regular expression: %v", name, l.kind, i, p, err))
					continue
				}
				*l.dst = append(*l.dst, re)
			}
		}
		comp[name] = c
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.compiled, r.ok = comp, true
	return nil
}

// ParseRules builds Rules from the decoded YAML/JSON value of
// constraints.rules (a map of param name to {deny, confirm, allow} lists of
// strings) and the word of constraints.shell_policy, and compiles them.
// Unknown keys and wrong types are errors naming the key.
func ParseRules(rules map[string]any, shellPolicy string) (Rules, error) {
	r := Rules{Params: make(map[string]ParamRules, len(rules)), ShellMode: shellPolicy}
	var errs []error
	for _, name := range sortedKeys(rules) {
		m, ok := rules[name].(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("rules.%s: want a map with keys deny, confirm, allow; got %T", name, rules[name]))
			continue
		}
		var pr ParamRules
		for _, k := range sortedKeys(m) {
			var dst *[]string
			switch k {
			case "deny":
				dst = &pr.Deny
			case "confirm":
				dst = &pr.Confirm
			case "allow":
				dst = &pr.Allow
			default:
				errs = append(errs, fmt.Errorf("rules.%s: unknown key %q (want deny, confirm or allow)", name, k))
				continue
			}
			list, ok := m[k].([]any)
			if !ok {
				errs = append(errs, fmt.Errorf("rules.%s.%s: want a list of patterns; got %T", name, k, m[k]))
				continue
			}
			for i, v := range list {
				s, ok := v.(string)
				if !ok {
					errs = append(errs, fmt.Errorf("rules.%s.%s[%d]: want a string pattern; got %T", name, k, i, v))
					continue
				}
				*dst = append(*dst, s)
			}
		}
		r.Params[name] = pr
	}
	if err := errors.Join(errs...); err != nil {
		return Rules{}, err
	}
	if err := r.Compile(); err != nil {
		return Rules{}, err
	}
	return r, nil
}

// checkParams applies the per-param rules to params, in sorted param order.
func (r *Rules) checkParams(params map[string]any) Verdict {
	v := Verdict{Decision: Allow}
	for _, name := range sortedKeys(r.compiled) {
		val, ok := params[name]
		if !ok || val == nil {
			continue
		}
		c := r.compiled[name]
		for _, s := range flatten(val) {
			v = stricter(v, c.judge(name, s))
		}
	}
	return v
}

func (c compiledParam) judge(name, s string) Verdict {
	for _, re := range c.deny {
		if re.MatchString(s) {
			return Verdict{Deny, fmt.Sprintf("param %s: deny pattern `%s`", name, re), fmt.Sprintf("the value of param %s matches a deny pattern of constraints.rules.%s; no approval can run it", name, name)}
		}
	}
	if len(c.allow) > 0 && !slices.ContainsFunc(c.allow, func(re *regexp.Regexp) bool { return re.MatchString(s) }) {
		pats := make([]string, len(c.allow))
		for i, re := range c.allow {
			pats[i] = "`" + re.String() + "`"
		}
		return Verdict{Deny, fmt.Sprintf("param %s: allow list (%s)", name, strings.Join(pats, ", ")), fmt.Sprintf("the value of param %s matches none of the allow patterns of constraints.rules.%s", name, name)}
	}
	for _, re := range c.confirm {
		if re.MatchString(s) {
			return Verdict{Confirm, fmt.Sprintf("param %s: confirm pattern `%s`", name, re), fmt.Sprintf("the value of param %s matches a confirm pattern of constraints.rules.%s; an approver must confirm the call", name, name)}
		}
	}
	return Verdict{Decision: Allow}
}

// flatten returns the strings a param value is matched as.
func flatten(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, flatten(e)...)
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []string:
		return v
	case fmt.Stringer:
		return []string{v.String()} // json.Number and friends
	}
	b, err := json.Marshal(v)
	if err != nil {
		return []string{fmt.Sprint(v)}
	}
	return []string{string(b)}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
