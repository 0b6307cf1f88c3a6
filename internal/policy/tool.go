package policy

import (
	"github.com/toolagent/toolagent/internal/hldp"
)

// ForTool returns the Rules of t: its constraints.rules and its
// constraints.shell_policy (absent means the default policy for method
// exec: secure by default). The rules are compiled; when they do not
// compile (only possible for a Tool built by hand, since hldp.Parse
// rejects bad patterns), the uncompiled Rules are returned and Evaluate
// and Recheck deny every call, naming the bad pattern.
//
// shell, when not nil, is the operator's replacement for the built-in
// default shell policy. It applies to tools whose shell_policy is absent
// or "default" only: a tool that asks for "strict" keeps the strict
// policy and "none" stays none, so an operator's override never weakens
// what an author asked for. Dispatch, the shell executor and the
// gatekeeper server must be given the same override, or the later checks
// refuse what the first allowed (they fail closed, never open).
func ForTool(t *hldp.Tool, shell *ShellPolicy) Rules {
	if t == nil {
		return Rules{}
	}
	r := Rules{ShellMode: t.Constraints.ShellPolicy}
	if len(t.Constraints.Rules) > 0 {
		r.Params = make(map[string]ParamRules, len(t.Constraints.Rules))
		for name, ar := range t.Constraints.Rules {
			r.Params[name] = ParamRules{Allow: ar.Allow, Confirm: ar.Confirm, Deny: ar.Deny}
		}
	}
	if shell != nil && (r.ShellMode == "" || r.ShellMode == ShellDefault) {
		r.Shell = shell
	}
	_ = r.Compile() // on failure r stays uncompiled and Evaluate denies with the error
	return r
}
