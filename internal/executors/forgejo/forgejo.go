// Package forgejo is the git-forgejo executor: Forgejo (or Gitea)
// repository operations over the server's REST API (/api/v1). Each
// Tool.Method is one API call; METHODS.md beside this file lists the
// methods, their params and the statuses each server answers. owner and
// repo default to Options.Owner / Options.Repo and may be overridden per
// call with the params "owner" and "repo".
//
// The output is the HTTP response body as the server sent it, byte for
// byte, read at most max_output_bytes far (Truncated; past the cap up to
// 1 MiB more is counted, then the connection is dropped): never the whole
// body first. So the executor sends its requests itself with net/http
// rather than through the client of code.gitea.io/sdk/gitea, which reads
// every body whole and decodes it into its structs (losing the fields it
// does not model, inventing others, and adding stat/files/verification
// to a commit listing). The SDK still supplies what it models well: the
// request bodies (its option structs, checked with their Validate), the
// query encoders of the issue and pull request listings, and the
// ContentsResponse an update or delete reads the file's current sha from.
//
// Any HTTP answer is an Outcome: HTTPStatus, the body as Output, and for a
// status of 300 or more "HTTP <status>: <the server's own reason>" in
// Stderr (its "message" with the entries of its "errors" array), so
// dispatch reports status error with the body kept. Network failures are
// errors wrapping ErrUnreachable; the tool's timeout gives an Outcome with
// TimedOut and ExitCode -1 (no process ran, so there is no exit code).
// The token is a secret: never logged, never in plans or errors.
//
// An Executor is safe for concurrent use. Imports: executors, hldp and the
// SDK. Imported only by the daemon (internal/daemon).
package forgejo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
)

// The methods of the git-forgejo executor, as written in TOOL.hdlp.
const (
	MethodGetFile      = "get_file"
	MethodListDir      = "list_dir"
	MethodListCommits  = "list_commits"
	MethodGetCommit    = "get_commit"
	MethodCreateFile   = "create_file"
	MethodUpdateFile   = "update_file"
	MethodDeleteFile   = "delete_file"
	MethodListBranches = "list_branches"
	MethodCreateBranch = "create_branch"
	MethodListIssues   = "list_issues"
	MethodCreateIssue  = "create_issue"
	MethodCommentIssue = "comment_issue"
	MethodListPulls    = "list_pulls"
	MethodCreatePull   = "create_pull"
)

// Methods lists the executor's methods in a stable order.
var Methods = []string{
	MethodGetFile, MethodListDir, MethodListCommits, MethodGetCommit,
	MethodCreateFile, MethodUpdateFile, MethodDeleteFile,
	MethodListBranches, MethodCreateBranch,
	MethodListIssues, MethodCreateIssue, MethodCommentIssue,
	MethodListPulls, MethodCreatePull,
}

// ErrUnreachable marks a call or health check that got no (complete) HTTP
// answer from the Forgejo server.
var ErrUnreachable = errors.New("forgejo unreachable")

// ErrTokenRefused marks a health check the server answered 401 although a
// token was sent: the token is wrong, expired or revoked.
var ErrTokenRefused = errors.New("the server refused the token")

// Options configure an Executor.
type Options struct {
	// URL is the server's base URL, e.g. https://forgejo.example; "" means
	// the executor is not configured.
	URL string
	// Token is an access token (read by the daemon from the environment
	// or a file). Secret: never logged.
	Token string
	// Owner and Repo are the default repository of calls that do not pass
	// the params "owner" / "repo".
	Owner, Repo string
	// Client is the HTTP client; nil means a new one (each call is bounded
	// by the tool's timeout).
	Client *http.Client
	// Logger receives one debug line per call; nil discards.
	Logger *slog.Logger
}

// Executor runs git-forgejo tools. Build it with New.
type Executor struct {
	url         string // without a trailing "/"; "" when not configured
	urlErr      error
	token       string
	owner, repo string
	client      *http.Client
	log         *slog.Logger
}

var _ executors.Executor = (*Executor)(nil)

