package policy

import (
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/hldp"
)

func parseTool(t *testing.T, constraints string) *hldp.Tool {
	t.Helper()
	src := `name: x
display: x
intent: run a command
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true }
  env: { type: string, required: false }
author: a
created: 2026-12-01
why: w
` + constraints
	tl, err := hldp.Parse("tools/x/TOOL.hdlp", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// TestForTool: the rules and shell policy of a parsed TOOL.hdlp, and the
// operator override, which replaces only the default policy.
func TestForTool(t *testing.T) {
	kubectlOK := DefaultShellPolicy()
	kubectlOK.Commands["kubectl"] = Allow
	for _, tt := range []struct {
		name        string
		constraints string
		override    *ShellPolicy
		params      map[string]any
		want        Decision
		rule        string
	}{
		{"absent shell_policy is default: read runs", "", nil, map[string]any{"cmd": "ls -l"}, Allow, "read-only (default policy)"},
		{"absent shell_policy is default: write asks", "", nil, map[string]any{"cmd": "touch f"}, Confirm, "command `touch`"},
		{"none", "constraints: { shell_policy: none }\n", nil, map[string]any{"cmd": "touch f"}, Allow, ""},
		{"strict", "constraints: { shell_policy: strict }\n", nil, map[string]any{"cmd": "touch f"}, Deny, "strict policy"},
		{"param deny", "constraints: { rules: { cmd: { deny: ['^ls'] } } }\n", nil, map[string]any{"cmd": "ls"}, Deny, "param cmd: deny pattern `^ls`"},
		{"param confirm", "constraints: { rules: { env: { confirm: ['^prod$'] } } }\n", nil, map[string]any{"cmd": "ls", "env": "prod"}, Confirm, "param env: confirm pattern"},
		{"allowlist", "constraints: { rules: { env: { allow: ['^dev$'] } } }\n", nil, map[string]any{"cmd": "ls", "env": "qa"}, Deny, "param env: allow list"},
		{"override replaces default", "", kubectlOK, map[string]any{"cmd": "kubectl apply -f x"}, Allow, ""},
		{"override does not weaken strict", "constraints: { shell_policy: strict }\n", kubectlOK, map[string]any{"cmd": "kubectl apply -f x"}, Deny, "strict policy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tl := parseTool(t, tt.constraints)
			v := Evaluate(tl, tt.params, ForTool(tl, tt.override))
			if v.Decision != tt.want || !strings.Contains(v.Rule, tt.rule) {
				t.Errorf("Evaluate(%v) = %+v; want %s with rule containing %q", tt.params, v, tt.want, tt.rule)
			}
		})
	}
	// A hand-built tool whose patterns do not compile is denied.
	bad := &hldp.Tool{Name: "b", Method: "run", Constraints: hldp.Constraints{Rules: map[string]hldp.ArgRules{"p": {Deny: []string{"("}}}}}
	if v := Evaluate(bad, nil, ForTool(bad, nil)); v.Decision != Deny || v.Rule != "policy: invalid rules" {
		t.Errorf("Evaluate with bad patterns = %+v; want deny", v)
	}
}
