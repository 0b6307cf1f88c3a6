// Package console is the daemon's web console at /ui/: the catalog with
// intent search, each tool's definition and policy, a try-a-call form
// generated from its params_schema, the approval queue (updated live over
// server-sent events) and the daemon's status, in Chinese or English.
//
// Pages are server-rendered html/template, embedded with embed.FS; every
// form works without JavaScript, and the one script (static/console.js,
// live updates with EventSource) is served from here under a strict
// Content-Security-Policy: no inline script, no request to another host.
//
// Auth: a visitor signs in with an API token (the form posts it once; the
// console keeps a session in memory, an HttpOnly SameSite=Strict cookie),
// or, on an open daemon, through a one-time link the daemon prints at
// start, as its operator. Every POST carries the session's CSRF token. The
// buttons a page shows follow the session's capabilities, and every action
// is checked again on the server; what a call or an approval may do is
// dispatch's decision, as through the API.
//
// Imports: audit, catalog, dispatch, hldp, reload (docs/architecture.md).
// Imported only by the daemon (internal/daemon).
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolagent/toolagent/internal/audit"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/reload"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Backend is what the console acts through: the dispatcher.
type Backend interface {
	Invoke(ctx context.Context, c dispatch.Call) dispatch.Result
	ApprovalsOn(pendingOnly bool, sf catalog.Surface) ([]dispatch.Approval, error)
	ApprovalOn(id string, sf catalog.Surface) (dispatch.Approval, error)
	DecideOn(ctx context.Context, id string, by dispatch.Decider, sf catalog.Surface, approve bool, edited json.RawMessage) (dispatch.Approval, *dispatch.Result, error)
	// MayApprove is the approval rules' answer to whether by may approve
	// a (nil) or why not: the page offers Approve or Confirm only then.
	MayApprove(a dispatch.Approval, by dispatch.Decider) error
}

var _ Backend = (*dispatch.Dispatcher)(nil)

// User is who a session acts as: a token's name, what its role lets it
// do, and its scope. Operator marks the person running the daemon
// (signed in with the one-time link or the operator token): they confirm
// the calls they asked for themselves ("Confirm and run").
type User struct {
	Name       string
	CanCall    bool
	CanApprove bool
	Operator   bool
	Scope      catalog.Scope
}

// decider is who u decides approvals as.
func (u User) decider() dispatch.Decider {
	return dispatch.Decider{Name: u.Name, Operator: u.Operator}
}

// owns reports whether a is u's own call that u confirms rather than
// approves: u is the operator and asked for it at a door a person uses
// (an agent's MCP call is approved by someone else).
func (u User) owns(a dispatch.Approval) bool {
	return u.Operator && a.Caller == u.Name && a.Door != dispatch.DoorMCP
}

func (u User) surface() catalog.Surface {
	if u.Scope.IsZero() {
		return nil
	}
	return catalog.Surface{u.Scope}
}

// Options configure the console.
type Options struct {
	// Authenticate looks up an API token's secret (constant time).
	Authenticate func(secret string) (User, bool)
	// Open says the daemon has no API tokens but the operator's: a
	// visitor without a session is Anonymous with every capability, as at
	// the API, and the operator signs in through OneTimeLink.
	Open bool
	// Operator is who a one-time link signs in (its Operator set).
	Operator User
	// History is the audit trail the history page reads; nil: no history.
	History audit.Store
	// Status reports the reload loop; nil leaves it out of the status page.
	Status func() reload.Status
	// Source reads a definition's file (its path in the tools tree, as
	// catalog.Entry.File) as it is in the source: the tool page shows it
	// as committed. Nil: not shown.
	Source func(file string) ([]byte, error)
	// Links gives the web addresses of a revision and of a file at it on
	// the git server (a Forgejo or Gitea) when the source is one; "" for
	// none.
	Links func(rev, file string) (commit, fileURL string)
	// Run returns a recent call's result by its run id (dispatch's
	// Options.Kept fills what it reads), with who asked; false when it is
	// not kept (any more). Nil: history rows do not open results.
	Run func(id string) (caller string, r dispatch.Result, ok bool)
	// LastWebhook reports the last push webhook delivery: when, and its
	// result (zero time: none yet; nil: not shown).
	LastWebhook func() (time.Time, string)
	// Executors reports the executors' last health checks (nil: not shown).
	Executors func() []ExecutorHealth
	// ToolLog returns the commits that changed a tool's folder, newest
	// first, at most limit; its error says why there is no history (a
	// local directory has none). Nil: the tool page says so.
	ToolLog func(name string, limit int) (ToolLog, error)
	// ToolDiff returns the unified diff of a tool's folder between two
	// commits (full hashes; from "" for none). Nil: no diffs.
	ToolDiff func(ctx context.Context, name, from, to string) (string, error)
	// Sync asks the reload loop for a sync now (the status page's "Sync
	// now", for the operator); nil: no button.
	Sync func()
	// Facts are the status page's lines about the host: the sandbox's
	// mechanism and limits, the store, the listen address (nil: none).
	Facts func(ctx context.Context) []Fact
	// Version and Sandbox are shown on the status page.
	Version string
	Sandbox string
	Logger  *slog.Logger
	// SessionTTL bounds a session (default 12h).
	SessionTTL time.Duration
	// Poll is how often the live approvals stream looks for changes
	// (default 1s).
	Poll time.Duration
}

