package hldp

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
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
	paramKeys    = []string{"type", "required", "description", "enum", "default", "pattern", "minimum", "maximum", "items"}
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
}

// entry is one key/value pair of a mapping, after duplicate and unknown-key
// checks.
type entry struct {
	key   string
	k, v  *yaml.Node
	field string
}

// mapping checks the keys of mapping node n and returns its entries in file
// order. known == nil accepts any key (params_schema); keys that are not
// strings, duplicates and unknown keys are reported and left out.
func (p *parser) mapping(n *yaml.Node, prefix string, known []string) []entry {
	var out []entry
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			if k.Tag == "!!merge" {
				p.add(k, prefix, "merge keys (<<) are not supported", "keys written out", "", "")
			} else {
				p.add(k, prefix, "invalid key", "a string key", describe(k), "")
			}
			continue
		}
		field := join(prefix, k.Value)
		if first, dup := seen[k.Value]; dup {
			p.add(k, field, "duplicate key", "each key once", "", fmt.Sprintf("first defined at line %d", first))
			continue
		}
		seen[k.Value] = k.Line
		if known != nil && !slices.Contains(known, k.Value) {
			p.add(k, field, "unknown key", "one of "+strings.Join(known, ", "), "", didYouMean(k.Value, known))
			continue
		}
		if v.Kind == yaml.AliasNode || v.Anchor != "" {
			p.add(v, field, "YAML anchors and aliases are not supported", "the value written out", "", "")
			continue
		}
		out = append(out, entry{key: k.Value, k: k, v: v, field: field})
	}
	return out
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// describe says what a node is, for the "got" part of a message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	v := n.Value
	if len(v) > 60 {
		v = v[:57] + "..."
	}
	switch n.Tag {
	case "!!str":
		return "string " + strconv.Quote(v)
	case "!!int":
		return "integer " + v
	case "!!float":
		return "float " + v
	case "!!bool":
		return "boolean " + v
	case "!!null":
		return "null"
	case "!!timestamp":
		return "date " + v
	}
	return n.Tag + " " + strconv.Quote(v)
}

// quoteHint is the hint for a plain scalar YAML read as something other
// than the string the author meant.
func quoteHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!str" && n.Tag != "!!null" && n.Style == 0 {
		return "put the value in quotes to make it a string"
	}
	return ""
}

// str returns the string value of n, reporting anything else.
func (p *parser) str(n *yaml.Node, field, want string, nonEmpty bool) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.add(n, field, "", want, describe(n), quoteHint(n))
		return "", false
	}
	if nonEmpty && strings.TrimSpace(n.Value) == "" {
		p.add(n, field, "", want, "an empty string", "")
		return "", false
	}
	return n.Value, true
}

// integer returns the integer value of n, reporting anything else.
func (p *parser) integer(n *yaml.Node, field, want string) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		p.add(n, field, "", want, describe(n), "")
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		p.add(n, field, "out of range", want, describe(n), "")
		return 0, false
	}
	return v, true
}

// boolean returns the boolean value of n, reporting anything else.
func (p *parser) boolean(n *yaml.Node, field string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.add(n, field, "", "boolean true or false", describe(n), "")
		return false, false
	}
	var v bool
	if err := n.Decode(&v); err != nil {
		p.add(n, field, "", "boolean true or false", describe(n), "")
		return false, false
	}
	return v, true
}

// number returns the numeric value of an int or float node.
func (p *parser) number(n *yaml.Node, field string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		p.add(n, field, "", "a number", describe(n), "")
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		p.add(n, field, "", "a finite number", describe(n), "")
		return 0, false
	}
	return v, true
}

// dateLayouts are the timestamp forms YAML accepts (as go-yaml resolves
// them), tried on both YAML dates and quoted strings.
var dateLayouts = []string{
	"2006-1-2T15:4:5.999999999Z07:00",
	"2006-1-2t15:4:5.999999999Z07:00",
	"2006-1-2 15:4:5.999999999",
	"2006-1-2",
}

// date returns the YYYY-MM-DD form of a YAML date or a string holding one.
func (p *parser) date(n *yaml.Node, field string) (string, bool) {
	const want = "a date like 2026-05-31"
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!timestamp" && n.Tag != "!!str") {
		p.add(n, field, "", want, describe(n), "")
		return "", false
	}
	s := strings.TrimSpace(n.Value)
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.Format(time.DateOnly), true
		}
	}
	p.add(n, field, "", want, describe(n), "")
	return "", false
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
		case "author":
			t.Author, _ = p.str(v, f, fieldWant[e.key], true)
		case "why":
			t.Why, _ = p.str(v, f, fieldWant[e.key], true)
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

