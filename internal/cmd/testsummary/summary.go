// The summarizer: test2json events in, go test's plain output and the
// summary out.

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// event is one test2json event (go doc cmd/test2json), with the fields of
// the build events go1.24 added (build-output, build-fail).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64 // seconds
	Output      string
	ImportPath  string
	FailedBuild string
}

// totals counts what the input reported. Tests include subtests, each
// counted once (a parent counts as one test as well).
type totals struct {
	Passed, Failed, Skipped int
	// Packages by outcome: OK passed, Failed failed (a test, the build or
	// the test binary), NoTests had no test files, Unfinished had not
	// ended when the input did.
	OK, PkgFailed, NoTests, Unfinished int
}

func (t totals) ok() bool { return t.Failed == 0 && t.PkgFailed == 0 && t.Unfinished == 0 }

// result is a skipped or failed test, or a failed package (test "").
type result struct {
	pkg, test string
	// note says more: a skip's reason (the test's last log entry, often
	// several lines), or why a package or test failed when no test said.
	note string
}

// summarizer consumes events one at a time (see add); it buffers each
// test's output until the test ends, and prints it only if it failed.
type summarizer struct {
	w      io.Writer
	err    error // the first write error
	pkgs   map[string]*pkg
	skips  []result
	fails  []result
	counts totals
}

// pkg is one package's state while its events arrive.
type pkg struct {
	name  string
	out   strings.Builder // the package's own output (Test == "")
	tests map[string]*test
	order []*test // in the order they started
	done  bool
}

// test is one test's (or subtest's) state.
type test struct {
	name string
	out  strings.Builder
	done bool
}

func newSummarizer(w io.Writer) *summarizer {
	return &summarizer{w: w, pkgs: map[string]*pkg{}}
}

func (s *summarizer) print(text string) {
	if s.err != nil || text == "" {
		return
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	_, s.err = io.WriteString(s.w, text)
}

// read feeds every line of in to add; a line that is not an event is
// printed as it is.
func (s *summarizer) read(in io.Reader) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var e event
			if bytes.HasPrefix(line, []byte("{")) && json.Unmarshal(line, &e) == nil && e.Action != "" {
				s.add(e)
			} else {
				s.print(string(line))
			}
		}
		if errors.Is(err, io.EOF) {
			return s.err
		}
		if err != nil {
			return fmt.Errorf("reading the events: %w", err)
		}
		if s.err != nil {
			return s.err
		}
	}
}

func (s *summarizer) pkg(name string) *pkg {
	p := s.pkgs[name]
	if p == nil {
		p = &pkg{name: name, tests: map[string]*test{}}
		s.pkgs[name] = p
	}
	return p
}

func (p *pkg) test(name string) *test {
	t := p.tests[name]
	if t == nil {
		t = &test{name: name}
		p.tests[name] = t
		p.order = append(p.order, t)
	}
	return t
}

// add takes one event.
func (s *summarizer) add(e event) {
	switch e.Action {
	case "build-output":
		s.print(e.Output) // compiler and vet errors, as go test prints them
		return
	case "build-fail":
		return // the package's fail event follows
	}
	p := s.pkg(e.Package)
	if e.Test == "" {
		s.addPackage(p, e)
		return
	}
	t := p.test(e.Test)
	switch e.Action {
	case "output":
		t.out.WriteString(e.Output)
	case "pass":
		s.counts.Passed++
		t.done = true
		t.out.Reset()
	case "skip":
		s.counts.Skipped++
		t.done = true
		s.skips = append(s.skips, result{pkg: p.name, test: t.name, note: skipReason(t.out.String())})
		t.out.Reset()
	case "fail":
		s.failTest(p, t, "")
	}
}

// failTest prints t's output and records it as failed.
func (s *summarizer) failTest(p *pkg, t *test, note string) {
	s.counts.Failed++
	t.done = true
	s.fails = append(s.fails, result{pkg: p.name, test: t.name, note: note})
	s.print(withoutFraming(t.out.String()))
	t.out.Reset()
}

func (s *summarizer) addPackage(p *pkg, e event) {
	switch e.Action {
	case "output":
		p.out.WriteString(e.Output)
	case "pass":
		p.done = true
		s.counts.OK++
		s.print(linesWithPrefix(p.out.String(), "ok", fmt.Sprintf("ok  \t%s\t%.3fs", p.name, e.Elapsed)))
	case "skip":
		p.done = true
		s.counts.NoTests++
		s.print(linesWithPrefix(p.out.String(), "?", fmt.Sprintf("?   \t%s\t[no test files]", p.name)))
	case "fail":
		p.done = true
		s.counts.PkgFailed++
		s.failPackage(p, "")
		note := ""
		if e.FailedBuild != "" {
			note = "build failed"
		}
		s.failedPackage(p, note)
	}
}

