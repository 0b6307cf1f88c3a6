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

// Class is what a simple command (or a redirection) does, as far as the
// shell policy is concerned. A ShellPolicy maps each class to a Decision.
type Class string

// The classes a command is sorted into; see POLICY.md for the lists.
const (
	// ClassRead only reads: ls, cat, grep, git log, systemctl status, ...
	ClassRead Class = "read"
	// ClassWrite creates or changes files: cp, mv, tee FILE, sed -i, > FILE.
	ClassWrite Class = "write"
	// ClassDelete deletes files: rm, rmdir, shred, find -delete.
	ClassDelete Class = "delete"
	// ClassPermissions changes permissions or ownership: chmod, chown.
	ClassPermissions Class = "permissions"
	// ClassNetwork reaches the network: curl, wget, ssh, git push.
	ClassNetwork Class = "network"
	// ClassProcess signals or controls processes: kill, pkill.
	ClassProcess Class = "process"
	// ClassSystem changes system state: systemctl restart, reboot, mount.
	ClassSystem Class = "system"
	// ClassPrivilege raises privileges: sudo, su, doas.
	ClassPrivilege Class = "privilege"
	// ClassExec runs code the policy cannot see: a script file, an
	// interpreter (python, perl, awk with system()), a shell reading a pipe.
	ClassExec Class = "exec"
	// ClassEnvironment changes how later commands are found or run:
	// PATH=..., LD_PRELOAD=..., alias.
	ClassEnvironment Class = "environment"
	// ClassDynamic is not known until the command runs: $cmd or $(...) in
	// command position, sh -c "$x", eval "$x", a redirection to $file.
	ClassDynamic Class = "dynamic"
	// ClassLookalike has non-ASCII or control characters in a command
	// name, e.g. a fullwidth ｒｍ or a Cyrillic с: possibly a look-alike.
	ClassLookalike Class = "lookalike"
	// ClassUnknown is a command the policy has no entry for.
	ClassUnknown Class = "unknown"
	// ClassCatastrophic destroys a system: rm -rf /, mkfs /dev/sda,
	// dd of=/dev/sda, a fork bomb, kill -9 -1.
	ClassCatastrophic Class = "catastrophic"
)

// Limits of the default policies.
const (
	// DefaultMaxBytes caps the length of a command: 128 KiB, Linux's
	// limit on one argv element (MAX_ARG_STRLEN), so a longer command
	// could not be passed to sh -c anyway.
	DefaultMaxBytes = 128 << 10
	// DefaultMaxNesting caps the nesting of ( { $( ${ in a command; the
	// parser's work grows with it.
	DefaultMaxNesting = 64
	// maxScriptDepth caps scripts inside scripts (sh -c, eval, here-docs).
	maxScriptDepth = 8
	// maxSteps caps the simple commands judged in one call.
	maxSteps = 1 << 17
)

// ShellPolicy judges shell command lines. It is read-only once built and
// safe for concurrent use; build a changed copy with Clone.
type ShellPolicy struct {
	// Name appears in rules ("default policy: network").
	Name string
	// Classes maps each class to its decision; a class missing here is
	// denied.
	Classes map[Class]Decision
	// Commands overrides the decision for a command by its name (the base
	// name for /bin/x and /usr/bin/x). Catastrophic patterns are checked
	// first and are not overridden; a wrapper overridden here (sudo, env,
	// sh, ...) is no longer looked through.
	Commands map[string]Decision
	// MaxBytes caps the command length; longer is denied (0: DefaultMaxBytes).
	MaxBytes int
	// MaxNesting caps the nesting depth; deeper is denied (0: DefaultMaxNesting).
	MaxNesting int
}

