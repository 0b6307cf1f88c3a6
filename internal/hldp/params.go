package hldp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// ParamError is one problem with the params of a call. Its message has the
// shape
//
//	param max_count: want integer >= 1, got "abc"
//	param cmd: missing required parameter; want string
//	param cmnd: unknown parameter; want one of cmd, cwd (did you mean "cmd"?)
type ParamError struct {
	// Param is the param's name, with an index for an array item
	// ("tags[2]").
	Param string
	// Problem is set when want/got alone do not say it: "missing required
	// parameter", "unknown parameter".
	Problem string
	Want    string
	Got     string // the value as compact JSON, possibly shortened
	Hint    string
}

// Error formats the problem as "param P: problem; want W, got G (hint)".
func (e *ParamError) Error() string {
	return "param " + e.Param + ": " + problemText(e.Problem, e.Want, e.Got, e.Hint)
}

// CheckParams validates params against the tool's params_schema (through
// its compiled InputSchema) and returns a new map holding the params with
// defaults filled in. params is not modified; nil is treated as empty; a
// param whose value is nil counts as not given.
//
// Values may be what encoding/json produces (with or without UseNumber) or
// plain Go values (int, int64, float64, string, bool, []any,
// map[string]any, and anything else that marshals to JSON). In the result,
// integer params are int64, number params float64, and any json.Number
// nested in arrays or objects is int64 or float64.
//
// On failure the error is an errors.Join of *ParamError listing every
// problem (missing, unknown, wrong type, enum, pattern, bounds), in the
// order of params_schema. CheckParams is safe for concurrent use.
func (t *Tool) CheckParams(params map[string]any) (map[string]any, error) {
	sch, err := t.schema()
	if err != nil {
		return nil, fmt.Errorf("tool %s: compile params schema: %w", t.Name, err)
	}
	in := make(map[string]any, len(params))
	var errs []*ParamError
	for k, v := range params {
		if v == nil {
			continue
		}
		jv, err := toJSON(v)
		if err != nil {
			errs = append(errs, &ParamError{Param: k, Want: t.wantOf(k), Got: err.Error()})
			continue
		}
		in[k] = jv
	}
	if verr := sch.Validate(in); verr != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(verr, &ve) {
			return nil, fmt.Errorf("tool %s: validate params: %w", t.Name, verr)
		}
		errs = append(errs, t.translate(ve, in)...)
	}
	out := make(map[string]any, len(t.Params))
	if len(errs) == 0 {
		for _, p := range t.Params {
			v, ok := in[p.Name]
			if !ok {
				if p.Default() != nil {
					out[p.Name] = deepCopy(p.Default())
				}
				continue
			}
			nv, err := coerce(&p, v, p.Name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out[p.Name] = nv
		}
	}
	if len(errs) > 0 {
		t.sortErrs(errs)
		all := make([]error, len(errs))
		for i, e := range errs {
			t.redactErr(e)
			all[i] = e
		}
		return nil, errors.Join(all...)
	}
	return out, nil
}

// wantOf describes what param name accepts, or the known names.
func (t *Tool) wantOf(name string) string {
	if p, ok := t.Param(name); ok {
		return describeParam(&p)
	}
	return "a declared param"
}

// sortErrs orders errors by the param's position in params_schema, then by
// name (unknown params last), keeping one error per param path.
func (t *Tool) sortErrs(errs []*ParamError) {
	pos := func(e *ParamError) int {
		name, _, _ := strings.Cut(e.Param, "[")
		for i, p := range t.Params {
			if p.Name == name {
				return i
			}
		}
		return len(t.Params)
	}
	sort.SliceStable(errs, func(i, j int) bool {
		pi, pj := pos(errs[i]), pos(errs[j])
		if pi != pj {
			return pi < pj
		}
		return errs[i].Param < errs[j].Param
	})
}

