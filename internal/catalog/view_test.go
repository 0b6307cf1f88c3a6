package catalog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/hldp"
)

// TestViewShowsThePolicy: the full view of a tool says why its calls may
// be held: the rules, the shell policy (default when unsaid), the sandbox
// grant, and a conditional argv group as such (issue 14, trap 6).
func TestViewShowsThePolicy(t *testing.T) {
	src := `name: g
display: G
intent: git, read-only
method: run
executor: shell
params_schema:
  op: { type: string, required: true, enum: [log, branch] }
argv:
  - git
  - "{op}"
  - { if: { op: [branch] }, then: ["--list"] }
constraints:
  rules:
    op: { confirm: ["^branch$"] }
sandbox: { write: [/srv/out], network: true }
author: a
created: 2026-05-31
why: tests
`
	tool, err := hldp.Parse("g/TOOL.hdlp", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(Entry{Name: "g", Tool: tool, Status: Enabled}.View(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"rules":{"op":{"confirm":["^branch$"]}}`,
		`"sandbox":{"write":["/srv/out"],"network":true}`,
		`{"if":{"op":["branch"]},"then":["--list"]}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("view %s lacks %s", b, want)
		}
	}
	exec, err := hldp.Parse("e/TOOL.hdlp", []byte(strings.NewReplacer("name: g", "name: e", "method: run", "method: exec",
		"  op: { type: string, required: true, enum: [log, branch] }", "  cmd: { type: string, required: true }",
		"argv:\n  - git\n  - \"{op}\"\n  - { if: { op: [branch] }, then: [\"--list\"] }\n", "",
		"  rules:\n    op: { confirm: [\"^branch$\"] }\n", "  timeout_ms: 1000\n").Replace(src)))
	if err != nil {
		t.Fatal(err)
	}
	if v := (Entry{Name: "e", Tool: exec}).View(true); v.Constraints.ShellPolicy != "default" {
		t.Errorf("an exec tool without shell_policy shows %q; want default", v.Constraints.ShellPolicy)
	}
}
