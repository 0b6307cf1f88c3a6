package catalog

import (
	"encoding/json"

	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/match"
)

// ToolView is the JSON shape of one catalog entry, shared by the CLI
// (`toolagent show`, `list`) and the HTTP API (/v1/tools).
type ToolView struct {
	Name         string           `json:"name"`
	Display      string           `json:"display,omitempty"`
	Intent       string           `json:"intent,omitempty"`
	Method       string           `json:"method,omitempty"`
	Executor     string           `json:"executor,omitempty"`
	Status       Status           `json:"status"`
	Reason       string           `json:"reason,omitempty"`
	Tags         []string         `json:"tags,omitempty"`
	Revision     string           `json:"revision,omitempty"`
	Signed       *Signature       `json:"signed,omitempty"`
	File         string           `json:"file"`
	LoadError    string           `json:"load_error,omitempty"`
	ParamsSchema json.RawMessage  `json:"params_schema,omitempty"`
	Constraints  *ConstraintsView `json:"constraints,omitempty"`
	Sandbox      *SandboxView     `json:"sandbox,omitempty"`
	Requires     *RequiresView    `json:"requires,omitempty"`
	Argv         []any            `json:"argv,omitempty"`
	Target       string           `json:"target,omitempty"`
	Keywords     []string         `json:"keywords,omitempty"`
	Examples     []string         `json:"examples,omitempty"`
	Author       string           `json:"author,omitempty"`
	Created      string           `json:"created,omitempty"`
	Why          string           `json:"why,omitempty"`
}

// ConstraintsView is the JSON shape of hldp.Constraints, the call policy
// included, so an operator sees why a call will be held.
type ConstraintsView struct {
	TimeoutMS      int64                    `json:"timeout_ms"`
	MaxOutputBytes int64                    `json:"max_output_bytes"`
	RequireConfirm bool                     `json:"require_confirm"`
	MaxConcurrency int                      `json:"max_concurrency,omitempty"`
	Rules          map[string]hldp.ArgRules `json:"rules,omitempty"`
	// ShellPolicy is the method exec tools' shell policy: "default" when
	// the definition does not say (secure by default).
	ShellPolicy string `json:"shell_policy,omitempty"`
}

// SandboxView is the declared sandbox grant of a shell or gatekeeper tool
// (what its approved calls get; a read-only-judged exec call gets none).
type SandboxView struct {
	None    bool     `json:"none,omitempty"`
	Write   []string `json:"write"`
	Network bool     `json:"network"`
}

// RequiresView is the JSON shape of hldp.Requires: what the host must
// have for the tool to be offered (a tool that lacks it is disabled, and
// its reason names what is missing).
type RequiresView struct {
	Programs []string `json:"programs,omitempty"`
	Files    []string `json:"files,omitempty"`
	Check    []string `json:"check,omitempty"`
}

// View returns the JSON shape of e. When full is false only the summary
// fields (name, display, intent, method, executor, status, reason, tags,
// revision, file) are set.
func (e Entry) View(full bool) ToolView {
	v := ToolView{Name: e.Name, Status: e.Status, Reason: e.Reason, Revision: e.Rev, File: e.File, Signed: e.Signed}
	if e.LoadErr != nil {
		v.LoadError = e.LoadErr.Error()
	}
	t := e.Tool
	if t == nil {
		return v
	}
	v.Display, v.Intent, v.Method, v.Executor = t.Display, t.Intent, t.Method, string(t.Executor)
	v.Tags = t.Tags()
	if !full {
		return v
	}
	v.ParamsSchema = t.InputSchema()
	v.Constraints = &ConstraintsView{
		TimeoutMS:      t.Constraints.Timeout.Milliseconds(),
		MaxOutputBytes: t.Constraints.MaxOutputBytes,
		RequireConfirm: t.Constraints.RequireConfirm,
		MaxConcurrency: t.Constraints.MaxConcurrency,
		Rules:          t.Constraints.Rules,
		ShellPolicy:    t.Constraints.ShellPolicy,
	}
	if t.Method == "exec" && v.Constraints.ShellPolicy == "" {
		v.Constraints.ShellPolicy = "default"
	}
	if t.Executor == hldp.Shell || t.Executor == hldp.Gatekeeper {
		sb := t.Sandbox()
		v.Sandbox = &SandboxView{None: sb.None, Write: append([]string{}, sb.Write...), Network: sb.Network}
	}
	if r := t.Requires(); !r.IsZero() {
		v.Requires = &RequiresView{Programs: r.Programs, Files: r.Files, Check: r.Check}
	}
	for _, it := range t.Argv {
		switch {
		case it.Group != nil && it.Group.If != nil:
			v.Argv = append(v.Argv, map[string]any{"if": map[string][]string{it.Group.If.Param: it.Group.If.Values}, "then": it.Group.Words})
		case it.Group != nil:
			v.Argv = append(v.Argv, it.Group.Words)
		default:
			v.Argv = append(v.Argv, it.Word)
		}
	}
	v.Target, v.Keywords, v.Examples = t.Target(), t.Keywords, t.Examples()
	v.Author, v.Created, v.Why = t.Author, t.Created, t.Why
	return v
}

