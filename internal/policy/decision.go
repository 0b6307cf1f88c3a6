package policy

import (
	"fmt"
)

// Decision is what the policy says about one call. The zero value is
// Allow; a larger value is stricter, so the verdict over several checks is
// the maximum.
type Decision int

// The three decisions, from the most to the least permissive.
const (
	// Allow: the call may run now.
	Allow Decision = iota
	// Confirm: the call may run only after an approver confirms it.
	Confirm
	// Deny: the call never runs; no approval can change that.
	Deny
)

// String returns the wire word: "allow", "confirm" or "deny".
func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Confirm:
		return "confirm"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// MarshalText encodes d as its wire word.
func (d Decision) MarshalText() ([]byte, error) {
	if d < Allow || d > Deny {
		return nil, fmt.Errorf("policy: invalid decision %d", int(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText decodes a wire word ("allow", "confirm", "deny").
func (d *Decision) UnmarshalText(b []byte) error {
	v, err := ParseDecision(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseDecision returns the decision named by a wire word.
func ParseDecision(s string) (Decision, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "confirm":
		return Confirm, nil
	case "deny":
		return Deny, nil
	}
	return Allow, fmt.Errorf("policy: unknown decision %q (want allow, confirm or deny)", s)
}

// Verdict is a decision together with the rule that made it and why, so a
// refused or held call can always say which rule stopped it.
type Verdict struct {
	Decision Decision `json:"decision"`
	// Rule names the rule that decided, e.g. "param cmd: deny pattern
	// `rm\s+-rf`" or "shell: command `curl` reaches the network (default
	// policy: network)".
	Rule string `json:"rule"`
	// Reason explains the rule in a sentence.
	Reason string `json:"reason"`
}

// String formats v as "decision: rule: reason".
func (v Verdict) String() string {
	s := v.Decision.String()
	if v.Rule != "" {
		s += ": " + v.Rule
	}
	if v.Reason != "" {
		s += ": " + v.Reason
	}
	return s
}

// stricter returns the stricter of v and w; on a tie v, the one found
// first, is kept, so the rule named is the first that decided.
func stricter(v, w Verdict) Verdict {
	if w.Decision > v.Decision {
		return w
	}
	return v
}

// RefusedError is returned by Recheck and CheckCommand when a call must
// not start: its verdict is Deny, or Confirm without an approval. Its
// message names the rule; use errors.As to get the verdict.
type RefusedError struct {
	Verdict Verdict
	// Unapproved is true when the verdict is Confirm and the call carried
	// no approval.
	Unapproved bool
}

// Error reports the rule and reason that refused the call.
func (e *RefusedError) Error() string {
	if e.Unapproved {
		return fmt.Sprintf("refused by policy: the call needs an approval and has none: %s: %s", e.Verdict.Rule, e.Verdict.Reason)
	}
	return fmt.Sprintf("refused by policy: %s: %s", e.Verdict.Rule, e.Verdict.Reason)
}