// DefaultShellPolicy is the built-in policy of the shipped shell-exec:
// read-only commands run; anything that writes, deletes, changes
// permissions, signals processes, changes the system, raises privileges,
// reaches the network, runs unseen code or is not known until run time
// needs an approval; catastrophic patterns are denied. POLICY.md lists the
// commands. Each call returns a new value the caller may change.
func DefaultShellPolicy() *ShellPolicy {
	p := &ShellPolicy{Name: ShellDefault, Classes: map[Class]Decision{}, Commands: map[string]Decision{}, MaxBytes: DefaultMaxBytes, MaxNesting: DefaultMaxNesting}
	for _, c := range allClasses {
		p.Classes[c] = Confirm
	}
	p.Classes[ClassRead] = Allow
	p.Classes[ClassCatastrophic] = Deny
	return p
}

// StrictShellPolicy runs read-only commands and denies everything else,
// so no approval can run a writing command through the tool.
func StrictShellPolicy() *ShellPolicy {
	p := DefaultShellPolicy()
	p.Name = ShellStrict
	for c := range p.Classes {
		if c != ClassRead {
			p.Classes[c] = Deny
		}
	}
	return p
}

// ShellPolicyFor returns the built-in policy a shell_policy word names;
// nil for "none". "" means "default".
func ShellPolicyFor(mode string) (*ShellPolicy, error) {
	switch mode {
	case "", ShellDefault:
		return DefaultShellPolicy(), nil
	case ShellStrict:
		return StrictShellPolicy(), nil
	case ShellNone:
		return nil, nil
	}
	return nil, fmt.Errorf("policy: unknown shell_policy %q (want default, strict or none)", mode)
}

// Clone returns a deep copy of p, to change without touching p.
func (p *ShellPolicy) Clone() *ShellPolicy {
	q := *p
	q.Classes = make(map[Class]Decision, len(p.Classes))
	for k, v := range p.Classes {
		q.Classes[k] = v
	}
	q.Commands = make(map[string]Decision, len(p.Commands))
	for k, v := range p.Commands {
		q.Commands[k] = v
	}
	return &q
}

var allClasses = []Class{ClassRead, ClassWrite, ClassDelete, ClassPermissions, ClassNetwork, ClassProcess, ClassSystem, ClassPrivilege, ClassExec, ClassEnvironment, ClassDynamic, ClassLookalike, ClassUnknown, ClassCatastrophic}

// classReason explains each class in the Reason of a verdict.
var classReason = map[Class]string{
	ClassRead:         "it only reads",
	ClassWrite:        "it creates or changes files",
	ClassDelete:       "it deletes files",
	ClassPermissions:  "it changes permissions or ownership",
	ClassNetwork:      "it may send or fetch data over the network",
	ClassProcess:      "it signals or controls other processes",
	ClassSystem:       "it changes the state of the system",
	ClassPrivilege:    "it runs with raised privileges",
	ClassExec:         "it runs code the policy cannot see",
	ClassEnvironment:  "it changes how later commands are found or run",
	ClassDynamic:      "what runs is only known when the command runs, so it cannot be judged beforehand",
	ClassLookalike:    "a command name with non-ASCII or control characters may imitate another command",
	ClassUnknown:      "the policy does not know what it does",
	ClassCatastrophic: "it can destroy the system",
}

// Judge parses cmd as a bash command line and judges every simple command
// in it: pipelines, && || ; lists, subshells, blocks, command and process
// substitutions, function bodies, if/while/for/case, here-documents fed to
// a shell, the scripts of sh -c, eval and trap, the commands of wrappers
// (sudo, env, xargs, timeout, find -exec, ...), and every redirection. The
// verdict is the strictest over all of them and names the command that
// decided it. A command that cannot be parsed, is too long or nests too
// deeply is denied. Judge never runs anything.
func (p *ShellPolicy) Judge(cmd string) Verdict {
	j := &judge{p: p, funcs: map[string]bool{}}
	j.script(cmd, stdinSrc{desc: "the standard input of the call"})
	if j.v.Decision == Allow {
		names := j.names
		if len(names) > 12 {
			names = append(names[:12:12], "...")
		}
		j.v.Rule = fmt.Sprintf("shell: every command is read-only (%s policy)", p.Name)
		if len(names) == 0 {
			j.v.Rule = fmt.Sprintf("shell: the command runs nothing (%s policy)", p.Name)
		}
		j.v.Reason = "judged: " + strings.Join(names, ", ")
	}
	return j.v
}

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

