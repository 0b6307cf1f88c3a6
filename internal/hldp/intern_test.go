package hldp

import (
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unique"
	"unsafe"
)

// TestInternShares: two parsed tools share one copy of what tools commonly
// have alike (author, date, method, a param's name and description) and
// keep their own of what is theirs (intent); Intern changes no value.
func TestInternShares(t *testing.T) {
	src := func(name, intent string) []byte {
		return []byte(`name: ` + name + `
display: ` + name + `
intent: ` + intent + `
method: run
executor: shell
argv: [echo, "{host}"]
params_schema:
  host: { type: string, required: true, description: "target host, like web-01" }
keywords: [uptime, host]
author: ops-team
created: 2026-01-01
why: for tests
`)
	}
	a, err := Parse("a/TOOL.hdlp", src("a", "show the uptime of one host"))
	if err != nil {
		t.Fatal(err)
	}
	// Handles keep a's copies alive until b is parsed: package unique
	// forgets a string no handle holds once the collector runs, and then
	// b would get copies of its own (tools loaded together share).
	var held []unique.Handle[string]
	for _, s := range []string{a.Author, a.Created, a.Method, a.Params[0].Name, a.Params[0].Description} {
		held = append(held, unique.Make(s))
	}
	defer runtime.KeepAlive(held)
	b, err := Parse("b/TOOL.hdlp", src("b", "show the uptime of one host"))
	if err != nil {
		t.Fatal(err)
	}
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are two copies, want one", what, x, y)
		}
	}
	same("author", a.Author, b.Author)
	same("created", a.Created, b.Created)
	same("method", a.Method, b.Method)
	same("param name", a.Params[0].Name, b.Params[0].Name)
	same("param description", a.Params[0].Description, b.Params[0].Description)
	if unsafe.StringData(a.Intent) == unsafe.StringData(b.Intent) {
		t.Errorf("the intents share one copy: a tool's own text is not interned")
	}

	// What a tool alone holds lies in one string, in field order.
	own := []string{b.Name, b.Display, b.Intent, b.Why, b.Argv[0].Word, b.Argv[1].Word, b.Keywords[0], b.Keywords[1]}
	for i := 1; i < len(own); i++ {
		end := unsafe.Add(unsafe.Pointer(unsafe.StringData(own[i-1])), len(own[i-1]))
		if unsafe.Pointer(unsafe.StringData(own[i])) != end {
			t.Errorf("%q does not follow %q in one string: a tool's own text is packed", own[i], own[i-1])
		}
	}

	c := *b
	c.Params = append([]Param(nil), b.Params...)
	c.Argv = append([]ArgvItem(nil), b.Argv...)
	c.Keywords = append([]string(nil), b.Keywords...)
	c.Intern()
	if !reflect.DeepEqual(&c, b) {
		t.Errorf("Intern changed a value:\n got %+v\nwant %+v", c, *b)
	}
}

// TestLazyOnFirstUse: a parsed tool holds no memo until its schema is
// first asked for; goroutines asking at once share one; a literal Tool
// keeps none.
func TestLazyOnFirstUse(t *testing.T) {
	tool, err := Parse("a/TOOL.hdlp", []byte(`name: a
display: a
intent: show a thing
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true, description: "command" }
author: t
created: 2026-01-01
why: for tests
`))
	if err != nil {
		t.Fatal(err)
	}
	if tool.lazy != pending {
		t.Fatalf("a parsed tool's memo is made before its first use")
	}
	var wg sync.WaitGroup
	memos := make([]*lazy, 8)
	for i := range memos {
		wg.Go(func() {
			if _, err := tool.CheckParams(map[string]any{"cmd": "ls"}); err != nil {
				t.Error(err)
			}
			memos[i] = tool.memo()
		})
	}
	wg.Wait()
	for _, m := range memos {
		if m == nil || m == pending || m != memos[0] {
			t.Fatalf("memos after concurrent first use: %p, want one of their own", memos)
		}
	}
	if lit := (&Tool{Name: "x"}); lit.memo() != nil {
		t.Errorf("a literal Tool got a memo")
	}
}

