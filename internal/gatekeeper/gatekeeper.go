// Package gatekeeper is the server side of the gatekeeper protocol: the
// HTTP endpoint a host runs (`toolagent gatekeeper`) so that toolagent's
// gatekeeper executor can run commands on it. PROTOCOL.md beside this file
// is the wire contract; the client is internal/executors/gatekeeper.
//
// NewHandler serves POST /exec and GET /healthz. Every command runs through
// proc.Run, so it gets exactly the limits of the shell executor: its own
// process group killed at the timeout, stdout and stderr each capped, a
// minimal environment instead of the server's own, and — with
// Options.Sandbox — the daemon's sandbox (bubblewrap): its own PID, mount
// and network namespaces, the filesystem read-only, the server's secrets
// hidden. The client's requested timeout and output cap are clamped to the
// server's maxima; a bearer token is compared in constant time.
//
// Right before a command would start it passes, in order: the allowlist
// (Options.Allow; it judges the program that will actually run: cmd must
// then be one plain simple command, and the program is resolved on the
// child's PATH), the Check hook, the grant, and the shell policy
// (internal/policy, the built-in default unless configured), which judges
// cmd requests and argv requests alike (an argv as its quoted command
// line). A command the policy denies never runs. One it wants confirmed
// runs only with a grant (internal/grant) the server verifies: an
// HMAC-SHA256 signed, with a key derived (HKDF) from the bearer token of
// the request, over the approval id, tool, revision, params hash, the
// digest of this exact command, this server's boot id, the sandbox it may
// use and an expiry. A grant runs once: the server remembers the
// approvals whose commands started until their grants expire and refuses
// a replay, and a restarted server (a new boot id) refuses the grants
// signed before. A bare approval id is not trusted. A command with a
// verified grant runs with the grant's sandbox (write paths, network);
// every other command runs read-only without network, whatever the
// request says. Every exec writes one audit line naming the resolved
// program.
//
// A handler is safe for concurrent use; it bounds the number of commands
// running at once and answers "busy" beyond that. The package imports
// proc, policy, grant and httpserve and is imported only by cmd/toolagent
// (toolagent gatekeeper, through Serve).
package gatekeeper

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolagent/toolagent/internal/grant"
	"github.com/toolagent/toolagent/internal/policy"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/telemetry"
)

// Defaults of Options fields left zero.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultMaxTimeout    = 10 * time.Minute
	DefaultMaxOutput     = 64 << 10
	DefaultMaxOutputCap  = 16 << 20
	DefaultMaxBodyBytes  = 1 << 20
	DefaultMaxConcurrent = 8
	// DefaultShell runs cmd requests (as DefaultShell -p -c cmd): bash,
	// the dialect the shell policy parses; -p keeps it from reading
	// BASH_ENV or ENV and from importing functions.
	DefaultShell = "/bin/bash"
)

// Error codes of the protocol (the "code" field of an error response).
const (
	CodeBadRequest       = "bad_request"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeRefused          = "refused"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeTooLarge         = "too_large"
	CodeStartFailed      = "start_failed"
	CodeBusy             = "busy"
	CodeInternal         = "internal"
)

