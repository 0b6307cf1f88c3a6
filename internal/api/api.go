// Package api is toolagent's HTTP JSON API: calling tools, listing and
// showing them, intent matching, the approval queue (approvals.go: list,
// fetch, approve or deny held calls, reached through Approver), reload
// status, health, readiness and Prometheus metrics, behind bearer-token
// authentication with roles (read < call < approve < admin), and the push
// webhook of the git source (webhook.go: HMAC-signed, no token). Guard
// (guard.go) is the one middleware the daemon puts in front of every
// route, this package's and /mcp and /ui alike: Host must name the
// daemon, a foreign Origin is refused, a JSON body must say so.
//
// The package owns the HTTP edge only: decoding requests (size-limited,
// strict JSON), authentication and roles, the one mapping from a call's
// dispatch.ResultStatus to an HTTP status (and from an approval error to
// one), and metrics. What a call does is
// dispatch's (reached through Invoker); what the catalog holds is the
// catalog.Store's; when to reload is reload's (reached through Syncer).
// Every route is listed once, in routes.go, and documented in
// api/openapi.yaml.
//
// The handler New returns is safe for concurrent use. It keeps no mutable
// state of its own beyond Prometheus counters. Each request loads the
// current snapshot once and answers from it.
//
// Imports: catalog, dispatch, reload (its Status type), hldp. Imported by
// the daemon (internal/daemon) only.
package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/feedback"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/reload"
	"github.com/toolagent/toolagent/internal/runs"
)

// Invoker runs one tool call; *dispatch.Dispatcher is one.
type Invoker interface {
	Invoke(ctx context.Context, c dispatch.Call) dispatch.Result
}

// Syncer reports on and nudges the reload loop. A struct embedding
// *reload.Loop and *reload.Trigger is one.
type Syncer interface {
	// Status is the reload loop's current status.
	Status() reload.Status
	// Poke asks for a reload without waiting for it.
	Poke()
}

// DefaultMaxBodyBytes is the default limit on a request body (1 MiB).
const DefaultMaxBodyBytes = 1 << 20

// RevisionHeader is the response header holding the revision of the
// snapshot a tools or match answer came from.
const RevisionHeader = "X-Toolagent-Revision"

// Options configure the API handler.
type Options struct {
	// Tokens are the accepted API tokens; nil or empty leaves every route
	// open (the daemon only allows that on loopback).
	Tokens *Tokens
	// MaxBodyBytes limits request bodies (0: DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Registry receives the API's metrics and is what GET /metrics serves
	// (nil: a registry of the handler's own).
	Registry *prometheus.Registry
	// Now returns the time (nil: time.Now).
	Now func() time.Time
	// Webhook configures POST /v1/hooks/forgejo (zero: the endpoint
	// answers 404).
	Webhook Webhook
	// Shared, when set, reports the shared store for GET /v1/status
	// (shown as "shared": the newest revision any replica has seen).
	// Notifications, when set, reports the delivery state of approval
	// notifications, shown as "notifications" in /v1/status.
	Notifications func() any
	Shared        func(ctx context.Context) any
	// Store, when set, reports whether the store of approvals (and of
	// the shared concurrency slots) answers: /readyz is 503 naming it
	// when it does not, and /v1/status shows it as "store".
	Store func(ctx context.Context) StoreStatus
	// Serving, when set, reports whether the other doors (the MCP tool
	// lists) serve the catalog too: /readyz is 503 until it does, so a
	// client that waits for ready and lists MCP tools sees them.
	Serving func() bool
	// Listen, when set, is the address the daemon listens on, shown as
	// "listen" in /v1/status.
	Listen func() string
	// OnWebhook, when set, is told the result of every push webhook
	// delivery (queued, ignored, unsigned, bad_signature, ...), as the
	// metric counts it.
	OnWebhook func(result string)
	// Runs is the registry the dispatcher keeps its calls' runs in
	// (dispatch.Options.Runs), for GET /v1/runs/{id} and streams (nil: a
	// streaming call still streams, and /v1/runs answers 404).
	Runs *runs.Registry
	// Match, when set, answers intent queries in place of the
	// snapshot's lexical matcher (the daemon's embeddings backend).
	Match catalog.MatchFunc
	// OnMatch, when set, sees every intent query's caller, request and
	// answer (learning from use: internal/feedback).
	OnMatch func(caller, request string, resp catalog.MatchResponse)
	// Feedback serves /v1/feedback: what was learned from use (nil: 501).
	Feedback *feedback.Store
	// ReattachGrace is how long a streaming call goes on once no client
	// follows it, so a dropped connection can re-attach
	// (0: DefaultReattachGrace).
	ReattachGrace time.Duration
	// Approvals serves /v1/approvals (nil: those routes answer 501).
	Approvals Approver
	// Sandbox is what /v1/status says of the sandbox around tool
	// processes.
	Sandbox SandboxStatus
	// Version is the daemon's build version, in /v1/status.
	Version string
}

