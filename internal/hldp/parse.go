// Parse and the parser: the file's limits and keys, whole-file checks
// (size, text, YAML syntax), the top-level mapping (tool) and the
// name/folder rule. Reading YAML nodes is in nodes.go; the sections have
// their own files: constraints.go, sandbox.go, paramsschema.go, argv.go,
// requires.go and examples.go.

package hldp

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize is the largest TOOL.hdlp Parse accepts, in bytes (256 KiB).
// A real definition is a few hundred bytes; anything near this is a mistake
// or an attack, and is refused before the YAML parser sees it.
const MaxFileSize = 256 << 10

// Upper bounds of the constraints a definition may declare.
const (
	// MaxTimeout is the largest constraints.timeout_ms (one hour).
	MaxTimeout = time.Hour
	// MaxOutputBytesLimit is the largest constraints.max_output_bytes (64 MiB).
	MaxOutputBytesLimit = 64 << 20
)

var (
	nameRE      = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	methodRE    = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)
	paramNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Top-level keys. The first group is the core format of DESIGN.md; the
// second the extensions (see Parse).
var (
	requiredKeys = []string{"name", "display", "intent", "method", "executor", "params_schema", "author", "created", "why"}
	topKeys      = []string{"name", "display", "intent", "method", "executor", "params_schema", "constraints", "author", "created", "why", "argv", "target", "keywords", "sandbox", "requires", "tags", "examples"}
	constraintKs = []string{"timeout_ms", "max_output_bytes", "output", "require_confirm", "max_concurrency", "rules", "shell_policy"}
	outputKs     = []string{"keep"}
	ruleKeys     = []string{"allow", "confirm", "deny"}
	paramKeys    = []string{"type", "required", "description", "enum", "default", "pattern", "minimum", "maximum", "items", "secret"}
	itemKeys     = []string{"type", "description", "enum", "pattern", "minimum", "maximum", "items"}
	paramTypes   = []string{"string", "integer", "number", "boolean", "array", "object"}
)

// typeAliases maps words authors write by habit to the JSON Schema type
// they mean, for the hint.
var typeAliases = map[string]ParamType{
	"str": TypeString, "text": TypeString,
	"int": TypeInteger, "int64": TypeInteger, "long": TypeInteger,
	"float": TypeNumber, "double": TypeNumber, "float64": TypeNumber, "decimal": TypeNumber,
	"bool": TypeBoolean,
	"list": TypeArray, "slice": TypeArray,
	"dict": TypeObject, "map": TypeObject, "hash": TypeObject,
}

// Parse parses and validates one TOOL.hdlp. file is only used in messages
// and for the name/folder rule: when its base name is FileName and it has a
// parent directory, the tool's name must equal that directory's name.
// Reading the file is the caller's business; Parse is a pure function of
// its arguments and safe for concurrent use.
//
// On failure the error is an errors.Join of *Diagnostic, one per problem,
// ordered by position, and every problem of the file is reported (use
// Diagnostics to get them back). Whole-file problems (too large, binary
// data, not YAML, empty, several documents, not a mapping) are reported
// alone, since nothing below them can be trusted.
//
// Besides the core fields of DESIGN.md, seven extension keys are accepted
// at the top level and validated as strictly:
//
//   - argv: the argv template of a tool with method "run" on executor
//     "shell" or "gatekeeper". A list whose items are words (strings) or
//     groups (lists of words). A word may hold placeholders {param} naming a
//     declared param; {{ and }} are literal braces. The first item is the
//     program: a plain word without placeholders. A param of type array may
//     only appear as a whole word "{p}", which expands to one element per
//     item. Groups may not nest. A conditional group, {if: {p: [values]},
//     then: [words]}, is kept only when the string param p has one of the
//     values (each one of p's enum, if it has one). See RenderArgv for how
//     a template is filled.
//   - target: the gatekeeper target a tool runs on (executor gatekeeper
//     only); absent means the default target.
//   - keywords: a list of extra words for intent matching.
//   - sandbox: what the processes of a shell or gatekeeper tool may change
//     and reach: `none` (outside the sandbox; only with require_confirm:
//     true), or a mapping with write (a list of clean absolute paths, or
//     ${files_root} for the daemon's files root) and network (a boolean).
//     Absent means read-only with no network. See Sandbox.
//   - requires: the prerequisites of a shell tool, a mapping with
//     programs (bare names, or absolute paths), files (clean absolute
//     paths) and check (a non-empty argv of literal words whose program is
//     a bare name or an absolute path). See Requires.
//   - tags: a list of distinct tags (see ValidTag).
//   - examples: requests, in any language, that the tool answers: a list
//     of at most MaxExamples distinct one-line strings of at most
//     MaxExampleLen characters each (see Ext.Examples).
func Parse(file string, data []byte) (*Tool, error) {
	p := &parser{file: file}
	t := p.parse(data)
	if len(p.diags) > 0 {
		slices.SortStableFunc(p.diags, func(a, b *Diagnostic) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
		})
		return nil, joinDiags(p.diags)
	}
	t.Intern() // and marks it for its lazy
	return t, nil
}

