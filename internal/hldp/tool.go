// Package hldp owns the TOOL.hdlp format: the Tool type, Parse with strict
// validation and file:line diagnostics, params validation, argv templates,
// and the JSON Schema / OpenAI function export of a tool.
//
// The package is pure: no I/O, no internal imports, so it can be fuzzed,
// benchmarked and imported by every other layer. Values returned by Parse
// are immutable by convention and safe for concurrent use: InputSchema,
// OpenAIFunction, CheckParams and RenderArgv may be called from many
// goroutines at once (the compiled params schema is built once, lazily).
//
// The format's extension keys (argv, target, keywords, sandbox, requires,
// tags, examples) are documented on Parse; RenderArgv documents how an
// argv template is filled and why params cannot inject commands.
package hldp

import (
	"regexp"
	"slices"
	"strings"
	"time"
	"unique"
)

// FileName is the one name a tool definition file has inside tools/<name>/.
// The spelling ("hdlp") is the seed's; keep it in this one constant.
const FileName = "TOOL.hdlp"

// FormatVersion changes whenever Parse may give a different result for the
// same bytes (new keys, new rules), or a Tool's persisted form changes (its
// fields, its binary form). Persisted parse memos (internal/cache) are
// discarded when it differs, so an upgrade never serves stale outcomes.
//
// 2: constraints.rules and constraints.shell_policy. 3: sandbox.
// 4: "file too large" says "more than N bytes" for a file read only up to
// the limit. 5: conditional argv groups ({if: ..., then: [...]}).
// 6: requires and tags. 7: examples. 8: an argv group is an *ArgvGroup,
// and requires a *Requires. 9: target, sandbox, requires, tags and
// examples are in Tool.Ext. 10: a param's enum, default, pattern,
// minimum, maximum and items are in Param.Ext. 11: a Tool persists in its
// binary form (MarshalBinary). 12: a param may be secret (Param.Secret).
const FormatVersion = 12

// ExecutorKind names an executor; the value is the wire word used in
// TOOL.hdlp and in results.
type ExecutorKind string

// The four executors of the spec.
const (
	Shell      ExecutorKind = "shell"
	Gatekeeper ExecutorKind = "gatekeeper"
	HlpdAPI    ExecutorKind = "hlpd-api"
	GitForgejo ExecutorKind = "git-forgejo"
)

// ExecutorKinds lists every known executor in a stable order.
var ExecutorKinds = []ExecutorKind{Shell, Gatekeeper, HlpdAPI, GitForgejo}

// ParamType is the type of one parameter, a JSON Schema type word.
type ParamType string

// The parameter types params_schema accepts.
const (
	TypeString  ParamType = "string"
	TypeInteger ParamType = "integer"
	TypeNumber  ParamType = "number"
	TypeBoolean ParamType = "boolean"
	TypeArray   ParamType = "array"
	TypeObject  ParamType = "object"
)

// Defaults applied to constraints a definition leaves out.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxOutputBytes = 65536
	// DefaultOutputKeep is constraints.output.keep when absent.
	DefaultOutputKeep = "head"
)

// Tool is one parsed and validated TOOL.hdlp. A Tool from Parse must not
// be modified (copies share its cached schema, its Ext and its params':
// give a copy an Ext of its own to change one); a Tool built as a literal,
// e.g. in another package's tests, works too but recomputes its schema on
// every call.
type Tool struct {
	Name        string
	Display     string
	Intent      string
	Method      string
	Executor    ExecutorKind
	Params      []Param // in file order
	Constraints Constraints
	Author      string
	Created     string // YYYY-MM-DD, whether written as a YAML date or a string
	Why         string

	// Executor-specific and matching extensions (documented in docs/tool-format.md).

	// Argv is the argv template of a tool with method "run" on executor
	// shell or gatekeeper (nil when absent); see Parse and RenderArgv.
	Argv []ArgvItem
	// Keywords are extra words the author gives intent matching.
	Keywords []string
	// Ext holds the extension keys most tools leave out: target, sandbox,
	// requires, tags and examples. Nil when every one is absent; read them
	// through the methods of the same names, which give the zero value
	// then. A pointer: inline, their room made a Tool 408 bytes, which
	// 100,000 tools would each carry (now 304, the allocator's 320 class).
	Ext *Ext

	// File is the path the tool was parsed from (for messages).
	File string

	// lazy caches the exported schema and its compiled form; set by Parse.
	lazy *lazy
}

