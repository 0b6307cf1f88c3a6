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
// (matcheval.LeaveOneOut). It returns a warning for each example that is
// refused, finds another tool first or does not find its tool among the
// candidates, and the figures.
func Examples(snap *catalog.Snapshot, vocab *match.Vocab) ([]string, matcheval.ExampleSummary) {
	var docs []match.Doc
	files := map[string]string{}
	for _, en := range snap.All() {
		if en.Tool != nil {
			docs = append(docs, catalog.ToolDoc(en.Tool))
			files[en.Name] = "tools/" + en.File
		}
	}
	results := matcheval.LeaveOneOut(docs, vocab, catalog.MaxCandidates)
	var warnings []string
	for _, r := range results {
		if !r.OK() {
			warnings = append(warnings, fmt.Sprintf("warning: %s: %s[%d] %q: %s", files[r.Doc], catalog.ExamplesField, r.Index, r.Example, r.Verdict()))
		}
	}
	return warnings, matcheval.SummarizeExamples(results)
}
