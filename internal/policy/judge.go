// The judge: one Judge call's state and verdict, parsing a script and
// walking its statements, commands and substitutions, and judging each
// simple command by its name (argv, call).

package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// stdinSrc is what a command reads on standard input, when the policy can
// see it (a here-document, a here-string, echo piped in).
type stdinSrc struct {
	text  string
	known bool
	desc  string // what it is, when not known
}

type judge struct {
	p      *ShellPolicy
	v      Verdict
	src    string // the script whose positions nodes refer to
	depth  int    // scripts inside scripts
	steps  int
	names  []string
	funcs  map[string]bool
	fstack []string
}

func (j *judge) maxBytes() int {
	if j.p.MaxBytes > 0 {
		return j.p.MaxBytes
	}
	return DefaultMaxBytes
}

func (j *judge) maxNesting() int {
	if j.p.MaxNesting > 0 {
		return j.p.MaxNesting
	}
	return DefaultMaxNesting
}

// deny records a verdict that no class mapping can soften.
func (j *judge) deny(rule, reason string) {
	j.v = stricter(j.v, Verdict{Deny, rule, reason})
}

// add records the verdict for subject (e.g. "command `curl`") of class c.
func (j *judge) add(subject string, c Class, phrase string) {
	d, ok := j.p.Classes[c]
	if !ok {
		d = Deny
	}
	if d == Allow {
		return
	}
	reason := classReason[c]
	switch d {
	case Confirm:
		reason += "; an approver must confirm the call before it runs"
	case Deny:
		reason += "; the policy never runs it and no approval can"
	}
	j.v = stricter(j.v, Verdict{d, fmt.Sprintf("shell: %s %s (%s policy: %s)", subject, phrase, j.p.Name, c), reason})
}

func (j *judge) note(name string) {
	if !slices.Contains(j.names, name) && len(j.names) < 64 {
		j.names = append(j.names, name)
	}
}

// script parses src and judges it; stdin is what the script reads.
func (j *judge) script(src string, stdin stdinSrc) {
	if j.depth >= maxScriptDepth {
		j.deny("shell: nested too deeply", fmt.Sprintf("scripts nest more than %d levels deep (sh -c, eval, here-documents); such a command is refused", maxScriptDepth))
		return
	}
	if len(src) > j.maxBytes() {
		j.deny("shell: command too long", fmt.Sprintf("the command is %d bytes, more than the %d the policy judges", len(src), j.maxBytes()))
		return
	}
	if !utf8.ValidString(src) || strings.IndexByte(src, 0) >= 0 {
		j.deny("shell: cannot parse", "the command is not valid UTF-8 text or holds a NUL byte")
		return
	}
	if n := nesting(src); n > j.maxNesting() {
		j.deny("shell: nested too deeply", fmt.Sprintf("brackets nest %d levels deep, more than the %d the policy judges", n, j.maxNesting()))
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		j.deny("shell: cannot parse", fmt.Sprintf("the command is not valid shell syntax (%v); a command the policy cannot read is not run", err))
		return
	}
	prevSrc := j.src
	j.src = src
	j.depth++
	defer func() { j.src = prevSrc; j.depth-- }()
	syntax.Walk(f, func(n syntax.Node) bool {
		if fd, ok := n.(*syntax.FuncDecl); ok && fd.Name != nil {
			j.funcs[fd.Name.Value] = true
		}
		return true
	})
	j.stmts(f.Stmts, stdin)
}

// nesting returns the deepest nesting of ( and { in src, counted without
// regard to quoting (so it can only over-estimate).
func nesting(src string) int {
	depth, max := 0, 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '(', '{':
			depth++
			if depth > max {
				max = depth
			}
		case ')', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return max
}

func (j *judge) stmts(ss []*syntax.Stmt, stdin stdinSrc) {
	for _, s := range ss {
		j.stmt(s, stdin)
	}
}

