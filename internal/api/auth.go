package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
)

// Role is what an API token may do. Roles are ordered, read < call <
// approve < admin: each includes the ones before it, so a call token may
// also read, an approve token may also call, and an admin token may do
// everything.
type Role uint8

// The roles of an API token.
const (
	// rolePublic marks routes that need no token (/healthz, /readyz); it is
	// never a token's role.
	rolePublic Role = iota
	// RoleRead lists and shows tools, matches intents, reads status and
	// metrics.
	RoleRead
	// RoleCall also calls tools and fetches the approvals of its own
	// calls.
	RoleCall
	// RoleApprove also lists every approval and approves or denies them
	// (never its own call, unless the daemon allows self-approval; the
	// operator token confirms its own).
	RoleApprove
	// RoleAdmin also triggers reloads (POST /v1/sync).
	RoleAdmin
)

var roleWords = [...]string{rolePublic: "public", RoleRead: "read", RoleCall: "call", RoleApprove: "approve", RoleAdmin: "admin"}

// String returns the wire word of r.
func (r Role) String() string {
	if int(r) < len(roleWords) {
		return roleWords[r]
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// MarshalText encodes r as its wire word.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// ParseRole returns the role named word (read, call, approve or admin).
func ParseRole(word string) (Role, error) {
	for i, w := range roleWords {
		if Role(i) != rolePublic && w == word {
			return Role(i), nil
		}
	}
	return 0, fmt.Errorf("unknown role %q (want read, call, approve or admin)", word)
}

// MinTokenLen is the shortest secret a token may have.
const MinTokenLen = 16

// Anonymous is the caller name of requests on an open daemon (no tokens,
// loopback only): dispatch's, the same through every door.
const Anonymous = dispatch.Anonymous

var tokenName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// scopeLike finds what looks like a mistyped scope key in a secret.
var scopeLike = regexp.MustCompile(`:[A-Za-z_]+=`)

// Tokens is the set of API tokens a daemon accepts. Only a SHA-256 hash of
// each secret is kept; a presented secret is hashed and compared with every
// hash in constant time, so neither its length nor which token it is close
// to leaks through timing. The zero value holds no tokens. Parse before
// serving; a Tokens is then safe for concurrent reads.
type Tokens struct {
	list []token
}

type token struct {
	name  string
	role  Role
	scope catalog.Scope // the tools it may see; zero: all
	hash  [sha256.Size]byte
	// operator marks the token the daemon made for the person who started
	// it (AddOperator): it identifies a request, and never closes an open
	// daemon to callers without a token.
	operator bool
}

// Parse adds the tokens in text. src names where text came from (a file
// name, or the environment variable) for error messages; a secret never
// appears in an error.
//
// The format: entries separated by newlines or commas, each
// "name:role:secret" with an optional scope after it,
// "name:role:secret:tools=GLOB|GLOB:tags=TAG|TAG"; blank entries and lines
// starting with # are ignored. name is 1-64 of [A-Za-z0-9._-] and is what
// the audit log shows as the caller; role is read, call, approve or admin;
// secret is at least MinTokenLen characters without spaces or commas (it
// may contain colons, but not ":tools=" or ":tags=", which start the
// scope). A scope narrows what the token sees, calls and approves to the
// tools whose name matches one of the globs and that carry one of the tags
// (catalog.Scope). Names and secrets must be unique across every Parse.
func (t *Tokens) Parse(src, text string) error {
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for j, entry := range strings.Split(line, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			where := fmt.Sprintf("%s:%d", src, i+1)
			if strings.Contains(line, ",") {
				where += fmt.Sprintf(" (entry %d)", j+1)
			}
			if err := t.add(entry); err != nil {
				return fmt.Errorf("tokens %s: %w", where, err)
			}
		}
	}
	return nil
}

func (t *Tokens) add(entry string) error {
	name, rest, ok1 := strings.Cut(entry, ":")
	roleWord, secret, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return fmt.Errorf("want name:role:secret")
	}
	if !tokenName.MatchString(name) {
		return fmt.Errorf("token name %q: want 1-64 of A-Z a-z 0-9 . _ -", name)
	}
	role, err := ParseRole(roleWord)
	if err != nil {
		return fmt.Errorf("token %s: %w", name, err)
	}
	var scope catalog.Scope
	if i := scopeStart(secret); i >= 0 {
		sc, err := catalog.ParseScope(secret[i+1:])
		if err != nil {
			return fmt.Errorf("token %s: %w", name, err)
		}
		secret, scope = secret[:i], sc
	}
	if m := scopeLike.FindString(secret); m != "" {
		return fmt.Errorf("token %s: %q after the secret is not a scope: a scope is :tools=GLOB|... and/or :tags=TAG|... (a secret may not contain ':WORD=')", name, m)
	}
	if len(secret) < MinTokenLen {
		return fmt.Errorf("token %s: the secret is shorter than %d characters", name, MinTokenLen)
	}
	if strings.ContainsAny(secret, " \t\r") {
		return fmt.Errorf("token %s: the secret contains white space", name)
	}
	h := sha256.Sum256([]byte(secret))
	for _, o := range t.list {
		if o.name == name {
			return fmt.Errorf("token %s: the name is used twice", name)
		}
		if o.hash == h {
			return fmt.Errorf("token %s: the same secret as token %s", name, o.name)
		}
	}
	t.list = append(t.list, token{name: name, role: role, scope: scope, hash: h})
	return nil
}