// MatchCandidate is one tool offered for an intent query.
type MatchCandidate struct {
	Name         string          `json:"name"`
	Display      string          `json:"display"`
	Intent       string          `json:"intent"`
	Score        float64         `json:"score"`
	Matched      []string        `json:"matched"`
	Executor     string          `json:"executor"`
	Revision     string          `json:"revision"`
	ParamsSchema json.RawMessage `json:"params_schema"`

	// Similarity is the cosine of the request's and the tool's vectors
	// when an embeddings backend ranked it too (internal/embed).
	Similarity *float64 `json:"similarity,omitempty"`
}

// MatchResponse is the answer to an intent query: 1 to 3 candidates, or
// found false with a suggestion.
type MatchResponse struct {
	Found      bool             `json:"found"`
	Query      string           `json:"query"`
	Revision   string           `json:"revision"`
	Candidates []MatchCandidate `json:"candidates,omitempty"`
	Suggestion string           `json:"suggestion,omitempty"`
	// Embeddings says what the embeddings backend (match_embeddings,
	// internal/embed) did for this answer: "used", or why it was not
	// ("unavailable: timeout after 300ms"); absent when none is configured.
	Embeddings string `json:"embeddings,omitempty"`
}

// MaxCandidates is the most candidates an intent query returns.
const MaxCandidates = 3

// MatchIntent answers an intent query with at most limit (1..3, default 3)
// callable tools, or found false when nothing fits well enough.
func (s *Snapshot) MatchIntent(q string, limit int) MatchResponse {
	return s.MatchIntentOn(q, limit, nil)
}

// MatchIntentOn is MatchIntent over the tools on the surface sf alone: no
// tool outside it is ever a candidate, and "nothing fits" is judged on the
// surface's tools.
func (s *Snapshot) MatchIntentOn(q string, limit int, sf Surface) MatchResponse {
	if limit <= 0 || limit > MaxCandidates {
		limit = MaxCandidates
	}
	var allow func(string) bool
	if len(sf) > 0 {
		allow = func(id string) bool { e, ok := s.Lookup(id); return ok && sf.AllowsEntry(e) }
	}
	s.BuildIndex()
	return s.Respond(q, s.index.MatchIn(q, limit, allow))
}

// Respond turns a ranking of this snapshot's tools into the answer to the
// intent query q: the candidates of res in its order, or found false with
// a suggestion.
func (s *Snapshot) Respond(q string, res match.Result) MatchResponse {
	resp := MatchResponse{Found: res.Found && len(res.Candidates) > 0, Query: q, Revision: s.rev}
	if !resp.Found {
		resp.Suggestion = "no registered tool fits this request; it has to be written: add tools/<name>/" + hldp.FileName +
			" (scaffold one with `toolagent new <name>`) and commit it"
		return resp
	}
	for _, c := range res.Candidates {
		e, _ := s.Lookup(c.ID)
		resp.Candidates = append(resp.Candidates, MatchCandidate{
			Name: c.ID, Display: e.Tool.Display, Intent: e.Tool.Intent, Score: c.Score, Matched: c.Matched,
			Executor: string(e.Tool.Executor), Revision: e.Rev, ParamsSchema: e.Tool.InputSchema(),
		})
	}
	return resp
}
