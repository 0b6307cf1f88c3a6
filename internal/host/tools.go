package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/feedback"
	"github.com/toolagent/toolagent/internal/hldp"
)

// toolNameRE is what a new tool's name may be: its folder's name.
var toolNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// ErrToolName is the error of a name NewTool refuses.
var ErrToolName = errors.New("want lower-case letters, digits, - and _, starting with a letter or digit")

// NewTool writes the scaffold of a tool name by author (hldp.Scaffold)
// to TOOLS/name/TOOL.hdlp and returns that file. A name NewTool refuses
// is ErrToolName; a file that exists is never overwritten (fs.ErrExist).
func (p *Paths) NewTool(name, author, intent, why string, now time.Time) (string, error) {
	if !toolNameRE.MatchString(name) {
		return "", fmt.Errorf("tool name %q: %w", name, ErrToolName)
	}
	if p.Tools == Embedded {
		return "", errors.New("no tools directory found; give --tools DIR")
	}
	file := filepath.Join(p.Tools, name, hldp.FileName)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return "", err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return file, err
	}
	if _, err := f.WriteString(hldp.Scaffold(name, author, intent, why, now)); err != nil {
		f.Close()
		return file, err
	}
	return file, f.Close()
}

// Feedback lists, or with clear forgets, what matching learned from use
// (of tool, or of every tool when it is "") in the state directory's
// file, for a command run while no daemon holds it.
func (p *Paths) Feedback(clear bool, tool string) (any, error) {
	fb, err := feedback.Open(FeedbackFile(p.State), feedback.Options{})
	if err != nil {
		return nil, err
	}
	if clear {
		n, err := fb.Clear(tool)
		return map[string]int{"cleared": n}, err
	}
	return map[string]any{"tools": fb.List(tool)}, nil
}

// LearnedOf adapts what fb learned to catalog.Options.Learned: each
// request with its weight by age (feedback.Store.Weighted).
func LearnedOf(fb *feedback.Store) func(name, intent string) []catalog.Learned {
	return func(name, intent string) []catalog.Learned {
		var out []catalog.Learned
		for _, w := range fb.Weighted(name, intent) {
			out = append(out, catalog.Learned{Request: w.Request, Weight: w.Weight})
		}
		return out
	}
}

// Learned returns what matching learned from use in the state directory
// state's file, as catalog.Options.Learned takes it, or nil when nothing
// was learned or the file cannot be read (validate --match then measures
// the tools alone).
func Learned(state string) func(name, intent string) []catalog.Learned {
	fb, err := feedback.Open(FeedbackFile(state), feedback.Options{})
	if err != nil || len(fb.List("")) == 0 {
		return nil
	}
	return LearnedOf(fb)
}