// Options configure a handler. The zero value is a loopback-only handler
// with no token: it accepts requests only from loopback addresses.
type Options struct {
	// Tokens are the accepted bearer tokens. Secrets: never logged.
	Tokens []string
	// TokenSHA256 are accepted tokens given as hex SHA-256 digests, so the
	// server's configuration need not hold the token itself
	// (`printf %s "$TOKEN" | sha256sum`).
	TokenSHA256 []string
	// Allow, when non-empty, is the list of programs that may run, as
	// names ("ls") or absolute paths ("/opt/bin/tool"). It judges the
	// program that will run: argv[0], or the command name of a cmd, is
	// resolved to an absolute file (a bare name on the child's PATH,
	// proc.MinimalPath), which is allowed when it equals an absolute
	// entry, or when its base name is an entry's base name and it lies in
	// one of the PATH directories. With an allowlist a cmd must be
	// exactly one simple command with a plain command name: no list or
	// pipeline, no assignment prefix (X=... changes how the program is
	// found or runs), no redirection, no expansion; anything else is
	// refused, since it could start programs the name does not say. An
	// allowed cmd runs with its command name replaced by the resolved
	// path, so no shell builtin or function stands in for the program.
	Allow []string
	// Check, when set, is called right before a process would start, with
	// the cmd of a cmd request (argv nil) or the argv of an argv request
	// (cmd ""). A non-nil error refuses the request with 403 "refused" and
	// the error's text. It is the hook for the per-argument shell policy;
	// it must be safe for concurrent use.
	Check func(cmd string, argv []string) error
	// Policy judges every request (policy.CheckCommand) right before it
	// would start, after the allowlist, the Check hook and the grant: a
	// cmd as it is, an argv as the command line of its quoted elements
	// (syntax.Quote). A deny is refused; a confirm is refused unless the
	// request carries a grant this server verified. nil means
	// policy.DefaultShellPolicy().
	Policy *policy.ShellPolicy
	// NoPolicy turns the shell policy off: only Allow and Check guard
	// commands. For a server whose every client judges its own commands.
	NoPolicy bool
	// Shell runs cmd requests as Shell -p -c cmd; "" means DefaultShell.
	// It must be bash (or accept -p -c the same way): the policy parses
	// bash.
	Shell string
	// Sandbox, when non-nil, runs every command inside it
	// (proc.Spec.Sandbox): read-only with no network, or with the write
	// paths and network of a verified grant. nil runs commands
	// unsandboxed, as the server's own user with its view of the host;
	// `toolagent gatekeeper` does that only with an explicit --sandbox=off.
	Sandbox *proc.Sandbox
	// Env holds extra KEY=VALUE entries added after proc.MinimalEnv for
	// every command. Do not put secrets here.
	Env []string
	// DefaultTimeout applies when a request gives no timeout_ms;
	// MaxTimeout caps any request's timeout.
	DefaultTimeout, MaxTimeout time.Duration
	// DefaultMaxOutput applies when a request gives no max_output_bytes;
	// MaxOutput caps any request's cap. Both are per stream.
	DefaultMaxOutput, MaxOutput int64
	// Grace is the time between SIGTERM and SIGKILL; 0 means proc.DefaultGrace.
	Grace time.Duration
	// MaxBodyBytes limits a request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxConcurrent bounds the commands running at once; beyond it a
	// request gets 503 "busy". 0 means DefaultMaxConcurrent.
	MaxConcurrent int
	// MaxUsedGrants bounds the used grants remembered at once (each until
	// it expires); when that many have not expired, a request with a
	// grant gets 503 "busy" rather than the server forgetting one. 0
	// means DefaultMaxUsedGrants.
	MaxUsedGrants int
}

// Validate reports configuration mistakes NewHandler would panic on:
// a TokenSHA256 entry that is not 64 hex digits, an empty token, a
// negative limit.
func (o Options) Validate() error {
	var errs []error
	for i, t := range o.Tokens {
		if t == "" {
			errs = append(errs, fmt.Errorf("gatekeeper: token %d is empty", i))
		}
	}
	for i, h := range o.TokenSHA256 {
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			errs = append(errs, fmt.Errorf("gatekeeper: token hash %d is not a hex SHA-256 digest (64 hex digits)", i))
		}
	}
	if o.DefaultTimeout < 0 || o.MaxTimeout < 0 || o.DefaultMaxOutput < 0 || o.MaxOutput < 0 || o.MaxBodyBytes < 0 || o.MaxConcurrent < 0 || o.MaxUsedGrants < 0 || o.Grace < 0 {
		errs = append(errs, errors.New("gatekeeper: limits must not be negative"))
	}
	return errors.Join(errs...)
}

