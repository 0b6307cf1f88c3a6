package executors

import "fmt"

// StringParam returns the string param name of validated params; an absent
// optional param is "". Params have passed the tool's schema, so a wrong
// type here means the definition and the executor disagree.
func StringParam(params map[string]any, name string, required bool) (string, error) {
	v, ok := params[name]
	if !ok || v == nil {
		if required {
			return "", fmt.Errorf("param %q is missing", name)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("param %q must be a string, got %T", name, v)
	}
	return s, nil
}
