package hldp

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// argvTool is a shell "run" tool whose template uses every argv feature.
const argvTool = `name: a
display: A
intent: exercise argv
method: run
executor: shell
params_schema:
  pattern: { type: string, required: true }
  dir: { type: string }
  max: { type: integer }
  ratio: { type: number }
  ignore_case: { type: boolean }
  files: { type: array, items: { type: string } }
  opts: { type: object }
author: a
created: 2026-05-31
why: tests
argv:
  - grep
  - "-r"
  - ["-i", "--ic={ignore_case}"]
  - "--max-count={max}"
  - "--ratio={ratio}"
  - "--opts={opts}"
  - "{{literal}}"
  - "--"
  - "{pattern}"
  - "{dir}"
  - "{files}"
`

func TestRenderArgv(t *testing.T) {
	tool := mustParse(t, "a.hdlp", argvTool)
	tests := []struct {
		name   string
		params map[string]any
		want   []string
	}{
		{
			name:   "only required: optional words and groups dropped",
			params: map[string]any{"pattern": "x"},
			want:   []string{"grep", "-r", "{literal}", "--", "x"},
		},
		{
			name:   "all values",
			params: map[string]any{"pattern": "x", "dir": "/src", "max": int64(5), "ratio": 0.5, "ignore_case": true, "files": []any{"a.go", "b.go"}, "opts": map[string]any{"b": 1, "a": "z"}},
			want:   []string{"grep", "-r", "-i", "--ic=true", "--max-count=5", "--ratio=0.5", `--opts={"a":"z","b":1}`, "{literal}", "--", "x", "/src", "a.go", "b.go"},
		},
		{
			name:   "group dropped when one param of it is missing, kept for false",
			params: map[string]any{"pattern": "x", "ignore_case": false},
			want:   []string{"grep", "-r", "-i", "--ic=false", "{literal}", "--", "x"},
		},
		{
			name:   "empty array is no value",
			params: map[string]any{"pattern": "x", "files": []any{}},
			want:   []string{"grep", "-r", "{literal}", "--", "x"},
		},
		{
			name:   "numbers",
			params: map[string]any{"pattern": "x", "max": 3, "ratio": 1e21},
			want:   []string{"grep", "-r", "--max-count=3", "--ratio=1e+21", "{literal}", "--", "x"},
		},
		{
			name:   "injection: semicolon stays one element",
			params: map[string]any{"pattern": "; rm -rf /"},
			want:   []string{"grep", "-r", "{literal}", "--", "; rm -rf /"},
		},
		{
			name:   "injection: command substitution and quotes",
			params: map[string]any{"pattern": "$(id)`id`'\"", "dir": "a b"},
			want:   []string{"grep", "-r", "{literal}", "--", "$(id)`id`'\"", "a b"},
		},
		{
			name:   "injection: newline and placeholder text in a value",
			params: map[string]any{"pattern": "x\ny", "dir": "{pattern}", "files": []any{"a b; c", "$HOME"}},
			want:   []string{"grep", "-r", "{literal}", "--", "x\ny", "{pattern}", "a b; c", "$HOME"},
		},
		{
			name:   "injection: embedded value does not split",
			params: map[string]any{"pattern": "x", "max": "1 --exec=sh"},
			want:   []string{"grep", "-r", "--max-count=1 --exec=sh", "{literal}", "--", "x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tool.RenderArgv(tt.params)
			if err != nil {
				t.Fatalf("RenderArgv(%v) = %v", tt.params, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("RenderArgv(%v) mismatch (-want +got):\n%s", tt.params, diff)
			}
		})
	}
}

// TestRenderArgvCheckedParams renders what CheckParams returns, the way the
// shell executor does.
func TestRenderArgvCheckedParams(t *testing.T) {
	tool := mustParse(t, "g.hdlp", strings.Replace(argvTool, "max: { type: integer }", "max: { type: integer, default: 20 }", 1))
	params, err := tool.CheckParams(map[string]any{"pattern": "needle", "files": []string{"x.go"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tool.RenderArgv(params)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"grep", "-r", "--max-count=20", "{literal}", "--", "needle", "x.go"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RenderArgv mismatch (-want +got):\n%s", diff)
	}
}

func TestRenderArgvErrors(t *testing.T) {
	tests := []struct {
		name    string
		tool    *Tool
		params  map[string]any
		wantErr string
	}{
		{"no template", &Tool{Name: "x"}, nil, "tool x has no argv template"},
		{"array inside a word", &Tool{Argv: []ArgvItem{{Word: "ls"}, {Word: "--f={f}"}}}, map[string]any{"f": []any{"a"}}, "argv[1]: param f: an array can only fill a whole word {f}"},
		{"bad placeholder in a literal tool", &Tool{Argv: []ArgvItem{{Word: "ls"}, {Group: &ArgvGroup{Words: []string{"{a"}}}}}, nil, "argv[1]: unclosed {"},
		{"NUL byte", &Tool{Argv: []ArgvItem{{Word: "ls"}, {Word: "{p}"}}}, map[string]any{"p": "a\x00b"}, "param p: value contains a NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.tool.RenderArgv(tt.params)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("RenderArgv = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseWord(t *testing.T) {
	tests := []struct {
		in      string
		want    []segment
		wantErr bool
	}{
		{in: "plain", want: []segment{{lit: "plain"}}},
		{in: "{p}", want: []segment{{param: "p"}}},
		{in: "--a={a}:{b}", want: []segment{{lit: "--a="}, {param: "a"}, {lit: ":"}, {param: "b"}}},
		{in: "{{p}}", want: []segment{{lit: "{p}"}}},
		{in: "{{{p}}}", want: []segment{{lit: "{"}, {param: "p"}, {lit: "}"}}},
		{in: "", want: nil},
		{in: "{", wantErr: true},
		{in: "}", wantErr: true},
		{in: "{}", wantErr: true},
		{in: "{a b}", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseWord(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseWord(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(segment{})); diff != "" {
			t.Errorf("parseWord(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

// condTool has a conditional group: branch and tag only ever list.
const condTool = `name: g
display: G
intent: git, read-only
method: run
executor: shell
params_schema:
  op: { type: string, required: true, enum: [log, branch, tag] }
  ref: { type: string }
author: a
created: 2026-05-31
why: tests
argv:
  - git
  - "{op}"
  - { if: { op: [branch, tag] }, then: ["--list"] }
  - ["{ref}"]
`

func TestRenderArgvConditional(t *testing.T) {
	tool := mustParse(t, "g.hdlp", condTool)
	for _, tc := range []struct {
		params map[string]any
		want   []string
	}{
		{map[string]any{"op": "branch", "ref": "evil"}, []string{"git", "branch", "--list", "evil"}},
		{map[string]any{"op": "tag"}, []string{"git", "tag", "--list"}},
		{map[string]any{"op": "log", "ref": "HEAD~3"}, []string{"git", "log", "HEAD~3"}},
	} {
		got, err := tool.RenderArgv(tc.params)
		if err != nil || !cmp.Equal(got, tc.want) {
			t.Errorf("RenderArgv(%v) = %q, %v; want %q", tc.params, got, err, tc.want)
		}
	}
}

func TestParseArgvConditionalErrors(t *testing.T) {
	for _, tc := range []struct{ item, want string }{
		{`{ if: { opp: [branch] }, then: ["--list"] }`, `argv[2].if.opp: condition on an undeclared param; want a param declared in params_schema, got "opp" (did you mean "op"?)`},
		{`{ if: { op: [push] }, then: ["--list"] }`, `argv[2].if.op[0]: not one of the param's enum values`},
		{`{ if: { op: [branch] } }`, `argv[2].then: missing required field`},
		{`{ if: { op: [branch] }, then: [] }`, `argv[2].then: want a list of one or more words`},
		{`{ if: { op: [branch] }, then: ["{nope}"] }`, `placeholder of an undeclared param`},
		{`{ when: { op: [branch] }, then: ["--list"] }`, `argv[2].when: unknown key`},
	} {
		src := strings.Replace(condTool, `{ if: { op: [branch, tag] }, then: ["--list"] }`, tc.item, 1)
		_, err := Parse("g.hdlp", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("argv item %s: Parse error %v; want it to contain %q", tc.item, err, tc.want)
		}
	}
}