// ListenCheck refuses to serve on addr (host:port) when the host is not a
// loopback address and no token is configured. An empty host (":8080")
// means every interface and is not loopback; "localhost" is.
func ListenCheck(addr string, hasToken bool) error {
	if hasToken {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("gatekeeper listen address %q: %w", addr, err)
	}
	if isLoopbackHost(host) {
		return nil
	}
	return fmt.Errorf("gatekeeper: refusing to listen on %q without a token: configure a token, or listen on a loopback address such as 127.0.0.1", addr)
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// ExecRequest is the body of POST /exec; see PROTOCOL.md.
type ExecRequest struct {
	Cmd            string   `json:"cmd,omitempty"`
	Argv           []string `json:"argv,omitempty"`
	Cwd            string   `json:"cwd,omitempty"`
	TimeoutMS      int64    `json:"timeout_ms,omitempty"`
	MaxOutputBytes int64    `json:"max_output_bytes,omitempty"`
	// OutputKeep says which bytes past the cap are kept: "head" (or
	// absent), "tail", or "both" (the two halves with a line between
	// them saying how many bytes were left out).
	OutputKeep string `json:"output_keep,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Revision   string `json:"revision,omitempty"`
	// Approval is the bare id of an approval, as older clients send it.
	// It is not trusted: only Grant lets a command the policy wants
	// confirmed run. It is accepted (and named in a refusal) so that an
	// older client gets a clear answer instead of "unknown field".
	Approval string `json:"approval,omitempty"`
	// Grant is the signed approval of this call (internal/grant).
	Grant *grant.Grant `json:"grant,omitempty"`
}

// maxApprovalLen bounds the approval field (ids are 32 hex digits).
const maxApprovalLen = 128

// ExecResponse is the 200 answer of POST /exec, sent for every command
// that started, whatever its exit status; see PROTOCOL.md.
type ExecResponse struct {
	Stdout         string `json:"stdout"`
	Stderr         string `json:"stderr"`
	StdoutEncoding string `json:"stdout_encoding,omitempty"` // "base64" when stdout is not UTF-8
	StderrEncoding string `json:"stderr_encoding,omitempty"`
	ExitCode       int    `json:"exit_code"`
	Signal         string `json:"signal,omitempty"`
	Truncated      bool   `json:"truncated"`
	TimedOut       bool   `json:"timed_out"`
	DurationMS     int64  `json:"duration_ms"`
	StdoutBytes    int64  `json:"stdout_bytes"`
	StderrBytes    int64  `json:"stderr_bytes"`
	TimeoutMS      int64  `json:"timeout_ms"`       // the timeout applied after clamping
	MaxOutputBytes int64  `json:"max_output_bytes"` // the cap applied after clamping
	// LimitHit names the sandbox limit the command hit, as its control
	// group counted it; absent when none (proc.Outcome.LimitHit).
	LimitHit string `json:"limit_hit,omitempty"`
}

// ErrorResponse is the body of every non-200 answer.
type ErrorResponse struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

type handler struct {
	opts    Options
	policy  *policy.ShellPolicy // nil when Options.NoPolicy
	hashes  [][sha256.Size]byte // the tokens' digests, from which their grant keys derive
	allow   *allowlist          // nil: no allowlist
	sb      *proc.Sandbox       // nil: unsandboxed
	sem     chan struct{}
	used    *usedGrants // the approvals whose grants ran, until they expire
	boot    string      // this process's boot id: grants name it
	log     *slog.Logger
	shell   string
	noToken bool
}

// NewHandler returns the gatekeeper HTTP handler configured by a copy of
// opts. It panics when opts.Validate fails (call Validate first to report
// configuration errors nicely). A nil logger discards the audit log.
func NewHandler(opts Options, logger *slog.Logger) http.Handler {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{opts: opts, log: logger, shell: opts.Shell, sb: opts.Sandbox}
	if h.shell == "" {
		h.shell = DefaultShell
	}
	o := &h.opts
	o.Tokens = nil // only the digests are kept
	o.DefaultTimeout = orDefault(o.DefaultTimeout, DefaultTimeout)
	o.MaxTimeout = orDefault(o.MaxTimeout, DefaultMaxTimeout)
	o.DefaultMaxOutput = orDefault(o.DefaultMaxOutput, DefaultMaxOutput)
	o.MaxOutput = orDefault(o.MaxOutput, DefaultMaxOutputCap)
	o.MaxBodyBytes = orDefault(o.MaxBodyBytes, DefaultMaxBodyBytes)
	o.MaxConcurrent = orDefault(o.MaxConcurrent, DefaultMaxConcurrent)
	o.MaxUsedGrants = orDefault(o.MaxUsedGrants, DefaultMaxUsedGrants)
	o.DefaultTimeout = min(o.DefaultTimeout, o.MaxTimeout)
	o.DefaultMaxOutput = min(o.DefaultMaxOutput, o.MaxOutput)
	o.Env = append([]string(nil), opts.Env...)
	for _, t := range opts.Tokens {
		h.hashes = append(h.hashes, sha256.Sum256([]byte(t)))
	}
	for _, s := range opts.TokenSHA256 {
		var d [sha256.Size]byte
		hex.Decode(d[:], []byte(s)) // checked by Validate
		h.hashes = append(h.hashes, d)
	}
	h.noToken = len(h.hashes) == 0
	if !opts.NoPolicy {
		h.policy = opts.Policy
		if h.policy == nil {
			h.policy = policy.DefaultShellPolicy()
		}
	}
	h.allow = newAllowlist(opts.Allow)
	h.sem = make(chan struct{}, o.MaxConcurrent)
	h.used = newUsedGrants(o.MaxUsedGrants, time.Now)
	h.boot = newBootID()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /exec", h.exec)
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/exec" || r.URL.Path == "/healthz" {
			allow := "GET, HEAD"
			if r.URL.Path == "/exec" {
				allow = "POST"
			}
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
			return
		}
		writeError(w, http.StatusNotFound, CodeNotFound, "no such endpoint "+r.URL.Path+" (the gatekeeper serves POST /exec and GET /healthz)")
	})
	// Tracing on (telemetry.Setup), a request continues the caller's
	// trace (its traceparent header) in a server span.
	return telemetry.Handler(mux, "gatekeeper")
}

// newBootID returns a fresh random boot id: 32 hex digits, so a grant
// signed for one gatekeeper process is refused by any other, including
// the same server after a restart.
func newBootID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// caller is who sent a request: the id of its token (a short digest
// prefix, safe to log) and the token's SHA-256, from which the key of the
// grants it may send derives (grant.KeyFromDigest). A server without
// tokens has no key.
type caller struct {
	tokenID string
	digest  [sha256.Size]byte
	hasKey  bool
}

// authorize checks the bearer token. It returns the caller or writes the
// error answer and returns ok false. Without configured tokens only
// loopback peers are accepted.
func (h *handler) authorize(w http.ResponseWriter, r *http.Request) (c caller, ok bool) {
	if h.noToken {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		if !isLoopbackHost(host) {
			writeError(w, http.StatusForbidden, CodeForbidden, "this gatekeeper has no token configured and only accepts loopback clients")
			return caller{}, false
		}
		return caller{tokenID: "none"}, true
	}
	auth := r.Header.Get("Authorization")
	scheme, tok, found := strings.Cut(auth, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gatekeeper"`)
		writeError(w, http.StatusUnauthorized, CodeUnauthorized, "missing bearer token (send Authorization: Bearer <token>)")
		return caller{}, false
	}
	d := sha256.Sum256([]byte(tok))
	match := 0
	for _, want := range h.hashes { // no early exit: the time does not depend on which token matched
		match |= subtle.ConstantTimeCompare(d[:], want[:])
	}
	if match != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gatekeeper", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, CodeUnauthorized, "invalid bearer token")
		return caller{}, false
	}
	// The grant key derives from the digest of the token that
	// authenticated this request, so a grant binds to that token and no
	// other.
	return caller{tokenID: hex.EncodeToString(d[:4]), digest: d, hasKey: true}, true
}

