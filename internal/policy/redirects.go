// Redirections and standard input: what a command reads (a here-document,
// a here-string, a static echo piped in) and which redirections write.

package policy

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

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
