// Package gatekeeper is the client executor of the gatekeeper protocol: it
// runs the tools whose executor is "gatekeeper" by sending POST /exec to a
// gatekeeper server (internal/gatekeeper, PROTOCOL.md) on a named target
// host, authenticated with that target's bearer token.
//
// Methods (Tool.Method):
//
//   - exec: the tool's "cmd" param runs under the server's /bin/bash -p -c;
//     optional "cwd" param (absolute path on the server).
//   - run: the tool's argv template, filled by hldp.(*Tool).RenderArgv,
//     sent as argv (no shell on the server either); optional "cwd" param.
//
// A tool picks its target with `target:` in TOOL.hdlp (Tool.Target), or
// runs on Options.Default. The server enforces timeout, process-group kill
// and output caps; this client enforces the output cap again on what it
// receives and reads at most a bounded response.
//
// Approvals: the server judges every command again with its shell policy
// right before it starts, and runs one the policy wants confirmed only
// with a grant it can verify. When dispatch claimed an approval for the
// call (executors.Request.Approval), the client sends that grant
// (internal/grant): the approval id, tool, revision, params hash, the
// digest of the exact command, the server's boot id, the tool's declared
// sandbox (write paths, network) and an expiry (now + the tool's timeout
// + GrantSlack), signed with HMAC-SHA256 under the key derived from the
// target's token (grant.Key). The boot id comes from the server's GET
// /healthz, asked right before an approved call: the server runs a grant
// once and refuses one signed for an earlier run of it (it restarted, and
// forgot which grants ran); when a grant is refused because the server
// restarted in between, the client signs for the new boot and sends the
// call once more (nothing ran). Without an approval no grant is sent, and
// the server runs the command read-only without network.
//
// Errors are classified so a caller never has to guess: ErrUnreachable
// (network), ErrUnauthorized (token refused, 401/403), executors.ErrRefused
// (the server's allowlist, policy or grant check refused the command, or
// the tool's sandbox cannot be granted remotely), *RemoteError for every
// other protocol error. A command that ran and failed or timed out
// is an Outcome, not an error (TimedOut set from the server's timed_out).
// Tokens never appear in errors, plans or logs.
//
// An Executor is safe for concurrent use. Imports: executors, hldp, grant.
// Imported only by the daemon (internal/daemon).
package gatekeeper

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/grant"
	"github.com/toolagent/toolagent/internal/hldp"
)

// The methods of the gatekeeper executor, as written in TOOL.hdlp.
const (
	MethodExec = "exec"
	MethodRun  = "run"
)

// Methods lists the gatekeeper executor's methods in a stable order.
var Methods = []string{MethodExec, MethodRun}

// RemoteShell is the shell a gatekeeper server runs cmd under (as
// RemoteShell -p -c cmd), shown in plans (the server's own setting
// decides).
const RemoteShell = "/bin/bash"

// GrantSlack is how long a grant outlives the tool's timeout: room for the
// request to travel and for clock skew between daemon and server.
const GrantSlack = 60 * time.Second

// ErrUnreachable marks a call or health check that got no HTTP answer from
// the target: connection refused, DNS failure, TLS failure, reset.
var ErrUnreachable = errors.New("gatekeeper unreachable")

// ErrUnauthorized marks an answer 401, or 403 "forbidden": the target did
// not accept this client's token.
var ErrUnauthorized = errors.New("gatekeeper refused the token")

// RemoteError is a gatekeeper error answer (any status but 200). It
// unwraps to ErrUnauthorized for 401 and 403 "forbidden", and to
// executors.ErrRefused for 403 "refused" (allowlist or policy).
type RemoteError struct {
	Target  string // target name
	Status  int    // HTTP status
	Code    string // protocol error code ("" when the body was not a protocol error)
	Message string // the server's message, or the start of a non-protocol body
}

func (e *RemoteError) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	return fmt.Sprintf("gatekeeper target %s: HTTP %d %s: %s", e.Target, e.Status, code, e.Message)
}

// Unwrap returns the sentinel the answer stands for, or nil.
func (e *RemoteError) Unwrap() error {
	switch {
	case e.Status == http.StatusUnauthorized, e.Status == http.StatusForbidden && e.Code == "forbidden":
		return ErrUnauthorized
	case e.Status == http.StatusForbidden && e.Code == "refused":
		return executors.ErrRefused
	}
	return nil
}

