// How the judge treats variables: which are sensitive or harmless to
// set or export, assignments, declare and its kin, and the arithmetic and
// test expressions that bash expands again.

package policy

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// sensitiveVars change how later commands are found or run, even when
// they are not exported (or are exported already).
var sensitiveVars = map[string]bool{
	"PATH": true, "IFS": true, "ENV": true, "BASH_ENV": true, "SHELLOPTS": true, "BASHOPTS": true,
	"PS0": true, "PS1": true, "PS2": true, "PS3": true, "PS4": true, "PROMPT_COMMAND": true, "HOME": true,
	"PAGER": true, "EDITOR": true, "VISUAL": true, "BROWSER": true, "LESS": true, "LESSOPEN": true,
	"LESSCLOSE": true, "LESSKEY": true, "LESSKEYIN": true, "MANPAGER": true, "MANOPT": true,
	"SYSTEMD_PAGER": true, "SYSTEMD_EDITOR": true, "SYSTEMD_LESS": true, "SSH_ASKPASS": true,
	"PYTHONPATH": true, "PYTHONSTARTUP": true, "PYTHONHOME": true, "PERL5OPT": true, "PERL5LIB": true,
	"PERLLIB": true, "NODE_OPTIONS": true, "NODE_PATH": true, "RUBYOPT": true, "RUBYLIB": true,
	"CDPATH": true, "GLOBIGNORE": true, "EXECIGNORE": true, "BASH_CMDS": true, "BASH_ALIASES": true,
	"BASH_COMPAT": true, "BASH_XTRACEFD": true, "BASH_LOADABLES_PATH": true, "HISTFILE": true,
	"INPUTRC": true, "TMPDIR": true, "POSIXLY_CORRECT": true,
}

// sensitivePrefixes start the names of whole families of such variables.
var sensitivePrefixes = []string{"LD_", "GIT_", "BASH_FUNC_", "DYLD_", "PYTHON", "PERL", "RUBY", "NODE_", "LESS", "npm_config_", "SUDO_"}

func sensitiveVar(name string) bool {
	if sensitiveVars[name] {
		return true
	}
	for _, p := range sensitivePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// harmlessVars may be exported to a program (X=1 cmd, env X=1 cmd, export
// X=1): they only change how it formats its output. Any other exported
// variable may change what a program does (many read their own variables:
// GIT_*, LESSOPEN, PAGER, ...), so it makes the command not read.
var harmlessVars = map[string]bool{
	"LANG": true, "LANGUAGE": true, "LC_ALL": true, "TZ": true, "TERM": true, "COLUMNS": true, "LINES": true,
	"NO_COLOR": true, "CLICOLOR": true, "COLORTERM": true, "TIME_STYLE": true, "QUOTING_STYLE": true,
	"BLOCK_SIZE": true, "BLOCKSIZE": true, "DF_BLOCK_SIZE": true, "DU_BLOCK_SIZE": true, "LS_BLOCK_SIZE": true,
	"LS_COLORS": true, "GREP_COLORS": true,
}

func harmlessVar(name string) bool {
	return harmlessVars[name] || strings.HasPrefix(name, "LC_") && !strings.ContainsAny(name, "[")
}

// setVar judges a command that sets the variable name (a static name,
// possibly with a subscript: a[1]). exported is whether the value reaches
// the environment of programs.
func (j *judge) setVar(name string, exported bool) {
	base, sub, hasSub := strings.Cut(name, "[")
	if hasSub && strings.ContainsAny(sub, "$`") {
		j.add(fmt.Sprintf("variable `%s`", short(name)), ClassDynamic, "has an array subscript that bash expands when it sets the variable, running any command substitution in it")
		return
	}
	switch {
	case sensitiveVar(base):
		j.add(fmt.Sprintf("assignment `%s=`", short(base)), ClassEnvironment, "changes how later commands are found or run")
	case exported && !harmlessVar(base):
		j.add(fmt.Sprintf("assignment `%s=`", short(base)), ClassEnvironment, "exports a variable the policy does not know to be harmless, and programs read their own variables")
	}
}

// reEvaluated reports a static string holding an array subscript with an
// expansion: bash expands it again when the value is used in arithmetic
// or as a variable name (x='a[$(cmd)]'; (( x ))).
func reEvaluated(s string) bool {
	return strings.Contains(s, "[") && strings.ContainsAny(s, "$`")
}

func (j *judge) assign(a *syntax.Assign, exported bool) {
	if a == nil {
		return
	}
	j.subst(a.Value)
	if a.Array != nil {
		j.subst(a.Array)
	}
	if a.Index != nil {
		j.arith(a.Index)
	}
	if a.Name == nil {
		return
	}
	if a.Value != nil {
		if v := j.word(a.Value); v.static && reEvaluated(v.s) {
			j.add(fmt.Sprintf("assignment `%s=`", short(a.Name.Value)), ClassDynamic, "stores an array subscript with an expansion, which bash runs when the value is used in arithmetic")
		}
	}
	j.setVar(a.Name.Value, exported)
}

// arith judges an arithmetic expression: its command substitutions, and
// quoted strings in it that bash expands again (a['$(cmd)']).
func (j *judge) arith(x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	j.subst(x)
	syntax.Walk(x, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return false
		case *syntax.SglQuoted:
			if strings.ContainsAny(n.Value, "$`") {
				j.add(fmt.Sprintf("arithmetic `%s`", short(n.Value)), ClassDynamic, "holds a string that bash expands again in arithmetic")
			}
		case *syntax.Lit:
			if strings.ContainsAny(n.Value, "$`") {
				j.add(fmt.Sprintf("arithmetic `%s`", short(n.Value)), ClassDynamic, "holds a string that bash expands again in arithmetic")
			}
		}
		return true
	})
}