// SandboxStatus says whether tool processes run sandboxed, and how.
type SandboxStatus struct {
	// Active is false only when the operator turned the sandbox off.
	Active bool `json:"active"`
	// Mechanism is "landlock" or "bubblewrap"; Version what it is made
	// of.
	Mechanism string `json:"mechanism,omitempty"`
	Version   string `json:"version,omitempty"`
	// Limits are the resource limits of every call.
	Limits any `json:"limits,omitempty"`
	// Enforced says what enforces the process and memory limits: a
	// control group per sandbox ("cgroup v1 (pids in ..., memory in
	// ...)"; a result then names a limit it hit, limit_hit), or "rlimits
	// only: " and why there is no control group.
	Enforced string `json:"limits_enforced,omitempty"`
	// Warning says what an inactive sandbox means.
	Warning string `json:"warning,omitempty"`
	// Isolation says what a sandbox serves: one call.
	Isolation string `json:"isolation,omitempty"`
}

type server struct {
	opts    Options
	store   *catalog.Store
	inv     Invoker
	sync    Syncer
	log     *slog.Logger
	metrics *metrics
	prom    http.Handler
	// webhooks counts push webhook deliveries by result.
	webhooks *prometheus.CounterVec
}

// New returns the API handler over store. inv runs calls; sync (may be
// nil: no reload loop) feeds /v1/status and /v1/sync; log (nil: discard)
// gets refusals and internal errors. Metrics are registered on
// opts.Registry; New panics if they are already registered there.
func New(opts Options, store *catalog.Store, inv Invoker, sync Syncer, log *slog.Logger) http.Handler {
	if store == nil || inv == nil {
		panic("api: New needs a store and an invoker")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &server{opts: opts, store: store, inv: inv, sync: sync, log: log}
	s.metrics = newMetrics(opts.Registry, store, sync, opts.Now)
	s.webhooks = newWebhookCounter(opts.Registry)
	s.prom = promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{Registry: opts.Registry, EnableOpenMetrics: true}) // OpenMetrics when asked: exemplars
	mux := http.NewServeMux()
	methods := map[string][]string{} // path -> the methods it serves
	var paths []string
	for _, rt := range s.routes() {
		pattern := rt.path
		if pattern == "/" {
			pattern = "/{$}" // exactly /, not every path below it
		}
		mux.Handle(rt.method+" "+pattern, s.authorize(rt.role, rt.handler))
		if rt.path == "/" {
			continue
		}
		if methods[rt.path] == nil {
			paths = append(paths, rt.path)
		}
		methods[rt.path] = append(methods[rt.path], rt.method)
	}
	// Every error is JSON, also those of the mux: another method on a
	// route is 405 naming the allowed ones, an unknown path 404 with the
	// index of the routes, which GET / answers.
	for _, p := range paths {
		allow := strings.Join(methods[p], ", ")
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, s.log, errorf(http.StatusMethodNotAllowed, "method %s not allowed on %s; use %s", r.Method, r.URL.Path, allow))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		encode(w, s.log, http.StatusNotFound, struct {
			Error  string   `json:"error"`
			Routes []string `json:"routes"`
		}{fmt.Sprintf("no route %s %s", r.Method, r.URL.Path), s.index()})
	})
	return mux
}

