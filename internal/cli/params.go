package cli

import (
	"encoding/json"
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
