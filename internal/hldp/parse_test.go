package hldp

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// parseFile parses a file under testdata with its path as the file name.
func parseFile(t testing.TB, path string) (*Tool, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Parse(filepath.ToSlash(path), data)
}

func mustParse(t testing.TB, file, src string) *Tool {
	t.Helper()
	tool, err := Parse(file, []byte(src))
	if err != nil {
		t.Fatalf("Parse(%s) = %v, want no error", file, err)
	}
	return tool
}

// TestParseSeed checks the seed example of DESIGN.md, copied verbatim,
// field by field.
func TestParseSeed(t *testing.T) {
	got, err := parseFile(t, "testdata/good/shell-exec/TOOL.hdlp")
	if err != nil {
		t.Fatalf("Parse(seed) = %v", err)
	}
	want := &Tool{
		Name:     "shell-exec",
		Display:  "Shell命令执行",
		Intent:   "在服务器上执行一条shell命令并返回结果",
		Method:   "exec",
		Executor: Gatekeeper,
		Params: []Param{
			{Name: "cmd", Type: TypeString, Required: true, Description: "要执行的shell命令"},
			{Name: "cwd", Type: TypeString, Description: "工作目录"},
		},
		Constraints: Constraints{Timeout: 30 * time.Second, MaxOutputBytes: 65536, OutputKeep: "head"},
		Author:      "ICE-GL-ZY001",
		Created:     "2026-05-31",
		Why:         "铸渊需要通过gatekeeper执行服务器命令。这是所有系统操作的基础工具。",
		File:        "testdata/good/shell-exec/TOOL.hdlp",
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Tool{})); diff != "" {
		t.Errorf("Parse(seed) mismatch (-want +got):\n%s", diff)
	}
}

// golden is what testdata/golden/<name>.json holds for a good file.
type golden struct {
	Tool           *Tool           `json:"tool"`
	InputSchema    json.RawMessage `json:"input_schema"`
	OpenAIFunction OpenAIFunction  `json:"openai_function"`
}

func TestParseGoodGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/good/*")
	if err != nil || len(dirs) < 5 {
		t.Fatalf("want at least 5 good cases, got %d (%v)", len(dirs), err)
	}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			tool, err := parseFile(t, filepath.Join(dir, FileName))
			if err != nil {
				t.Fatalf("Parse = %v, want no error", err)
			}
			if tool.Name != name {
				t.Errorf("Name = %q, want %q", tool.Name, name)
			}
			got, err := json.MarshalIndent(golden{tool, tool.InputSchema(), tool.OpenAIFunction()}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "golden", name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("golden %s mismatch (-want +got):\n%s\nrun go test -update if the change is intended", path, diff)
			}
		})
	}
}

// expectedErrors maps each case folder under testdata/bad/tools to
// substrings its error must contain, each with the position, in the manner
// of Prometheus' config_test.go. Every folder must have an entry.
var expectedErrors = map[string][]string{
	"alias":                    {"alias/TOOL.hdlp:13:9: author: YAML anchors and aliases are not supported", "alias/TOOL.hdlp:15:6: why: YAML anchors"},
	"argv-array-in-word":       {"TOOL.hdlp:19:5: argv[1]: array param inside a word; want {tags} as a whole word"},
	"argv-bad-brace":           {"TOOL.hdlp:16:16: argv[1]: invalid placeholder", "unclosed {", "TOOL.hdlp:16:24: argv[2]: invalid placeholder", "unmatched }"},
	"argv-empty":               {"TOOL.hdlp:16:7: argv: want a non-empty list of words"},
	"argv-nested-group":        {"TOOL.hdlp:18:15: argv[1][1]: groups may not nest"},
	"argv-non-run-method":      {"TOOL.hdlp:16:1: argv: only allowed with method run; got method exec"},
	"argv-program-placeholder": {`TOOL.hdlp:16:8: argv[0]: the program must be a plain word`},
	"argv-undeclared-param":    {"TOOL.hdlp:16:19: argv[2]: placeholder of an undeclared param; want a param declared in params_schema, got {dir}"},
	"argv-wrong-executor":      {"TOOL.hdlp:16:1: argv: only allowed with executor shell or gatekeeper; got executor hlpd-api"},
	"bad-default":              {`TOOL.hdlp:9:54: params_schema.mode.default: not in enum; want one of "fast", "safe", got string "slow"`},
	"bad-default-type":         {`TOOL.hdlp:9:36: params_schema.lines.default: want a value of type integer, got string "ten"`},
	"bad-enum":                 {`TOOL.hdlp:9:40: params_schema.level.enum[2]: want a value of type integer, got string "three"`},
	"bad-pattern":              {`TOOL.hdlp:8:73: params_schema.cmd.pattern: invalid regular expression; want Go RE2 syntax, got "([a-z]+" (missing closing )`},
	"binary-junk":              {"binary-junk/TOOL.hdlp:2:1: NUL byte (binary file?)"},
	"comments-only":            {"TOOL.hdlp:1: empty file"},
	"created-bad-date":         {`TOOL.hdlp:14:10: created: want a date like 2026-05-31, got string "2026-13-45"`},
	"created-not-date":         {`TOOL.hdlp:14:10: created: want a date like 2026-05-31, got string "last tuesday"`},
	"display-not-string":       {"TOOL.hdlp:3:10: display: want a non-empty string (display name), got integer 12345 (put the value in quotes"},
	"duplicate-keys":           {"TOOL.hdlp:6:1: method: duplicate key; want each key once (first defined at line 5)"},
	"duplicate-params":         {"TOOL.hdlp:9:3: params_schema.cmd: duplicate key; want each key once (first defined at line 8)"},
	"examples-invalid": {
		`TOOL.hdlp:18:5: examples[1]: want a request (a non-empty string), got an empty string`,
		`TOOL.hdlp:19:5: examples[2]: want a request (a non-empty string), got integer 42 (put the value in quotes to make it a string)`,
		`TOOL.hdlp:20:5: examples[3]: example too long; want at most 200 characters, got 201 characters`,
		`TOOL.hdlp:21:5: examples[4]: duplicate example; want each request once (case and spacing aside), got "Show me  the LAST commits" (same as examples[0])`,
		`TOOL.hdlp:22:5: examples[5]: not one line of text; want one request on one line, got U+000A in string`,
	},
	"examples-not-list":        {`TOOL.hdlp:16:11: examples: want a list of requests the tool answers, like ["show me the last five commits", 查看最近的提交记录], got string "show me the last commits" (write a list: [show me the last commits])`},
	"examples-too-many":        {`TOOL.hdlp:17:3: examples: too many examples; want at most 20, got 21`},
	"empty-file":               {"empty-file/TOOL.hdlp:1: empty file; want a YAML mapping of tool fields"},
	"invalid-method":           {`TOOL.hdlp:5:9: method: want a method name matching [a-z][a-z0-9_.-]*, got string "Exec Now"`},
	"invalid-name":             {`TOOL.hdlp:2:7: name: invalid name; want a name matching [a-z0-9][a-z0-9_-]*, got string "Invalid Name"`},
	"invalid-param-name":       {`TOOL.hdlp:8:3: params_schema.the-cmd: invalid param name`},
	"invalid-utf8":             {"TOOL.hdlp:3:14: invalid UTF-8 (binary file?); want UTF-8 text, got byte 0xe9"},
	"items-on-string":          {"TOOL.hdlp:8:64: params_schema.cmd.items: only allowed on array params; got type string"},
	"keywords-not-list":        {`TOOL.hdlp:16:11: keywords: want a list of strings, got string "git, log"`},
	"list-document":            {"TOOL.hdlp:2:1: document is not a mapping; want a mapping of tool fields (name: ..., display: ...), got a list"},
	"max-concurrency-negative": {"TOOL.hdlp:13:20: constraints.max_concurrency: out of range; want integer >= 0 (0 = no cap), got integer -2"},
	"min-above-max":            {"TOOL.hdlp:12:14: params_schema.lines.maximum: maximum below minimum; want >= minimum 10, got 5"},
	"missing-author":           {"TOOL.hdlp:2:1: author: missing required field"},
	"missing-created":          {"TOOL.hdlp:2:1: created: missing required field; want a date like 2026-05-31"},
	"missing-display":          {"TOOL.hdlp:2:1: display: missing required field"},
	"missing-executor":         {"TOOL.hdlp:2:1: executor: missing required field; want one of shell, gatekeeper, hlpd-api, git-forgejo"},
	"missing-intent":           {"TOOL.hdlp:2:1: intent: missing required field"},
	"missing-method":           {"TOOL.hdlp:2:1: method: missing required field"},
	"missing-name":             {"TOOL.hdlp:2:1: name: missing required field"},
	"missing-params-schema":    {"TOOL.hdlp:2:1: params_schema: missing required field; want a mapping of param name to {type, required, description} ({} for none)"},
	"missing-why":              {"TOOL.hdlp:2:1: why: missing required field"},
	"misspelt-intent":          {`TOOL.hdlp:4:1: intnet: unknown key; want one of name, display, intent,`, `(did you mean "intent"?)`},
	"misspelt-param-required":  {`TOOL.hdlp:8:24: params_schema.cmd.requried: unknown key; want one of type, required, description, enum, default, pattern, minimum, maximum, items, secret (did you mean "required"?)`},
	"misspelt-params-schema":   {`TOOL.hdlp:7:1: params_shema: unknown key`, `(did you mean "params_schema"?)`},
	"misspelt-require-confirm": {`misspelt-require-confirm/TOOL.hdlp:12:3: constraints.require_confrim: unknown key; want one of timeout_ms, max_output_bytes, output, require_confirm, max_concurrency, rules, shell_policy (did you mean "require_confirm"?)`},
	"name-folder-mismatch":     {`TOOL.hdlp:2:7: name: name does not match its folder; want "name-folder-mismatch" (the folder name), got "shell-exec"`},
	"negative-max-output":      {"TOOL.hdlp:11:21: constraints.max_output_bytes: out of range; want integer bytes > 0 and <= 67108864, got integer -1"},
	"param-required-string":    {`TOOL.hdlp:8:34: params_schema.cmd.required: want boolean true or false, got string "true"`},
	"params-schema-list":       {"TOOL.hdlp:8:3: params_schema: want a mapping of param name to {type, required, description} ({} for none), got a list"},
	"params-schema-null":       {"TOOL.hdlp:7:15: params_schema: want a mapping", "got null"},
	"pattern-on-integer":       {"TOOL.hdlp:9:23: params_schema.n.pattern: only allowed on string params; got type integer"},
	"rules-bad-regexp":         {"TOOL.hdlp:11:31: constraints.rules.cmd.deny[1]: invalid regular expression; want Go RE2 syntax, got \"(unclosed\" (missing closing )"},
	"rules-not-list":           {`TOOL.hdlp:11:18: constraints.rules.cmd.deny: want a list of regular expressions (Go RE2 syntax), got string "rm -rf"`},
	"rules-not-mapping":        {"TOOL.hdlp:11:5: constraints.rules: want a mapping of param name to { allow: [...], confirm: [...], deny: [...] }, got a list"},
	"rules-undeclared-param":   {`TOOL.hdlp:11:5: constraints.rules.cmnd: rule for an undeclared param; want a param declared in params_schema (cmd), got "cmnd" (did you mean "cmd"?)`},
	"rules-unknown-list":       {`TOOL.hdlp:12:7: constraints.rules.cmd.confrim: unknown key; want one of allow, confirm, deny (did you mean "confirm"?)`},
	"shell-policy-non-exec":    {"TOOL.hdlp:10:3: constraints.shell_policy: only allowed with method exec; got method run"},
	"sandbox-none-unconfirmed": {"TOOL.hdlp:9:10: sandbox: sandbox: none needs require_confirm: true"},
	"sandbox-relative-write":   {"TOOL.hdlp:10:11: sandbox.write[0]: not a clean absolute path"},
	"sandbox-unknown-key":      {"TOOL.hdlp:10:3: sandbox.netwrok: unknown key; want one of write, network (did you mean \"network\"?)"},
	"sandbox-wrong-executor":   {"TOOL.hdlp:8:1: sandbox: only allowed with executor shell or gatekeeper"},
	"sandbox-network-string":   {"TOOL.hdlp:9:21: sandbox.network: want boolean true or false, got string \"yes\""},
	"shell-policy-unknown":     {`TOOL.hdlp:10:17: constraints.shell_policy: unknown shell policy; want one of default, strict, none, got string "strcit" (did you mean "strict"?)`},
	"requires-bad-programs": {
		`TOOL.hdlp:10:14: requires.programs[0]: want a program name like kubectl, or an absolute path like /opt/tool/bin/tool, got an empty string`,
		`TOOL.hdlp:10:18: requires.programs[1]: relative program path; want a program name like kubectl, or an absolute path like /opt/tool/bin/tool, got "bin/jq"`,
		`TOOL.hdlp:10:26: requires.programs[2]: not a program name;`,
		`TOOL.hdlp:10:46: requires.programs[4]: duplicate entry; want each entry once, got "jq"`,
	},
	"requires-check-empty":     {"TOOL.hdlp:10:10: requires.check: want a non-empty argv list, the program first, like [kubectl, version, --client], got an empty list"},
	"requires-not-mapping":     {"TOOL.hdlp:9:11: requires: want a mapping with programs (a list of program names), files (a list of absolute paths) and check (an argv list), got a list"},
	"requires-programs-string": {`TOOL.hdlp:9:23: requires.programs: want a list of program names (kubectl) or absolute paths (/opt/tool/bin/tool), got string "kubectl" (write a list: [kubectl])`},
	"requires-relative-file": {
		`TOOL.hdlp:10:34: requires.files[1]: not a clean absolute path; want a clean absolute path like /etc/nginx/nginx.conf, got "etc/nginx/mime.types" (a relative path would depend on the daemon's working directory)`,
		`TOOL.hdlp:10:56: requires.files[2]: not a clean absolute path; want a clean absolute path like /etc/nginx/nginx.conf, got "/etc/nginx/../passwd"`,
	},
	"requires-unknown-key":    {`TOOL.hdlp:11:3: requires.chek: unknown key; want one of programs, files, check (did you mean "check"?)`},
	"requires-wrong-executor": {"TOOL.hdlp:9:1: requires: only allowed with executor shell; got executor gatekeeper"},
	"tags-invalid": {
		`TOOL.hdlp:9:8: tags[0]: invalid tag; want lowercase letters, digits and single - between them, at most 40 bytes, got "Git" (did you mean "git"?)`,
		`TOOL.hdlp:9:13: tags[1]: invalid tag; want lowercase letters, digits and single - between them, at most 40 bytes, got "read_only" (did you mean "read-only"?)`,
		`TOOL.hdlp:9:24: tags[2]: invalid tag;`,
		`TOOL.hdlp:9:35: tags[4]: want a tag (a lowercase word of letters, digits and -), got integer 42`,
		`TOOL.hdlp:9:39: tags[5]: duplicate tag; want each tag once, got "git"`,
	},
	"tags-not-list":          {`TOOL.hdlp:9:7: tags: want a list of tags (lowercase words of letters, digits and -, like git or read-only), got string "git" (write a list: [git])`},
	"require-confirm-string": {`TOOL.hdlp:12:20: constraints.require_confirm: want boolean true or false, got string "yes"`},
	"tab-indent":             {"TOOL.hdlp:10:1: invalid YAML: found character that cannot start any token (YAML does not allow tabs for indentation; indent with spaces)"},
	"target-non-gatekeeper":  {"TOOL.hdlp:16:1: target: only allowed with executor gatekeeper; got executor shell"},
	"three-problems": {
		`TOOL.hdlp:6:11: executor: unknown executor; want one of shell, gatekeeper, hlpd-api, git-forgejo, got string "ssh"`,
		`TOOL.hdlp:10:15: constraints.timeout_ms: want integer milliseconds > 0 and <= 3600000, got string "30s"`,
		`TOOL.hdlp:12:3: constraints.require_confrim: unknown key`,
	},
	"timeout-string":    {`TOOL.hdlp:10:15: constraints.timeout_ms: want integer milliseconds > 0 and <= 3600000, got string "30s"`},
	"timeout-too-large": {"TOOL.hdlp:10:15: constraints.timeout_ms: out of range; want integer milliseconds > 0 and <= 3600000, got integer 86400000"},
	"two-documents":     {"TOOL.hdlp:16: multiple YAML documents; want exactly one document (one tool per file)"},
	"unknown-executor":  {`TOOL.hdlp:6:11: executor: unknown executor; want one of shell, gatekeeper, hlpd-api, git-forgejo, got string "gatekeper" (did you mean "gatekeeper"?)`},
	"unknown-param-type": {
		`TOOL.hdlp:8:16: params_schema.cmd.type: unknown type; want one of string, integer, number, boolean, array, object, got string "int" (did you mean "integer"?)`,
	},
	"unknown-top-key": {"TOOL.hdlp:14:1: owner: unknown key; want one of name, display, intent, method, executor, params_schema, constraints, author, created, why, argv, target, keywords"},
	"yaml-syntax":     {"TOOL.hdlp:8:8: invalid YAML: did not find expected ',' or '}'"},
}

func TestParseBad(t *testing.T) {
	const root = "testdata/bad/tools"
	dirs, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 30 {
		t.Errorf("%s has %d cases, want at least 30", root, len(dirs))
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		name := d.Name()
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			want, ok := expectedErrors[name]
			if !ok {
				t.Fatalf("no expectedErrors entry for %s/%s: every bad file must name the error it produces", root, name)
			}
			tool, err := parseFile(t, filepath.Join(root, name, FileName))
			if err == nil {
				t.Fatalf("Parse = %+v, nil error; want errors %q", tool, want)
			}
			if tool != nil {
				t.Errorf("Parse returned a tool with an error")
			}
			msg := err.Error()
			for _, w := range want {
				if !strings.Contains(msg, w) {
					t.Errorf("Parse error =\n%s\nwant it to contain\n%s", msg, w)
				}
			}
			diags := Diagnostics(err)
			if len(diags) == 0 {
				t.Fatalf("Diagnostics(%v) is empty", err)
			}
			for _, d := range diags {
				if d.File != filepath.ToSlash(filepath.Join(root, name, FileName)) {
					t.Errorf("Diagnostic.File = %q, want the parsed file", d.File)
				}
			}
		})
	}
	for name := range expectedErrors {
		if !seen[name] {
			t.Errorf("expectedErrors has %s, but %s/%s does not exist", name, root, name)
		}
	}
}

// TestParseReportsAll checks that every problem of a file is reported, not
// just the first.
func TestParseReportsAll(t *testing.T) {
	_, err := parseFile(t, "testdata/bad/tools/three-problems/TOOL.hdlp")
	var got []string
	for _, d := range Diagnostics(err) {
		got = append(got, fmt.Sprintf("%d:%d %s", d.Line, d.Col, d.Field))
	}
	want := []string{"6:11 executor", "10:15 constraints.timeout_ms", "12:3 constraints.require_confrim"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Diagnostics(three-problems) mismatch (-want +got):\n%s", diff)
	}
}

func TestDiagnosticError(t *testing.T) {
	tests := []struct {
		name string
		d    Diagnostic
		want string
	}{
		{
			name: "unknown key with hint",
			d: Diagnostic{File: "tools/x/TOOL.hdlp", Line: 7, Col: 3, Field: "constraints.require_confrim", Problem: "unknown key",
				Want: "one of timeout_ms, max_output_bytes, require_confirm, max_concurrency", Hint: `did you mean "require_confirm"?`},
			want: `tools/x/TOOL.hdlp:7:3: constraints.require_confrim: unknown key; want one of timeout_ms, max_output_bytes, require_confirm, max_concurrency (did you mean "require_confirm"?)`,
		},
		{
			name: "want and got",
			d:    Diagnostic{File: "f", Line: 2, Col: 15, Field: "constraints.timeout_ms", Want: "integer milliseconds", Got: `string "30s"`},
			want: `f:2:15: constraints.timeout_ms: want integer milliseconds, got string "30s"`,
		},
		{
			name: "whole file",
			d:    Diagnostic{File: "f", Problem: "file too large", Want: "at most 1 bytes", Got: "2 bytes"},
			want: "f: file too large; want at most 1 bytes, got 2 bytes",
		},
		{
			name: "line without column",
			d:    Diagnostic{File: "f", Line: 3, Problem: "invalid YAML: x"},
			want: "f:3: invalid YAML: x",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDiagnosticsUnwrap(t *testing.T) {
	d1, d2 := &Diagnostic{File: "a"}, &Diagnostic{File: "b"}
	err := fmt.Errorf("scan: %w", errors.Join(d1, errors.New("other"), errors.Join(d2)))
	if diff := cmp.Diff([]*Diagnostic{d1, d2}, Diagnostics(err)); diff != "" {
		t.Errorf("Diagnostics mismatch (-want +got):\n%s", diff)
	}
	if got := Diagnostics(nil); got != nil {
		t.Errorf("Diagnostics(nil) = %v, want nil", got)
	}
}

// seedYAML is a valid tool used as a base by table tests.
const seedYAML = `name: t
display: T
intent: do t
method: exec
executor: gatekeeper
params_schema: {}
author: a
created: 2026-05-31
why: because
`

func TestParseWholeFile(t *testing.T) {
	tooLarge := []byte(seedYAML + "# " + strings.Repeat("x", MaxFileSize) + "\n")
	atLimit := []byte(seedYAML + "# " + strings.Repeat("x", MaxFileSize-len(seedYAML)-3) + "\n")
	if len(atLimit) != MaxFileSize {
		t.Fatalf("atLimit is %d bytes, want %d", len(atLimit), MaxFileSize)
	}
	tests := []struct {
		name    string
		data    []byte
		wantErr string // "" = parses
	}{
		{"huge file", tooLarge, fmt.Sprintf("t.hdlp: file too large; want at most %d bytes, got %d bytes", MaxFileSize, len(tooLarge))},
		// Read only up to the limit (as scan reads): the size is unknown.
		{"huge file read up to the limit", tooLarge[:MaxFileSize+1], fmt.Sprintf("t.hdlp: file too large; want at most %d bytes, got more than %d bytes", MaxFileSize, MaxFileSize)},
		{"exactly the limit", atLimit, ""},
		{"whitespace only", []byte("  \n\n \t\n"), "t.hdlp:1: empty file"},
		{"control character", []byte("name: t\ndisplay: \x07bell\n"), "t.hdlp:2:10: control character; want UTF-8 text, got U+0007"},
		{"scalar document", []byte("just a string\n"), `t.hdlp:1:1: document is not a mapping; want a mapping of tool fields (name: ..., display: ...), got string "just a string"`},
		{"null document", []byte("~\n"), "got null"},
		{"leading document marker", []byte("---\n" + seedYAML), ""},
		{"empty second document", []byte(seedYAML + "---\n"), "multiple YAML documents"},
		{"syntax error in second document", []byte(seedYAML + "---\n{ a: \n"), "multiple YAML documents"},
		{"BOM", append([]byte("\ufeff"), seedYAML...), ""},
		{"merge key", []byte(seedYAML + "<<: {x: 1}\n"), "merge keys (<<) are not supported"},
		{"non-string key", []byte(seedYAML + "1: x\n"), "t.hdlp:10:1: invalid key; want a string key, got integer 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.hdlp", tt.data)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Parse = %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Parse = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseFields(t *testing.T) {
	tests := []struct {
		name    string
		replace [2]string // in seedYAML
		append  string
		check   func(*Tool) string // returns a problem or ""
		wantErr string
	}{
		{name: "defaults", check: func(t *Tool) string {
			want := Constraints{Timeout: DefaultTimeout, MaxOutputBytes: DefaultMaxOutputBytes, OutputKeep: DefaultOutputKeep}
			return cmp.Diff(want, t.Constraints)
		}},
		{name: "created timestamp", replace: [2]string{"created: 2026-05-31", "created: 2026-05-31T23:30:00+08:00"}, check: createdIs("2026-05-31")},
		{name: "created quoted", replace: [2]string{"created: 2026-05-31", `created: "2026-05-31"`}, check: createdIs("2026-05-31")},
		{name: "created short", replace: [2]string{"created: 2026-05-31", `created: 2026-5-3`}, check: createdIs("2026-05-03")},
		{name: "created space time", replace: [2]string{"created: 2026-05-31", `created: 2026-05-31 08:00:00`}, check: createdIs("2026-05-31")},
		{name: "created number", replace: [2]string{"created: 2026-05-31", `created: 20260531`}, wantErr: "created: want a date like 2026-05-31, got integer 20260531"},
		{name: "empty name", replace: [2]string{"name: t", `name: ""`}, wantErr: `name: want a name matching [a-z0-9][a-z0-9_-]*, got an empty string`},
		{name: "null intent", replace: [2]string{"intent: do t", `intent:`}, wantErr: `intent: want a non-empty string (one sentence: what the tool does), got null`},
		{name: "constraints all", append: "constraints: {timeout_ms: 3600000, max_output_bytes: 67108864, require_confirm: true, max_concurrency: 2}\n", check: func(t *Tool) string {
			return cmp.Diff(Constraints{Timeout: time.Hour, MaxOutputBytes: 64 << 20, OutputKeep: "head", RequireConfirm: true, MaxConcurrency: 2}, t.Constraints)
		}},
		{name: "constraints float", append: "constraints: {timeout_ms: 1.5}\n", wantErr: "constraints.timeout_ms: want integer milliseconds > 0 and <= 3600000, got float 1.5"},
		{name: "constraints overflow", append: "constraints: {timeout_ms: 99999999999999999999}\n", wantErr: "constraints.timeout_ms"},
		{name: "constraints not mapping", append: "constraints: 5\n", wantErr: "constraints: want a mapping with timeout_ms"},
		{name: "output keep tail", append: "constraints: {output: {keep: tail}}\n", check: func(t *Tool) string { return cmp.Diff("tail", t.Constraints.OutputKeep) }},
		{name: "output keep both", append: "constraints: {output: {keep: both}}\n", check: func(t *Tool) string { return cmp.Diff("both", t.Constraints.OutputKeep) }},
		{name: "output keep unknown", append: "constraints: {output: {keep: tial}}\n", wantErr: `constraints.output.keep: unknown output keep; want one of head, tail, both, got string "tial" (did you mean "tail"?)`},
		{name: "output unknown key", append: "constraints: {output: {kept: tail}}\n", wantErr: `constraints.output.kept: unknown key; want one of keep`},
		{name: "output not mapping", append: "constraints: {output: tail}\n", wantErr: `constraints.output: want a mapping with keep, got string "tail"`},
		{name: "keywords", append: "keywords: [a, 日志]\n", check: func(t *Tool) string { return cmp.Diff([]string{"a", "日志"}, t.Keywords) }},
		{name: "examples", append: "examples: [\"show me the last five commits\", 查看最近的提交记录]\n", check: func(t *Tool) string {
			return cmp.Diff([]string{"show me the last five commits", "查看最近的提交记录"}, t.Examples())
		}},
		{name: "examples empty list", append: "examples: []\n", check: func(t *Tool) string { return cmp.Diff([]string(nil), t.Examples()) + cmp.Diff((*Ext)(nil), t.Ext) }},
		{name: "duplicate examples", append: "examples: [show me the commits, Show me the  commits]\n", wantErr: `examples[1]: duplicate example; want each request once (case and spacing aside), got "Show me the  commits" (same as examples[0])`},
		{name: "example of MaxExampleLen characters", append: "examples: [" + strings.Repeat("查", MaxExampleLen) + "]\n", check: func(t *Tool) string {
			return cmp.Diff(1, len(t.Examples()))
		}},
		{name: "MaxExamples examples", append: "examples: [" + numbered("e", MaxExamples) + "]\n", check: func(t *Tool) string {
			return cmp.Diff(MaxExamples, len(t.Examples()))
		}},
		{name: "example with a tab", append: "examples: [\"a\\tb\"]\n", wantErr: "examples[0]: not one line of text; want one request on one line, got U+0009"},
		{name: "example a list", append: "examples: [[a, b]]\n", wantErr: "examples[0]: want a request (a non-empty string), got a list"},
		{name: "examples a mapping", append: "examples: {a: b}\n", wantErr: "examples: want a list of requests"},
		{name: "target on gatekeeper", append: "target: prod\n", check: func(t *Tool) string { return cmp.Diff("prod", t.Target()) }},
		{name: "executor typo hint", replace: [2]string{"executor: gatekeeper", "executor: hlpd_api"}, wantErr: `(did you mean "hlpd-api"?)`},
		{name: "type alias hint", replace: [2]string{"params_schema: {}", "params_schema: {n: {type: bool}}"}, wantErr: `params_schema.n.type: unknown type; want one of string, integer, number, boolean, array, object, got string "bool" (did you mean "boolean"?)`},
		{name: "missing type", replace: [2]string{"params_schema: {}", "params_schema: {n: {required: true}}"}, wantErr: `params_schema.n.type: missing required field`},
		{name: "required inside items", replace: [2]string{"params_schema: {}", "params_schema: {n: {type: array, items: {type: string, required: true}}}"}, wantErr: `params_schema.n.items.required: unknown key`},
		{name: "nested items", replace: [2]string{"params_schema: {}", "params_schema: {m: {type: array, items: {type: array, items: {type: integer, minimum: 0}}, default: [[1, 2], []]}}"}, check: func(t *Tool) string {
			return cmp.Diff([]any{[]any{int64(1), int64(2)}, []any{}}, t.Params[0].Default())
		}},
		{name: "default below minimum", replace: [2]string{"params_schema: {}", "params_schema: {n: {type: integer, minimum: 1, default: 0}}"}, wantErr: "params_schema.n.default: below minimum; want integer >= 1, got integer 0"},
		{name: "default fails pattern", replace: [2]string{"params_schema: {}", `params_schema: {s: {type: string, pattern: "^a", default: "b"}}`}, wantErr: "params_schema.s.default: does not match pattern"},
		{name: "object default", replace: [2]string{"params_schema: {}", `params_schema: {o: {type: object, default: {a: 1, b: [x, null]}}}`}, check: func(t *Tool) string {
			return cmp.Diff(map[string]any{"a": int64(1), "b": []any{"x", nil}}, t.Params[0].Default())
		}},
		{name: "number enum", replace: [2]string{"params_schema: {}", `params_schema: {r: {type: number, enum: [1, 2.5], default: 1}}`}, check: func(t *Tool) string {
			return cmp.Diff([]any{1.0, 2.5}, t.Params[0].Enum()) + cmp.Diff(any(1.0), t.Params[0].Default())
		}},
		{name: "minimum on string", replace: [2]string{"params_schema: {}", `params_schema: {s: {type: string, minimum: 1}}`}, wantErr: "params_schema.s.minimum: only allowed on integer and number params; got type string"},
		{name: "shell run without argv parses", replace: [2]string{"method: exec\nexecutor: gatekeeper", "method: run\nexecutor: shell"}, check: func(t *Tool) string {
			return cmp.Diff([]ArgvItem(nil), t.Argv)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := seedYAML
			if tt.replace[0] != "" {
				if !strings.Contains(src, tt.replace[0]) {
					t.Fatalf("seedYAML has no %q", tt.replace[0])
				}
				src = strings.Replace(src, tt.replace[0], tt.replace[1], 1)
			}
			src += tt.append
			tool, err := Parse("t.hdlp", []byte(src))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %v, want error containing %q", src, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q) = %v, want no error", src, err)
			}
			if tt.check != nil {
				if diff := tt.check(tool); diff != "" {
					t.Errorf("Parse(%q) mismatch (-want +got):\n%s", src, diff)
				}
			}
		})
	}
}

// numbered returns "w0, w1, ..." with n words.
func numbered(w string, n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", w, i)
	}
	return strings.Join(out, ", ")
}

func createdIs(want string) func(*Tool) string {
	return func(t *Tool) string { return cmp.Diff(want, t.Created) }
}

func TestFolderOf(t *testing.T) {
	tests := []struct {
		file   string
		want   string
		wantOK bool
	}{
		{"tools/git-log/TOOL.hdlp", "git-log", true},
		{"/abs/tools/x/TOOL.hdlp", "x", true},
		{`tools\x\TOOL.hdlp`, "x", true},
		{"TOOL.hdlp", "", false},
		{"/TOOL.hdlp", "", false},
		{"./TOOL.hdlp", "", false},
		{"tools/x/other.hdlp", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := folderOf(tt.file)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("folderOf(%q) = %q, %v, want %q, %v", tt.file, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestSuggest(t *testing.T) {
	tests := []struct {
		in         string
		candidates []string
		want       string
	}{
		{"require_confrim", constraintKs, "require_confirm"},
		{"intnet", topKeys, "intent"},
		{"params_shema", topKeys, "params_schema"},
		{"Name", topKeys, "name"},
		{"requried", paramKeys, "required"},
		{"gatekeper", executorWords(), "gatekeeper"},
		{"owner", topKeys, ""},
		{"x", paramTypes, ""},
		{"", topKeys, ""},
	}
	for _, tt := range tests {
		if got := suggest(tt.in, tt.candidates); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestInputSchemaAlwaysObject(t *testing.T) {
	const want = `{"type":"object","properties":{},"required":[],"additionalProperties":false}`
	tests := []struct {
		name string
		tool *Tool
	}{
		{"parsed without params", mustParse(t, "t.hdlp", seedYAML)},
		{"zero Tool literal", &Tool{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.tool.InputSchema()
			if string(got) != want {
				t.Errorf("InputSchema() = %s, want %s", got, want)
			}
			if _, err := tt.tool.CheckParams(nil); err != nil {
				t.Errorf("CheckParams(nil) = %v, want no error", err)
			}
		})
	}
}

func TestOpenAIFunctionJSON(t *testing.T) {
	tool := mustParse(t, "t.hdlp", strings.Replace(seedYAML, "params_schema: {}", "params_schema: {q: {type: string, required: true}}", 1))
	got, err := json.Marshal(tool.OpenAIFunction())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"function","function":{"name":"t","description":"do t (T)","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}}}`
	if string(got) != want {
		t.Errorf("OpenAIFunction() = %s, want %s", got, want)
	}
	// The cached schema is a copy: changing it must not change the tool.
	s := tool.InputSchema()
	s[0] = 'X'
	if !bytes.HasPrefix(tool.InputSchema(), []byte("{")) {
		t.Errorf("InputSchema() returned a shared slice")
	}
	// BuildInputSchema is those bytes, and keeps nothing: a fresh tool
	// has no memo of its schema after it.
	fresh := mustParse(t, "t.hdlp", strings.Replace(seedYAML, "params_schema: {}", "params_schema: {q: {type: string, required: true}}", 1))
	if got := fresh.BuildInputSchema(); !bytes.Equal(got, tool.InputSchema()) {
		t.Errorf("BuildInputSchema() = %s, want InputSchema()'s %s", got, tool.InputSchema())
	}
	if l := fresh.memo(); l.schema != nil {
		t.Errorf("BuildInputSchema() kept %s", l.schema)
	}
}