// failPackage prints the output of p's unfinished tests, recording them as
// failed, then p's own output.
func (s *summarizer) failPackage(p *pkg, note string) {
	for _, t := range p.order {
		if !t.done {
			s.failTest(p, t, "did not finish")
		}
	}
	s.print(withoutFraming(p.out.String()))
	if note != "" {
		s.print(fmt.Sprintf("FAIL\t%s\t(%s)", p.name, note))
	}
}

// failedPackage lists p among the failures when none of its tests is.
func (s *summarizer) failedPackage(p *pkg, note string) {
	if slices.ContainsFunc(s.fails, func(r result) bool { return r.pkg == p.name }) {
		return
	}
	s.fails = append(s.fails, result{pkg: p.name, note: cmp.Or(note, "the package failed outside its tests")})
}

// finish ends the packages the input left unfinished and prints the
// summary; it returns the totals.
func (s *summarizer) finish() totals {
	var open []*pkg
	for _, p := range s.pkgs {
		if !p.done {
			open = append(open, p)
		}
	}
	slices.SortFunc(open, func(a, b *pkg) int { return strings.Compare(a.name, b.name) })
	for _, p := range open {
		s.counts.Unfinished++
		const note = "the input ended before the package did"
		s.failPackage(p, note)
		s.failedPackage(p, note)
	}
	s.summary()
	return s.counts
}

// summary prints the skipped and the failed tests, by package, and the
// totals; its last line reads "tests: N passed, N failed, N skipped".
func (s *summarizer) summary() {
	var b strings.Builder
	b.WriteString("\n")
	list := func(title string, rs []result) {
		fmt.Fprintf(&b, "== %s: %d\n", title, len(rs))
		slices.SortStableFunc(rs, func(x, y result) int { return strings.Compare(x.pkg, y.pkg) })
		for _, r := range rs {
			b.WriteString(r.pkg)
			if r.test != "" {
				b.WriteString(" " + r.test)
			}
			b.WriteString("\n")
			for line := range strings.Lines(r.note) {
				b.WriteString("    " + line)
			}
			if r.note != "" && !strings.HasSuffix(r.note, "\n") {
				b.WriteString("\n")
			}
		}
	}
	list("skipped tests", s.skips)
	if len(s.fails) > 0 {
		list("failed", s.fails)
	}
	c := s.counts
	fmt.Fprintf(&b, "== packages: %d ok, %d failed, %d without tests", c.OK, c.PkgFailed+c.Unfinished, c.NoTests)
	if c.Unfinished > 0 {
		fmt.Fprintf(&b, " (%d unfinished)", c.Unfinished)
	}
	fmt.Fprintf(&b, "\ntests: %d passed, %d failed, %d skipped\n", c.Passed, c.Failed, c.Skipped)
	s.print(b.String())
}

// framing matches the lines go test -json adds to say which test an
// output belongs to; go test without -json does not print them.
var framing = regexp.MustCompile(`^\s*=== (RUN|PAUSE|CONT|NAME)\b`)

// withoutFraming returns out without its framing lines.
func withoutFraming(out string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		if !framing.MatchString(line) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// linesWithPrefix returns the lines of out that start with prefix, or def
// when none does.
func linesWithPrefix(out, prefix, def string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, prefix) {
			b.WriteString(line)
		}
	}
	if b.Len() == 0 {
		return def
	}
	return b.String()
}

// logEntry matches the first line of a t.Log entry: "    file_test.go:12: ".
var logEntry = regexp.MustCompile(`^(\s*)\S+\.go:\d+: `)

// skipReason returns the reason a skipped test gave: its last log entry
// (t.Skip logs its arguments), with the entry's continuation lines and its
// indentation removed; else the last line it printed.
func skipReason(out string) string {
	var lines []string
	for line := range strings.Lines(out) {
		t := strings.TrimSpace(line)
		if t == "" || framing.MatchString(line) || strings.HasPrefix(t, "--- SKIP:") {
			continue
		}
		lines = append(lines, strings.TrimRight(line, "\r\n"))
	}
	if len(lines) == 0 {
		return "(no reason given)"
	}
	start := len(lines) - 1
	for i := len(lines) - 1; i >= 0; i-- {
		if logEntry.MatchString(lines[i]) {
			start = i
			break
		}
	}
	indent := logEntry.FindStringSubmatch(lines[start])
	cut := len(lines[start]) - len(strings.TrimLeft(lines[start], " \t"))
	if indent != nil {
		cut = len(indent[1])
	}
	var b strings.Builder
	for _, line := range lines[start:] {
		if len(line)-len(strings.TrimLeft(line, " \t")) >= cut {
			line = line[cut:]
		} else {
			line = strings.TrimLeft(line, " \t")
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
