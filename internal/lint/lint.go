// Package lint owns the checks of a tools tree that `toolagent validate`
// and `toolagent eval` run: the problems of a tree as this host loads it
// and of one TOOL.hdlp, how well each tool's examples find it among the
// others, and intent matching measured on a file of queries. It prints
// nothing but returns lines and figures, which the commands print. It
// holds no state; only command packages import it.
package lint

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/match"
	"github.com/toolagent/toolagent/internal/match/matcheval"
)

// Tree returns the problems of a loaded tools tree, one line each: what
// did not load (file:line:col: field: what was expected), and the tools
// an executor configured here cannot run. A tool whose executor is
// merely not configured on this host is not a problem.
//
// Each line names the file read: below dir, the tree's directory, unless
// it is host.Embedded (the compiled-in copy keeps its tools/ names).
func Tree(l *host.Loaded, dir string) []string {
	lines := host.ProblemLines(l.Report.Problems)
	for _, en := range l.Snap.All() {
		if en.Tool != nil && en.Status == catalog.Disabled {
			if _, configured := l.Execs[en.Tool.Executor]; configured {
				lines = append(lines, fmt.Sprintf("tools/%s: %s", en.File, en.Reason))
			}
		}
	}
	if dir != host.Embedded {
		for i, ln := range lines {
			if rest, ok := strings.CutPrefix(ln, "tools/"); ok {
				lines[i] = filepath.Join(dir, rest[:strings.IndexByte(rest+":", ':')]) + rest[strings.IndexByte(rest+":", ':'):]
			}
		}
	}
	return lines
}

// Summary is validate's last line for a tree: its tool folders, how many
// are callable, and the problems, each count with its own number.
func Summary(folders, callable, problems int) string {
	return fmt.Sprintf("%s, %d callable, %s", Count(folders, "tool folder"), callable, Count(problems, "problem"))
}

// Count is n nouns, the noun singular for 1.
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// File returns the problems of one TOOL.hdlp, one line each,
// file:line:col; none when it parses.
func File(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if _, err := hldp.Parse(path, data); err != nil {
		return host.ProblemLines([]error{err}), nil
	}
	return nil, nil
}

// Examples runs every example of the tools in snap (each tool whose
// definition parses, whatever its executor or status) against the others
// with that example left out of its own tool's text
// (matcheval.LeaveOneOut), and against the catalog without its own tool
// (matcheval.LeftOut: it should be refused). It returns a warning for each
// example that is refused, finds another tool first or does not find its
// tool among the candidates, and the figures; with learned (the requests
// learned from use, as the daemon indexes them; nil: none), the same
// figures with them, so that what learning changes shows.
func Examples(snap *catalog.Snapshot, vocab *match.Vocab, learned func(name, intent string) []catalog.Learned) ([]string, MatchCheck) {
	var docs, taught []match.Doc
	files := map[string]string{}
	var c MatchCheck
	for _, en := range snap.All() {
		if en.Tool != nil {
			d := catalog.ToolDoc(en.Tool)
			docs = append(docs, d)
			files[en.Name] = "tools/" + en.File
			if learned != nil {
				for _, l := range learned(en.Name, en.Tool.Intent) {
					d.Fields = append(d.Fields, match.Field{Name: catalog.LearnedField, Text: l.Request, Weight: l.Weight, Learned: true})
					c.Learned++
				}
			}
			taught = append(taught, d)
		}
	}
	results := matcheval.LeaveOneOut(docs, vocab, catalog.MaxCandidates)
	var warnings []string
	for _, r := range results {
		if !r.OK() {
			warnings = append(warnings, fmt.Sprintf("warning: %s: %s[%d] %q: %s", files[r.Doc], catalog.ExamplesField, r.Index, r.Example, r.Verdict()))
		}
	}
	c.ExampleSummary = matcheval.SummarizeExamples(results)
	c.NoFitRecall = matcheval.NoFitRecall(matcheval.LeftOut(docs, vocab, catalog.MaxCandidates))
	if c.Learned > 0 {
		c.WithLearned = matcheval.SummarizeExamples(matcheval.LeaveOneOut(taught, vocab, catalog.MaxCandidates))
		c.WithLearnedNoFit = matcheval.NoFitRecall(matcheval.LeftOut(taught, vocab, catalog.MaxCandidates))
	}
	c.warnings = len(warnings)
	return warnings, c
}

// MatchCheck holds the figures of Examples.
type MatchCheck struct {
	matcheval.ExampleSummary
	// NoFitRecall is the share of examples refused when their own tool
	// is left out of the catalog (matcheval.LeftOut).
	NoFitRecall float64
	// Learned counts the learned requests indexed; WithLearned and
	// WithLearnedNoFit are the figures with them (when Learned > 0).
	Learned          int
	WithLearned      matcheval.ExampleSummary
	WithLearnedNoFit float64
	warnings         int
}

// String is what validate --match prints: the figures, one line each.
func (c MatchCheck) String() string {
	s := fmt.Sprintf("match: %d examples of %d tools, each left out of its own tool: Hit@1 %.3f, Hit@3 %.3f, refused %.3f; %d warnings\n", c.Examples, c.Docs, c.HitAt1, c.HitAt3, c.Refused, c.warnings)
	if c.Examples == 0 {
		return s
	}
	s += fmt.Sprintf("match: each example with its own tool left out of the catalog: refused (no-fit recall) %.3f\n", c.NoFitRecall)
	if c.Learned > 0 {
		s += fmt.Sprintf("match: with the %d requests learned from use: Hit@1 %.3f -> %.3f, refused %.3f -> %.3f, no-fit recall %.3f -> %.3f\n",
			c.Learned, c.HitAt1, c.WithLearned.HitAt1, c.Refused, c.WithLearned.Refused, c.NoFitRecall, c.WithLearnedNoFit)
	}
	return s
}