// New returns an Executor configured by a copy of opts. A URL that is not
// http(s) with a host is reported by Health and by calls.
func New(opts Options) *Executor {
	e := &Executor{token: opts.Token, owner: opts.Owner, repo: opts.Repo, client: opts.Client, log: opts.Logger}
	if e.client == nil {
		e.client = &http.Client{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if opts.URL != "" {
		u, err := url.Parse(opts.URL)
		switch {
		case err != nil:
			e.urlErr = fmt.Errorf("forgejo URL: %w", err)
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			e.urlErr = fmt.Errorf("forgejo URL %q: want http:// or https:// with a host", u.Redacted())
		}
		e.url = strings.TrimRight(opts.URL, "/")
	}
	return e
}

func (e *Executor) configured() error {
	if e.url == "" {
		return fmt.Errorf("forgejo URL %w", executors.ErrNotConfigured)
	}
	return e.urlErr
}

// Check reports whether this executor can run t: the executor is
// git-forgejo, the method is known, and a URL is configured (else an
// error wrapping executors.ErrNotConfigured).
func (e *Executor) Check(t *hldp.Tool) error {
	if t == nil {
		return errors.New("no tool")
	}
	if t.Executor != hldp.GitForgejo {
		return fmt.Errorf("executor is %q, not %q", t.Executor, hldp.GitForgejo)
	}
	if _, ok := handlers[t.Method]; !ok {
		return fmt.Errorf("the git-forgejo executor has no method %q (methods: %s)", t.Method, strings.Join(Methods, ", "))
	}
	if err := executors.CheckHeadOnly(t, "git-forgejo"); err != nil {
		return err
	}
	return e.configured()
}

// prepare checks req and builds its call.
func (e *Executor) prepare(req executors.Request) (call, error) {
	t := req.Tool
	if t == nil {
		return call{}, errors.New("git-forgejo executor: request without a tool")
	}
	if err := e.Check(t); err != nil {
		return call{}, fmt.Errorf("tool %s: %w: %w", t.Name, executors.ErrRefused, err)
	}
	a := &args{p: req.Params, e: e}
	c := handlers[t.Method](a)
	if a.err != nil {
		return call{}, fmt.Errorf("tool %s: %w", t.Name, a.err)
	}
	return c, nil
}

// Plan describes the call without making it: in Extra the method, the
// repository, the server URL and the HTTP request ("http"), and for an
// update or delete without a sha the request that looks it up first
// ("lookup"). No token appears in a plan.
func (e *Executor) Plan(req executors.Request) (executors.Plan, error) {
	c, err := e.prepare(req)
	if err != nil {
		return executors.Plan{}, err
	}
	timeout, maxOut := limits(req.Tool)
	p := executors.Plan{
		Timeout: timeout, TimeoutMS: timeout.Milliseconds(), MaxOutputBytes: maxOut,
		Extra: map[string]string{"method": req.Tool.Method, "repository": c.owner + "/" + c.repo, "url": redact(e.url),
			"http": c.verb + " /api/v1" + c.target()},
	}
	if c.lookup != nil {
		p.Extra["lookup"] = http.MethodGet + " /api/v1" + c.lookup.target() + " (the file's current sha)"
	}
	return p, nil
}

func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}

func limits(t *hldp.Tool) (time.Duration, int64) {
	timeout, maxOut := t.Constraints.Timeout, t.Constraints.MaxOutputBytes
	if timeout <= 0 {
		timeout = hldp.DefaultTimeout
	}
	if maxOut <= 0 {
		maxOut = hldp.DefaultMaxOutputBytes
	}
	return timeout, maxOut
}

// errToolTimeout is the cause of the context bounded by the tool timeout.
var errToolTimeout = errors.New("forgejo: tool timeout")

// Execute sends the request of req's method and returns the answer as an
// Outcome: HTTPStatus, the body byte for byte as Output (capped,
// Truncated), and for a status of 300 or more the server's reason in
// Stderr. When the tool's timeout fires the Outcome has TimedOut,
// ExitCode -1 and whatever arrived. Errors: a tool this executor cannot
// run (wrapping executors.ErrRefused), missing or ill-typed params,
// ErrUnreachable, or the caller's context error.
func (e *Executor) Execute(ctx context.Context, req executors.Request) (executors.Outcome, error) {
	c, err := e.prepare(req)
	if err != nil {
		return executors.Outcome{}, err
	}
	t := req.Tool
	timeout, maxOut := limits(t)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errToolTimeout)
	defer cancel()
	start := time.Now()
	out, err := e.run(ctx, c, maxOut)
	out.Duration = time.Since(start)
	if err != nil {
		switch {
		case context.Cause(ctx) == errToolTimeout:
			// No process ran: there is no exit code, and nothing was killed.
			out.TimedOut, out.ExitCode = true, -1
			out.Stderr = fmt.Appendf(out.Stderr, "forgejo %s: no complete answer from %s within the tool's timeout of %s; the request was abandoned\n", t.Method, redact(e.url), timeout)
			return out, nil
		case ctx.Err() != nil:
			return executors.Outcome{}, fmt.Errorf("tool %s: forgejo %s: %w", t.Name, t.Method, ctx.Err())
		case errors.Is(err, ErrUnreachable):
			return executors.Outcome{}, fmt.Errorf("tool %s: forgejo %s at %s: %w", t.Name, t.Method, redact(e.url), err)
		default:
			return executors.Outcome{}, fmt.Errorf("tool %s: forgejo %s: %w", t.Name, t.Method, err)
		}
	}
	out.Completed = true // the server answered, and the body was read
	e.log.DebugContext(ctx, "forgejo call", "tool", t.Name, "method", t.Method, "rev", req.Rev,
		"http", c.verb, "status", out.HTTPStatus, "bytes", out.OutputBytes, "truncated", out.Truncated, "duration", out.Duration)
	return out, nil
}

