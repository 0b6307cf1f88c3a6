// Words: resolving a shell word to its value when it is static ($'...'
// decoded as bash does, backslashes removed), and a node's source text.

package policy

import (
	"strings"
	"unicode"

	"mvdan.cc/sh/v3/syntax"
)

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