// TestExtOnlyWhenGiven: a tool that gives none of target, sandbox,
// requires, tags and examples keeps no Ext, and one that gives any keeps
// it, read through the methods of the same names; a Tool fits the
// allocator's 320-byte size class (it was 408 bytes, 416 allocated, with
// those keys inline).
func TestExtOnlyWhenGiven(t *testing.T) {
	const base = `name: a
display: a
intent: show a thing
method: run
executor: shell
argv: [uptime]
params_schema: {}
author: t
created: 2026-01-01
why: for tests
`
	plain, err := Parse("a/TOOL.hdlp", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Ext != nil {
		t.Errorf("a tool without extension keys keeps an Ext: %+v", *plain.Ext)
	}
	if plain.Target() != "" || !reflect.DeepEqual(plain.Sandbox(), Sandbox{}) || plain.Requires() != nil || plain.Tags() != nil || plain.Examples() != nil {
		t.Errorf("a tool without extension keys reads %q %+v %+v %q %q", plain.Target(), plain.Sandbox(), plain.Requires(), plain.Tags(), plain.Examples())
	}
	tests := []struct {
		src   string
		check func(*Tool) bool
	}{
		{strings.Replace(base, "executor: shell\nargv: [uptime]", "executor: gatekeeper\nargv: [uptime]\ntarget: prod", 1), func(x *Tool) bool { return x.Target() == "prod" }},
		{base + "sandbox: {network: true}\n", func(x *Tool) bool { return x.Sandbox().Network }},
		{base + "requires: {programs: [uptime]}\n", func(x *Tool) bool { return slices.Equal(x.Requires().Programs, []string{"uptime"}) }},
		{base + "tags: [host]\n", func(x *Tool) bool { return slices.Equal(x.Tags(), []string{"host"}) && x.HasTags("host") }},
		{base + "examples: [how long has it been up]\n", func(x *Tool) bool { return slices.Equal(x.Examples(), []string{"how long has it been up"}) }},
	}
	for _, tt := range tests {
		x, err := Parse("a/TOOL.hdlp", []byte(tt.src))
		if err != nil {
			t.Fatal(err)
		}
		if x.Ext == nil || !tt.check(x) {
			t.Errorf("Parse(%q): Ext %+v does not hold what the file gives", tt.src, x.Ext)
		}
	}
	if n := unsafe.Sizeof(Tool{}); n > 320 {
		t.Errorf("a Tool is %d bytes; a catalog of 100,000 keeps each in the allocator's class above 320 (move what few tools have into Ext)", n)
	}
}

// TestParamExtOnlyWhenGiven: a param that gives none of enum, default,
// pattern, minimum, maximum and items keeps no Ext, and one that gives
// any keeps it, read through the methods of the same names; a Param is
// 64 bytes (it was 136, 144 allocated, with those keys inline).
func TestParamExtOnlyWhenGiven(t *testing.T) {
	parse := func(param string) Param {
		t.Helper()
		tool, err := Parse("a/TOOL.hdlp", []byte(`name: a
display: a
intent: show a thing
method: get
executor: hlpd-api
params_schema:
  p: `+param+`
author: t
created: 2026-01-01
why: for tests
`))
		if err != nil {
			t.Fatal(err)
		}
		return tool.Params[0]
	}
	plain := parse(`{ type: string, required: true, description: "a host" }`)
	if plain.Ext != nil || plain.Enum() != nil || plain.Default() != nil || plain.Pattern() != "" || plain.Min() != nil || plain.Max() != nil || plain.Items() != nil {
		t.Errorf("a param without extension keys keeps %+v", plain.Ext)
	}
	if !plain.Required || plain.Description != "a host" {
		t.Errorf("param = %+v, want required with its description", plain)
	}
	tests := []struct {
		src   string
		check func(*Param) bool
	}{
		{`{ type: string, enum: [a, b] }`, func(p *Param) bool { return slices.Equal(p.Enum(), []any{"a", "b"}) }},
		{`{ type: string, default: a }`, func(p *Param) bool { return p.Default() == "a" }},
		{`{ type: string, pattern: "^a" }`, func(p *Param) bool { return p.Pattern() == "^a" }},
		{`{ type: integer, minimum: 1 }`, func(p *Param) bool { return p.Min() != nil && *p.Min() == 1 }},
		{`{ type: integer, maximum: 9 }`, func(p *Param) bool { return p.Max() != nil && *p.Max() == 9 }},
		{`{ type: array, items: { type: string } }`, func(p *Param) bool { return p.Items() != nil && p.Items().Type == TypeString }},
	}
	for _, tt := range tests {
		if p := parse(tt.src); p.Ext == nil || !tt.check(&p) {
			t.Errorf("param %s: Ext %+v does not hold what the file gives", tt.src, p.Ext)
		}
	}
	if n := unsafe.Sizeof(Param{}); n > 64 {
		t.Errorf("a Param is %d bytes, want at most 64 (move what few params have into ParamExt)", n)
	}
}