// translate turns a jsonschema validation error into readable ParamErrors:
// one per missing or unknown param and one per offending value path.
func (t *Tool) translate(ve *jsonschema.ValidationError, in map[string]any) []*ParamError {
	var out []*ParamError
	seen := map[string]bool{}
	names := make([]string, len(t.Params))
	for i, p := range t.Params {
		names[i] = p.Name
	}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			if len(e.InstanceLocation) == 0 {
				for _, m := range k.Missing {
					if !seen[m] {
						seen[m] = true
						out = append(out, &ParamError{Param: m, Problem: "missing required parameter", Want: t.wantOf(m)})
					}
				}
				return
			}
		case *kind.AdditionalProperties:
			if len(e.InstanceLocation) == 0 {
				for _, m := range k.Properties {
					if !seen[m] {
						seen[m] = true
						want := "no parameters"
						if len(names) > 0 {
							want = "one of " + strings.Join(names, ", ")
						}
						out = append(out, &ParamError{Param: m, Problem: "unknown parameter", Want: want, Hint: didYouMean(m, names)})
					}
				}
				return
			}
		}
		if len(e.InstanceLocation) == 0 {
			return
		}
		path, want, got := t.locate(e.InstanceLocation, in)
		if seen[path] {
			return
		}
		seen[path] = true
		out = append(out, &ParamError{Param: path, Want: want, Got: got})
	}
	walk(ve)
	return out
}

// locate resolves an instance location to a readable path ("tags[1]"),
// the description of the schema there and the value found there.
func (t *Tool) locate(loc []string, in map[string]any) (path, want, got string) {
	name := loc[0]
	p, ok := t.Param(name)
	if !ok {
		return name, "a declared param", shortJSON(in[name])
	}
	var (
		cur   any = in[name]
		sch       = &p
		b     strings.Builder
		depth = 1
	)
	b.WriteString(name)
	for ; depth < len(loc); depth++ {
		tok := loc[depth]
		switch c := cur.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return b.String(), describeParam(sch), shortJSON(cur)
			}
			b.WriteString("[" + tok + "]")
			cur = c[i]
			if sch != nil && sch.Items() != nil {
				sch = sch.Items()
			} else {
				sch = nil
			}
		case map[string]any:
			b.WriteString("." + tok)
			cur = c[tok]
			sch = nil
		default:
			return b.String(), describeOrAny(sch), shortJSON(cur)
		}
		if sch == nil {
			break
		}
	}
	return b.String(), describeOrAny(sch), shortJSON(cur)
}

func describeOrAny(p *Param) string {
	if p == nil {
		return "a valid value"
	}
	return describeParam(p)
}

// shortJSON renders a value for a message, shortened to about 80 bytes.
func shortJSON(v any) string {
	s, err := marshalCompact(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	if len(s) > 80 {
		cut := 77
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// toJSON converts a Go value into the JSON data model jsonschema validates:
// nil, bool, string, int64, float64, []any, map[string]any.
func toJSON(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, string, int64:
		return x, nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("%s (out of range)", x.String())
		}
		return f, nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("%v (not a JSON number)", x)
		}
		return x, nil
	case float32:
		return toJSON(float64(x))
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint:
		return toJSON(uint64(x))
	case uint64:
		if x > math.MaxInt64 {
			return float64(x), nil
		}
		return int64(x), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			jv, err := toJSON(e)
			if err != nil {
				return nil, err
			}
			out[i] = jv
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			jv, err := toJSON(e)
			if err != nil {
				return nil, err
			}
			out[k] = jv
		}
		return out, nil
	}
	// Anything else ([]string, structs, typed maps): through encoding/json.
	if rv := reflect.ValueOf(v); (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Slice || rv.Kind() == reflect.Map) && rv.IsNil() {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("a %T that does not convert to JSON", v)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var back any
	if err := dec.Decode(&back); err != nil {
		return nil, fmt.Errorf("a %T that does not convert to JSON", v)
	}
	return toJSON(back)
}

// coerce returns v (already valid for p) in the normalised representation:
// int64 for integers, float64 for numbers, recursively for items.
func coerce(p *Param, v any, path string) (any, *ParamError) {
	switch p.Type {
	case TypeInteger:
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			// JSON Schema calls 3.0 an integer; int64 must hold it.
			if x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
				return nil, &ParamError{Param: path, Want: describeParam(p) + " within 64-bit range", Got: shortJSON(x)}
			}
			return int64(x), nil
		}
	case TypeNumber:
		if x, ok := v.(int64); ok {
			return float64(x), nil
		}
	case TypeArray:
		arr, ok := v.([]any)
		if !ok || p.Items() == nil {
			return v, nil
		}
		out := make([]any, len(arr))
		for i, e := range arr {
			ne, err := coerce(p.Items(), e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = ne
		}
		return out, nil
	}
	return v, nil
}

// deepCopy copies the []any and map[string]any of a default value, so a
// caller changing the result cannot change the Tool.
func deepCopy(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	}
	return v
}
