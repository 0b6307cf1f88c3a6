package hldp

import (
	"testing"
	"time"
)

// TestScaffold: what `toolagent new` writes parses, with every field.
func TestScaffold(t *testing.T) {
	data := Scaffold("my-tool", "alice", time.Date(2026, 5, 31, 0, 0, 0, 0, time.UTC))
	tool, err := Parse("tools/my-tool/TOOL.hdlp", []byte(data))
	if err != nil {
		t.Fatalf("Parse(Scaffold()) = %v\n%s", err, data)
	}
	if tool.Name != "my-tool" || tool.Author != "alice" || len(tool.Params) != 2 || len(tool.Examples()) == 0 || len(tool.Tags()) == 0 || tool.Requires().IsZero() {
		t.Errorf("Parse(Scaffold()) = %+v; want my-tool by alice with two params, examples, tags and requires", tool)
	}
}
