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

// TestViewShowsTagsAndRequires: listings (the summary view) show a tool's
// tags; the full view adds its prerequisites.
func TestViewShowsTagsAndRequires(t *testing.T) {
	tool, err := hldp.Parse("k/TOOL.hdlp", []byte(`name: k
display: K
intent: list pods
method: run
executor: shell
argv: [kubectl, get, pods]
params_schema: {}
requires: { programs: [kubectl], files: [/etc/kube.conf], check: [kubectl, version] }
tags: [k8s, read-only]
author: a
created: 2026-05-31
why: tests
`))
	if err != nil {
		t.Fatal(err)
	}
	e := Entry{Name: "k", Tool: tool, Status: Enabled}
	summary, err := json.Marshal(e.View(false))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(summary), `"tags":["k8s","read-only"]`) || strings.Contains(string(summary), `"requires"`) {
		t.Errorf("summary view %s; want the tags and no requires", summary)
	}
	full, err := json.Marshal(e.View(true))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"requires":{"programs":["kubectl"],"files":["/etc/kube.conf"],"check":["kubectl","version"]}`; !strings.Contains(string(full), want) {
		t.Errorf("full view %s lacks %s", full, want)
	}
}

// TestViewShowsExamples: the full view of a tool lists its examples in
// file order; listings (the summary view) leave them out.
func TestViewShowsExamples(t *testing.T) {
	tool, err := hldp.Parse("g/TOOL.hdlp", []byte(`name: g
display: G
intent: show git history
method: run
executor: shell
argv: [git, log]
params_schema: {}
examples: ["show me the last five commits", 查看最近的提交记录]
author: a
created: 2026-05-31
why: tests
`))
	if err != nil {
		t.Fatal(err)
	}
	e := Entry{Name: "g", Tool: tool, Status: Enabled}
	summary, err := json.Marshal(e.View(false))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(summary), `"examples"`) {
		t.Errorf("summary view %s; want no examples", summary)
	}
	full, err := json.Marshal(e.View(true))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"examples":["show me the last five commits","查看最近的提交记录"]`; !strings.Contains(string(full), want) {
		t.Errorf("full view %s lacks %s", full, want)
	}
}