// run makes the call: the sha lookup first when the call needs one, then
// the request itself. An HTTP answer of the lookup other than 2xx is the
// outcome.
func (e *Executor) run(ctx context.Context, c call, maxOut int64) (executors.Outcome, error) {
	if c.lookup != nil {
		sha, failed, err := e.lookupSHA(ctx, *c.lookup, maxOut)
		if err != nil || failed != nil {
			var out executors.Outcome
			if failed != nil {
				out = failed.outcome("look up the current sha of " + c.lookup.path + ": ")
			}
			return out, err
		}
		c.setSHA(sha)
	}
	body, err := c.encode()
	if err != nil {
		return executors.Outcome{}, err
	}
	ans, err := e.send(ctx, c.verb, c.target(), body, maxOut)
	return ans.outcome(""), err
}

// healthBodyBytes is how much of a health answer is read: enough for an
// error body.
const healthBodyBytes = 4 << 10

// Health asks for the server version (reachable), the token's user
// (token valid, when a token is configured) and the default repository
// (when Owner and Repo are set), each with the token. A failed step says
// which, the HTTP status and the server's reason; a 401 with a token
// wraps ErrTokenRefused.
func (e *Executor) Health(ctx context.Context) error {
	if err := e.configured(); err != nil {
		return err
	}
	steps := []struct{ what, target string }{{"version", "/version"}}
	if e.token != "" {
		steps = append(steps, struct{ what, target string }{"token user", "/user"})
	}
	if e.owner != "" && e.repo != "" {
		steps = append(steps, struct{ what, target string }{"repository " + e.owner + "/" + e.repo, repoPath(e.owner, e.repo)})
	}
	for _, s := range steps {
		ans, err := e.send(ctx, http.MethodGet, s.target, nil, healthBodyBytes)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("forgejo %s at %s: %w", s.what, redact(e.url), ctx.Err())
			}
			return fmt.Errorf("forgejo %s at %s: %w", s.what, redact(e.url), err)
		}
		if ans.ok() {
			continue
		}
		switch reason := ans.reason(); {
		case ans.status == http.StatusUnauthorized && e.token != "":
			return fmt.Errorf("forgejo %s at %s: HTTP %s: %w: %s", s.what, redact(e.url), ans.statusText, ErrTokenRefused, reason)
		case ans.status == http.StatusUnauthorized:
			return fmt.Errorf("forgejo %s at %s: HTTP %s: the server wants a token and none is configured: %s", s.what, redact(e.url), ans.statusText, reason)
		default:
			return fmt.Errorf("forgejo %s at %s: HTTP %s: %s", s.what, redact(e.url), ans.statusText, reason)
		}
	}
	return nil
}