// Health is the answer of GET /healthz.
type Health struct {
	Status string `json:"status"`
	// BootID is the id of this gatekeeper process, which a grant must
	// name; given only to a request whose token the server checked.
	BootID string `json:"boot_id,omitempty"`
}

// healthz answers liveness without a token. A request that carries an
// Authorization header has it checked, so a client can verify its token,
// and gets the boot id its grants must name.
func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	ans := Health{Status: "ok"}
	if r.Header.Get("Authorization") != "" || h.noToken {
		who, ok := h.authorize(w, r)
		if !ok {
			return
		}
		if who.hasKey {
			ans.BootID = h.boot
		}
	}
	writeJSON(w, http.StatusOK, ans)
}

func (h *handler) exec(w http.ResponseWriter, r *http.Request) {
	who, ok := h.authorize(w, r)
	if !ok {
		h.log.WarnContext(r.Context(), "gatekeeper request refused", "remote", r.RemoteAddr, "reason", "unauthorized")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	var req ExecRequest
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("request body larger than %d bytes", mbe.Limit))
			return
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, "request body is not a valid exec request: "+err.Error())
		return
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "request body holds more than one JSON value")
		return
	}
	spec, err := h.spec(req)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	prog := analyze(req)
	audit := h.auditAttrs(r, req, who.tokenID, spec, prog)
	v, err := h.guard(req, prog, who)
	audit = append(audit, "approval", v.approval, "sandbox", h.sandboxText(v.grant))
	if err != nil {
		h.log.WarnContext(r.Context(), "gatekeeper exec refused", append(audit, "reason", err.Error())...)
		writeError(w, http.StatusForbidden, CodeRefused, err.Error())
		return
	}
	spec.Argv, spec.Grant = v.argv, v.grant
	if v.approval != "" {
		// A grant runs once: claim its approval right before the start;
		// it counts as used once the command started.
		c, err := h.used.claim(usedKey(grant.KeyFromDigest(who.digest), v.approval), v.approval, v.expires)
		if full, ok := errors.AsType[*usedFull](err); ok {
			h.log.WarnContext(r.Context(), "gatekeeper exec refused", append(audit, "reason", err.Error())...)
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(time.Until(full.next).Seconds())))))
			writeError(w, http.StatusServiceUnavailable, CodeBusy, err.Error())
			return
		}
		if err != nil {
			err = fmt.Errorf("grant refused: %w", err)
			h.log.WarnContext(r.Context(), "gatekeeper exec refused", append(audit, "reason", err.Error())...)
			writeError(w, http.StatusForbidden, CodeRefused, err.Error())
			return
		}
		defer c.done()
		spec.Started = c.started
	}
	select {
	case h.sem <- struct{}{}:
		defer func() { <-h.sem }()
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, CodeBusy, fmt.Sprintf("busy: %d commands are already running; retry later", cap(h.sem)))
		return
	}
	// A client that accepts NDJSON gets the output as the command writes
	// it, then the answer (PROTOCOL.md, "Streaming"); others, as before,
	// the answer alone.
	var st *execStream
	if acceptsNDJSON(r) {
		st = &execStream{w: w, rc: http.NewResponseController(w)}
		w.Header().Set("Content-Type", mediaNDJSON)
		w.WriteHeader(http.StatusOK)
		spec.OnOutput = st.output
		if r.Header.Get(FollowHeader) == "1" {
			// Someone is shown all of it, for as long as the client reads:
			// the request's end (the client gone) ends the command too.
			spec.Followed = func() bool { return r.Context().Err() == nil }
		}
	}
	// The request context ends when the client goes away: proc then kills
	// the process group, so an abandoned call leaves nothing running.
	out, err := proc.Run(r.Context(), spec)
	if err != nil {
		h.log.WarnContext(r.Context(), "gatekeeper exec could not start", append(audit, "err", err.Error())...)
		if st != nil {
			st.write(StreamEvent{Event: "error", Code: CodeStartFailed, Error: err.Error()})
			return
		}
		writeError(w, http.StatusUnprocessableEntity, CodeStartFailed, err.Error())
		return
	}
	h.log.InfoContext(r.Context(), "gatekeeper exec", append(audit,
		"exit_code", out.ExitCode, "signal", out.Signal, "timed_out", out.TimedOut,
		"truncated", out.Truncated, "stdout_bytes", out.StdoutBytes, "stderr_bytes", out.StderrBytes,
		"duration_ms", out.Duration.Milliseconds(), "limit_hit", out.LimitHit)...)
	resp := ExecResponse{
		ExitCode:       out.ExitCode,
		Signal:         out.Signal,
		Truncated:      out.Truncated,
		TimedOut:       out.TimedOut,
		DurationMS:     out.Duration.Milliseconds(),
		StdoutBytes:    out.StdoutBytes,
		StderrBytes:    out.StderrBytes,
		TimeoutMS:      spec.Timeout.Milliseconds(),
		MaxOutputBytes: spec.MaxOutput,
		LimitHit:       out.LimitHit,
	}
	resp.Stdout, resp.StdoutEncoding = encode(out.Stdout)
	resp.Stderr, resp.StderrEncoding = encode(out.Stderr)
	if st != nil {
		st.write(StreamEvent{Event: "result", Result: &resp})
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// FollowHeader, set to "1" on a streamed /exec request, says the client
// shows the command's output to someone as it comes (PROTOCOL.md,
// "Streaming"): a stream past max_output_bytes and proc.DrainLimit is then
// read on and streamed while the client reads, not cut.
const FollowHeader = "Toolagent-Follow"

// mediaNDJSON is the media type of a streamed /exec answer.
const mediaNDJSON = "application/x-ndjson"

// acceptsNDJSON reports whether the request asks for a streamed answer.
func acceptsNDJSON(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), mediaNDJSON) {
			return true
		}
	}
	return false
}

