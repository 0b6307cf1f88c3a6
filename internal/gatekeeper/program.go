package gatekeeper

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/toolagent/toolagent/internal/proc"
)

// program is what a request will run, as far as the server can tell
// before it starts: argv[0] of an argv request, or the command name of a
// cmd that is exactly one plain simple command.
type program struct {
	// name is argv[0], or the command name as written in cmd; "" when cmd
	// is not one plain simple command (notSimple says why).
	name string
	// path is name resolved to an absolute file (resolve); "" when it
	// could not be (notFound says why).
	path     string
	notFound error
	// notSimple says why cmd is not one plain simple command; nil for
	// argv requests and for such a cmd.
	notSimple error
	// start, end is the byte span of the command name in cmd.
	start, end int
}

// audit is the program for the audit line: the resolved path, else the
// name as written, else the shell that runs a compound cmd.
func (p program) audit(shell string) string {
	switch {
	case p.path != "":
		return p.path
	case p.name != "":
		return p.name
	}
	return shell
}

// pathDirs are the directories of proc.MinimalPath, the PATH every child
// gets: the only places a bare program name is found in.
var pathDirs = filepath.SplitList(proc.MinimalPath)

// analyze finds the program of req. It never runs anything.
func analyze(req ExecRequest) program {
	var p program
	if req.Cmd == "" {
		p.name = req.Argv[0]
	} else {
		p.name, p.start, p.end, p.notSimple = simpleCommand(req.Cmd)
	}
	if p.name != "" {
		p.path, p.notFound = resolve(p.name)
	}
	return p
}

// simpleCommand parses cmd as bash and returns its command name and the
// name's byte span when cmd is exactly one simple command the allowlist
// can judge: no list, pipeline or compound command, no assignment prefix,
// no redirection, no expansion anywhere ($x, $(...), `...`, $((...)),
// <(...)), and a command name that is a plain word. Otherwise the error
// says which of these it is not.
func simpleCommand(cmd string) (name string, start, end int, err error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return "", 0, 0, fmt.Errorf("cmd cannot be parsed as bash (%v), so an allowlist cannot vouch for it", err)
	}
	if len(f.Stmts) != 1 {
		return "", 0, 0, fmt.Errorf("cmd holds %d commands (; & or newline between them), which an allowlist cannot vouch for; send one command, or argv", len(f.Stmts))
	}
	s := f.Stmts[0]
	switch {
	case s.Negated || s.Background || s.Coprocess:
		return "", 0, 0, errors.New("cmd uses shell syntax (!, & or coproc), which an allowlist cannot vouch for; send argv instead")
	case len(s.Redirs) > 0:
		return "", 0, 0, errors.New("cmd has a redirection (<, >, a here-document), which an allowlist cannot vouch for; send argv instead")
	}
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok {
		return "", 0, 0, errors.New("cmd is not one simple command (it has a pipeline, a list, a subshell, a block, a loop or other shell syntax), which an allowlist cannot vouch for; send argv instead")
	}
	if len(call.Assigns) > 0 {
		return "", 0, 0, fmt.Errorf("cmd starts with the assignment %s=..., which changes how the program is found or how it runs; an allowlist cannot vouch for it", call.Assigns[0].Name.Value)
	}
	var expansion string
	syntax.Walk(s, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.ParamExp:
			expansion = "a parameter expansion ($x)"
		case *syntax.CmdSubst:
			expansion = "a command substitution ($(...) or `...`)"
		case *syntax.ArithmExp:
			expansion = "an arithmetic expansion ($((...)))"
		case *syntax.ProcSubst:
			expansion = "a process substitution (<(...) or >(...))"
		}
		return expansion == ""
	})
	if expansion != "" {
		return "", 0, 0, fmt.Errorf("cmd has %s, which could run or name other programs; an allowlist cannot vouch for it: send argv instead", expansion)
	}
	w := call.Args[0]
	lit := w.Lit()
	if len(w.Parts) != 1 || !plainName(lit) {
		return "", 0, 0, fmt.Errorf("the program name %q is not a plain word (quotes, escapes, globs and braces are refused with an allowlist)", cmd[w.Pos().Offset():w.End().Offset()])
	}
	return lit, int(w.Pos().Offset()), int(w.End().Offset()), nil
}

// plainName reports whether s holds only bytes that bash takes literally
// in a command name: letters, digits and . _ + - / (no quote, escape,
// glob, brace, tilde or space).
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == '+', c == '-', c == '/':
		default:
			return false
		}
	}
	return true
}

// resolve returns the absolute file name would run as: a bare name is
// looked up in the child's PATH (proc.MinimalPath), an absolute one is
// cleaned; a relative path with a slash is refused (it depends on the
// working directory). The file must be a regular executable file.
func resolve(name string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			return "", fmt.Errorf("program %q is a relative path; give a bare name or an absolute path", name)
		}
		p := filepath.Clean(name)
		if !executable(p) {
			return "", fmt.Errorf("program %s is not an executable file", p)
		}
		return p, nil
	}
	for _, dir := range pathDirs {
		if p := filepath.Join(dir, name); executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("program %q is not found in PATH=%s", name, proc.MinimalPath)
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// allowlist is Options.Allow compiled: a resolved program is allowed when
// it equals an absolute entry, or when its base name is an entry's base
// name and it lies in one of the PATH directories.
type allowlist struct {
	names map[string]bool
	paths map[string]bool
}

func newAllowlist(entries []string) *allowlist {
	if len(entries) == 0 {
		return nil
	}
	a := &allowlist{names: map[string]bool{}, paths: map[string]bool{}}
	for _, e := range entries {
		if filepath.IsAbs(e) {
			a.paths[filepath.Clean(e)] = true
		}
		a.names[filepath.Base(e)] = true
	}
	return a
}

// check returns nil when the allowlist vouches for p, else why not.
func (a *allowlist) check(p program) error {
	if p.notSimple != nil {
		return p.notSimple
	}
	if p.notFound != nil {
		if !a.names[filepath.Base(p.name)] {
			return fmt.Errorf("program %q is not in this gatekeeper's allowlist", p.name)
		}
		return fmt.Errorf("allowlist: %w", p.notFound)
	}
	if a.paths[p.path] {
		return nil
	}
	if !a.names[filepath.Base(p.path)] {
		return fmt.Errorf("program %s is not in this gatekeeper's allowlist", p.path)
	}
	if !slices.Contains(pathDirs, filepath.Dir(p.path)) {
		return fmt.Errorf("program %s is named in the allowlist, but lies outside PATH=%s and is not listed by this absolute path", p.path, proc.MinimalPath)
	}
	return nil
}

// quoteArgv is the bash command line that runs argv: each element quoted
// (syntax.Quote), so the shell policy judges an argv request exactly like
// the equivalent cmd.
func quoteArgv(argv []string) (string, error) {
	q := make([]string, len(argv))
	for i, a := range argv {
		s, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			return "", fmt.Errorf("argv[%d]: %w", i, err)
		}
		q[i] = s
	}
	return strings.Join(q, " "), nil
}