func (j *judge) stmt(s *syntax.Stmt, stdin stdinSrc) {
	if s == nil {
		return
	}
	for _, r := range s.Redirs {
		stdin = j.redirect(r, stdin)
	}
	j.command(s.Cmd, stdin)
}

func (j *judge) command(cmd syntax.Command, stdin stdinSrc) {
	switch c := cmd.(type) {
	case nil:
	case *syntax.CallExpr:
		j.call(c, stdin)
	case *syntax.BinaryCmd:
		j.stmt(c.X, stdin)
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			j.stmt(c.Y, j.pipeText(c.X))
		} else {
			j.stmt(c.Y, stdin)
		}
	case *syntax.Subshell:
		j.stmts(c.Stmts, stdin)
	case *syntax.Block:
		j.stmts(c.Stmts, stdin)
	case *syntax.IfClause:
		for ; c != nil; c = c.Else {
			j.stmts(c.Cond, stdin)
			j.stmts(c.Then, stdin)
		}
	case *syntax.WhileClause:
		j.stmts(c.Cond, stdin)
		j.stmts(c.Do, stdin)
	case *syntax.ForClause:
		switch l := c.Loop.(type) {
		case *syntax.WordIter:
			j.subst(l)
			if l.Name != nil {
				j.setVar(l.Name.Value, false)
			}
		case *syntax.CStyleLoop:
			j.arith(l.Init)
			j.arith(l.Cond)
			j.arith(l.Post)
		}
		j.stmts(c.Do, stdin)
	case *syntax.CaseClause:
		j.subst(c.Word)
		for _, it := range c.Items {
			for _, w := range it.Patterns {
				j.subst(w)
			}
			j.stmts(it.Stmts, stdin)
		}
	case *syntax.FuncDecl:
		name := ""
		if c.Name != nil {
			name = c.Name.Value
		}
		j.fstack = append(j.fstack, name)
		j.stmt(c.Body, stdin)
		j.fstack = j.fstack[:len(j.fstack)-1]
	case *syntax.ArithmCmd:
		j.arith(c.X)
	case *syntax.TestClause:
		j.test(c.X)
	case *syntax.LetClause:
		for _, x := range c.Exprs {
			j.arith(x)
		}
	case *syntax.DeclClause:
		j.decl(c)
	case *syntax.TimeClause:
		j.stmt(c.Stmt, stdin)
	case *syntax.CoprocClause:
		j.subst(c.Name)
		j.stmt(c.Stmt, stdin)
	case *syntax.TestDecl:
		j.subst(c.Description)
		j.stmt(c.Body, stdin)
	default:
		j.add(fmt.Sprintf("construct %T", cmd), ClassUnknown, "is not a shell construct the policy knows")
	}
}

// subst judges every command and process substitution inside n (a word,
// an arithmetic or test expression, a loop header, ...).
func (j *judge) subst(n syntax.Node) {
	if n == nil {
		return
	}
	if w, ok := n.(*syntax.Word); ok && w == nil {
		return
	}
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst:
			j.stmts(n.Stmts, stdinSrc{desc: "the standard input of a command substitution"})
			return false
		case *syntax.ProcSubst:
			j.stmts(n.Stmts, stdinSrc{desc: "the standard input of a process substitution"})
			return false
		case *syntax.ArithmExp:
			j.arith(n.X)
			return false
		case *syntax.ParamExp:
			if n.Index != nil {
				j.arith(n.Index)
			}
			if n.Slice != nil {
				j.arith(n.Slice.Offset)
				j.arith(n.Slice.Length)
			}
			if n.Exp != nil {
				j.subst(n.Exp.Word)
			}
			if n.Repl != nil {
				j.subst(n.Repl.Orig)
				j.subst(n.Repl.With)
			}
			return false
		}
		return true
	})
}

func (j *judge) call(c *syntax.CallExpr, stdin stdinSrc) {
	for _, a := range c.Assigns {
		j.assign(a, len(c.Args) > 0) // X=1 cmd: cmd gets X in its environment
	}
	for _, w := range c.Args {
		j.subst(w)
	}
	if len(c.Args) == 0 {
		return
	}
	args := make([]arg, len(c.Args))
	for i, w := range c.Args {
		args[i] = j.word(w)
	}
	j.argv(args, stdin)
}

