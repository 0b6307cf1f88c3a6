package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolagent/toolagent/internal/hldp"
)

// KVParams turns k=v arguments into a params object. Values are converted
// to the type params_schema declares (integer, number, boolean; array and
// object as JSON); k:=JSON always takes raw JSON.
func KVParams(t *hldp.Tool, kvs []string) (map[string]any, error) {
	var types map[string]string
	if t != nil {
		types = map[string]string{}
		for _, kv := range kvs {
			k, _, _ := strings.Cut(kv, "=")
			if p, ok := t.Param(k); ok {
				types[k] = string(p.Type)
			}
		}
	}
	return KVParamsTyped(types, kvs)
}

// KVParamsTyped is KVParams with the declared types given by name (JSON
// Schema words: integer, number, boolean, array, object, string).
func KVParamsTyped(types map[string]string, kvs []string) (map[string]any, error) {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		if i := strings.Index(kv, ":="); i > 0 && !strings.Contains(kv[:i], "=") {
			var v any
			if err := json.Unmarshal([]byte(kv[i+2:]), &v); err != nil {
				return nil, fmt.Errorf("param %s: value after := must be JSON: %v", kv[:i], err)
			}
			m[kv[:i]] = v
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("argument %q: want k=v (or k:=JSON)", kv)
		}
		m[k] = convertValue(types[k], v)
	}
	return m, nil
}

// convertValue converts v to the declared type typ when it parses as that
// type; otherwise the string goes through and params validation says what
// was expected.
func convertValue(typ, v string) any {
	switch typ {
	case "integer":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	case "number":
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	case "boolean":
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	case "array", "object":
		var x any
		if json.Unmarshal([]byte(v), &x) == nil {
			return x
		}
	}
	return v
}

// ExitBadJSON is the exit code of a --params value that is not a JSON
// object: the command line is wrong before any tool is asked, so it is
// told apart from a tool that ran and failed (1) and from params a tool
// refused (2).
const ExitBadJSON = 6

// ParamsJSON checks a --params value: nil for "", else one JSON object.
// Bad JSON is an ExitError (ExitBadJSON) saying where it broke: the byte
// offset and its line:col, and the text around it.
func ParamsJSON(s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	var v any
	err := json.Unmarshal([]byte(s), &v)
	if err == nil {
		if _, ok := v.(map[string]any); ok {
			return json.RawMessage(s), nil
		}
		return nil, ExitError{Code: ExitBadJSON, Msg: fmt.Sprintf("--params: want one JSON object ({\"name\": value, ...}); got %s", jsonKind(v))}
	}
	off := len(s)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = int(se.Offset)
	case errors.As(err, &te):
		off = int(te.Offset)
	}
	// json's Offset is the count of bytes read when it failed: the bad
	// byte is the last of them.
	at := max(min(off-1, len(s)), 0)
	if strings.Contains(err.Error(), "unexpected end of JSON input") {
		at = len(s) // it broke at the end: something is missing there
	}
	line, col := 1, 1
	for _, r := range s[:at] {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	near := s[max(at-20, 0):min(at+20, len(s))]
	return nil, ExitError{Code: ExitBadJSON, Msg: fmt.Sprintf("--params: not valid JSON at byte %d (line %d, column %d), near %q: %v", at, line, col, near, err)}
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}