// Ext is the extension keys of a TOOL.hdlp that most tools leave out (see
// Tool.Ext). Parse sets a Tool's only when one of them is present.
type Ext struct {
	// Target names the gatekeeper target a gatekeeper tool runs on ("" = default).
	Target string
	// Sandbox is what the tool's processes may change and reach (the
	// top-level sandbox key; shell and gatekeeper tools only). The zero
	// value, also when the key is absent, is read-only with no network.
	Sandbox Sandbox
	// Requires is what this host must have for the tool to be offered
	// (the top-level requires key; shell tools only). Nil, also when
	// the key is absent, requires nothing.
	Requires *Requires
	// Tags are the tool's labels (the top-level tags key): lowercase
	// words of letters, digits and '-', each once, in file order. Listings
	// show them and filter by them.
	Tags []string
	// Examples are requests, in any language, that the tool answers (the
	// top-level examples key), in file order: each one line of at most
	// MaxExampleLen characters, no two alike (ignoring case and spacing),
	// at most MaxExamples. Intent matching indexes them as its strongest
	// field, and `toolagent validate --match` checks that each one finds
	// its tool against the rest of the catalog.
	Examples []string
}

// isZero reports whether e holds nothing (a Tool keeps no such Ext).
func (e *Ext) isZero() bool {
	return e == nil || e.Target == "" && e.Sandbox.isZero() && e.Requires.IsZero() && len(e.Tags) == 0 && len(e.Examples) == 0
}

// Target is Ext.Target: the gatekeeper target ("" for the default).
func (t *Tool) Target() string {
	if t.Ext == nil {
		return ""
	}
	return t.Ext.Target
}

// Sandbox is Ext.Sandbox: the zero value (read-only, no network) when
// the key is absent.
func (t *Tool) Sandbox() Sandbox {
	if t.Ext == nil {
		return Sandbox{}
	}
	return t.Ext.Sandbox
}

// Requires is Ext.Requires: nil when the tool requires nothing.
func (t *Tool) Requires() *Requires {
	if t.Ext == nil {
		return nil
	}
	return t.Ext.Requires
}

// Tags is Ext.Tags (nil for none). The slice is the Tool's: read it only.
func (t *Tool) Tags() []string {
	if t.Ext == nil {
		return nil
	}
	return t.Ext.Tags
}

// Examples is Ext.Examples (nil for none). The slice is the Tool's: read
// it only.
func (t *Tool) Examples() []string {
	if t.Ext == nil {
		return nil
	}
	return t.Ext.Examples
}

// SandboxNone is the value of `sandbox: none`.
const SandboxNone = "none"

// SandboxFilesRoot in sandbox.write stands for the daemon's files root
// (the directory of file-read and file-write), which a definition in git
// cannot know.
const SandboxFilesRoot = "${files_root}"

// Sandbox is the sandbox key of a TOOL.hdlp: what a tool's processes may
// change and reach beyond reading the filesystem. The zero value grants
// nothing: read-only, no network. Which grant a call really gets is the
// runtime's decision (for method exec, a command judged read-only runs
// with none; see the shell executor).
type Sandbox struct {
	// None is `sandbox: none`: the tool runs outside the sandbox. Parse
	// accepts it only with require_confirm: true.
	None bool
	// Write lists the absolute paths the tool may change.
	Write []string
	// Network lets the tool use the host's network.
	Network bool
}

func (s Sandbox) isZero() bool { return !s.None && !s.Network && len(s.Write) == 0 }

// String says the grant in one line, for approvers and logs:
// "none (no sandbox)", "read-only, no network", "write /srv/x, network".
func (s Sandbox) String() string {
	if s.None {
		return "none (runs outside the sandbox)"
	}
	w := "read-only"
	if len(s.Write) > 0 {
		w = "write " + strings.Join(s.Write, ", ")
	}
	if s.Network {
		return w + ", network"
	}
	return w + ", no network"
}