func (p *parser) constraints(n *yaml.Node, field string, c *Constraints) {
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "", "a mapping with "+strings.Join(constraintKs, ", "), describe(n), "")
		return
	}
	for _, e := range p.mapping(n, field, constraintKs) {
		switch e.key {
		case "timeout_ms":
			const want = "integer milliseconds > 0 and <= 3600000"
			if v, ok := p.integer(e.v, e.field, want); ok {
				if v <= 0 || v > MaxTimeout.Milliseconds() {
					p.add(e.v, e.field, "out of range", want, describe(e.v), "")
				} else {
					c.Timeout = time.Duration(v) * time.Millisecond
				}
			}
		case "max_output_bytes":
			want := fmt.Sprintf("integer bytes > 0 and <= %d", MaxOutputBytesLimit)
			if v, ok := p.integer(e.v, e.field, want); ok {
				if v <= 0 || v > MaxOutputBytesLimit {
					p.add(e.v, e.field, "out of range", want, describe(e.v), "")
				} else {
					c.MaxOutputBytes = v
				}
			}
		case "output":
			if e.v.Kind != yaml.MappingNode {
				p.add(e.v, e.field, "", "a mapping with keep", describe(e.v), "")
				continue
			}
			for _, o := range p.mapping(e.v, e.field, outputKs) {
				want := "one of " + strings.Join(OutputKeeps, ", ")
				if s, ok := p.str(o.v, o.field, want, true); ok {
					if !slices.Contains(OutputKeeps, s) {
						p.add(o.v, o.field, "unknown output keep", want, describe(o.v), didYouMean(s, OutputKeeps))
					} else {
						c.OutputKeep = s
					}
				}
			}
		case "require_confirm":
			c.RequireConfirm, _ = p.boolean(e.v, e.field)
		case "max_concurrency":
			const want = "integer >= 0 (0 = no cap)"
			if v, ok := p.integer(e.v, e.field, want); ok {
				if v < 0 || v > math.MaxInt32 {
					p.add(e.v, e.field, "out of range", want, describe(e.v), "")
				} else {
					c.MaxConcurrency = int(v)
				}
			}
		case "rules":
			c.Rules = p.rules(e.v, e.field)
		case "shell_policy":
			want := "one of " + strings.Join(ShellPolicies, ", ")
			if s, ok := p.str(e.v, e.field, want, true); ok {
				if !slices.Contains(ShellPolicies, s) {
					p.add(e.v, e.field, "unknown shell policy", want, describe(e.v), didYouMean(s, ShellPolicies))
				} else {
					c.ShellPolicy = s
					p.shellPolicy = &e
				}
			}
		}
	}
}

// rules parses constraints.rules: a mapping of param name to a mapping
// with allow, confirm and deny lists of Go regular expressions. Param
// names are checked against params_schema later (checkRules).
func (p *parser) rules(n *yaml.Node, field string) map[string]ArgRules {
	const want = "a mapping of param name to { allow: [...], confirm: [...], deny: [...] }"
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "", want, describe(n), "")
		return nil
	}
	out := map[string]ArgRules{}
	for _, e := range p.mapping(n, field, nil) {
		p.ruleKeys = append(p.ruleKeys, e)
		if e.v.Kind != yaml.MappingNode {
			p.add(e.v, e.field, "", "a mapping with allow, confirm, deny (lists of regular expressions)", describe(e.v), "")
			continue
		}
		var r ArgRules
		for _, le := range p.mapping(e.v, e.field, ruleKeys) {
			pats := p.patterns(le.v, le.field)
			switch le.key {
			case "allow":
				r.Allow = pats
			case "confirm":
				r.Confirm = pats
			case "deny":
				r.Deny = pats
			}
		}
		out[e.key] = r
	}
	return out
}