// Target is one gatekeeper server.
type Target struct {
	// URL is the server's base URL, e.g. http://10.0.0.5:8766; /exec and
	// /healthz are appended.
	URL string
	// Token is the bearer token (read from a file or the environment by
	// the daemon; never from the repository). "" sends none.
	Token string
}

// Options configure an Executor.
type Options struct {
	// Targets are the configured servers by name.
	Targets map[string]Target
	// Default names the target of tools without `target:`; "" means the
	// only target when there is exactly one.
	Default string
	// Client is the HTTP client; nil means a client with no overall
	// timeout (each call is bounded by its context and the tool timeout).
	Client *http.Client
	// Logger receives one debug line per call; nil discards. Never tokens.
	Logger *slog.Logger
}

// Executor runs gatekeeper tools. Build it with New.
type Executor struct {
	targets map[string]target
	def     string
	client  *http.Client
	log     *slog.Logger
}

type target struct {
	name  string
	base  *url.URL // nil when URL did not parse (urlErr says why)
	raw   string   // URL as configured, redacted, for messages
	token string
	err   error
}

var _ executors.Executor = (*Executor)(nil)

// New returns an Executor configured by a copy of opts. Target URLs that
// do not parse are reported by Health and by calls, not here.
func New(opts Options) *Executor {
	e := &Executor{
		targets: make(map[string]target, len(opts.Targets)),
		def:     opts.Default,
		client:  opts.Client,
		log:     opts.Logger,
	}
	if e.client == nil {
		e.client = &http.Client{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	for name, t := range opts.Targets {
		tg := target{name: name, token: t.Token, raw: t.URL}
		u, err := url.Parse(t.URL)
		switch {
		case err != nil:
			tg.err = fmt.Errorf("gatekeeper target %s: invalid URL: %w", name, err)
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			tg.err = fmt.Errorf("gatekeeper target %s: URL %q must be http:// or https:// with a host", name, u.Redacted())
		default:
			tg.raw = u.Redacted()
			tg.base = u
		}
		e.targets[name] = tg
	}
	if e.def == "" && len(e.targets) == 1 {
		for name := range e.targets {
			e.def = name
		}
	}
	return e
}

// TargetNames returns the configured target names, sorted.
func (e *Executor) TargetNames() []string {
	return slices.Sorted(maps.Keys(e.targets))
}

// target resolves a tool's target name ("" = default).
func (e *Executor) target(name string) (target, error) {
	if len(e.targets) == 0 {
		return target{}, fmt.Errorf("gatekeeper: no targets %w", executors.ErrNotConfigured)
	}
	if name == "" {
		if e.def == "" {
			return target{}, fmt.Errorf("gatekeeper: no default target (configured: %s); set a default or `target:` in the tool: %w",
				strings.Join(e.TargetNames(), ", "), executors.ErrNotConfigured)
		}
		name = e.def
	}
	t, ok := e.targets[name]
	if !ok {
		return target{}, fmt.Errorf("gatekeeper target %q is %w here (configured: %s)", name, executors.ErrNotConfigured, strings.Join(e.TargetNames(), ", "))
	}
	if t.err != nil {
		return target{}, t.err
	}
	return t, nil
}

// Check reports whether this executor can run t: the executor is
// gatekeeper, the method is exec (with a string "cmd" param) or run (with
// an argv template), "cwd" is a string if declared, and the tool's target
// (or the default) is configured. An unknown target wraps
// executors.ErrNotConfigured and names the configured targets.
func (e *Executor) Check(t *hldp.Tool) error {
	if t == nil {
		return errors.New("no tool")
	}
	if t.Executor != hldp.Gatekeeper {
		return fmt.Errorf("executor is %q, not %q", t.Executor, hldp.Gatekeeper)
	}
	switch t.Method {
	case MethodExec:
		p, ok := t.Param("cmd")
		if !ok || p.Type != hldp.TypeString {
			return errors.New(`method exec needs a string param "cmd" in params_schema`)
		}
	case MethodRun:
		if len(t.Argv) == 0 {
			return errors.New("method run needs an argv template, and the definition has none")
		}
	default:
		return fmt.Errorf("the gatekeeper executor has no method %q (methods: %s)", t.Method, strings.Join(Methods, ", "))
	}
	if p, ok := t.Param("cwd"); ok && p.Type != hldp.TypeString {
		return fmt.Errorf(`param "cwd" must be of type string, not %s`, p.Type)
	}
	_, err := e.target(t.Target())
	return err
}

// wireRequest is the body of POST /exec (PROTOCOL.md).
type wireRequest struct {
	Cmd            string   `json:"cmd,omitempty"`
	Argv           []string `json:"argv,omitempty"`
	Cwd            string   `json:"cwd,omitempty"`
	TimeoutMS      int64    `json:"timeout_ms"`
	MaxOutputBytes int64    `json:"max_output_bytes"`
	// OutputKeep is sent only when it is not the head, so a server that
	// does not know it refuses such a tool's calls instead of keeping the
	// wrong end.
	OutputKeep string `json:"output_keep,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Revision   string `json:"revision,omitempty"`
	// Grant is the signed approval dispatch claimed for this call, so the
	// server's policy re-check lets a confirmed command run.
	Grant *grant.Grant `json:"grant,omitempty"`
}

// wireResponse is the 200 answer of POST /exec.
type wireResponse struct {
	Stdout         string `json:"stdout"`
	Stderr         string `json:"stderr"`
	StdoutEncoding string `json:"stdout_encoding"`
	StderrEncoding string `json:"stderr_encoding"`
	ExitCode       int    `json:"exit_code"`
	Signal         string `json:"signal"`
	Truncated      bool   `json:"truncated"`
	TimedOut       bool   `json:"timed_out"`
	DurationMS     int64  `json:"duration_ms"`
	StdoutBytes    int64  `json:"stdout_bytes"`
	StderrBytes    int64  `json:"stderr_bytes"`
	LimitHit       string `json:"limit_hit"`
}

type wireError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// call is one prepared call.
type call struct {
	target  target
	body    wireRequest
	grant   *grant.Grant // the unsigned grant of an approved call, or nil
	timeout time.Duration
	maxOut  int64
	plan    executors.Plan
}

func (e *Executor) prepare(req executors.Request) (call, error) {
	t := req.Tool
	if t == nil {
		return call{}, errors.New("gatekeeper executor: request without a tool")
	}
	if err := e.Check(t); err != nil {
		return call{}, fmt.Errorf("tool %s: %w: %w", t.Name, executors.ErrRefused, err)
	}
	tg, _ := e.target(t.Target()) // checked above
	timeout, maxOut := t.Constraints.Timeout, t.Constraints.MaxOutputBytes
	if timeout <= 0 {
		timeout = hldp.DefaultTimeout
	}
	if maxOut <= 0 {
		maxOut = hldp.DefaultMaxOutputBytes
	}
	cwd, err := executors.StringParam(req.Params, "cwd", false)
	if err != nil {
		return call{}, fmt.Errorf("tool %s: %w", t.Name, err)
	}
	c := call{target: tg, timeout: timeout, maxOut: maxOut, body: wireRequest{
		Cwd: cwd, TimeoutMS: timeout.Milliseconds(), MaxOutputBytes: maxOut, OutputKeep: executors.OutputKeep(t), Tool: t.Name, Revision: req.Rev,
	}}
	switch t.Method {
	case MethodExec:
		cmd, err := executors.StringParam(req.Params, "cmd", true)
		if err != nil {
			return call{}, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		c.body.Cmd = cmd
		c.plan.Argv = []string{RemoteShell, "-p", "-c", cmd}
	case MethodRun:
		argv, err := t.RenderArgv(req.Params)
		if err != nil {
			return call{}, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		if len(argv) == 0 {
			return call{}, fmt.Errorf("tool %s: argv template rendered to nothing", t.Name)
		}
		c.body.Argv = argv
		c.plan.Argv = argv
	}
	sandbox := "read-only, no network (without an approval)"
	if req.Approval != "" {
		g, err := newGrant(req, tg, c.body.Cmd, c.body.Argv)
		if err != nil {
			return call{}, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		c.grant = g
		sandbox = t.Sandbox().String()
	}
	c.plan.Dir = cwd
	c.plan.Timeout = timeout
	c.plan.TimeoutMS = timeout.Milliseconds()
	c.plan.MaxOutputBytes = maxOut
	c.plan.Extra = map[string]string{"target": tg.name, "url": tg.raw + "/exec", "http": "POST", "sandbox": sandbox}
	return c, nil
}

// newGrant returns the grant of an approved call, unsigned: bound to the
// approval, the tool, its revision and params, this exact command and the
// tool's declared sandbox; Execute adds the server's boot id and the
// expiry and signs it (sign). A target without a token gets no grant (its
// server has no key to verify one and judges the call as unapproved).
func newGrant(req executors.Request, tg target, cmd string, argv []string) (*grant.Grant, error) {
	if tg.token == "" {
		return nil, nil
	}
	sb := req.Tool.Sandbox()
	if sb.None {
		return nil, fmt.Errorf("%w: sandbox: none cannot be granted on gatekeeper target %s: its server sandboxes every command; declare the write paths and network the tool needs instead", executors.ErrRefused, tg.name)
	}
	if slices.Contains(sb.Write, hldp.SandboxFilesRoot) {
		return nil, fmt.Errorf("%w: the sandbox grant names %s, which is the daemon's files root, not a path on gatekeeper target %s", executors.ErrRefused, hldp.SandboxFilesRoot, tg.name)
	}
	g := &grant.Grant{
		Approval:   req.Approval,
		Tool:       req.Tool.Name,
		Revision:   req.Rev,
		ParamsHash: grant.ParamsHash(req.Params),
		Command:    grant.CommandDigest(cmd, argv),
		Sandbox:    grant.Sandbox{Write: slices.Clone(sb.Write), Network: sb.Network},
	}
	if g.Sandbox.Write == nil {
		g.Sandbox.Write = []string{} // "write": [] on the wire, not null
	}
	return g, nil
}

// sign returns a copy of the unsigned grant g for the server whose boot
// id is boot, expiring at now + timeout + GrantSlack, signed under the
// target's token.
func sign(g *grant.Grant, tg target, boot string, timeout time.Duration) *grant.Grant {
	s := *g
	s.BootID = boot
	s.ExpiresAt = time.Now().Add(timeout + GrantSlack).UTC().Format(time.RFC3339)
	s.Sign(grant.Key(tg.token))
	return &s
}

// bootID asks t's GET /healthz, with the token, for the server's boot id,
// which a grant must name.
func (e *Executor) bootID(ctx context.Context, t target) (string, error) {
	var h struct {
		Status string `json:"status"`
		BootID string `json:"boot_id"`
	}
	if err := e.do(ctx, t, http.MethodGet, "/healthz", nil, responseSlack, &h); err != nil {
		return "", fmt.Errorf("asking for the boot id a grant must name: %w", err)
	}
	if h.BootID == "" {
		return "", &RemoteError{Target: t.name, Status: http.StatusOK,
			Message: "GET /healthz gave no boot_id, so no grant can be signed for it: the gatekeeper is older than this daemon (grant format 2); upgrade it to the daemon's release"}
	}
	return h.BootID, nil
}

// Plan returns what Execute would send: the argv the server would run
// (cmd under the remote shell), cwd, limits, and in Extra the target name
// and URL. No token appears in a plan.
func (e *Executor) Plan(req executors.Request) (executors.Plan, error) {
	c, err := e.prepare(req)
	return c.plan, err
}

// responseSlack is what a response may hold beyond its two capped
// streams: the JSON envelope.
const responseSlack = 64 << 10

// Execute sends req to its target and returns the command's outcome. A
// command that ran — whatever its exit status, also when the server killed
// it at the timeout (TimedOut) — is an Outcome. The error is for calls
// that did not run: ErrUnreachable, ErrUnauthorized, executors.ErrRefused
// (bad tool, or refused by the server's guards), other *RemoteError, or
// the context's error when the caller's deadline passed first.
func (e *Executor) Execute(ctx context.Context, req executors.Request) (executors.Outcome, error) {
	c, err := e.prepare(req)
	if err != nil {
		return executors.Outcome{}, err
	}
	// The server answers by the tool timeout plus its kill grace; this
	// bound only matters for a caller without a deadline.
	ctx, cancel := context.WithTimeout(ctx, c.timeout+30*time.Second)
	defer cancel()
	start := time.Now()
	var wr wireResponse
	// Whether someone follows the output is asked once, as the call
	// starts: the server then reads a long stream on rather than cutting
	// it (PROTOCOL.md, "Streaming").
	follow := req.Output != nil && req.Followed != nil && req.Followed()
	if err := e.sendCall(ctx, c, &wr, req.Output, follow); err != nil {
		return executors.Outcome{}, fmt.Errorf("tool %s: %w", req.Tool.Name, err)
	}
	stdout, err := decode(wr.Stdout, wr.StdoutEncoding)
	if err != nil {
		return executors.Outcome{}, fmt.Errorf("tool %s: gatekeeper target %s: stdout: %w", req.Tool.Name, c.target.name, err)
	}
	stderr, err := decode(wr.Stderr, wr.StderrEncoding)
	if err != nil {
		return executors.Outcome{}, fmt.Errorf("tool %s: gatekeeper target %s: stderr: %w", req.Tool.Name, c.target.name, err)
	}
	out := executors.Outcome{
		Completed:   !wr.TimedOut, // the server answered with the command's status
		ExitCode:    wr.ExitCode,
		Truncated:   wr.Truncated,
		OutputBytes: max(wr.StdoutBytes, int64(len(stdout))),
		TimedOut:    wr.TimedOut,
		Duration:    time.Duration(wr.DurationMS) * time.Millisecond,
		LimitHit:    wr.LimitHit,
	}
	// The server capped already; cap again in case it allows more than
	// this tool does.
	out.Output, out.Stderr = stdout, stderr
	if int64(len(out.Output)) > c.maxOut {
		out.Output, out.Truncated = out.Output[:c.maxOut], true
	}
	if int64(len(out.Stderr)) > c.maxOut {
		out.Stderr, out.Truncated = out.Stderr[:c.maxOut], true
	}
	if out.Duration == 0 {
		out.Duration = time.Since(start)
	}
	e.log.DebugContext(ctx, "gatekeeper call", "tool", req.Tool.Name, "target", c.target.name, "rev", req.Rev,
		"exit_code", out.ExitCode, "signal", wr.Signal, "timed_out", out.TimedOut, "truncated", out.Truncated,
		"duration", time.Since(start))
	return out, nil
}

// sendCall sends the prepared call c and reads its answer into wr. An
// approved call is signed for the server's current boot id; when the
// server refuses its grant and has restarted since (its boot id
// changed), nothing ran, and the call is signed for the new boot and sent
// once more.
func (e *Executor) sendCall(ctx context.Context, c call, wr *wireResponse, output func(string, []byte), follow bool) error {
	limit := 2*6*c.maxOut + responseSlack
	if c.grant == nil {
		body, _ := json.Marshal(c.body) // plain strings and numbers: cannot fail
		return e.doStream(ctx, c.target, "/exec", body, limit, wr, output, follow)
	}
	boot, err := e.bootID(ctx, c.target)
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		c.body.Grant = sign(c.grant, c.target, boot, c.timeout)
		body, _ := json.Marshal(c.body)
		err := e.doStream(ctx, c.target, "/exec", body, limit, wr, output, follow)
		if try > 0 || !errors.Is(err, executors.ErrRefused) {
			return err
		}
		now, berr := e.bootID(ctx, c.target)
		if berr != nil || now == boot {
			return err // refused for another reason than a restart
		}
		e.log.DebugContext(ctx, "gatekeeper restarted: signing the grant again", "target", c.target.name, "approval", c.grant.Approval)
		boot = now
	}
}

// do sends one request to t and decodes a 200 JSON answer into v, reading
// at most limit bytes. Every failure names the target, never the token.
// doStream POSTs body to path like do; with output set it asks for a
// streamed answer and hands each chunk of the command's output to output
// as it comes; follow says someone is shown all of it, so the server reads
// a stream past its cap and drain limit on. A server that does not stream
// (an older one) answers the plain way, which do's path reads.
func (e *Executor) doStream(ctx context.Context, t target, path string, body []byte, limit int64, v *wireResponse, output func(string, []byte), follow bool) error {
	if output == nil {
		return e.do(ctx, t, http.MethodPost, path, body, limit, v)
	}
	return e.send(ctx, t, http.MethodPost, path, body, limit, v, output, follow)
}

func (e *Executor) do(ctx context.Context, t target, method, path string, body []byte, limit int64, v any) error {
	return e.send(ctx, t, method, path, body, limit, v, nil, false)
}

// streamEvent is one line of a streamed /exec answer (PROTOCOL.md).
type streamEvent struct {
	Event    string        `json:"event"`
	Data     string        `json:"data"`
	Encoding string        `json:"encoding"`
	Result   *wireResponse `json:"result"`
	Code     string        `json:"code"`
	Error    string        `json:"error"`
}

// readStream reads a streamed answer into v, handing chunks to output.
// No line may be larger than limit.
func readStream(t target, r io.Reader, limit int64, v any, output func(string, []byte)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), int(min(limit, 1<<30)))
	for sc.Scan() {
		var ev streamEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return &RemoteError{Target: t.name, Status: http.StatusOK, Message: "a streamed line is not gatekeeper JSON: " + snippet(sc.Bytes())}
		}
		switch ev.Event {
		case "stdout", "stderr":
			p, err := decode(ev.Data, ev.Encoding)
			if err != nil {
				return &RemoteError{Target: t.name, Status: http.StatusOK, Message: fmt.Sprintf("a %s chunk: %v", ev.Event, err)}
			}
			output(ev.Event, p)
		case "result":
			if ev.Result == nil {
				return &RemoteError{Target: t.name, Status: http.StatusOK, Message: "a result event without a result"}
			}
			if wr, ok := v.(*wireResponse); ok {
				*wr = *ev.Result
			}
			return nil
		case "error":
			return &RemoteError{Target: t.name, Status: http.StatusUnprocessableEntity, Code: ev.Code, Message: ev.Error}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("gatekeeper target %s (%s): %w: reading the stream: %v", t.name, t.raw, ErrUnreachable, err)
	}
	return fmt.Errorf("gatekeeper target %s (%s): %w: the stream ended before the command's result", t.name, t.raw, ErrUnreachable)
}

func (e *Executor) send(ctx context.Context, t target, method, path string, body []byte, limit int64, v any, output func(string, []byte), follow bool) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	u := t.base.JoinPath(path)
	hreq, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("gatekeeper target %s: %w", t.name, err)
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set("Accept", "application/json")
	if output != nil {
		hreq.Header.Set("Accept", "application/x-ndjson, application/json")
		if follow {
			hreq.Header.Set("Toolagent-Follow", "1") // gatekeeper.FollowHeader
		}
	}
	if t.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := e.client.Do(hreq)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			// The caller's deadline or cancellation, not the network.
			return fmt.Errorf("gatekeeper target %s (%s): no answer: %w", t.name, t.raw, ctxErr)
		}
		return fmt.Errorf("gatekeeper target %s (%s): %w: %v", t.name, t.raw, ErrUnreachable, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if output != nil && resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		err := readStream(t, resp.Body, limit, v, output)
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("gatekeeper target %s (%s): reading the answer: %w", t.name, t.raw, ctx.Err())
		}
		return err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("gatekeeper target %s (%s): reading the answer: %w", t.name, t.raw, ctxErr)
		}
		return fmt.Errorf("gatekeeper target %s (%s): %w: reading the answer: %v", t.name, t.raw, ErrUnreachable, err)
	}
	if int64(len(data)) > limit {
		return &RemoteError{Target: t.name, Status: resp.StatusCode, Code: "", Message: fmt.Sprintf("answer larger than %d bytes; refusing to read it", limit)}
	}
	if resp.StatusCode != http.StatusOK {
		re := &RemoteError{Target: t.name, Status: resp.StatusCode}
		var we wireError
		if json.Unmarshal(data, &we) == nil && we.Error != "" {
			re.Code, re.Message = we.Code, we.Error
		} else {
			re.Message = snippet(data)
		}
		return re
	}
	if err := json.Unmarshal(data, v); err != nil {
		return &RemoteError{Target: t.name, Status: resp.StatusCode, Message: "answer is not gatekeeper JSON: " + snippet(data)}
	}
	return nil
}

// Health checks GET /healthz (with the token, so a wrong token fails) on
// every target and reports every one that failed, by name. No targets:
// executors.ErrNotConfigured.
func (e *Executor) Health(ctx context.Context) error {
	if len(e.targets) == 0 {
		return fmt.Errorf("gatekeeper: no targets %w", executors.ErrNotConfigured)
	}
	var errs []error
	if e.def != "" {
		if _, ok := e.targets[e.def]; !ok {
			errs = append(errs, fmt.Errorf("gatekeeper: default target %q is not configured (configured: %s)", e.def, strings.Join(e.TargetNames(), ", ")))
		}
	}
	for _, name := range e.TargetNames() {
		t := e.targets[name]
		if t.err != nil {
			errs = append(errs, t.err)
			continue
		}
		var ok struct {
			Status string `json:"status"`
		}
		if err := e.do(ctx, t, http.MethodGet, "/healthz", nil, responseSlack, &ok); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// unwrapURLError drops *url.Error's "Post \"<url>\":" prefix, which the
// message already carries as the target.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func snippet(b []byte) string {
	const n = 512
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = s[:n] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return strconv.Quote(s)
}

func decode(s, encoding string) ([]byte, error) {
	switch encoding {
	case "":
		return []byte(s), nil
	case "base64":
		return base64.StdEncoding.DecodeString(s)
	default:
		return nil, fmt.Errorf("unknown encoding %q", encoding)
	}
}
