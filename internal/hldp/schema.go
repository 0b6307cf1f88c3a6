package hldp

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// lazy holds what a parsed Tool computes on first use. Parse and Intern
// (which decoders call) mark the Tool for one (pending), made on its first
// use (memo): most tools of a big catalog are never called, and 100,000
// empty ones took 8 MB. A Tool built as a literal has none and recomputes
// on every call, which is correct but slower. Copies of a parsed Tool
// share it once made, which is why Tools are immutable after Parse.
type lazy struct {
	schemaOnce sync.Once
	schema     json.RawMessage

	compileOnce sync.Once
	compiled    *jsonschema.Schema
	compileErr  error
}

// InputSchema returns the JSON Schema of the tool's params: always an
// object schema of the form
//
//	{"type":"object","properties":{...},"required":[...],"additionalProperties":false}
//
// also for a tool without params (properties {}), so it can be handed to
// MCP and OpenAI as is. Properties are in file order and carry type,
// description, enum, default, pattern, minimum, maximum and items. The
// returned slice is the caller's.
func (t *Tool) InputSchema() json.RawMessage {
	l := t.memo()
	if l == nil {
		return t.buildSchema()
	}
	// Cloned to its length: the builder's spare room is not kept for the
	// Tool's lifetime.
	l.schemaOnce.Do(func() { l.schema = bytes.Clone(t.buildSchema()) })
	return slices.Clone(l.schema)
}

// BuildInputSchema is InputSchema built anew and not kept: for a caller
// that needs every tool's once in a while (MCP's tools/list pages and
// their fingerprints), where a kept copy would be held by every tool of
// a big catalog for its lifetime (100,000 tools: 17 MB).
func (t *Tool) BuildInputSchema() json.RawMessage { return t.buildSchema() }

// pending is the lazy of a Tool whose own is made on first use (see lazy).
// It is never used itself.
var pending = new(lazy)

// memo returns t's lazy, making it on first use; nil for a Tool built as a
// literal. Safe for concurrent use: the first caller's is kept.
func (t *Tool) memo() *lazy {
	p := (*unsafe.Pointer)(unsafe.Pointer(&t.lazy))
	for {
		l := (*lazy)(atomic.LoadPointer(p))
		if l != pending {
			return l
		}
		atomic.CompareAndSwapPointer(p, unsafe.Pointer(pending), unsafe.Pointer(new(lazy)))
	}
}

func (t *Tool) buildSchema() json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	var required []string
	for i, p := range t.Params {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSON(&b, p.Name)
		b.WriteByte(':')
		writeParamSchema(&b, &p)
		if p.Required {
			required = append(required, p.Name)
		}
	}
	b.WriteString(`},"required":[`)
	for i, r := range required {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSON(&b, r)
	}
	b.WriteString(`],"additionalProperties":false}`)
	return b.Bytes()
}

// writeParamSchema writes the schema of one param. Values that cannot be
// written as JSON (only possible in a hand-built Tool) are left out, so
// the result is always valid JSON.
func writeParamSchema(b *bytes.Buffer, p *Param) {
	b.WriteByte('{')
	if p.Type != "" {
		b.WriteString(`"type":`)
		writeJSON(b, string(p.Type))
	} else {
		b.WriteString(`"type":"string"`)
	}
	if p.Description != "" {
		b.WriteString(`,"description":`)
		writeJSON(b, p.Description)
	}
	if p.Secret {
		// JSON Schema's mark of a value sent, never shown back (a client
		// may mask it).
		b.WriteString(`,"writeOnly":true`)
	}
	if len(p.Enum()) > 0 {
		if s, err := marshalCompact(p.Enum()); err == nil {
			b.WriteString(`,"enum":`)
			b.WriteString(s)
		}
	}
	if p.Default() != nil {
		if s, err := marshalCompact(p.Default()); err == nil {
			b.WriteString(`,"default":`)
			b.WriteString(s)
		}
	}
	if p.Pattern() != "" {
		b.WriteString(`,"pattern":`)
		writeJSON(b, p.Pattern())
	}
	if p.Min() != nil {
		if s, err := marshalCompact(*p.Min()); err == nil {
			b.WriteString(`,"minimum":`)
			b.WriteString(s)
		}
	}
	if p.Max() != nil {
		if s, err := marshalCompact(*p.Max()); err == nil {
			b.WriteString(`,"maximum":`)
			b.WriteString(s)
		}
	}
	if p.Items() != nil {
		b.WriteString(`,"items":`)
		writeParamSchema(b, p.Items())
	}
	b.WriteByte('}')
}

func writeJSON(b *bytes.Buffer, s string) {
	j, _ := marshalCompact(s) // a string always marshals
	b.WriteString(j)
}

// marshalCompact is json.Marshal without HTML escaping, so Chinese and
// <, >, & stay readable.
func marshalCompact(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// OpenAIFunction is a tool in the OpenAI "tools" format:
// {"type":"function","function":{"name","description","parameters"}}.
type OpenAIFunction struct {
	Type     string             `json:"type"` // always "function"
	Function OpenAIFunctionSpec `json:"function"`
}

// OpenAIFunctionSpec is the "function" member of an OpenAIFunction.
type OpenAIFunctionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// OpenAIFunction returns the tool in the OpenAI tools format; the
// description is the intent followed by the display name in parentheses,
// and the parameters are InputSchema.
func (t *Tool) OpenAIFunction() OpenAIFunction {
	desc := t.Intent
	if t.Display != "" && t.Display != t.Intent {
		desc += " (" + t.Display + ")"
	}
	return OpenAIFunction{
		Type: "function",
		Function: OpenAIFunctionSpec{
			Name:        t.Name,
			Description: desc,
			Parameters:  t.InputSchema(),
		},
	}
}

// schema returns the compiled InputSchema, once per parsed Tool.
func (t *Tool) schema() (*jsonschema.Schema, error) {
	l := t.memo()
	if l == nil {
		return compileSchema(t.InputSchema())
	}
	l.compileOnce.Do(func() {
		l.compiled, l.compileErr = compileSchema(t.InputSchema())
	})
	return l.compiled, l.compileErr
}

func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	const url = "mem:///input-schema.json"
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// describeParam says what values a param accepts, for messages:
// "integer >= 1", `one of "a", "b"`, `string matching "^v"`, "array of string".
func describeParam(p *Param) string {
	if len(p.Enum()) > 0 {
		vals := make([]string, 0, len(p.Enum()))
		for _, e := range p.Enum() {
			s, err := marshalCompact(e)
			if err != nil {
				s = "?"
			}
			vals = append(vals, s)
		}
		return "one of " + strings.Join(vals, ", ")
	}
	s := string(p.Type)
	if s == "" {
		s = "string"
	}
	switch {
	case p.Pattern() != "":
		s += " matching " + strconv.Quote(p.Pattern())
	case p.Min() != nil && p.Max() != nil:
		s += " >= " + fmtNum(*p.Min()) + " and <= " + fmtNum(*p.Max())
	case p.Min() != nil:
		s += " >= " + fmtNum(*p.Min())
	case p.Max() != nil:
		s += " <= " + fmtNum(*p.Max())
	case p.Items() != nil:
		s += " of " + describeParam(p.Items())
	}
	return s
}