// parser collects the diagnostics of one Parse call.
type parser struct {
	file  string
	diags []*Diagnostic
	// ruleKeys are the param names under constraints.rules, checked
	// against params_schema once the whole file is read (the keys may
	// come before params_schema).
	ruleKeys []entry
	// shellPolicy is the constraints.shell_policy entry, checked against
	// the method once the whole file is read.
	shellPolicy *entry
}

// add records a problem at node n (nil: whole file).
func (p *parser) add(n *yaml.Node, field, problem, want, got, hint string) {
	d := &Diagnostic{File: p.file, Field: field, Problem: problem, Want: want, Got: got, Hint: hint}
	if n != nil {
		d.Line, d.Col = n.Line, n.Column
	}
	p.diags = append(p.diags, d)
}

// placeholder reports a field still holding the text `toolagent new`
// wrote for it: an unedited scaffold does not load.
func (p *parser) placeholder(n *yaml.Node, field, got, scaffold string) {
	if got == scaffold {
		p.add(n, field, "still the placeholder `toolagent new` wrote", fieldWant[field], "", "edit it, or give new --"+field)
	}
}

// addAt records a problem at an explicit line.
func (p *parser) addAt(line int, problem, want, got, hint string) {
	p.diags = append(p.diags, &Diagnostic{File: p.file, Line: line, Problem: problem, Want: want, Got: got, Hint: hint})
}

func (p *parser) parse(data []byte) *Tool {
	if len(data) > MaxFileSize {
		// A reader that stops at MaxFileSize+1 bytes (scan does) does not
		// know the real size: say only what is true.
		got := fmt.Sprintf("%d bytes", len(data))
		if len(data) == MaxFileSize+1 {
			got = fmt.Sprintf("more than %d bytes", MaxFileSize)
		}
		p.addAt(0, "file too large", fmt.Sprintf("at most %d bytes", MaxFileSize), got, "")
		return nil
	}
	if !p.checkText(data) {
		return nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		p.addAt(1, "empty file", "a YAML mapping of tool fields (name, display, intent, ...)", "", "")
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.addAt(1, "empty file", "a YAML mapping of tool fields (name, display, intent, ...)", "only comments", "")
			return nil
		}
		p.yamlError(err, data)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			line, _ = yamlErrorLine(err)
		}
		p.addAt(line, "multiple YAML documents", "exactly one document (one tool per file)", "", "remove the --- separator and what follows")
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		p.addAt(1, "not a YAML document", "a YAML mapping of tool fields", "", "")
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		p.add(root, "", "document is not a mapping", "a mapping of tool fields (name: ..., display: ...)", describe(root), "")
		return nil
	}
	return p.tool(root)
}

// checkText refuses binary data: NUL and other control bytes, and invalid
// UTF-8. The YAML parser would refuse most of it too, but without a line.
func (p *parser) checkText(data []byte) bool {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			p.diags = append(p.diags, &Diagnostic{File: p.file, Line: line, Col: col, Problem: "invalid UTF-8 (binary file?)", Want: "UTF-8 text", Got: fmt.Sprintf("byte 0x%02x", data[i])})
			return false
		case r == 0:
			p.diags = append(p.diags, &Diagnostic{File: p.file, Line: line, Col: col, Problem: "NUL byte (binary file?)", Want: "UTF-8 text"})
			return false
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0x7f:
			p.diags = append(p.diags, &Diagnostic{File: p.file, Line: line, Col: col, Problem: "control character", Want: "UTF-8 text", Got: fmt.Sprintf("%U", r)})
			return false
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return true
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlErrorLine extracts the line and message of a go-yaml syntax error.
func yamlErrorLine(err error) (int, string) {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n, m[2]
	}
	return 1, strings.TrimPrefix(msg, "yaml: ")
}

// yamlParserErrors are the go-yaml parser (not scanner) errors. go-yaml
// reports their line 0-based while scanner errors are 1-based; Parse adds
// the missing one so the line points at the construct that is not closed.
var yamlParserErrors = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected key",
	"did not find expected node content",
}

