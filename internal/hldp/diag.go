package hldp

import (
	"errors"
	"strconv"
	"strings"
)

// Diagnostic is one problem Parse found in a TOOL.hdlp file. It names the
// file, the position (Line and Col are 1-based; Line 0 means the problem is
// about the whole file), the field (a dotted path such as
// "constraints.timeout_ms" or "argv[2]"), what was expected and what was
// found, and a hint when one exists. Its message has the shape
//
//	tools/x/TOOL.hdlp:7:3: constraints.require_confrim: unknown key; want one of timeout_ms, max_output_bytes, require_confirm, max_concurrency (did you mean "require_confirm"?)
type Diagnostic struct {
	File      string
	Line, Col int
	// Field is the dotted path of the offending key or value; "" for
	// problems of the whole file.
	Field string
	// Problem says what is wrong when want/got alone do not ("unknown key",
	// "missing required field"); "" for a plain want/got mismatch.
	Problem string
	Want    string
	Got     string
	// Hint is a suggestion such as `did you mean "intent"?`.
	Hint string
}

// Error formats the diagnostic as file:line:col: field: problem; want W, got G (hint).
func (d *Diagnostic) Error() string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(d.Line))
		if d.Col > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(d.Col))
		}
	}
	b.WriteString(": ")
	if d.Field != "" {
		b.WriteString(d.Field)
		b.WriteString(": ")
	}
	b.WriteString(problemText(d.Problem, d.Want, d.Got, d.Hint))
	return b.String()
}

// problemText is the shared "problem; want W, got G (hint)" tail of
// Diagnostic and ParamError messages.
func problemText(problem, want, got, hint string) string {
	var parts []string
	if problem != "" {
		parts = append(parts, problem)
	}
	switch {
	case want != "" && got != "":
		parts = append(parts, "want "+want+", got "+got)
	case want != "":
		parts = append(parts, "want "+want)
	case got != "":
		parts = append(parts, "got "+got)
	}
	s := strings.Join(parts, "; ")
	if hint != "" {
		s += " (" + hint + ")"
	}
	return s
}

// Diagnostics returns every *Diagnostic in err, which is usually the
// errors.Join returned by Parse. It walks joined and wrapped errors, so a
// caller may wrap Parse's error with fmt.Errorf("%w") first. It returns nil
// when err holds none.
func Diagnostics(err error) []*Diagnostic {
	var out []*Diagnostic
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if d, ok := err.(*Diagnostic); ok {
			out = append(out, d)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// joinDiags returns the diagnostics as one errors.Join error.
func joinDiags(ds []*Diagnostic) error {
	if len(ds) == 0 {
		return nil
	}
	errs := make([]error, len(ds))
	for i, d := range ds {
		errs[i] = d
	}
	return errors.Join(errs...)
}

// suggest returns the candidate closest to s by edit distance (case
// insensitive, a transposition counts as one edit) when it is close enough
// to be a likely typo, else "".
func suggest(s string, candidates []string) string {
	best, bestD := "", -1
	ls := strings.ToLower(s)
	for _, c := range candidates {
		d := editDistance(ls, strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD == 0 && best == s {
		return ""
	}
	// Allow two edits, or one in three characters for long words.
	if bestD <= 2 || bestD*3 <= len(s) {
		return best
	}
	return ""
}

// didYouMean formats the hint for a suggestion, or "" when there is none.
func didYouMean(s string, candidates []string) string {
	if m := suggest(s, candidates); m != "" {
		return "did you mean " + strconv.Quote(m) + "?"
	}
	return ""
}

// editDistance is the optimal string alignment distance between a and b
// (Levenshtein plus adjacent transpositions), on runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows are enough for the transposition look-back.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
