package hldp

import (
	"strings"
	"testing"
	"time"
)

// TestScaffold: what `toolagent new` writes parses, with every field,
// once intent and why are its author's; with their placeholders it does
// not load, naming both fields, so an unedited scaffold is never served.
func TestScaffold(t *testing.T) {
	day := time.Date(2026, 5, 31, 0, 0, 0, 0, time.UTC)
	data := Scaffold("my-tool", "alice", "Echo a message: \"quoted\" and 中文.", "To try toolagent: why #1", day)
	tool, err := Parse("tools/my-tool/TOOL.hdlp", []byte(data))
	if err != nil {
		t.Fatalf("Parse(Scaffold()) = %v\n%s", err, data)
	}
	if tool.Name != "my-tool" || tool.Author != "alice" || len(tool.Params) != 2 || len(tool.Examples()) == 0 || len(tool.Tags()) == 0 || tool.Requires().IsZero() {
		t.Errorf("Parse(Scaffold()) = %+v; want my-tool by alice with two params, examples, tags and requires", tool)
	}
	if tool.Intent != "Echo a message: \"quoted\" and 中文." || tool.Why != "To try toolagent: why #1" {
		t.Errorf("intent %q, why %q: not as given", tool.Intent, tool.Why)
	}
	_, err = Parse("tools/my-tool/TOOL.hdlp", []byte(Scaffold("my-tool", "alice", "", "", day)))
	if err == nil {
		t.Fatal("the unedited scaffold parses; want its placeholders refused")
	}
	for _, want := range []string{"TOOL.hdlp:6:9: intent: still the placeholder", "why: still the placeholder"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("unedited scaffold: %v\nwant a line with %q", err, want)
		}
	}
}

// TestYAMLErrorColumn: a YAML syntax error names its column too.
func TestYAMLErrorColumn(t *testing.T) {
	_, err := Parse("tools/x/TOOL.hdlp", []byte("name: x\nintent: [a, b\nwhy: y\n"))
	if err == nil || !strings.Contains(err.Error(), "tools/x/TOOL.hdlp:2:9: invalid YAML") {
		t.Errorf("Parse = %v; want tools/x/TOOL.hdlp:2:9: invalid YAML (the unclosed [)", err)
	}
}
