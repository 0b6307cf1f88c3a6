package hldp

import (
	"strings"
	"testing"
)

const secretTool = `name: s
display: S
intent: use a secret
method: exec
executor: shell
params_schema:
  host: { type: string, required: true }
  token: { type: string, required: true, secret: true, pattern: "^tk-[a-z]+$" }
author: a
created: 2026-05-31
why: tests
`

func TestSecretParam(t *testing.T) {
	tool := mustParse(t, "s.hdlp", secretTool)
	if !tool.IsSecret("token") || tool.IsSecret("host") || !tool.HasSecrets() {
		t.Fatalf("secret flags: token %v host %v", tool.IsSecret("token"), tool.IsSecret("host"))
	}
	if sch := string(tool.InputSchema()); !strings.Contains(sch, `"token":{"type":"string","writeOnly":true,`) {
		t.Errorf("input schema %s: want the token writeOnly", sch)
	}
	// The parse memo keeps the field.
	b, err := tool.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Tool
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !back.IsSecret("token") || back.IsSecret("host") {
		t.Fatal("the binary form lost Param.Secret")
	}
	// A problem with a secret value names the param, not the value.
	_, err = tool.CheckParams(map[string]any{"host": "h", "token": "tk-SHOUTED-99"})
	if err == nil || strings.Contains(err.Error(), "SHOUTED") || !strings.Contains(err.Error(), "param token") || !strings.Contains(err.Error(), Redacted) {
		t.Fatalf("error %v: want the token's problem with its value redacted", err)
	}
	params, err := tool.CheckParams(map[string]any{"host": "h", "token": "tk-abc"})
	if err != nil {
		t.Fatal(err)
	}
	red, sec := tool.RedactParams(params)
	if red["token"] != Redacted || red["host"] != "h" || sec["token"] != "tk-abc" || params["token"] != "tk-abc" {
		t.Fatalf("RedactParams: %v %v (input now %v)", red, sec, params)
	}
}

func TestSecretOnlyOnStrings(t *testing.T) {
	for _, tc := range []struct{ decl, want string }{
		{"{ type: integer, secret: true }", `s.hdlp:7:23: params_schema.n.secret: only allowed on string params`},
		{"{ type: string, secret: yes }", `params_schema.n.secret`},
		{"{ type: array, items: { type: string, secret: true } }", `params_schema.n.items.secret`},
	} {
		src := strings.Replace(secretTool, "  host: { type: string, required: true }", "  n: "+tc.decl, 1)
		_, err := Parse("s.hdlp", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.decl, err, tc.want)
		}
	}
}
