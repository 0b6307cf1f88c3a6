package lint

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/match/matcheval"
	"github.com/toolagent/toolagent/internal/scan"
)

// EvalRun is one run of `toolagent eval`: the tree (from ToolsDir), the
// extra vocabulary and the queries' files, and how to print.
type EvalRun struct {
	Tree                             scan.Tree
	ToolsDir, VocabFile, QueriesFile string
	// ByLang breaks the figures down by language; JSON prints one
	// object; Misses lists the queries answered wrongly (text).
	ByLang, JSON, Misses bool
	Stdout, Stderr       io.Writer
}

// Run reads the vocabulary and the queries, measures matching on the
// tree (Eval) and prints the figures: what was indexed and what could
// not be read on Stderr, the figures on Stdout.
func (r EvalRun) Run() error {
	vocab, err := host.LoadVocab(r.VocabFile)
	if err != nil {
		return err
	}
	f, err := os.Open(r.QueriesFile)
	if err != nil {
		return err
	}
	qs, err := matcheval.ReadQueries(f)
	f.Close()
	if err != nil {
		return err
	}
	out, problems, err := Eval(r.Tree, vocab, qs)
	if err != nil {
		return err
	}
	if !r.ByLang {
		out.ByLang, out.WithoutExamples.ByLang = nil, nil
	}
	fmt.Fprintf(r.Stderr, "indexed %d tools from %s (%d examples in %d tools); %d queries\n", out.Tools, r.ToolsDir, out.Examples, out.ToolsWithExamples, len(qs))
	for _, p := range problems {
		fmt.Fprintf(r.Stderr, "could not read: %s\n", p)
	}
	if r.JSON {
		enc := json.NewEncoder(r.Stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if err := out.WriteText(r.Stdout); err != nil {
		return err
	}
	if r.Misses {
		return out.WriteMisses(r.Stdout)
	}
	return nil
}