// index lists the routes, "METHOD /path".
func (s *server) index() []string {
	var out []string
	for _, rt := range s.routes() {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}

func (s *server) handleIndex(w http.ResponseWriter, r *http.Request) {
	encode(w, s.log, http.StatusOK, routeIndex{Name: "toolagent", Routes: s.index(), OpenAPI: "api/openapi.yaml in the repository"})
}

// routeIndex is GET /: what this daemon serves.
type routeIndex struct {
	Name    string   `json:"name"`
	Routes  []string `json:"routes"`
	OpenAPI string   `json:"openapi"`
}

// snapshot returns the current snapshot, or writes 503 before the first.
func (s *server) snapshot(w http.ResponseWriter) (*catalog.Snapshot, bool) {
	snap := s.store.Load()
	if snap == nil {
		writeError(w, s.log, errNotReady)
		return nil, false
	}
	w.Header().Set(RevisionHeader, snap.Rev())
	return snap, true
}

// storeRetryAfter is the Retry-After of an answer refused because the
// store does not answer (seconds).
const storeRetryAfter = "5"

var errNotReady = &apiError{status: http.StatusServiceUnavailable, msg: "not ready: the tool catalog is not loaded yet"}

type statusBody struct {
	Status string `json:"status"`
}

func (s *server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	encode(w, s.log, http.StatusOK, statusBody{Status: "ok"})
}

// StoreStatus is whether the store answers, for /readyz and /v1/status.
type StoreStatus struct {
	// Kind is the store: files or postgres.
	Kind string `json:"kind"`
	// Available is true when the store answered just now.
	Available bool `json:"available"`
	// Error is why not: "approval store unavailable: " and the cause
	// (never a URL, host, password or local path).
	Error string `json:"error,omitempty"`
	// Effect says what works while the store does not answer.
	Effect string `json:"effect,omitempty"`
	// SlotReleasesOwed counts the max_concurrency slots of calls that
	// ended while the shared store did not answer; each is released as
	// soon as it answers again.
	SlotReleasesOwed int `json:"slot_releases_owed,omitempty"`
}

// readyBody is the answer of /readyz.
type readyBody struct {
	Status string `json:"status"`
	// Store says why the store makes the daemon not ready.
	Store string `json:"store,omitempty"`
}

func (s *server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.store.Load() == nil || s.opts.Serving != nil && !s.opts.Serving() {
		encode(w, s.log, http.StatusServiceUnavailable, readyBody{Status: "not ready"})
		return
	}
	if s.opts.Store != nil {
		if st := s.opts.Store(r.Context()); !st.Available {
			encode(w, s.log, http.StatusServiceUnavailable, readyBody{Status: "not ready", Store: st.Error})
			return
		}
	}
	encode(w, s.log, http.StatusOK, readyBody{Status: "ready"})
}

func (s *server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	s.prom.ServeHTTP(w, r)
}

func (s *server) handleStatus(w http.ResponseWriter, r *http.Request) {
	var st reload.Status
	if s.sync != nil {
		st = s.sync.Status()
	} else if snap := s.store.Load(); snap != nil {
		st.Rev, st.Gen = snap.Rev(), snap.Gen()
	}
	var shared any
	if s.opts.Shared != nil {
		shared = s.opts.Shared(r.Context())
	}
	var notifications any
	if s.opts.Notifications != nil {
		notifications = s.opts.Notifications()
	}
	var store *StoreStatus
	if s.opts.Store != nil {
		ss := s.opts.Store(r.Context())
		store = &ss
	}
	listen, tools := "", map[string]int{"total": 0}
	if s.opts.Listen != nil {
		listen = s.opts.Listen()
	}
	if snap := s.store.Load(); snap != nil {
		tools["total"] = snap.Len()
		for st, n := range snap.Counts() {
			tools[st.String()] = n
		}
	}
	encode(w, s.log, http.StatusOK, struct {
		Version string `json:"version,omitempty"`
		Listen  string `json:"listen,omitempty"`
		reload.Status
		Tools         map[string]int `json:"tools"` // total, and by status
		Sandbox       SandboxStatus  `json:"sandbox"`
		Store         *StoreStatus   `json:"store,omitempty"`
		Shared        any            `json:"shared,omitempty"`
		Notifications any            `json:"notifications,omitempty"`
	}{s.opts.Version, listen, st, tools, s.opts.Sandbox, store, shared, notifications})
}

func (s *server) handleSync(w http.ResponseWriter, r *http.Request) {
	if s.sync == nil {
		writeError(w, s.log, errorf(http.StatusNotImplemented, "this daemon has no reload loop"))
		return
	}
	s.sync.Poke()
	encode(w, s.log, http.StatusAccepted, statusBody{Status: "queued"})
}

// toolList is the answer of GET /v1/tools.
type toolList struct {
	Revision string             `json:"revision"`
	Tools    []catalog.ToolView `json:"tools"`
}

// openAIList is the answer of GET /v1/tools?format=openai: Tools is the
// "tools" array of an OpenAI chat request.
type openAIList struct {
	Revision string                `json:"revision"`
	Tools    []hldp.OpenAIFunction `json:"tools"`
}

func (s *server) handleTools(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	all, err := boolQuery(q.Get("all"))
	if err != nil {
		writeError(w, s.log, errorf(http.StatusBadRequest, "query all: %v", err))
		return
	}
	format := q.Get("format")
	if format != "" && format != "openai" {
		writeError(w, s.log, errorf(http.StatusBadRequest, "query format: %q is not a format; want openai, or none", format))
		return
	}
	if format == "openai" && all {
		writeError(w, s.log, errorf(http.StatusBadRequest, "query all: format=openai lists the callable tools only"))
		return
	}
	// tag=a&tag=b and tag=a,b both ask for the tools carrying a and b.
	tags, err := catalog.ParseTagFilter(q["tag"])
	if err != nil {
		writeError(w, s.log, errorf(http.StatusBadRequest, "query tag: %v", err))
		return
	}
	snap, ok := s.snapshot(w)
	if !ok {
		return
	}
	entries := snap.Enabled()
	if all {
		entries = snap.All()
	}
	entries = catalog.FilterTags(surfaceFrom(r.Context()).Filter(entries), tags)
	if format == "openai" {
		out := openAIList{Revision: snap.Rev(), Tools: make([]hldp.OpenAIFunction, 0, len(entries))}
		for _, e := range entries {
			out.Tools = append(out.Tools, e.Tool.OpenAIFunction())
		}
		encode(w, s.log, http.StatusOK, out)
		return
	}
	out := toolList{Revision: snap.Rev(), Tools: make([]catalog.ToolView, 0, len(entries))}
	for _, e := range entries {
		out.Tools = append(out.Tools, e.View(false))
	}
	encode(w, s.log, http.StatusOK, out)
}

func boolQuery(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf(http.StatusBadRequest, "%q is not a boolean; want 1 or 0", v)
	}
	return b, nil
}