// Requires is the requires key of a TOOL.hdlp: the prerequisites a host
// must meet for the tool to be offered there. Parse only checks their
// form; whether a host meets them is the runtime's business (the daemon
// evaluates them at load and on its health schedule, and disables a tool
// whose prerequisites fail, naming what is missing).
type Requires struct {
	// Programs must be found: a bare name on the PATH the tool's
	// processes get, or an absolute path to an executable file.
	Programs []string
	// Files are clean absolute paths that must exist and be readable.
	Files []string
	// Check is an argv (no shell, no placeholders: every word is
	// literal) that must exit 0; nil when absent.
	Check []string
}

// IsZero reports whether r requires nothing.
func (r *Requires) IsZero() bool {
	return r == nil || len(r.Programs) == 0 && len(r.Files) == 0 && len(r.Check) == 0
}

// MaxTagLen is the longest tag Parse accepts, in bytes.
const MaxTagLen = 40

// ValidTag reports whether s is a tag: 1 to MaxTagLen lowercase ASCII
// letters, digits and '-', starting and ending with a letter or digit,
// without "--" (git, read-only, k8s).
func ValidTag(s string) bool {
	return len(s) <= MaxTagLen && tagRE.MatchString(s)
}

var tagRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// HasTags reports whether t carries every tag in tags (true for none).
func (t *Tool) HasTags(tags ...string) bool {
	for _, want := range tags {
		if !slices.Contains(t.Tags(), want) {
			return false
		}
	}
	return true
}

// Param is one entry of params_schema.
type Param struct {
	Name        string
	Type        ParamType
	Description string
	Required    bool
	// Secret (secret: true, string params only) marks a value that
	// reaches the tool alone: audit records, logs, approvals, notifications,
	// the console and results show Redacted instead (RedactParams).
	Secret bool
	// Ext holds the keys most params leave out: enum, default, pattern,
	// minimum, maximum and items. Nil when every one is absent; read them
	// through the methods of the same names. A pointer: inline they made
	// a Param 136 bytes (now 64), and a catalog has a few per tool.
	Ext *ParamExt
}

// ParamExt is the keys of a param that most params leave out (see
// Param.Ext).
type ParamExt struct {
	Enum     []any
	Default  any // nil when absent
	Pattern  string
	Min, Max *float64
	Items    *Param // element schema of an array param (Name is empty)
}

func (x *ParamExt) isZero() bool {
	return x == nil || len(x.Enum) == 0 && x.Default == nil && x.Pattern == "" && x.Min == nil && x.Max == nil && x.Items == nil
}

// Enum is Ext.Enum: the values the param may take (nil: any).
func (p *Param) Enum() []any {
	if p.Ext == nil {
		return nil
	}
	return p.Ext.Enum
}

// Default is Ext.Default: the value a call without the param gets (nil:
// none).
func (p *Param) Default() any {
	if p.Ext == nil {
		return nil
	}
	return p.Ext.Default
}

// Pattern is Ext.Pattern: the RE2 expression a string param's value
// must match ("" for any).
func (p *Param) Pattern() string {
	if p.Ext == nil {
		return ""
	}
	return p.Ext.Pattern
}

// Min is Ext.Min: a numeric param's minimum (nil for none).
func (p *Param) Min() *float64 {
	if p.Ext == nil {
		return nil
	}
	return p.Ext.Min
}

// Max is Ext.Max: a numeric param's maximum (nil for none).
func (p *Param) Max() *float64 {
	if p.Ext == nil {
		return nil
	}
	return p.Ext.Max
}

// Items is Ext.Items: an array param's element schema (nil for none).
func (p *Param) Items() *Param {
	if p.Ext == nil {
		return nil
	}
	return p.Ext.Items
}