// scopeStart is the index of the ':' that starts a token entry's scope in
// rest (the secret and what follows it), or -1.
func scopeStart(rest string) int {
	i, j := strings.Index(rest, ":tools="), strings.Index(rest, ":tags=")
	switch {
	case i < 0:
		return j
	case j < 0:
		return i
	}
	return min(i, j)
}

// AddOperator adds the operator token: the identity of the person who
// started the daemon, with the admin role. On an open daemon (no other
// tokens) requests without a token stay anonymous, and a request with this
// token is the operator's, so an operator can approve what an anonymous
// caller asked. The name must not be one of the parsed tokens'.
func (t *Tokens) AddOperator(name, secret string) error {
	before := len(t.list)
	if err := t.add(name + ":" + RoleAdmin.String() + ":" + secret); err != nil {
		return fmt.Errorf("operator token: %w", err)
	}
	t.list[before].operator = true
	return nil
}

// Len is the number of tokens, the operator's included.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.list)
}

// Open reports whether the API is open: no tokens but the operator's, so
// a request without a token is served as Anonymous (loopback only).
func (t *Tokens) Open() bool {
	if t == nil {
		return true
	}
	for _, tok := range t.list {
		if !tok.operator {
			return false
		}
	}
	return true
}

// Lookup returns the token whose secret is secret. Every token is compared,
// whatever matches, in constant time over equal-length hashes.
func (t *Tokens) Lookup(secret string) (name string, role Role, ok bool) {
	p, ok := t.Find(secret)
	return p.Name, p.Role, ok
}

// ScopeOf returns the scope of the token named name (zero: every tool, or
// no such token).
func (t *Tokens) ScopeOf(name string) catalog.Scope {
	if t == nil {
		return catalog.Scope{}
	}
	for _, tok := range t.list {
		if tok.name == name {
			return tok.scope
		}
	}
	return catalog.Scope{}
}

// Principal is who a token is: its name, role and scope, and whether it
// is the operator token (AddOperator): the person running the daemon, who
// may confirm a call they asked for themselves.
type Principal struct {
	Name     string
	Role     Role
	Scope    catalog.Scope
	Operator bool
}

// Find is Lookup with the token's scope.
func (t *Tokens) Find(secret string) (Principal, bool) {
	h := sha256.Sum256([]byte(secret))
	var p Principal
	ok := false
	for _, tok := range t.list {
		if subtle.ConstantTimeCompare(h[:], tok.hash[:]) == 1 {
			p, ok = Principal{Name: tok.name, Role: tok.role, Scope: tok.scope, Operator: tok.operator}, true
		}
	}
	return p, ok
}

type callerKey struct{}

// principal is who sent a request: the token's name, role and scope,
// and whether it is the operator token.
type principal struct {
	name     string
	role     Role
	scope    catalog.Scope
	operator bool
}

// surfaceFrom returns what the request's token may see (nil: every tool).
func surfaceFrom(ctx context.Context) catalog.Surface {
	if p, ok := ctx.Value(callerKey{}).(principal); ok && !p.scope.IsZero() {
		return catalog.Surface{p.scope}
	}
	return nil
}

// callerFrom returns the name of the token that authenticated the request,
// or Anonymous.
func callerFrom(ctx context.Context) string {
	if p, ok := ctx.Value(callerKey{}).(principal); ok {
		return p.name
	}
	return Anonymous
}

// deciderFrom returns who decides an approval in the request: the
// token's name, and whether it is the operator token (Anonymous, not the
// operator, without a token).
func deciderFrom(ctx context.Context) dispatch.Decider {
	if p, ok := ctx.Value(callerKey{}).(principal); ok {
		return dispatch.Decider{Name: p.name, Operator: p.operator}
	}
	return dispatch.Decider{Name: Anonymous}
}

// roleFrom returns the role of the token that authenticated the request;
// on an open daemon (no tokens) every request has every role.
func roleFrom(ctx context.Context) Role {
	if p, ok := ctx.Value(callerKey{}).(principal); ok {
		return p.role
	}
	return RoleAdmin
}

// The refusals say what to do and nothing else: not which tokens exist,
// not whether a tool does.
var (
	errUnauthorized = &apiError{status: http.StatusUnauthorized, msg: "unauthorized: send a valid API token as Authorization: Bearer <token>"}
	errForbidden    = &apiError{status: http.StatusForbidden, msg: "forbidden: this token's role does not allow this request"}
)

// authorize wraps h so that it runs only for a token of at least role need
// (any request when need is rolePublic; on an open daemon, any request
// without a token, as Anonymous), with the caller's name in the request
// context. A token that is sent is checked even on an open daemon: a
// wrong one is refused, not served anonymously.
func (s *server) authorize(need Role, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, ok := bearer(r)
		if need == rolePublic || (s.opts.Tokens.Open() && !ok) {
			h(w, r)
			return
		}
		var p Principal
		found := false
		if ok {
			p, found = s.opts.Tokens.Find(secret)
		}
		name, role := p.Name, p.Role
		if !found {
			s.log.InfoContext(r.Context(), "request refused", "status", http.StatusUnauthorized, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolagent"`)
			writeError(w, s.log, errUnauthorized)
			return
		}
		if role < need {
			s.log.InfoContext(r.Context(), "request refused", "status", http.StatusForbidden, "caller", name, "role", role, "need", need, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			writeError(w, s.log, errForbidden)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, principal{name: name, role: role, scope: p.Scope, operator: p.Operator})))
	})
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