func (s *server) handleTool(w http.ResponseWriter, r *http.Request) {
	snap, ok := s.snapshot(w)
	if !ok {
		return
	}
	name := r.PathValue("name")
	e, ok := snap.Lookup(name)
	if !ok || !surfaceFrom(r.Context()).AllowsEntry(e) {
		writeError(w, s.log, errorf(http.StatusNotFound, "no tool named %q is registered in the repository", name))
		return
	}
	encode(w, s.log, http.StatusOK, e.View(true))
}

// matchRequest is the body of POST /v1/match.
type matchRequest struct {
	Intent string `json:"intent"`
	Limit  int    `json:"limit"`
}

func (s *server) handleMatch(w http.ResponseWriter, r *http.Request) {
	var req matchRequest
	if err := decode(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeError(w, s.log, err)
		return
	}
	if req.Intent == "" {
		writeError(w, s.log, errorf(http.StatusBadRequest, "request body: intent is required: describe in words what you want done"))
		return
	}
	if req.Limit < 0 || req.Limit > catalog.MaxCandidates {
		writeError(w, s.log, errorf(http.StatusBadRequest, "request body: limit %d is out of range; want 1 to %d (0 or absent: %d)", req.Limit, catalog.MaxCandidates, catalog.MaxCandidates))
		return
	}
	snap, ok := s.snapshot(w)
	if !ok {
		return
	}
	var resp catalog.MatchResponse
	if s.opts.Match != nil {
		resp = s.opts.Match(r.Context(), snap, req.Intent, req.Limit, surfaceFrom(r.Context()))
	} else {
		resp = snap.MatchIntentOn(req.Intent, req.Limit, surfaceFrom(r.Context()))
	}
	if s.opts.OnMatch != nil {
		s.opts.OnMatch(callerFrom(r.Context()), req.Intent, resp)
	}
	encode(w, s.log, http.StatusOK, resp)
}