// patterns parses a list of Go regular expressions, reporting each one
// that does not compile.
func (p *parser) patterns(n *yaml.Node, field string) []string {
	if n.Kind != yaml.SequenceNode {
		p.add(n, field, "", "a list of regular expressions (Go RE2 syntax)", describe(n), quoteHint(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, ok := p.str(c, f, "a regular expression string (Go RE2 syntax)", true)
		if !ok {
			continue
		}
		if _, err := regexp.Compile(s); err != nil {
			p.add(c, f, "invalid regular expression", "Go RE2 syntax", strconv.Quote(s), strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			continue
		}
		out = append(out, s)
	}
	return out
}

// checkRules reports the keys of constraints.rules that name no declared
// param: a rule on a misspelt param would silently guard nothing.
func (p *parser) checkRules(t *Tool, byKey map[string]entry) {
	if _, ok := byKey["params_schema"]; !ok {
		return // the missing params_schema is already reported
	}
	names := make([]string, len(t.Params))
	for i, pr := range t.Params {
		names[i] = pr.Name
	}
	for _, e := range p.ruleKeys {
		if !slices.Contains(names, e.key) {
			want := "a param declared in params_schema"
			if len(names) > 0 {
				want += " (" + strings.Join(names, ", ") + ")"
			}
			p.add(e.k, e.field, "rule for an undeclared param", want, strconv.Quote(e.key), didYouMean(e.key, names))
		}
	}
}

// sandboxKs are the keys of a sandbox mapping.
var sandboxKs = []string{"write", "network"}

// sandbox parses the top-level sandbox key: the word none, or a mapping
// with write (a list of absolute paths) and network (a boolean).
func (p *parser) sandbox(n *yaml.Node, field string) Sandbox {
	const want = "none, or a mapping with write (a list of absolute paths or ${files_root}) and network (true or false)"
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		if n.Value == SandboxNone {
			return Sandbox{None: true}
		}
		p.add(n, field, "", want, describe(n), didYouMean(n.Value, []string{SandboxNone}))
		return Sandbox{}
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "", want, describe(n), "")
		return Sandbox{}
	}
	var sb Sandbox
	for _, e := range p.mapping(n, field, sandboxKs) {
		switch e.key {
		case "network":
			sb.Network, _ = p.boolean(e.v, e.field)
		case "write":
			if e.v.Kind != yaml.SequenceNode {
				p.add(e.v, e.field, "", "a list of absolute paths", describe(e.v), "")
				continue
			}
			for i, w := range e.v.Content {
				f := fmt.Sprintf("%s[%d]", e.field, i)
				s, ok := p.str(w, f, "an absolute path", true)
				if !ok {
					continue
				}
				switch {
				case s == SandboxFilesRoot:
					if slices.Contains(sb.Write, s) {
						p.add(w, f, "duplicate path", "each path once", strconv.Quote(s), "")
					} else {
						sb.Write = append(sb.Write, s)
					}
				case !path.IsAbs(s) || path.Clean(s) != s:
					p.add(w, f, "not a clean absolute path", "an absolute path without . or .. or a trailing /, like /srv/reports, or ${files_root}", strconv.Quote(s), "")
				case s == "/":
					p.add(w, f, "the whole filesystem cannot be granted", "a directory or file below /", strconv.Quote(s), "")
				case slices.Contains(sb.Write, s):
					p.add(w, f, "duplicate path", "each path once", strconv.Quote(s), "")
				default:
					sb.Write = append(sb.Write, s)
				}
			}
		}
	}
	return sb
}

func (p *parser) keywords(n *yaml.Node, field string) []string {
	if n.Kind != yaml.SequenceNode {
		p.add(n, field, "", "a list of strings", describe(n), "")
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, w := range n.Content {
		if s, ok := p.str(w, fmt.Sprintf("%s[%d]", field, i), "a non-empty string", true); ok {
			out = append(out, s)
		}
	}
	return out
}

func (p *parser) params(n *yaml.Node, field string) []Param {
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "", fieldWant["params_schema"], describe(n), "")
		return nil
	}
	var out []Param
	for _, e := range p.mapping(n, field, nil) {
		if !paramNameRE.MatchString(e.key) {
			p.add(e.k, e.field, "invalid param name", "a name matching [A-Za-z_][A-Za-z0-9_]*", strconv.Quote(e.key), "")
			continue
		}
		if pr := p.param(e.v, e.field, false); pr != nil {
			pr.Name = e.key
			out = append(out, *pr)
		}
	}
	return out
}