// yamlError reports a YAML syntax error, with a hint when tabs are the
// likely cause.
func (p *parser) yamlError(err error, data []byte) {
	line, msg := yamlErrorLine(err)
	lines := bytes.Split(data, []byte("\n"))
	if slices.Contains(yamlParserErrors, msg) && line < len(lines) {
		line++
	}
	hint := ""
	for _, l := range []int{line, line - 1, line + 1} {
		if l >= 1 && l <= len(lines) && bytes.ContainsRune(lines[l-1], '\t') {
			hint = "YAML does not allow tabs for indentation; indent with spaces"
			if l != line && bytes.HasPrefix(bytes.TrimLeft(lines[l-1], " "), []byte("\t")) {
				line = l
			}
			break
		}
	}
	p.addAt(line, "invalid YAML: "+msg, "", "", hint)
	if d := p.diags[len(p.diags)-1]; line >= 1 && line <= len(lines) {
		d.Col = yamlCol(string(lines[line-1]), msg)
	}
}

// yamlCol is the column (1-based, in bytes) a YAML syntax error on line
// points at: go-yaml names only the line. For a flow collection not
// closed, the bracket that opens it (the last one the line leaves open);
// for a tab in the indentation, the tab; else the line's first non-blank character.
func yamlCol(line, msg string) int {
	if strings.Contains(msg, "']'") || strings.Contains(msg, "'}'") {
		var open []int
		for i, r := range line {
			switch r {
			case '[', '{':
				open = append(open, i)
			case ']', '}':
				if len(open) > 0 {
					open = open[:len(open)-1]
				}
			}
		}
		if len(open) > 0 {
			return open[len(open)-1] + 1
		}
	}
	lead := len(line) - len(strings.TrimLeft(line, " \t"))
	if i := strings.IndexByte(line[:lead], '\t'); i >= 0 {
		return i + 1
	}
	return lead + 1
}

func (p *parser) tool(root *yaml.Node) *Tool {
	t := &Tool{File: p.file, Constraints: Constraints{Timeout: DefaultTimeout, MaxOutputBytes: DefaultMaxOutputBytes, OutputKeep: DefaultOutputKeep}}
	entries := p.mapping(root, "", topKeys)
	byKey := make(map[string]entry, len(entries))
	for _, e := range entries {
		byKey[e.key] = e
	}
	present := make(map[string]bool, len(root.Content)/2)
	for i := 0; i < len(root.Content); i += 2 {
		present[root.Content[i].Value] = true // a key reported for its value is not also missing
	}
	for _, k := range requiredKeys {
		if !present[k] {
			if hasUnknownNear(root, k) {
				continue // the unknown-key diagnostic already says "did you mean"
			}
			p.add(root, k, "missing required field", fieldWant[k], "", "")
		}
	}

	var (
		methodOK, execOK bool
		argv             *entry
		ext              Ext // t.Ext unless it holds nothing
	)
	for _, e := range entries {
		v, f := e.v, e.field
		switch e.key {
		case "name":
			var ok bool
			if t.Name, ok = p.str(v, f, fieldWant[e.key], true); ok {
				p.checkName(v, t.Name)
			}
		case "display":
			t.Display, _ = p.str(v, f, fieldWant[e.key], true)
		case "intent":
			t.Intent, _ = p.str(v, f, fieldWant[e.key], true)
			p.placeholder(v, f, t.Intent, ScaffoldIntent)
		case "author":
			t.Author, _ = p.str(v, f, fieldWant[e.key], true)
		case "why":
			t.Why, _ = p.str(v, f, fieldWant[e.key], true)
			p.placeholder(v, f, t.Why, ScaffoldWhy)
		case "method":
			if m, ok := p.str(v, f, fieldWant[e.key], true); ok {
				if !methodRE.MatchString(m) {
					p.add(v, f, "", fieldWant[e.key], describe(v), "")
				} else {
					t.Method, methodOK = m, true
				}
			}
		case "executor":
			if s, ok := p.str(v, f, fieldWant[e.key], true); ok {
				if !slices.Contains(ExecutorKinds, ExecutorKind(s)) {
					p.add(v, f, "unknown executor", fieldWant[e.key], describe(v), didYouMean(s, executorWords()))
				} else {
					t.Executor, execOK = ExecutorKind(s), true
				}
			}
		case "created":
			t.Created, _ = p.date(v, f)
		case "params_schema":
			t.Params = p.params(v, f)
		case "constraints":
			p.constraints(v, f, &t.Constraints)
		case "target":
			ext.Target, _ = p.str(v, f, fieldWant[e.key], true)
		case "keywords":
			t.Keywords = p.keywords(v, f)
		case "sandbox":
			ext.Sandbox = p.sandbox(v, f)
		case "requires":
			if r := p.requires(v, f); !r.IsZero() {
				ext.Requires = &r
			}
		case "tags":
			ext.Tags = p.tags(v, f)
		case "examples":
			ext.Examples = p.examples(v, f)
		case "argv":
			argv = &e
		}
	}
	if e, ok := byKey["target"]; ok && execOK && t.Executor != Gatekeeper {
		p.add(e.k, e.field, "only allowed with executor gatekeeper", "", "executor "+string(t.Executor), "remove target, or use executor gatekeeper")
	}
	p.checkRules(t, byKey)
	if e, ok := byKey["sandbox"]; ok {
		if execOK && t.Executor != Shell && t.Executor != Gatekeeper {
			p.add(e.k, e.field, "only allowed with executor shell or gatekeeper", "", "executor "+string(t.Executor), "the sandbox confines the processes of shell and gatekeeper tools; remove it")
		}
		if ext.Sandbox.None && !t.Constraints.RequireConfirm {
			p.add(e.v, e.field, "sandbox: none needs require_confirm: true", "require_confirm: true in constraints", "require_confirm: false", "running a tool outside the sandbox is an escape hatch that an approver must confirm for every call")
		}
	}
	if e, ok := byKey["requires"]; ok && execOK && t.Executor != Shell {
		p.add(e.k, e.field, "only allowed with executor shell", "", "executor "+string(t.Executor), requiresHint(t.Executor))
	}
	if p.shellPolicy != nil && methodOK && t.Method != "exec" {
		e := p.shellPolicy
		p.add(e.k, e.field, "only allowed with method exec", "", "method "+t.Method, "the shell policy judges the cmd of an exec tool; use rules to guard the params of other methods")
	}
	if argv != nil {
		if methodOK && t.Method != "run" {
			p.add(argv.k, argv.field, "only allowed with method run", "", "method "+t.Method, "")
		}
		if execOK && t.Executor != Shell && t.Executor != Gatekeeper {
			p.add(argv.k, argv.field, "only allowed with executor shell or gatekeeper", "", "executor "+string(t.Executor), "")
		}
		t.Argv = p.argv(argv.v, argv.field, t)
	}
	if !ext.isZero() {
		t.Ext = &ext
	}
	return t
}

