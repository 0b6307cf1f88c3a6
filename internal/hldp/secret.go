package hldp

import "strings"

// Redacted is what stands for a secret param's value (Param.Secret)
// wherever the value must not go: audit records, logs, approvals,
// notifications, the console, results.
const Redacted = "[redacted]"

// HasSecrets reports whether any param of t is secret.
func (t *Tool) HasSecrets() bool {
	for i := range t.Params {
		if t.Params[i].Secret {
			return true
		}
	}
	return false
}

// IsSecret reports whether the param name of t is secret.
func (t *Tool) IsSecret(name string) bool {
	for i := range t.Params {
		if t.Params[i].Name == name {
			return t.Params[i].Secret
		}
	}
	return false
}

// RedactParams returns params with every secret param's value replaced
// by Redacted, and the secret values apart (nil when there are none). It
// returns params itself when t has no secret param given; params is never
// modified.
func (t *Tool) RedactParams(params map[string]any) (redacted, secrets map[string]any) {
	if t == nil {
		return params, nil
	}
	for i := range t.Params {
		p := &t.Params[i]
		v, ok := params[p.Name]
		if !p.Secret || !ok || v == nil {
			continue
		}
		if secrets == nil {
			secrets = make(map[string]any)
			redacted = make(map[string]any, len(params))
			for k, v := range params {
				redacted[k] = v
			}
		}
		secrets[p.Name] = v
		redacted[p.Name] = Redacted
	}
	if secrets == nil {
		return params, nil
	}
	return redacted, secrets
}

// redactErr hides the value of a secret param in a problem with it.
func (t *Tool) redactErr(e *ParamError) {
	name, _, _ := strings.Cut(e.Param, "[")
	if t.IsSecret(name) && e.Got != "" {
		e.Got = Redacted
	}
}