// Constraints are the runtime limits a tool declares.
type Constraints struct {
	Timeout        time.Duration
	MaxOutputBytes int64
	// OutputKeep is constraints.output.keep, one of OutputKeeps: which
	// bytes of an output past MaxOutputBytes are kept. Parse sets "head"
	// when the key is absent.
	OutputKeep     string
	RequireConfirm bool
	// MaxConcurrency caps how many calls of this tool run at once
	// (constraints.max_concurrency); 0 means no per-tool cap.
	MaxConcurrency int
	// Rules are the per-argument rules (constraints.rules): param name to
	// its allow, confirm and deny patterns. nil when absent. Every key is
	// a declared param and every pattern compiles (Parse checks both);
	// internal/policy gives them their meaning.
	Rules map[string]ArgRules
	// ShellPolicy is constraints.shell_policy, one of ShellPolicies, or ""
	// when the key is absent. Absent means "default": an exec tool's
	// command is judged by the built-in default shell policy unless the
	// author writes shell_policy: none (secure by default). Only method
	// exec may state it.
	ShellPolicy string
}

// ArgRules are the per-argument rules of one param
// (constraints.rules.<param>): Go regular expressions (RE2) searched
// anywhere in the value. A value matching a Deny pattern never runs; with
// a non-empty Allow, a value matching none of them never runs; a value
// matching a Confirm pattern runs only after an approval. See
// internal/policy/POLICY.md.
type ArgRules struct {
	Allow   []string `json:"allow,omitempty"`
	Confirm []string `json:"confirm,omitempty"`
	Deny    []string `json:"deny,omitempty"`
}

// The words of constraints.shell_policy.
const (
	// ShellPolicyDefault judges an exec tool's command with the built-in
	// default shell policy: reads run, writes and the like need an
	// approval, catastrophic commands are denied. Also what an absent key
	// means.
	ShellPolicyDefault = "default"
	// ShellPolicyStrict runs read-only commands and denies everything else.
	ShellPolicyStrict = "strict"
	// ShellPolicyNone does not judge the command; only constraints.rules
	// and require_confirm apply.
	ShellPolicyNone = "none"
)

// ShellPolicies lists the words constraints.shell_policy accepts.
var ShellPolicies = []string{ShellPolicyDefault, ShellPolicyStrict, ShellPolicyNone}

// OutputKeeps are the values of constraints.output.keep: the first bytes
// (head, the default), the last (tail: what a log's end says), or the
// first and last halves with a line between them saying how many bytes
// were left out (both).
var OutputKeeps = []string{"head", "tail", "both"}

// ArgvItem is one element of an argv template: either a single word (which
// may hold {param} placeholders) or a group of words that is kept or dropped
// as a whole depending on whether every param it references has a value.
type ArgvItem struct {
	Word string
	// Group, when set, makes the item a group (Word is empty). A pointer:
	// most items are words, and a catalog of 100,000 tools has about
	// half a million of them.
	Group *ArgvGroup
}

// ArgvGroup is a group of argv words kept or dropped as a whole.
type ArgvGroup struct {
	Words []string
	// If, when set, makes the group a conditional group: its words are
	// kept only when the param If.Param has one of If.Values (argv item
	// `{if: {op: [branch, tag]}, then: [--list]}`).
	If *ArgvCond
}

// ArgvCond is the condition of a conditional argv group: a string param
// and the values that keep the group.
type ArgvCond struct {
	Param  string
	Values []string
}