// callRequest is the body of POST /v1/call.
type callRequest struct {
	Tool   string          `json:"tool"`
	Params json.RawMessage `json:"params"`
	DryRun bool            `json:"dry_run"`
}

func (s *server) handleCall(w http.ResponseWriter, r *http.Request) {
	var req callRequest
	if err := decode(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeError(w, s.log, err)
		return
	}
	if req.Tool == "" {
		writeError(w, s.log, errorf(http.StatusBadRequest, "request body: tool is required: the exact name of a registered tool"))
		return
	}
	if s.store.Load() == nil {
		writeError(w, s.log, errNotReady)
		return
	}
	c := dispatch.Call{Tool: req.Tool, Params: req.Params, Caller: callerFrom(r.Context()), Door: dispatch.DoorAPI, DryRun: req.DryRun, Surface: surfaceFrom(r.Context()), RunID: dispatch.NewRunID()}
	s.metrics.inFlight.Inc()
	start := s.opts.Now()
	if media := streamMedia(r); media != "" {
		s.streamCall(w, r, media, c)
		s.metrics.inFlight.Dec()
		return
	}
	// The dispatcher keeps the call's run (Options.Runs is the one it
	// was given).
	res := s.inv.Invoke(r.Context(), c)
	s.metrics.inFlight.Dec()
	s.metrics.observe(r.Context(), res, s.opts.Now().Sub(start))
	code := resultHTTPStatus(res)
	switch code {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", storeRetryAfter)
	case http.StatusAccepted:
		w.Header().Set("Location", "/v1/approvals/"+res.ApprovalID)
	}
	encode(w, s.log, code, res)
}

// resultHTTPStatus is the one mapping from what happened to a call to the
// HTTP status of its answer. The body is the Result in every case.
//
//   - 200: the tool ran, whatever its exit code (success, no_data, error,
//     timeout), or a dry run was planned; status says which.
//   - 202 approval_required with an approval id: the call is held in the
//     approval queue and runs on the server once approved; Location names
//     the approval to fetch its outcome from.
//   - 400 invalid_params, 404 not_found, 429 busy.
//   - 503 unavailable: the call needs the store (an approval, a
//     max_concurrency counted across replicas) and the store does not
//     answer; error gives the cause. Retry-After is set.
//   - 403 denied: a policy rule refuses the call; the body (a Result, not
//     an auth refusal's {"error"}) names the rule and the reason.
//   - 409 disabled, and approval_required without an approval id (this
//     daemon has no approval queue): the tool exists, but its state here
//     does not let it run now.
func resultHTTPStatus(res dispatch.Result) int {
	switch res.Status {
	case dispatch.InvalidParams:
		return http.StatusBadRequest
	case dispatch.NotFound:
		return http.StatusNotFound
	case dispatch.Busy:
		return http.StatusTooManyRequests
	case dispatch.Unavailable:
		return http.StatusServiceUnavailable
	case dispatch.Denied:
		return http.StatusForbidden
	case dispatch.ApprovalRequired:
		if res.ApprovalID != "" {
			return http.StatusAccepted
		}
		return http.StatusConflict
	case dispatch.Disabled:
		return http.StatusConflict
	default:
		return http.StatusOK
	}
}