// ExecutorHealth is one executor's (or gatekeeper target's) last health
// check.
type ExecutorHealth struct {
	Name   string
	OK     bool
	Reason string
}

// Fact is one line of the status page: a name and its value; Bad marks
// a problem.
type Fact struct {
	Name, Value string
	Bad         bool
}

// ToolLog is a tool folder's history in git.
type ToolLog struct {
	Changes []Revision
	// Complete is false when the history goes further back than listed
	// (more commits, or a clone kept one commit deep); Note says why.
	Complete bool
	Note     string
}

// Revision is one commit that changed a tool's folder.
type Revision struct {
	Hash, Parent, Author, Message string
	When                          time.Time
	// Signed: the commit carries a signature. Signer is who signed it
	// when the trust policy knows the key ("" otherwise), SignerNote why
	// it is not trusted when a policy is set.
	Signed             bool
	Signer, SignerNote string
}

// maxSessions bounds the session table; the oldest go first.
const maxSessions = 1024

// Console serves /ui/. Build it with New.
type Console struct {
	store *catalog.Store
	be    Backend
	opts  Options
	log   *slog.Logger

	mu       sync.Mutex
	sessions map[string]*session
	once     map[string]time.Time // one-time sign-in codes -> expiry
}

type session struct {
	user    User
	csrf    string
	expires time.Time
	lang    string
}

// New returns the console over store and be.
func New(store *catalog.Store, be Backend, opts Options) *Console {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	return &Console{store: store, be: be, opts: opts, log: opts.Logger, sessions: map[string]*session{}, once: map[string]time.Time{}}
}

// OneTimeLink returns a path that signs its first visitor in as the
// operator within ten minutes, for the daemon to print at start.
func (c *Console) OneTimeLink() string {
	code := randomToken()
	c.mu.Lock()
	c.once[code] = time.Now().Add(10 * time.Minute)
	c.mu.Unlock()
	return "/ui/login?once=" + code
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

const cookieName = "toolagent_session"

// Handler returns the console's routes, to mount at /ui/.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui/login", c.loginPage)
	mux.HandleFunc("POST /ui/login", c.login)
	mux.HandleFunc("POST /ui/logout", c.withUser(c.logout))
	mux.HandleFunc("GET /ui/{$}", c.withUser(c.catalogPage))
	mux.HandleFunc("GET /ui/tools/{name}", c.withUser(c.toolPage))
	mux.HandleFunc("GET /ui/tools/{name}/raw", c.withUser(c.rawFile))
	mux.HandleFunc("GET /ui/tools/{name}/diff", c.withUser(c.diffPage))
	mux.HandleFunc("POST /ui/sync", c.withUser(c.syncNow))
	mux.HandleFunc("POST /ui/tools/{name}", c.withUser(c.callTool))
	mux.HandleFunc("POST /ui/tools/{name}/stream", c.withUser(c.streamCall))
	mux.HandleFunc("GET /ui/approvals", c.withUser(c.approvalsPage))
	mux.HandleFunc("GET /ui/approvals/events", c.withUser(c.approvalEvents))
	mux.HandleFunc("GET /ui/approvals/{id}", c.withUser(c.approvalPage))
	mux.HandleFunc("POST /ui/approvals/{id}", c.withUser(c.decide))
	mux.HandleFunc("GET /ui/status", c.withUser(c.statusPage))
	mux.HandleFunc("GET /ui/history", c.withUser(c.historyPage))
	mux.HandleFunc("GET /ui/runs/{id}", c.withUser(c.runPage))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, nil, http.StatusNotFound, "error", map[string]any{"Message": "no such page"})
	})
	return securityHeaders(mux)
}

