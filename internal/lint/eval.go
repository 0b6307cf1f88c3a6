package lint

import (
	"fmt"
	"io"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/match"
	"github.com/toolagent/toolagent/internal/match/matcheval"
	"github.com/toolagent/toolagent/internal/scan"
)

// EvalReport is what eval measures: the figures of the tools as written,
// the same figures with their examples removed, and how many examples
// there were. In JSON the first set's keys stay at the top level, as
// before examples existed.
type EvalReport struct {
	matcheval.Report
	WithoutExamples   matcheval.Report `json:"without_examples"`
	Examples          int              `json:"examples"`
	ToolsWithExamples int              `json:"tools_with_examples"`
	// Tools is how many tools were indexed.
	Tools int `json:"-"`
}

// Eval measures intent matching alone on tree: it indexes every tool
// whose definition parses (whatever its executor, configured here or
// not), ranks each query and returns the figures, then the same with the
// tools' examples removed, so that what the examples gain (or cost)
// shows; and what could not be read, one line each.
func Eval(tree scan.Tree, vocab *match.Vocab, qs []matcheval.Query) (EvalReport, []string, error) {
	snap, rep, err := scan.Build(nil, tree, nil, scan.Options{Catalog: catalog.Options{LazyIndex: true}})
	if err != nil {
		return EvalReport{}, nil, err
	}
	var docs []match.Doc
	for _, en := range snap.All() {
		if en.Tool != nil {
			docs = append(docs, catalog.ToolDoc(en.Tool))
		}
	}
	out := EvalReport{
		Report:          matcheval.RunDocs(docs, vocab, qs, catalog.MaxCandidates),
		WithoutExamples: matcheval.RunDocs(matcheval.WithoutExamples(docs), vocab, qs, catalog.MaxCandidates),
		Tools:           len(docs),
	}
	for _, d := range docs {
		n := 0
		for _, f := range d.Fields {
			if f.Example {
				n++
			}
		}
		out.Examples += n
		if n > 0 {
			out.ToolsWithExamples++
		}
	}
	return out, host.ProblemLines(rep.Problems), nil
}

// WriteText writes the figures as text: those of the tools as written,
// then those without their examples.
func (r EvalReport) WriteText(w io.Writer) error {
	if err := r.Report.WriteText(w); err != nil {
		return err
	}
	if r.Examples == 0 {
		_, err := fmt.Fprintln(w, "without examples: the same (no tool has examples)")
		return err
	}
	fmt.Fprintf(w, "without examples (the %d examples of %d tools removed):\n", r.Examples, r.ToolsWithExamples)
	return r.WithoutExamples.WriteText(w)
}