// Param returns the named parameter and whether it exists.
func (t *Tool) Param(name string) (Param, bool) {
	for _, p := range t.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Prereqs returns t's prerequisites (the zero value for none).
func (t *Tool) Prereqs() Requires {
	if r := t.Requires(); r != nil {
		return *r
	}
	return Requires{}
}

// Intern makes the strings of t that tools commonly share (the method and
// executor, author and date, target, tags, the params' names, types,
// descriptions and patterns, the argv's groups and conditions, the
// sandbox's and prerequisites' paths, the policy words) point at one copy
// per distinct value (package unique), so that a catalog of 100,000 tools
// keeps "cmd" or an author's name once, not 100,000 times. What a tool
// alone holds (name, display, intent, why, examples) is left as it is, and
// so are keywords and argv words: short, often a tool's own ("nginx-5"),
// and a distinct value costs the table more than a copy of a short word.
// Those a tool alone holds are packed into one string (see pack).
// Parse interns what it returns, and UnmarshalBinary what it decodes; a
// Tool decoded otherwise may be given to Intern. It changes no value. It
// also marks t, as Parse's are, for what it computes on first use
// (InputSchema's and the compiled schema CheckParams uses): t must not be
// changed after. UnmarshalBinary makes the same choices field by field as
// it decodes: a field interned or packed here is so there too.
func (t *Tool) Intern() {
	if t.lazy == nil {
		t.lazy = pending
	}
	t.Method, t.Author, t.Created = in(t.Method), in(t.Author), in(t.Created)
	if i := slices.Index(ExecutorKinds, t.Executor); i >= 0 {
		t.Executor = ExecutorKinds[i]
	}
	t.Constraints.OutputKeep, t.Constraints.ShellPolicy = in(t.Constraints.OutputKeep), in(t.Constraints.ShellPolicy)
	if x := t.Ext; x != nil {
		x.Target = in(x.Target)
		inAll(x.Tags)
		inAll(x.Sandbox.Write)
		if r := x.Requires; r != nil {
			inAll(r.Programs)
			inAll(r.Files)
			inAll(r.Check)
		}
	}
	for i := range t.Params {
		t.Params[i].intern()
	}
	for _, a := range t.Argv {
		if g := a.Group; g != nil {
			inAll(g.Words)
			if g.If != nil {
				g.If.Param = in(g.If.Param)
				inAll(g.If.Values)
			}
		}
	}
	t.pack(nil)
}

// pack makes the strings a tool alone holds (name, display, intent, why,
// argv words, keywords, examples), and with, substrings of one: a decoder
// or parser allocates each on its own, rounded up to the allocator's size
// class, which wasted about 60 bytes a tool of bench catalog's (and as
// many objects for the collector to track). Strings are immutable, so the
// values are the same; a substring kept elsewhere keeps the whole. It
// allocates nothing else: what a decoder frees between the objects it
// keeps is room the heap holds but cannot use for those objects' kind.
func (t *Tool) pack(with []*string) {
	// Three passes over the same strings in the same order, written out:
	// handing their addresses to a callback would move a decoder's
	// variables, whose strings with points at, to the heap.
	n := len(t.Name) + len(t.Display) + len(t.Intent) + len(t.Why)
	for _, a := range t.Argv {
		n += len(a.Word) // "" for a group
	}
	for _, k := range t.Keywords {
		n += len(k)
	}
	for _, e := range t.Examples() {
		n += len(e)
	}
	for _, s := range with {
		n += len(*s)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(t.Name)
	b.WriteString(t.Display)
	b.WriteString(t.Intent)
	b.WriteString(t.Why)
	for _, a := range t.Argv {
		b.WriteString(a.Word)
	}
	for _, k := range t.Keywords {
		b.WriteString(k)
	}
	for _, e := range t.Examples() {
		b.WriteString(e)
	}
	for _, s := range with {
		b.WriteString(*s)
	}
	all := b.String()
	cut := func(s string) string {
		s, all = all[:len(s)], all[len(s):]
		return s
	}
	t.Name, t.Display, t.Intent, t.Why = cut(t.Name), cut(t.Display), cut(t.Intent), cut(t.Why)
	for i := range t.Argv {
		t.Argv[i].Word = cut(t.Argv[i].Word)
	}
	for i := range t.Keywords {
		t.Keywords[i] = cut(t.Keywords[i])
	}
	for i := range t.Examples() {
		t.Ext.Examples[i] = cut(t.Ext.Examples[i])
	}
	for _, s := range with {
		*s = cut(*s)
	}
}

func (p *Param) intern() {
	p.Name, p.Description = in(p.Name), in(p.Description)
	p.Type = ParamType(in(string(p.Type)))
	x := p.Ext
	if x == nil {
		return
	}
	x.Pattern = in(x.Pattern)
	for i, v := range x.Enum {
		if s, ok := v.(string); ok {
			x.Enum[i] = in(s)
		}
	}
	if x.Items != nil {
		x.Items.intern()
	}
}

// in returns the one copy of s (see Tool.Intern).
func in(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

func inAll(ss []string) {
	for i, s := range ss {
		ss[i] = in(s)
	}
}
