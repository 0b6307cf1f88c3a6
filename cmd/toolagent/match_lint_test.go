package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/feedback"
	"github.com/toolagent/toolagent/internal/host"
)

// crossMatchTools writes a tools tree of two service tools whose examples
// cross-match: svc-status gives a restart request as its own example.
func crossMatchTools(t *testing.T) string {
	t.Helper()
	tools := filepath.Join(t.TempDir(), "tools")
	write := func(name, display, intent, examples string) {
		dir := filepath.Join(tools, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		src := "name: " + name + "\ndisplay: " + display + "\nintent: " + intent + "\nmethod: run\nexecutor: shell\n" +
			"argv: [echo, \"{unit}\"]\nparams_schema:\n  unit: { type: string, required: true, description: \"the unit\" }\n" +
			"examples:\n" + examples + "author: t\ncreated: 2026-11-30\nwhy: tests\n"
		if err := os.WriteFile(filepath.Join(dir, "TOOL.hdlp"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("svc-restart", "重启服务", "restart a systemd service on the host", "  - bounce the nginx service\n  - 订单服务卡死了，重启一下\n")
	write("svc-status", "服务状态", "show whether a systemd service is running", "  - is nginx running\n  - restart the nginx service\n")
	return tools
}

// TestValidateMatchCrossMatch: validate --match warns about the examples
// of two tools that read alike, naming both tools and the example, and
// prints the figures; the warnings fail the run only with --match-strict;
// without --match the output is what it always was.
func TestValidateMatchCrossMatch(t *testing.T) {
	t.Parallel()
	tools := crossMatchTools(t)
	state := t.TempDir()
	plain, _, code := runCLI(t, nil, "validate", "--state", state, tools)
	if code != 0 || strings.Contains(plain, "match") || strings.Contains(plain, "warning") {
		t.Fatalf("validate = exit %d\n%s\nwant 0 and no match lint", code, plain)
	}
	if want := "tools tree: " + tools + "\n2 tool folders, 2 callable, 0 problems\n"; plain != want {
		t.Errorf("validate output =\n%s\nwant\n%s", plain, want)
	}
	out, _, code := runCLI(t, nil, "validate", "--state", state, "--match", tools)
	if code != 0 {
		t.Errorf("validate --match = exit %d, want 0 (warnings do not fail)\n%s", code, out)
	}
	if !strings.HasPrefix(out, plain) {
		t.Errorf("validate --match output =\n%s\nwant it to start with the plain output\n%s", out, plain)
	}
	for _, want := range []string{
		`warning: tools/svc-status/TOOL.hdlp: examples[1] "restart the nginx service": svc-restart ranks first`,
		`warning: tools/svc-restart/TOOL.hdlp: examples[0] "bounce the nginx service": svc-status ranks first`,
		"match: 4 examples of 2 tools, each left out of its own tool: Hit@1 0.500, Hit@3 1.000, refused 0.000; 2 warnings\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate --match output =\n%s\nwant it to contain\n%s", out, want)
		}
	}
	for _, ok := range []string{"is nginx running", "订单服务卡死了，重启一下"} {
		if strings.Contains(out, ok) {
			t.Errorf("validate --match warns about %q, which finds its own tool:\n%s", ok, out)
		}
	}
	strict, _, code := runCLI(t, nil, "validate", "--state", state, "--match-strict", tools)
	if code != exitFailed || strict != out {
		t.Errorf("validate --match-strict = exit %d\n%s\nwant %d and the --match output", code, strict, exitFailed)
	}
}

// TestValidateMatchShippedTools: every example of the shipped tools finds
// its own tool first with itself left out, and is not refused.
func TestValidateMatchShippedTools(t *testing.T) {
	t.Parallel()
	out, _, code := runCLI(t, nil, "validate", "--state", t.TempDir(), "--match-strict", nativeTools(t))
	if code != 0 || !strings.Contains(out, "Hit@1 1.000, Hit@3 1.000, refused 0.000; 0 warnings") {
		t.Errorf("validate --match-strict native = exit %d\n%s\nwant 0 and no warnings", code, out)
	}
}

// TestValidateMatchUsage: --match needs a tools tree.
func TestValidateMatchUsage(t *testing.T) {
	t.Parallel()
	file := filepath.Join(nativeTools(t), "git-ops", "TOOL.hdlp")
	for _, args := range [][]string{
		{"validate", "--match", file},
		{"validate", "--match-strict", "--config", "../../examples/toolagent.yaml"},
	} {
		if _, errOut, code := runCLI(t, nil, append(args, "--state", t.TempDir())...); code != exitUsage || !strings.Contains(errOut, "--match") {
			t.Errorf("%v = exit %d %q; want %d naming --match", args, code, errOut, exitUsage)
		}
	}
	if out, _, code := runCLI(t, nil, "validate", file); code != 0 || out != file+": 0 problems\n" {
		t.Errorf("validate FILE = exit %d %q; want 0 problems", code, out)
	}
}

// TestEvalWithoutExamples: eval prints the figures of the tools as written
// and, beside them, those with the examples removed; a request in an
// example's words is found with examples and not without.
func TestEvalWithoutExamples(t *testing.T) {
	t.Parallel()
	tools := crossMatchTools(t)
	queries := filepath.Join(t.TempDir(), "q.jsonl")
	if err := os.WriteFile(queries, []byte(`{"query": "支付又卡死了", "expected": ["svc-restart"]}
{"query": "write me a poem", "expected": []}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, nil, "eval", "--state", t.TempDir(), "--tools", tools, "--queries", queries, "--json")
	if code != 0 {
		t.Fatalf("eval --json = exit %d %s", code, errOut)
	}
	var r struct {
		HitAt1            float64 `json:"hit_at_1"`
		Refused           float64 `json:"answerable_refused"`
		Examples          int     `json:"examples"`
		ToolsWithExamples int     `json:"tools_with_examples"`
		Without           *struct {
			HitAt1  float64 `json:"hit_at_1"`
			Refused float64 `json:"answerable_refused"`
		} `json:"without_examples"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("eval --json: %v\n%s", err, out)
	}
	if r.Without == nil || r.Examples != 4 || r.ToolsWithExamples != 2 {
		t.Fatalf("eval --json = %s; want without_examples and 4 examples in 2 tools", out)
	}
	if r.HitAt1 != 1 || r.Refused != 0 {
		t.Errorf("with examples: hit_at_1 %v, answerable_refused %v; want 1 and 0", r.HitAt1, r.Refused)
	}
	if r.Without.Refused != 1 {
		t.Errorf("without examples: answerable_refused %v; want 1 (the request is in an example's words)", r.Without.Refused)
	}
	text, _, code := runCLI(t, nil, "eval", "--state", t.TempDir(), "--tools", tools, "--queries", queries)
	if code != 0 || strings.Count(text, "subset ") != 2 || !strings.Contains(text, "without examples (the 4 examples of 2 tools removed):\n") {
		t.Errorf("eval = exit %d\n%s\nwant two tables, the second without the examples", code, text)
	}
}

// TestValidateMatchShowsLearning (issue 41, item 5): validate --match
// prints the no-fit check (each example against the catalog without its
// own tool) and, with requests learned from use in the state directory,
// the figures with them beside those without; learning does not lower
// the no-fit recall.
func TestValidateMatchShowsLearning(t *testing.T) {
	t.Parallel()
	tools := crossMatchTools(t)
	state := t.TempDir()
	out, _, code := runCLI(t, nil, "validate", "--state", state, "--match", tools)
	if code != 0 || !strings.Contains(out, "match: each example with its own tool left out of the catalog: refused (no-fit recall) ") || strings.Contains(out, "learned from use") {
		t.Fatalf("validate --match (nothing learned) = exit %d\n%s\nwant the no-fit line and no learning line", code, out)
	}
	fb, err := feedback.Open(host.FeedbackFile(state), feedback.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fb.Teach("svc-restart", "restart a systemd service on the host", "the nginx box is wedged, kick it")
	fb.Teach("svc-status", "show whether a systemd service is running", "is the nginx unit up")
	out, _, code = runCLI(t, nil, "validate", "--state", state, "--match", tools)
	i := strings.Index(out, "match: with the 2 requests learned from use: ")
	if code != 0 || i < 0 {
		t.Fatalf("validate --match (2 learned) = exit %d\n%s\nwant the figures with the learned requests", code, out)
	}
	var h1, h1l, r, rl, nf, nfl float64
	if _, err := fmt.Sscanf(out[i:], "match: with the 2 requests learned from use: Hit@1 %f -> %f, refused %f -> %f, no-fit recall %f -> %f", &h1, &h1l, &r, &rl, &nf, &nfl); err != nil {
		t.Fatalf("learning line: %v\n%s", err, out[i:])
	}
	if nfl < nf {
		t.Errorf("learning lowered the no-fit recall of the catalog's examples: %.3f -> %.3f\n%s", nf, nfl, out)
	}
}