// arg is one word of a simple command.
type arg struct {
	s       string // the value when static, else the source text
	static  bool   // no expansion: the value is known before running
	pattern bool   // unquoted glob, brace or tilde: expands at run time
	lead    string // the static text before the first expansion
	split   bool   // has an unquoted expansion, which may split into words
}

func dynamicArg(s string) arg { return arg{s: s} }

// word resolves w to its value when that is known statically. $'...' is
// decoded as bash does, so $'\x72\x6d' is rm.
func (j *judge) word(w *syntax.Word) arg {
	var b strings.Builder
	a := arg{static: true}
	leading := true
	dyn := func(split bool) {
		if leading {
			a.lead = b.String()
			leading = false
		}
		a.static = false
		a.split = a.split || split
	}
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v, pat := unescape(p.Value)
			if i == 0 && strings.HasPrefix(p.Value, "~") {
				pat = true
			}
			a.pattern = a.pattern || pat
			b.WriteString(v)
		case *syntax.SglQuoted:
			if p.Dollar {
				b.WriteString(ansiC(p.Value))
				continue
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar { // $"...": translated at run time
				dyn(false)
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					dyn(false)
					continue
				}
				b.WriteString(unescapeDbl(l.Value))
			}
		default:
			dyn(true)
		}
	}
	if !a.static {
		a.s = j.text(w)
		return a
	}
	a.s = b.String()
	a.lead = a.s
	return a
}

// ansiC decodes the body of a $'...' string as bash does.
func ansiC(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	num := func(i, max, base int) (int, int) { // value and digits read at s[i:]
		v, n := 0, 0
		for ; n < max && i+n < len(s); n++ {
			d := strings.IndexByte("0123456789abcdef", byte(unicode.ToLower(rune(s[i+n]))))
			if d < 0 || d >= base {
				break
			}
			v = v*base + d
		}
		return v, n
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'e', 'E':
			b.WriteByte(27)
		case 'f':
			b.WriteByte(12)
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte(11)
		case '\\', '\'', '"', '?':
			b.WriteByte(c)
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(byte(unicode.ToUpper(rune(s[i]))) & 0x1f)
			}
		case 'x', 'u', 'U':
			max := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			v, n := num(i+1, max, 16)
			if n == 0 {
				b.WriteByte('\\')
				b.WriteByte(c)
				continue
			}
			i += n
			if c == 'x' {
				b.WriteByte(byte(v))
			} else {
				b.WriteRune(rune(v))
			}
		default:
			if c >= '0' && c <= '7' {
				v, n := num(i, 3, 8)
				i += n - 1
				b.WriteByte(byte(v))
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	out := b.String()
	if k := strings.IndexByte(out, 0); k >= 0 {
		out = out[:k] // bash ends the string at a NUL
	}
	return out
}

// text is the source text of n, for messages.
func (j *judge) text(n syntax.Node) string {
	s, e := int(n.Pos().Offset()), int(n.End().Offset())
	if s < 0 || e > len(j.src) || s > e {
		return "?"
	}
	return j.src[s:e]
}

// unescape removes the backslashes of an unquoted literal and reports
// whether it holds an unescaped glob or brace expansion.
func unescape(s string) (string, bool) {
	if !strings.ContainsAny(s, `\*?[{`) {
		return s, false
	}
	var b strings.Builder
	pat := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			continue
		case c == '*' || c == '?' || c == '[' && strings.Contains(s[i+1:], "]"):
			pat = true
		case c == '{' && (strings.Contains(s[i:], ",") || strings.Contains(s[i:], "..")) && strings.Contains(s[i:], "}"):
			pat = true
		}
		b.WriteByte(c)
	}
	return b.String(), pat
}