// param parses one param mapping; inItems is true for the element schema
// under items, which has no required or default.
func (p *parser) param(n *yaml.Node, field string, inItems bool) *Param {
	known := paramKeys
	if inItems {
		known = itemKeys
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "", "a mapping like { type: string, required: false, description: ... }", describe(n), "")
		return nil
	}
	entries := p.mapping(n, field, known)
	by := make(map[string]entry, len(entries))
	for _, e := range entries {
		by[e.key] = e
	}
	pr := &Param{}
	ok := true
	if e, has := by["type"]; !has {
		if !hasKey(n, "type") && !hasUnknownNearIn(n, "type", known) {
			p.add(n, join(field, "type"), "missing required field", "one of "+strings.Join(paramTypes, ", "), "", "")
		}
		ok = false
	} else if s, good := p.str(e.v, e.field, "one of "+strings.Join(paramTypes, ", "), true); good {
		if !slices.Contains(paramTypes, s) {
			hint := didYouMean(s, paramTypes)
			if a, isAlias := typeAliases[strings.ToLower(s)]; isAlias {
				hint = "did you mean " + strconv.Quote(string(a)) + "?"
			}
			p.add(e.v, e.field, "unknown type", "one of "+strings.Join(paramTypes, ", "), describe(e.v), hint)
			ok = false
		} else {
			pr.Type = ParamType(s)
		}
	} else {
		ok = false
	}
	if e, has := by["required"]; has {
		pr.Required, _ = p.boolean(e.v, e.field)
	}
	if e, has := by["description"]; has {
		pr.Description, _ = p.str(e.v, e.field, "a string", false)
	}
	// The keys below depend on the type; without one, stop here (the type
	// problem is already reported).
	if !ok {
		return nil
	}
	x := new(ParamExt)
	pr.Ext = x // read by checkValue below; dropped at the end if empty
	if e, has := by["pattern"]; has {
		if pr.Type != TypeString {
			p.add(e.k, e.field, "only allowed on string params", "", "type "+string(pr.Type), "")
		} else if s, good := p.str(e.v, e.field, "a regular expression string", false); good {
			if _, err := regexp.Compile(s); err != nil {
				p.add(e.v, e.field, "invalid regular expression", "Go RE2 syntax", strconv.Quote(s), strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			} else {
				x.Pattern = s
			}
		}
	}
	numeric := pr.Type == TypeInteger || pr.Type == TypeNumber
	for _, k := range []string{"minimum", "maximum"} {
		e, has := by[k]
		if !has {
			continue
		}
		if !numeric {
			p.add(e.k, e.field, "only allowed on integer and number params", "", "type "+string(pr.Type), "")
			continue
		}
		if v, good := p.number(e.v, e.field); good {
			if k == "minimum" {
				x.Min = &v
			} else {
				x.Max = &v
			}
		}
	}
	if x.Min != nil && x.Max != nil && *x.Min > *x.Max {
		e := by["maximum"]
		p.add(e.v, e.field, "maximum below minimum", fmt.Sprintf(">= minimum %s", fmtNum(*x.Min)), fmtNum(*x.Max), "")
		x.Max = nil
	}
	if e, has := by["items"]; has {
		if pr.Type != TypeArray {
			p.add(e.k, e.field, "only allowed on array params", "", "type "+string(pr.Type), "")
		} else if it := p.param(e.v, e.field, true); it != nil {
			x.Items = it
		}
	}
	if e, has := by["enum"]; has {
		x.Enum = p.enum(e.v, e.field, pr)
	}
	if e, has := by["default"]; has {
		if v, good := p.value(e.v, e.field, pr); good {
			if prob := checkValue(pr, v); prob != "" {
				p.add(e.v, e.field, prob, describeParam(pr), describe(e.v), "")
			} else {
				x.Default = v
			}
		}
	}
	if x.isZero() {
		pr.Ext = nil
	}
	return pr
}

// hasKey reports whether mapping n has the key k (valid or not).
func hasKey(n *yaml.Node, k string) bool {
	for i := 0; i < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return true
		}
	}
	return false
}

// hasUnknownNearIn reports whether mapping n has an unknown key that is a
// likely misspelling of k.
func hasUnknownNearIn(n *yaml.Node, k string, known []string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i]
		if key.Kind == yaml.ScalarNode && !slices.Contains(known, key.Value) && suggest(key.Value, known) == k {
			return true
		}
	}
	return false
}

func (p *parser) enum(n *yaml.Node, field string, pr *Param) []any {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.add(n, field, "", "a non-empty list of "+string(pr.Type)+" values", describe(n), "")
		return nil
	}
	out := make([]any, 0, len(n.Content))
	for i, c := range n.Content {
		if v, ok := p.value(c, fmt.Sprintf("%s[%d]", field, i), &Param{Type: pr.Type, Ext: &ParamExt{Items: pr.Items()}}); ok {
			out = append(out, v)
		}
	}
	return out
}