// securityHeaders sets the strict CSP and friends on every answer.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: under no-referrer a browser sends
		// "Origin: null" with the console's own form posts, and the
		// HTTP surface refuses a null origin (api.Guard). Other sites
		// still get no referrer.
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// current returns the request's session, if any and not expired.
func (c *Console) current(r *http.Request) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[ck.Value]
	if s == nil || time.Now().After(s.expires) {
		delete(c.sessions, ck.Value)
		return nil
	}
	return s
}

// startSession makes a session for u and sets its cookie.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, u User) *session {
	id := randomToken()
	s := &session{user: u, csrf: randomToken(), expires: time.Now().Add(c.opts.SessionTTL)}
	c.mu.Lock()
	if len(c.sessions) >= maxSessions {
		var oldest string
		var at time.Time
		for k, v := range c.sessions {
			if oldest == "" || v.expires.Before(at) {
				oldest, at = k, v.expires
			}
		}
		delete(c.sessions, oldest)
	}
	c.sessions[id] = s
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/ui/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, Expires: s.expires})
	return s
}

// withUser runs h for a signed-in session; on an open daemon a visitor
// without one gets an anonymous session (every capability, as at the
// API) so that its forms carry a CSRF token. Every POST must carry the
// session's CSRF token.
func (c *Console) withUser(h func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.current(r)
		if s == nil && c.opts.Open && r.Method == http.MethodGet {
			s = c.startSession(w, r, User{Name: dispatch.Anonymous, CanCall: true, CanApprove: true})
		}
		if s == nil {
			if r.Method != http.MethodGet {
				c.render(w, r, nil, http.StatusForbidden, "error", map[string]any{"Message": c.t(r, nil, "err.signin")})
				return
			}
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		if lang := r.URL.Query().Get("lang"); lang == "zh" || lang == "en" {
			c.mu.Lock()
			s.lang = lang
			c.mu.Unlock()
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			if err := r.ParseForm(); err != nil {
				c.render(w, r, s, http.StatusBadRequest, "error", map[string]any{"Message": err.Error()})
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1 {
				c.log.Info("console: POST refused: no or wrong CSRF token", "user", s.user.Name, "path", r.URL.Path)
				c.render(w, r, s, http.StatusForbidden, "error", map[string]any{"Message": c.t(r, s, "err.csrf")})
				return
			}
		}
		h(w, r, s)
	}
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if code := r.URL.Query().Get("once"); code != "" {
		c.mu.Lock()
		exp, ok := c.once[code]
		delete(c.once, code) // once, whatever happens
		c.mu.Unlock()
		if !ok || time.Now().After(exp) {
			c.render(w, r, nil, http.StatusForbidden, "error", map[string]any{"Message": c.t(r, nil, "err.once")})
			return
		}
		c.startSession(w, r, c.opts.Operator)
		c.log.Info("console: the operator signed in with the one-time link")
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	c.render(w, r, nil, http.StatusOK, "login", map[string]any{"Open": c.opts.Open})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	secret := strings.TrimSpace(r.PostFormValue("token"))
	u, ok := User{}, false
	if secret != "" && c.opts.Authenticate != nil {
		u, ok = c.opts.Authenticate(secret)
	}
	if !ok {
		c.log.Info("console: sign-in refused", "remote", r.RemoteAddr)
		c.render(w, r, nil, http.StatusUnauthorized, "login", map[string]any{"Error": c.t(r, nil, "err.token")})
		return
	}
	c.startSession(w, r, u)
	c.log.Info("console: signed in", "user", u.Name)
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.mu.Lock()
		delete(c.sessions, ck.Value)
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
