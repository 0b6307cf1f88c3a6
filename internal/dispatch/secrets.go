package dispatch

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/toolagent/toolagent/internal/hldp"
)

// heldSecrets keeps the values of held calls' secret params (hldp
// Param.Secret) in this process's memory alone, by approval id: the
// approval store keeps hldp.Redacted in their place, so they are never
// written to STATE, the database, an approver's view or a notification.
// A daemon that restarts (or another replica) has none: such an approved
// call does not run, and its result says to ask again.
type heldSecrets struct {
	mu sync.Mutex
	m  map[string]heldSecret
}

type heldSecret struct {
	vals    map[string]any
	expires time.Time
}

// keep remembers vals for approval id until expires, unless it has some
// already (a repeat of a held call keeps the first call's values); it
// drops what expired.
func (h *heldSecrets) keep(id string, vals map[string]any, expires, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]heldSecret{}
	}
	for k, s := range h.m {
		if now.After(s.expires) {
			delete(h.m, k)
		}
	}
	if _, ok := h.m[id]; !ok {
		h.m[id] = heldSecret{vals: vals, expires: expires}
	}
}

func (h *heldSecrets) get(id string) (map[string]any, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.m[id]
	return s.vals, ok
}

func (h *heldSecrets) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, id)
}

// withSecrets returns params with each secret param that holds
// hldp.Redacted given its value from vals; missing names the secret
// params it could not fill.
func withSecrets(t *hldp.Tool, params, vals map[string]any) (out map[string]any, missing []string) {
	out = make(map[string]any, len(params))
	for k, v := range params {
		out[k] = v
	}
	for _, p := range t.Params {
		if !p.Secret || params[p.Name] != hldp.Redacted {
			continue
		}
		if v, ok := vals[p.Name]; ok {
			out[p.Name] = v
		} else {
			missing = append(missing, p.Name)
		}
	}
	return out, missing
}

// checkSecretEdits refuses an approver's edit of a secret param: edited
// may leave it out or give hldp.Redacted (the held value stays).
func checkSecretEdits(t *hldp.Tool, edited map[string]any) error {
	for _, p := range t.Params {
		if v, ok := edited[p.Name]; p.Secret && ok && v != nil && v != hldp.Redacted {
			return fmt.Errorf("param %s is secret: an approver cannot edit it (leave it out, or give %q, to keep the asked value)", p.Name, hldp.Redacted)
		}
	}
	return nil
}

// scrub replaces every secret value in s with hldp.Redacted.
func scrub(s string, secrets map[string]any) string {
	for _, v := range secrets {
		if sv, ok := v.(string); ok && sv != "" {
			s = strings.ReplaceAll(s, sv, hldp.Redacted)
		}
	}
	return s
}

// scrubResult takes the secret values out of what a result says besides
// the tool's own output: its error, problems, suggestion and plan (a dry
// run's argv and environment).
func scrubResult(r *Result, secrets map[string]any) {
	if len(secrets) == 0 {
		return
	}
	r.Error, r.Suggestion = scrub(r.Error, secrets), scrub(r.Suggestion, secrets)
	for i := range r.Problems {
		r.Problems[i] = scrub(r.Problems[i], secrets)
	}
	if r.Plan != nil {
		p := *r.Plan
		p.Argv = scrubAll(p.Argv, secrets)
		p.Env = scrubAll(p.Env, secrets)
		p.Dir, p.Path = scrub(p.Dir, secrets), scrub(p.Path, secrets)
		if p.Extra != nil {
			x := make(map[string]string, len(p.Extra))
			for k, v := range p.Extra {
				x[k] = scrub(v, secrets)
			}
			p.Extra = x
		}
		r.Plan = &p
	}
}

func scrubAll(ss []string, secrets map[string]any) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = scrub(s, secrets)
	}
	return out
}
