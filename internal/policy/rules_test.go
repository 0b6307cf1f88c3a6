package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/hldp"
)

func TestParamRules(t *testing.T) {
	rules := Rules{Params: map[string]ParamRules{
		"target": {Allow: []string{`^(dev|staging|prod)$`}, Confirm: []string{`^prod$`}},
		"query":  {Deny: []string{`(?i)drop\s+table`}, Confirm: []string{`(?i)^\s*(update|delete)\b`}},
		"tags":   {Deny: []string{`^secret$`}},
	}}
	if err := rules.Compile(); err != nil {
		t.Fatal(err)
	}
	tool := &hldp.Tool{Name: "db", Method: "run"}
	for _, tt := range []struct {
		params map[string]any
		want   Decision
		rule   string
	}{
		{map[string]any{"target": "dev", "query": "select 1"}, Allow, "no rule"},
		{map[string]any{"target": "prod", "query": "select 1"}, Confirm, "param target: confirm pattern `^prod$`"},
		{map[string]any{"target": "qa"}, Deny, "param target: allow list (`^(dev|staging|prod)$`)"},
		{map[string]any{"query": "DELETE FROM t"}, Confirm, "param query: confirm pattern"},
		{map[string]any{"query": "delete; DROP TABLE t"}, Deny, "param query: deny pattern"}, // deny wins over confirm
		{map[string]any{"tags": []any{"a", "secret"}}, Deny, "param tags: deny pattern `^secret$`"},
		{map[string]any{"tags": []any{"a", "b"}}, Allow, ""},
		{map[string]any{"target": json.Number("1")}, Deny, "allow list"},
		{map[string]any{}, Allow, ""}, // absent params are not judged
	} {
		v := Evaluate(tool, tt.params, rules)
		if v.Decision != tt.want || !strings.Contains(v.Rule, tt.rule) {
			t.Errorf("Evaluate(%v) = %+v; want %s with rule containing %q", tt.params, v, tt.want, tt.rule)
		}
		if v.Decision != Allow && !strings.Contains(v.Reason, "constraints.rules.") {
			t.Errorf("Evaluate(%v).Reason = %q; want it to name constraints.rules", tt.params, v.Reason)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	r := Rules{Params: map[string]ParamRules{"cmd": {Deny: []string{"ok", "(unclosed"}}, "x": {Confirm: []string{"[z-a]"}}}, ShellMode: "loose"}
	err := r.Compile()
	if err == nil {
		t.Fatal("Compile accepted bad patterns")
	}
	for _, want := range []string{"rules.cmd.deny[1]", "`(unclosed`", "rules.x.confirm[0]", `shell_policy: unknown policy "loose"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Compile error %q does not mention %q", err, want)
		}
	}
	// Evaluate fails closed on rules that do not compile.
	v := Evaluate(&hldp.Tool{Name: "t", Method: "run"}, nil, r)
	if v.Decision != Deny || v.Rule != "policy: invalid rules" {
		t.Errorf("Evaluate with bad rules = %+v; want deny by policy: invalid rules", v)
	}
}

func TestParseRules(t *testing.T) {
	r, err := ParseRules(map[string]any{
		"cmd": map[string]any{"deny": []any{`rm\s+-rf`}, "confirm": []any{"^git push"}},
	}, "strict")
	if err != nil {
		t.Fatal(err)
	}
	if r.ShellMode != "strict" || len(r.Params["cmd"].Deny) != 1 || !r.ok {
		t.Errorf("ParseRules = %+v", r)
	}
	_, err = ParseRules(map[string]any{
		"cmd": map[string]any{"deny": "x", "ask": []any{"y"}},
		"cwd": []any{"z"},
		"n":   map[string]any{"allow": []any{1}},
	}, "")
	for _, want := range []string{"rules.cmd.deny: want a list", `rules.cmd: unknown key "ask"`, "rules.cwd: want a map", "rules.n.allow[0]: want a string"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRules error %v does not mention %q", err, want)
		}
	}
}

func TestEvaluateExec(t *testing.T) {
	shell := &hldp.Tool{Name: "shell-exec", Method: "exec", Executor: hldp.Shell}
	var rules Rules
	for _, tt := range []struct {
		tool   *hldp.Tool
		params map[string]any
		rules  Rules
		want   Decision
		rule   string
	}{
		{shell, map[string]any{"cmd": "ls"}, rules, Allow, "read-only"},
		{shell, map[string]any{"cmd": "rm x"}, rules, Confirm, "command `rm`"},
		{shell, map[string]any{"cmd": "rm -rf /"}, rules, Deny, "catastrophic"},
		{shell, map[string]any{}, rules, Deny, "shell: no command"},
		{shell, map[string]any{"cmd": 3}, rules, Deny, "shell: no command"},
		{shell, map[string]any{"cmd": "rm x"}, Rules{ShellMode: ShellStrict}, Deny, "strict policy"},
		{shell, map[string]any{"cmd": "rm x"}, Rules{ShellMode: ShellNone}, Allow, ""},
		{shell, map[string]any{"cmd": "ls"}, Rules{Params: map[string]ParamRules{"cmd": {Deny: []string{`^ls$`}}}}, Deny, "param cmd: deny pattern `^ls$`"},
		{shell, map[string]any{"cmd": "git push"}, Rules{Params: map[string]ParamRules{"cmd": {Confirm: []string{`^git push`}}}}, Confirm, "param cmd: confirm pattern"},
		{shell, map[string]any{"cmd": "kubectl get pods"}, Rules{Shell: overridden()}, Allow, ""},
		{&hldp.Tool{Name: "c", Method: "exec", Constraints: hldp.Constraints{RequireConfirm: true}}, map[string]any{"cmd": "ls"}, rules, Confirm, "constraints.require_confirm: true"},
		{&hldp.Tool{Name: "r", Method: "run"}, map[string]any{"cmd": "rm -rf /"}, rules, Allow, ""}, // run: no shell, the cmd is one argv element
		{nil, nil, rules, Deny, "policy: no tool"},
	} {
		v := Evaluate(tt.tool, tt.params, tt.rules)
		if v.Decision != tt.want || !strings.Contains(v.Rule, tt.rule) {
			t.Errorf("Evaluate(%v, %v) = %+v; want %s with rule containing %q", tt.tool, tt.params, v, tt.want, tt.rule)
		}
	}
}

func overridden() *ShellPolicy {
	p := DefaultShellPolicy()
	p.Commands["kubectl"] = Allow
	return p
}

func TestRecheck(t *testing.T) {
	shell := &hldp.Tool{Name: "shell-exec", Method: "exec"}
	if err := Recheck(shell, map[string]any{"cmd": "ls"}, Rules{}, false); err != nil {
		t.Errorf("Recheck(ls) = %v", err)
	}
	err := Recheck(shell, map[string]any{"cmd": "curl x"}, Rules{}, false)
	var re *RefusedError
	if !errors.As(err, &re) || !re.Unapproved || re.Verdict.Decision != Confirm || !strings.Contains(err.Error(), "command `curl` reaches the network") || !strings.Contains(err.Error(), "needs an approval") {
		t.Errorf("Recheck(curl, unapproved) = %v; want a RefusedError naming the rule", err)
	}
	if err := Recheck(shell, map[string]any{"cmd": "curl x"}, Rules{}, true); err != nil {
		t.Errorf("Recheck(curl, approved) = %v", err)
	}
	err = Recheck(shell, map[string]any{"cmd": "rm -rf /"}, Rules{}, true)
	if !errors.As(err, &re) || re.Unapproved || !strings.Contains(err.Error(), "catastrophic") {
		t.Errorf("Recheck(rm -rf /, approved) = %v; want refused: an approval cannot lift a deny", err)
	}
	if err := CheckCommand("echo $(rm x)", nil, false); !errors.As(err, &re) {
		t.Errorf("CheckCommand(unapproved rm) = %v", err)
	}
	if err := CheckCommand("uptime", StrictShellPolicy(), false); err != nil {
		t.Errorf("CheckCommand(uptime, strict) = %v", err)
	}
}

func TestDecisionText(t *testing.T) {
	for _, d := range []Decision{Allow, Confirm, Deny} {
		b, err := d.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Decision
		if err := back.UnmarshalText(b); err != nil || back != d {
			t.Errorf("round trip of %s = %s, %v", d, back, err)
		}
	}
	if _, err := Decision(7).MarshalText(); err == nil {
		t.Error("MarshalText(7) did not fail")
	}
	var d Decision
	if err := d.UnmarshalText([]byte("maybe")); err == nil {
		t.Error("UnmarshalText(maybe) did not fail")
	}
	b, _ := json.Marshal(Verdict{Confirm, "r", "why"})
	if string(b) != `{"decision":"confirm","rule":"r","reason":"why"}` {
		t.Errorf("Verdict JSON = %s", b)
	}
}

func TestLongInputIsFast(t *testing.T) {
	p := DefaultShellPolicy()
	cmd := strings.Repeat("echo aaaaaaaa | grep a && ", 5000) + "true"
	v := p.Judge(cmd)
	if v.Decision != Allow {
		t.Errorf("Judge(long benign) = %+v", v)
	}
}