// hasUnknownNear reports whether root has an unknown key that is a likely
// misspelling of the required key k.
func hasUnknownNear(root *yaml.Node, k string) bool {
	for i := 0; i+1 < len(root.Content); i += 2 {
		key := root.Content[i]
		if key.Kind == yaml.ScalarNode && !slices.Contains(topKeys, key.Value) && suggest(key.Value, topKeys) == k {
			return true
		}
	}
	return false
}

var fieldWant = map[string]string{
	"name":          "a name matching [a-z0-9][a-z0-9_-]*",
	"display":       "a non-empty string (display name)",
	"intent":        "a non-empty string (one sentence: what the tool does)",
	"method":        "a method name matching [a-z][a-z0-9_.-]*",
	"executor":      "one of shell, gatekeeper, hlpd-api, git-forgejo",
	"params_schema": "a mapping of param name to {type, required, description} ({} for none)",
	"author":        "a non-empty string (who wrote the tool)",
	"created":       "a date like 2026-05-31",
	"why":           "a non-empty string (why the tool exists)",
	"target":        "a non-empty string (gatekeeper target)",
}

func executorWords() []string {
	out := make([]string, len(ExecutorKinds))
	for i, k := range ExecutorKinds {
		out[i] = string(k)
	}
	return out
}

// checkName checks the name's syntax and that it equals its folder.
func (p *parser) checkName(n *yaml.Node, name string) {
	if !nameRE.MatchString(name) {
		p.add(n, "name", "invalid name", fieldWant["name"], describe(n), "")
		return
	}
	if folder, ok := folderOf(p.file); ok && folder != name {
		p.add(n, "name", "name does not match its folder", strconv.Quote(folder)+" (the folder name)", strconv.Quote(name), "rename the folder or the tool; tools/<name>/"+FileName)
	}
}

// folderOf returns the parent directory name of file when file is a
// FileName inside a directory.
func folderOf(file string) (string, bool) {
	i := strings.LastIndexAny(file, `/\`)
	if i < 0 || file[i+1:] != FileName {
		return "", false
	}
	dir := strings.TrimRight(file[:i], `/\`)
	j := strings.LastIndexAny(dir, `/\`)
	folder := dir[j+1:]
	if folder == "" || folder == "." || folder == ".." {
		return "", false
	}
	return folder, true
}