// systemDirs are the directories whose programs are judged by base name.
var systemDirs = map[string]bool{"/bin": true, "/usr/bin": true, "/usr/local/bin": true, "/sbin": true, "/usr/sbin": true, "/usr/local/sbin": true}

func short(s string) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > 60 {
		cut := 57
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + "..."
	}
	return s
}

// lookalike reports the first rune of a command name that is not
// printable ASCII.
func lookalike(name string) (rune, bool) {
	for _, r := range name {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return r, true
		}
	}
	return 0, false
}

// argv judges one simple command given as words.
func (j *judge) argv(args []arg, stdin stdinSrc) {
	j.steps++
	if j.steps > maxSteps {
		j.deny("shell: too many commands", fmt.Sprintf("the command holds more than %d simple commands", maxSteps))
		return
	}
	name := args[0]
	if !name.static || name.pattern {
		j.add(fmt.Sprintf("command `%s`", short(name.s)), ClassDynamic, "is not known until the command runs")
		return
	}
	if r, bad := lookalike(name.s); bad {
		j.add(fmt.Sprintf("command `%s`", short(name.s)), ClassLookalike, fmt.Sprintf("has the character %U %q in its name", r, r))
		return
	}
	base := name.s
	if strings.Contains(base, "/") {
		dir, file := path.Split(base)
		if !systemDirs[path.Clean(dir)] || file == "" {
			j.add(fmt.Sprintf("command `%s`", short(name.s)), ClassUnknown, "runs a program by path outside the system directories")
			return
		}
		base = file
	}
	if slices.Contains(j.fstack, base) {
		j.add(fmt.Sprintf("function `%s`", short(base)), ClassCatastrophic, "calls itself (the fork bomb pattern)")
		return
	}
	c := &call{j: j, name: base, args: args[1:], stdin: stdin}
	if catastrophic(c) {
		return
	}
	if d, ok := j.p.Commands[base]; ok {
		j.note(base)
		if d != Allow {
			j.v = stricter(j.v, Verdict{d, fmt.Sprintf("shell: command `%s` has its own entry (%s policy: commands.%s = %s)", short(base), j.p.Name, base, d), fmt.Sprintf("the operator's policy says %s for %s", d, base)})
		}
		return
	}
	if f, ok := commandTable()[base]; ok {
		j.note(base)
		f(c)
		return
	}
	if j.funcs[base] {
		j.note(base)
		return // a function of the script: its body is judged where it is declared
	}
	j.add(fmt.Sprintf("command `%s`", short(base)), ClassUnknown, "is not on the read-only list")
}

// call is one simple command being classified.
type call struct {
	j     *judge
	name  string
	args  []arg // without the name
	stdin stdinSrc
}

// add records class c for the command, described by phrase.
func (c *call) add(cl Class, phrase string) {
	c.j.add(fmt.Sprintf("command `%s`", short(c.name)), cl, phrase)
}

// addAs is add with a longer subject, e.g. "git push".
func (c *call) addAs(subject string, cl Class, phrase string) {
	c.j.add(fmt.Sprintf("command `%s`", short(subject)), cl, phrase)
}

// inner judges a wrapped command (sudo X, env X, xargs X, find -exec X).
func (c *call) inner(args []arg, stdin stdinSrc) {
	if len(args) == 0 {
		return
	}
	c.j.argv(args, stdin)
}

// script judges a script argument (sh -c S, eval S, trap S).
func (c *call) script(a arg, what string) {
	if !a.static || a.pattern {
		c.add(ClassDynamic, fmt.Sprintf("runs %s that is not known until the command runs (`%s`)", what, short(a.s)))
		return
	}
	c.j.script(a.s, stdinSrc{desc: "the standard input of " + c.name})
}