// unescapeDbl removes the backslashes that escape inside double quotes.
func unescapeDbl(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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

// pipeText is what the left side of a pipe writes, when it is an echo or
// printf of static words; otherwise unknown.
func (j *judge) pipeText(s *syntax.Stmt) stdinSrc {
	unknown := stdinSrc{desc: "a pipe"}
	ce, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(ce.Args) < 1 || len(s.Redirs) > 0 {
		return unknown
	}
	args := make([]string, 0, len(ce.Args))
	for _, w := range ce.Args {
		a := j.word(w)
		if !a.static || a.pattern {
			return unknown
		}
		args = append(args, a.s)
	}
	switch args[0] {
	case "echo":
		if len(args) > 1 && strings.HasPrefix(args[1], "-") {
			return unknown
		}
		return stdinSrc{text: strings.Join(args[1:], " ") + "\n", known: true}
	case "printf":
		if len(args) == 2 && !strings.ContainsAny(args[1], `%\`) {
			return stdinSrc{text: args[1], known: true}
		}
	}
	return unknown
}

// redirect judges r and returns the standard input the command gets.
func (j *judge) redirect(r *syntax.Redirect, stdin stdinSrc) stdinSrc {
	j.subst(r.Word)
	if r.Hdoc != nil {
		j.subst(r.Hdoc)
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		if r.Hdoc == nil {
			return stdinSrc{text: "", known: true}
		}
		if a := j.word(r.Hdoc); a.static {
			return stdinSrc{text: rawLits(r.Hdoc), known: true}
		}
		return stdinSrc{desc: "a here-document with expansions"}
	case syntax.WordHdoc:
		if a := j.word(r.Word); a.static && !a.pattern {
			return stdinSrc{text: a.s + "\n", known: true}
		}
		return stdinSrc{desc: "a here-string with expansions"}
	case syntax.RdrIn, syntax.DplIn:
		if r.Op == syntax.DplIn {
			return stdinSrc{desc: "a duplicated file descriptor"}
		}
		return stdinSrc{desc: "the file " + short(j.text(r.Word))}
	case syntax.DplOut:
		a := j.word(r.Word)
		if a.static && (a.s == "-" || isDigits(a.s)) {
			return stdin
		}
	}
	// Every other operator opens its target for writing.
	a := j.word(r.Word)
	subject := fmt.Sprintf("redirection `%s%s`", r.Op, short(a.s))
	switch {
	case !a.static || a.pattern:
		j.add(subject, ClassDynamic, "writes to a file not known until the command runs")
	case safeSink(a.s):
	case device(a.s):
		j.add(subject, ClassCatastrophic, "writes straight to a device")
	default:
		j.add(subject, ClassWrite, "writes to a file")
	}
	return stdin
}

// rawLits joins the literal parts of a here-document body.
func rawLits(w *syntax.Word) string {
	var b strings.Builder
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok {
			b.WriteString(l.Value)
		}
	}
	return b.String()
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// safeSink reports the files writing to which changes nothing.
func safeSink(s string) bool {
	switch s {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/full", "/dev/zero":
		return true
	}
	return strings.HasPrefix(s, "/dev/fd/") && isDigits(strings.TrimPrefix(s, "/dev/fd/"))
}

// device reports a path under /dev that is not a harmless sink: a disk,
// memory, a port.
func device(s string) bool {
	s = path.Clean(s)
	if !strings.HasPrefix(s, "/dev/") || safeSink(s) {
		return false
	}
	switch s {
	case "/dev/random", "/dev/urandom", "/dev/stdin":
		return false
	}
	return !strings.HasPrefix(s, "/dev/shm/") && !strings.HasPrefix(s, "/dev/pts/")
}