// value converts node n to a Go value of the param's type (string, int64,
// float64, bool, []any, map[string]any), reporting a mismatch.
func (p *parser) value(n *yaml.Node, field string, pr *Param) (any, bool) {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		p.add(n, field, "YAML anchors and aliases are not supported", "the value written out", "", "")
		return nil, false
	}
	bad := func() (any, bool) {
		p.add(n, field, "", "a value of type "+string(pr.Type), describe(n), "")
		return nil, false
	}
	switch pr.Type {
	case TypeString:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!timestamp") {
			return bad()
		}
		return n.Value, true
	case TypeInteger:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return bad()
		}
		var v int64
		if err := n.Decode(&v); err != nil {
			return bad()
		}
		return v, true
	case TypeNumber:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			return bad()
		}
		var v float64
		if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return bad()
		}
		return v, true
	case TypeBoolean:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			return bad()
		}
		var v bool
		if err := n.Decode(&v); err != nil {
			return bad()
		}
		return v, true
	case TypeArray:
		if n.Kind != yaml.SequenceNode {
			return bad()
		}
		out := make([]any, 0, len(n.Content))
		ok := true
		for i, c := range n.Content {
			var v any
			var good bool
			f := fmt.Sprintf("%s[%d]", field, i)
			if pr.Items() != nil {
				v, good = p.value(c, f, pr.Items())
			} else {
				v, good = p.anyValue(c, f)
			}
			ok = ok && good
			out = append(out, v)
		}
		return out, ok
	case TypeObject:
		if n.Kind != yaml.MappingNode {
			return bad()
		}
		return p.anyValue(n, field)
	}
	return bad()
}

// anyValue converts node n to an untyped JSON-like Go value.
func (p *parser) anyValue(n *yaml.Node, field string) (any, bool) {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		p.add(n, field, "YAML anchors and aliases are not supported", "the value written out", "", "")
		return nil, false
	}
	switch n.Kind {
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		ok := true
		for i, c := range n.Content {
			v, good := p.anyValue(c, fmt.Sprintf("%s[%d]", field, i))
			ok = ok && good
			out = append(out, v)
		}
		return out, ok
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		ok := true
		for _, e := range p.mapping(n, field, nil) {
			v, good := p.anyValue(e.v, e.field)
			ok = ok && good
			out[e.key] = v
		}
		return out, ok && len(out)*2 == len(n.Content)
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str", "!!timestamp":
			return n.Value, true
		case "!!null":
			return nil, true
		case "!!int":
			return p.value(n, field, &Param{Type: TypeInteger})
		case "!!float":
			return p.value(n, field, &Param{Type: TypeNumber})
		case "!!bool":
			return p.value(n, field, &Param{Type: TypeBoolean})
		}
	}
	p.add(n, field, "", "a JSON-like value", describe(n), "")
	return nil, false
}

// checkValue checks a value already of the param's type against its enum,
// pattern and bounds; it returns the problem or "".
func checkValue(pr *Param, v any) string {
	if len(pr.Enum()) > 0 && !slices.ContainsFunc(pr.Enum(), func(e any) bool { return equalValue(e, v) }) {
		return "not in enum"
	}
	switch x := v.(type) {
	case string:
		if pr.Pattern() != "" {
			if re, err := regexp.Compile(pr.Pattern()); err == nil && !re.MatchString(x) {
				return "does not match pattern"
			}
		}
	case int64:
		return checkBounds(pr, float64(x))
	case float64:
		return checkBounds(pr, x)
	case []any:
		if pr.Items() != nil {
			for _, e := range x {
				if prob := checkValue(pr.Items(), e); prob != "" {
					return "item " + prob
				}
			}
		}
	}
	return ""
}

func checkBounds(pr *Param, f float64) string {
	if pr.Min() != nil && f < *pr.Min() {
		return "below minimum"
	}
	if pr.Max() != nil && f > *pr.Max() {
		return "above maximum"
	}
	return ""
}

// equalValue compares two normalised values (numbers across int64 and
// float64).
func equalValue(a, b any) bool {
	if fa, ok := asFloat(a); ok {
		fb, ok := asFloat(b)
		return ok && fa == fb
	}
	switch x := a.(type) {
	case []any, map[string]any:
		ja, _ := marshalCompact(x)
		jb, _ := marshalCompact(b)
		return ja != "" && ja == jb
	}
	return a == b
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
