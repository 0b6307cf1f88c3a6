package policy

import (
	"fmt"

	"github.com/toolagent/toolagent/internal/hldp"
)

// CmdParam is the param whose value an exec tool runs under
// /bin/bash -p -c (the dialect the shell policy parses), and which the
// shell policy judges.
const CmdParam = "cmd"

// MethodExec is the method whose cmd param is a shell command line.
const MethodExec = "exec"

// Evaluate judges one call of t with validated params under rules: the
// per-param rules, then (for method exec) the shell policy over params
// "cmd", then constraints.require_confirm. The verdict is the strictest of
// them; on a tie the first in that order names the rule. Rules that do not
// compile deny the call (fail closed). Evaluate never runs anything and is
// safe for concurrent use.
func Evaluate(t *hldp.Tool, params map[string]any, rules Rules) Verdict {
	if t == nil {
		return Verdict{Deny, "policy: no tool", "there is no tool definition to judge the call against"}
	}
	if !rules.ok {
		if err := rules.Compile(); err != nil {
			return Verdict{Deny, "policy: invalid rules", fmt.Sprintf("the rules of tool %s do not compile, so nothing runs: %v", t.Name, err)}
		}
	}
	const none = "policy: no rule holds the call back"
	v := Verdict{Allow, none, ""}
	v = stricter(v, rules.checkParams(params))
	if t.Method == MethodExec && rules.ShellMode != ShellNone {
		sp := rules.Shell
		if sp == nil {
			var err error
			if sp, err = ShellPolicyFor(rules.ShellMode); err != nil {
				return Verdict{Deny, "policy: invalid rules", err.Error()}
			}
		}
		cmd, ok := params[CmdParam].(string)
		if !ok {
			return stricter(v, Verdict{Deny, "shell: no command", fmt.Sprintf("tool %s has method exec but param %s is missing or not a string", t.Name, CmdParam)})
		}
		sv := sp.Judge(cmd)
		if v.Decision == Allow && sv.Decision == Allow {
			v = sv // name what the shell policy judged
		}
		v = stricter(v, sv)
	}
	if t.Constraints.RequireConfirm {
		v = stricter(v, Verdict{Confirm, "constraints.require_confirm: true", fmt.Sprintf("tool %s declares that every call needs an approval", t.Name)})
	}
	if v.Decision == Allow && v.Rule == none {
		v.Reason = fmt.Sprintf("no rule of tool %s applies to these params", t.Name)
	}
	return v
}

// Recheck is the defence-in-depth gate: call it right before starting the
// process (the shell executor, the gatekeeper) with the same tool, params
// and rules dispatch used. It returns a *RefusedError when the verdict is
// Deny, or Confirm and approved is false; nil means the process may start.
// approved must be true only when dispatch claimed an approval bound to
// exactly these params.
func Recheck(t *hldp.Tool, params map[string]any, rules Rules, approved bool) error {
	return refuse(Evaluate(t, params, rules), approved)
}

// CheckCommand is Recheck for a bare command line, for the gatekeeper
// server, which receives a command but no tool definition. A nil policy
// means the default one.
func CheckCommand(cmd string, p *ShellPolicy, approved bool) error {
	if p == nil {
		p = DefaultShellPolicy()
	}
	return refuse(p.Judge(cmd), approved)
}

func refuse(v Verdict, approved bool) error {
	switch {
	case v.Decision == Deny:
		return &RefusedError{Verdict: v}
	case v.Decision == Confirm && !approved:
		return &RefusedError{Verdict: v, Unapproved: true}
	}
	return nil
}