// test judges a [[ ]] expression: -v NAME and the operands of -eq, -lt,
// ... are evaluated by bash again (array subscripts, arithmetic).
func (j *judge) test(x syntax.TestExpr) {
	j.subst(x)
	syntax.Walk(x, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				if w, ok := n.X.(*syntax.Word); ok {
					j.varRef(j.word(w))
				}
			}
		case *syntax.BinaryTest:
			switch n.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				for _, o := range []syntax.TestExpr{n.X, n.Y} {
					if w, ok := o.(*syntax.Word); ok {
						if a := j.word(w); a.static && strings.ContainsAny(a.s, "$`") {
							j.add(fmt.Sprintf("test operand `%s`", short(a.s)), ClassDynamic, "is evaluated as arithmetic, which expands it again")
						}
					}
				}
			}
		}
		return true
	})
}

// varRef judges a word a builtin takes as a variable name to read or
// unset (test -v NAME, unset NAME): a subscript with an expansion runs.
func (j *judge) varRef(a arg) {
	switch {
	case !a.static:
		j.add(fmt.Sprintf("variable name `%s`", short(a.s)), ClassDynamic, "is a variable name not known until the command runs, and bash expands a subscript in it")
	case reEvaluated(a.s):
		j.add(fmt.Sprintf("variable `%s`", short(a.s)), ClassDynamic, "has an array subscript that bash expands, running any command substitution in it")
	}
}

// decl judges declare, local, export, readonly and typeset: the
// variables they set, whether they export them, and namerefs (-n).
func (j *judge) decl(c *syntax.DeclClause) {
	exported := c.Variant != nil && c.Variant.Value == "export"
	nameref := false
	for _, a := range c.Args {
		if !a.Naked || a.Value == nil {
			continue
		}
		if v := j.word(a.Value); v.static && len(v.s) > 1 && v.s[0] == '-' {
			exported = exported || strings.Contains(v.s, "x")
			nameref = nameref || strings.Contains(v.s, "n")
		}
	}
	for _, a := range c.Args {
		switch {
		case a.Naked && a.Value != nil:
			v := j.word(a.Value)
			j.subst(a.Value)
			switch {
			case !v.static:
				j.add(fmt.Sprintf("%s `%s`", declName(c), short(v.s)), ClassDynamic, "declares a variable whose name is not known until the command runs")
			case len(v.s) > 0 && (v.s[0] == '-' || v.s[0] == '+'):
			default:
				j.declText(v.s, exported)
			}
		case a.Naked && a.Name != nil:
			j.setVar(a.Name.Value, exported)
		default:
			j.assign(a, exported)
			if nameref && a.Value != nil {
				if v := j.word(a.Value); v.static {
					j.setVar(v.s, exported) // the variable the reference stands for
				} else {
					j.add(fmt.Sprintf("nameref `%s`", short(v.s)), ClassDynamic, "refers to a variable not known until the command runs")
				}
			}
		}
	}
}

func declName(c *syntax.DeclClause) string {
	if c.Variant != nil {
		return c.Variant.Value
	}
	return "declare"
}

// declText judges a quoted "NAME=VALUE" argument of declare and its kin,
// which bash parses as an assignment after quote removal.
func (j *judge) declText(s string, exported bool) {
	name, val, _ := strings.Cut(s, "=")
	if strings.HasPrefix(val, "(") {
		j.add(fmt.Sprintf("declaration `%s`", short(s)), ClassDynamic, "is a compound assignment in a string, which bash parses and expands again")
		return
	}
	j.setVar(strings.TrimSuffix(name, "+"), exported)
}