// StreamEvent is one line of a streamed /exec answer: a chunk of the
// command's "stdout" or "stderr" (Data, base64 when Encoding says so),
// then exactly one "result" (the ExecResponse) or "error" (the command
// could not start: Code and Error).
type StreamEvent struct {
	Event    string        `json:"event"`
	Data     string        `json:"data,omitempty"`
	Encoding string        `json:"encoding,omitempty"`
	Result   *ExecResponse `json:"result,omitempty"`
	Code     string        `json:"code,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// execStream writes a streamed answer; proc's two readers call output at
// once, so writes are serialized.
type execStream struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (s *execStream) output(stream string, p []byte) {
	e := StreamEvent{Event: stream}
	e.Data, e.Encoding = encode(p)
	s.write(e)
}

func (s *execStream) write(e StreamEvent) {
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(append(b, '\n')); err == nil {
		_ = s.rc.Flush()
	}
}

// spec turns a request into a proc.Spec with the server's limits applied.
func (h *handler) spec(req ExecRequest) (proc.Spec, error) {
	switch {
	case req.Cmd != "" && len(req.Argv) > 0:
		return proc.Spec{}, errors.New(`give either "cmd" or "argv", not both`)
	case req.Cmd == "" && len(req.Argv) == 0:
		return proc.Spec{}, errors.New(`give "cmd" (a shell command) or "argv" (a program and its arguments)`)
	case len(req.Argv) > 0 && req.Argv[0] == "":
		return proc.Spec{}, errors.New(`argv[0] (the program) is empty`)
	case req.TimeoutMS < 0 || req.MaxOutputBytes < 0:
		return proc.Spec{}, errors.New(`timeout_ms and max_output_bytes must not be negative`)
	case !slices.Contains([]string{"", "head", "tail", "both"}, req.OutputKeep):
		return proc.Spec{}, fmt.Errorf(`output_keep %q: want head, tail or both`, req.OutputKeep)
	case req.Cwd != "" && !filepath.IsAbs(req.Cwd):
		return proc.Spec{}, fmt.Errorf("cwd %q must be an absolute path", req.Cwd)
	case len(req.Approval) > maxApprovalLen:
		return proc.Spec{}, fmt.Errorf("approval id longer than %d bytes", maxApprovalLen)
	case strings.Contains(req.Cmd, "\x00") || slices.ContainsFunc(req.Argv, func(a string) bool { return strings.Contains(a, "\x00") }):
		return proc.Spec{}, errors.New("cmd and argv must not contain NUL bytes")
	}
	timeout := h.opts.DefaultTimeout
	if req.TimeoutMS > 0 {
		timeout = min(time.Duration(req.TimeoutMS)*time.Millisecond, h.opts.MaxTimeout)
	}
	maxOut := h.opts.DefaultMaxOutput
	if req.MaxOutputBytes > 0 {
		maxOut = min(req.MaxOutputBytes, h.opts.MaxOutput)
	}
	env := proc.MinimalEnv(req.Cwd)
	if h.sb != nil {
		env = proc.SandboxEnv() // HOME is the sandbox's private /tmp
	}
	return proc.Spec{
		Argv:      h.argv(req.Cmd, req.Argv),
		Dir:       req.Cwd,
		Env:       append(env, h.opts.Env...),
		Timeout:   timeout,
		Grace:     h.opts.Grace,
		MaxOutput: maxOut,
		Keep:      outputKeep(req.OutputKeep),
		Sandbox:   h.sb,
	}, nil
}

// outputKeep maps the request's output_keep to proc's.
func outputKeep(k string) proc.Keep {
	if k == "head" {
		return proc.KeepHead
	}
	return proc.Keep(k)
}

// argv is what runs for a cmd (under the shell) or an argv.
func (h *handler) argv(cmd string, argv []string) []string {
	if cmd != "" {
		return []string{h.shell, "-p", "-c", cmd}
	}
	return argv
}

// verdict is what guard decided for a request that may run.
type verdict struct {
	argv     []string   // what runs (the allowlist pins the program's path)
	grant    proc.Grant // the sandbox grant it runs with
	approval string     // the approval id of a verified grant, or ""
	expires  time.Time  // when that grant expires
}

// guard applies the allowlist, the Check hook, the grant and the shell
// policy, in that order, right before the process would start. The error
// says why the request is refused.
func (h *handler) guard(req ExecRequest, prog program, who caller) (verdict, error) {
	v := verdict{argv: h.argv(req.Cmd, req.Argv)}
	if h.allow != nil {
		if err := h.allow.check(prog); err != nil {
			return v, err
		}
		// Run exactly the program the allowlist judged: by its path, so
		// neither PATH order nor a shell builtin can put another in.
		if req.Cmd != "" {
			v.argv = h.argv(req.Cmd[:prog.start]+prog.path+req.Cmd[prog.end:], nil)
		} else {
			v.argv = append([]string{prog.path}, req.Argv[1:]...)
		}
	}
	if h.opts.Check != nil {
		var err error
		if req.Cmd != "" {
			err = h.opts.Check(req.Cmd, nil)
		} else {
			err = h.opts.Check("", append([]string(nil), req.Argv...))
		}
		if err != nil {
			return v, fmt.Errorf("policy: %w", err)
		}
	}
	approved := false
	if req.Grant != nil {
		g, exp, err := h.verifyGrant(req, who)
		if err != nil {
			return v, fmt.Errorf("grant refused: %w", err)
		}
		approved, v.approval, v.grant, v.expires = true, req.Grant.Approval, g, exp
	}
	if h.policy != nil {
		line := req.Cmd
		if line == "" {
			var err error
			if line, err = quoteArgv(req.Argv); err != nil {
				return v, fmt.Errorf("argv cannot be judged: %w", err)
			}
		}
		// The error names the rule: "refused by policy: shell: command
		// `rm` deletes files (default policy: delete): ...".
		if err := policy.CheckCommand(line, h.policy, approved); err != nil {
			var re *policy.RefusedError
			if errors.As(err, &re) && re.Unapproved && req.Approval != "" {
				return v, fmt.Errorf("%w (the request names approval %q without a signed grant; this gatekeeper does not trust a bare approval id: the daemon must send the grant signed with its token)", err, req.Approval)
			}
			return v, err
		}
	}
	return v, nil
}

// verifyGrant checks req.Grant for who and returns the sandbox grant the
// command runs with and the grant's expiry. Whether it already ran is
// checked right before the start (usedGrants).
func (h *handler) verifyGrant(req ExecRequest, who caller) (proc.Grant, time.Time, error) {
	g := req.Grant
	if !who.hasKey {
		return proc.Grant{}, time.Time{}, errors.New("this gatekeeper has no token, so it cannot verify a grant (configure a token)")
	}
	if err := g.Verify(grant.KeyFromDigest(who.digest), time.Now(), grant.CommandDigest(req.Cmd, req.Argv), h.boot); err != nil {
		return proc.Grant{}, time.Time{}, err
	}
	exp, _ := time.Parse(time.RFC3339, g.ExpiresAt) // Verify parsed it
	for _, f := range []struct{ name, req, grant string }{
		{"tool", req.Tool, g.Tool}, {"revision", req.Revision, g.Revision}, {"approval", req.Approval, g.Approval},
	} {
		if f.req != "" && f.req != f.grant {
			return proc.Grant{}, time.Time{}, fmt.Errorf("the grant is for %s %q, the request names %s %q", f.name, f.grant, f.name, f.req)
		}
	}
	pg := proc.Grant{Write: slices.Clone(g.Sandbox.Write), Network: g.Sandbox.Network}
	if h.sb != nil {
		if err := h.sb.CheckGrant(pg); err != nil {
			return proc.Grant{}, time.Time{}, err
		}
	}
	return pg, exp, nil
}

// sandboxText says what a command runs with, for the audit line.
func (h *handler) sandboxText(g proc.Grant) string {
	if h.sb == nil {
		return "off"
	}
	return g.String()
}

// auditAttrs are the attributes of the audit line of one exec. The
// command itself is what a gatekeeper audits, but a cmd can carry secrets
// (a password on a command line), so the line holds the program name and
// a SHA-256 of the full command, never its text: an operator who has the
// command can prove it ran; the log alone does not leak it.
func (h *handler) auditAttrs(r *http.Request, req ExecRequest, tokenID string, spec proc.Spec, prog program) []any {
	mode := "argv"
	full := strings.Join(req.Argv, "\x00")
	if req.Cmd != "" {
		mode, full = "cmd", req.Cmd
	}
	sum := sha256.Sum256([]byte(full))
	return []any{
		"remote", r.RemoteAddr, "token_id", tokenID, "tool", req.Tool, "rev", req.Revision,
		"mode", mode, "program", prog.audit(h.shell), "cmd_sha256", hex.EncodeToString(sum[:]),
		"cmd_bytes", len(full), "cwd", req.Cwd,
		"timeout_ms", spec.Timeout.Milliseconds(), "max_output_bytes", spec.MaxOutput,
	}
}

// encode returns b as a JSON string, or as base64 with encoding "base64"
// when b is not valid UTF-8, so no byte is lost.
func encode(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client is gone if this fails; nothing to do
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg, Code: code})
}
