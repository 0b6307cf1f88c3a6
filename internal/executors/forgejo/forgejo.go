// Package forgejo is the git-forgejo executor: Forgejo (or Gitea)
// repository operations through code.gitea.io/sdk/gitea. Each Tool.Method
// is one SDK call; METHODS.md beside this file lists the methods and their
// params. owner and repo default to Options.Owner / Options.Repo and may
// be overridden per call with the params "owner" and "repo".
//
// The output is the JSON of the SDK's response object(s), as the server
// sent them (get_file additionally decodes the file content). An answer
// with an HTTP error status (404, 401, 409/422 on a conflicting create, …)
// is an Outcome with HTTPStatus and the server's message in Stderr, so
// dispatch reports status error with the real message. Network failures
// are errors wrapping ErrUnreachable; the tool's timeout gives an Outcome
// with TimedOut.
//
// The SDK binds a context to a client, not to a call, so Execute builds a
// light client per call (with the call's context) and reuses the server
// version learnt once, instead of asking for it on every call. The token
// is a secret: never logged, never in plans or errors.
//
// An Executor is safe for concurrent use. Imports: executors, hldp and the
// SDK. Imported only by cmd/toolagent.
package forgejo

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"code.gitea.io/sdk/gitea"

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

// ErrUnreachable marks a call or health check that got no HTTP answer from
// the Forgejo server.
var ErrUnreachable = errors.New("forgejo unreachable")

// Options configure an Executor.
type Options struct {
	// URL is the server's base URL, e.g. https://forgejo.example; "" means
	// the executor is not configured.
	URL string
	// Token is an access token (read by cmd/toolagent from the environment
	// or a file). Secret: never logged.
	Token string
	// Owner and Repo are the default repository of calls that do not pass
	// the params "owner" / "repo".
	Owner, Repo string
	// Client is the HTTP client; nil means a new one.
	Client *http.Client
	// Logger receives one debug line per call; nil discards.
	Logger *slog.Logger
}

// Executor runs git-forgejo tools. Build it with New.
type Executor struct {
	url          string // "" when not configured
	urlErr       error
	token        string
	owner, repo  string
	client       *http.Client
	log          *slog.Logger
	mu           sync.Mutex // guards version, versionKnown
	version      string
	versionKnown bool
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
	return e.configured()
}

// Plan describes the call without making it: in Extra the method, the
// repository and the server URL. No token appears in a plan.
func (e *Executor) Plan(req executors.Request) (executors.Plan, error) {
	if req.Tool == nil {
		return executors.Plan{}, errors.New("git-forgejo executor: request without a tool")
	}
	if err := e.Check(req.Tool); err != nil {
		return executors.Plan{}, fmt.Errorf("tool %s: %w: %w", req.Tool.Name, executors.ErrRefused, err)
	}
	a := args{p: req.Params, e: e}
	owner, repo := a.owner(), a.repo()
	if a.err != nil {
		return executors.Plan{}, fmt.Errorf("tool %s: %w", req.Tool.Name, a.err)
	}
	timeout, maxOut := limits(req.Tool)
	return executors.Plan{
		Timeout: timeout, TimeoutMS: timeout.Milliseconds(), MaxOutputBytes: maxOut,
		Extra: map[string]string{"method": req.Tool.Method, "repository": owner + "/" + repo, "url": redact(e.url)},
	}, nil
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

// Execute makes the SDK call of req's method and returns its JSON as the
// Output (capped, Truncated). An HTTP error answer is an Outcome with
// HTTPStatus and the server's message in Stderr. Errors: a tool this
// executor cannot run (wrapping executors.ErrRefused), missing or
// ill-typed params, ErrUnreachable, or the caller's context error.
func (e *Executor) Execute(ctx context.Context, req executors.Request) (executors.Outcome, error) {
	t := req.Tool
	if t == nil {
		return executors.Outcome{}, errors.New("git-forgejo executor: request without a tool")
	}
	if err := e.Check(t); err != nil {
		return executors.Outcome{}, fmt.Errorf("tool %s: %w: %w", t.Name, executors.ErrRefused, err)
	}
	timeout, maxOut := limits(t)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errToolTimeout)
	defer cancel()
	start := time.Now()

	a := &args{p: req.Params, e: e}
	handle := handlers[t.Method]
	c, err := e.sdk(ctx)
	var (
		v    any
		resp *gitea.Response
	)
	if err == nil {
		v, resp, err = handle(c, a)
	}
	if a.err != nil {
		return executors.Outcome{}, fmt.Errorf("tool %s: %w", t.Name, a.err)
	}
	out := executors.Outcome{Duration: time.Since(start)}
	if resp != nil && resp.Response != nil {
		out.HTTPStatus = resp.StatusCode
	}
	if err != nil {
		switch {
		case context.Cause(ctx) == errToolTimeout:
			out.TimedOut = true
			return out, nil
		case out.HTTPStatus >= 300:
			out.Stderr = []byte(fmt.Sprintf("HTTP %d: %s\n", out.HTTPStatus, err))
			return out, nil
		case ctx.Err() != nil:
			return executors.Outcome{}, fmt.Errorf("tool %s: forgejo %s: %w", t.Name, t.Method, ctx.Err())
		case isTransport(err):
			return executors.Outcome{}, fmt.Errorf("tool %s: forgejo %s at %s: %w: %v", t.Name, t.Method, redact(e.url), ErrUnreachable, unwrapURLError(err))
		default:
			return executors.Outcome{}, fmt.Errorf("tool %s: forgejo %s: %w", t.Name, t.Method, err)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return executors.Outcome{}, fmt.Errorf("tool %s: encode the answer: %w", t.Name, err)
	}
	out.Output = b.Bytes()
	out.OutputBytes = int64(len(out.Output))
	if out.OutputBytes > maxOut {
		out.Output, out.Truncated = out.Output[:maxOut], true
	}
	e.log.DebugContext(ctx, "forgejo call", "tool", t.Name, "method", t.Method, "rev", req.Rev,
		"status", out.HTTPStatus, "bytes", out.OutputBytes, "duration", out.Duration)
	return out, nil
}

func isTransport(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue)
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// sdk returns a client bound to ctx. The server version is learnt on the
// first call and reused; until then it is fetched (GET /api/v1/version).
func (e *Executor) sdk(ctx context.Context) (*gitea.Client, error) {
	if err := e.configured(); err != nil {
		return nil, err
	}
	base := []gitea.ClientOption{gitea.SetHTTPClient(e.client), gitea.SetContext(ctx), gitea.SetUserAgent("toolagent")}
	if e.token != "" {
		base = append(base, gitea.SetToken(e.token))
	}
	e.mu.Lock()
	ver, known := e.version, e.versionKnown
	e.mu.Unlock()
	if !known {
		// Ask without the SDK's own version check, then remember.
		probe, err := gitea.NewClient(e.url, append(base, gitea.SetGiteaVersion(""))...)
		if err != nil {
			return nil, err
		}
		v, _, err := probe.ServerVersion()
		if err != nil {
			return nil, err
		}
		if _, err := gitea.NewClient(e.url, append(base, gitea.SetGiteaVersion(v))...); err != nil {
			v = "" // unparsable version: skip the SDK's version gates
		}
		e.mu.Lock()
		e.version, e.versionKnown = v, true
		e.mu.Unlock()
		ver = v
	}
	return gitea.NewClient(e.url, append(base, gitea.SetGiteaVersion(ver))...)
}

// Health asks for the server version (reachable), the token's user
// (token valid, when a token is configured) and the default repository
// (when Owner and Repo are set).
func (e *Executor) Health(ctx context.Context) error {
	if err := e.configured(); err != nil {
		return err
	}
	wrap := func(what string, resp *gitea.Response, err error) error {
		if isTransport(err) {
			return fmt.Errorf("forgejo %s at %s: %w: %v", what, redact(e.url), ErrUnreachable, unwrapURLError(err))
		}
		if resp != nil && resp.Response != nil {
			return fmt.Errorf("forgejo %s at %s: HTTP %d: %w", what, redact(e.url), resp.StatusCode, err)
		}
		return fmt.Errorf("forgejo %s at %s: %w", what, redact(e.url), err)
	}
	c, err := e.sdk(ctx)
	if err != nil {
		return wrap("version", nil, err)
	}
	if e.token != "" {
		if _, resp, err := c.GetMyUserInfo(); err != nil {
			return wrap("token user", resp, err)
		}
	}
	if e.owner != "" && e.repo != "" {
		if _, resp, err := c.GetRepo(e.owner, e.repo); err != nil {
			return wrap("repository "+e.owner+"/"+e.repo, resp, err)
		}
	}
	return nil
}

// args reads params; the first problem is kept in err and later reads
// return zero values, so a handler reads all it needs and the caller
// checks err once.
type args struct {
	p   map[string]any
	e   *Executor
	err error
}

func (a *args) fail(format string, v ...any) {
	if a.err == nil {
		a.err = fmt.Errorf(format, v...)
	}
}

func (a *args) str(name string, required bool) string {
	v, ok := a.p[name]
	if !ok || v == nil {
		if required {
			a.fail("param %q is missing", name)
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		a.fail("param %q must be a string, got %T", name, v)
		return ""
	}
	if required && s == "" {
		a.fail("param %q must not be empty", name)
	}
	return s
}

func (a *args) int(name string, required bool) int64 {
	switch x := a.p[name].(type) {
	case nil:
		if required {
			a.fail("param %q is missing", name)
		}
		return 0
	case int64:
		return x
	case int:
		return int64(x)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			a.fail("param %q must be an integer, got %v", name, x)
			return 0
		}
		return int64(x)
	default:
		a.fail("param %q must be an integer, got %T", name, x)
		return 0
	}
}

func (a *args) owner() string {
	if s := a.str("owner", false); s != "" {
		return s
	}
	if a.e.owner == "" {
		a.fail(`no repository owner: pass the param "owner" or configure a default owner`)
	}
	return a.e.owner
}

func (a *args) repo() string {
	if s := a.str("repo", false); s != "" {
		return s
	}
	if a.e.repo == "" {
		a.fail(`no repository: pass the param "repo" or configure a default repository`)
	}
	return a.e.repo
}

func (a *args) list() gitea.ListOptions {
	return gitea.ListOptions{Page: int(a.int("page", false)), PageSize: int(a.int("limit", false))}
}

func (a *args) state() gitea.StateType {
	switch s := a.str("state", false); s {
	case "":
		return gitea.StateOpen
	case "open", "closed", "all":
		return gitea.StateType(s)
	default:
		a.fail(`param "state" must be open, closed or all, got %q`, s)
		return ""
	}
}

func (a *args) fileOptions() gitea.FileOptions {
	return gitea.FileOptions{
		Message:       a.str("message", false),
		BranchName:    a.str("branch", false),
		NewBranchName: a.str("new_branch", false),
	}
}

// handler makes one SDK call. It returns nil, nil, nil without calling
// when a param is wrong (args.err is then set).
type handler func(c *gitea.Client, a *args) (any, *gitea.Response, error)

var handlers = map[string]handler{
	MethodGetFile: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo, path, ref := a.owner(), a.repo(), a.str("path", true), a.str("ref", false)
		if a.err != nil {
			return nil, nil, nil
		}
		f, resp, err := c.GetContents(owner, repo, ref, path)
		if err != nil {
			return nil, resp, err
		}
		decodeContent(f)
		return f, resp, nil
	},
	MethodListDir: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo, path, ref := a.owner(), a.repo(), a.str("path", false), a.str("ref", false)
		if a.err != nil {
			return nil, nil, nil
		}
		return c.ListContents(owner, repo, ref, path)
	},
	MethodListCommits: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo := a.owner(), a.repo()
		opt := gitea.ListCommitOptions{ListOptions: a.list(), SHA: a.str("ref", false), Path: a.str("path", false)}
		if a.err != nil {
			return nil, nil, nil
		}
		return c.ListRepoCommits(owner, repo, opt)
	},
	MethodGetCommit: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo, sha := a.owner(), a.repo(), a.str("sha", true)
		if a.err != nil {
			return nil, nil, nil
		}
		return c.GetSingleCommit(owner, repo, sha)
	},
	MethodCreateFile: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo, path := a.owner(), a.repo(), a.str("path", true)
		opt := gitea.CreateFileOptions{FileOptions: a.fileOptions(), Content: base64.StdEncoding.EncodeToString([]byte(a.str("content", true)))}
		if a.err != nil {
			return nil, nil, nil
		}
		return c.CreateFile(owner, repo, path, opt)
	},
	MethodUpdateFile: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo, path := a.owner(), a.repo(), a.str("path", true)
		opt := gitea.UpdateFileOptions{FileOptions: a.fileOptions(), SHA: a.str("sha", false),
			Content: base64.StdEncoding.EncodeToString([]byte(a.str("content", true)))}
		if a.err != nil {
			return nil, nil, nil
		}
		if opt.SHA == "" {
			sha, resp, err := currentSHA(c, owner, repo, opt.BranchName, path)
			if err != nil {
				return nil, resp, err
			}
			opt.SHA = sha
		}
		return c.UpdateFile(owner, repo, path, opt)
	},
	MethodDeleteFile: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo, path := a.owner(), a.repo(), a.str("path", true)
		opt := gitea.DeleteFileOptions{FileOptions: a.fileOptions(), SHA: a.str("sha", false)}
		if a.err != nil {
			return nil, nil, nil
		}
		if opt.SHA == "" {
			sha, resp, err := currentSHA(c, owner, repo, opt.BranchName, path)
			if err != nil {
				return nil, resp, err
			}
			opt.SHA = sha
		}
		resp, err := c.DeleteFile(owner, repo, path, opt)
		if err != nil {
			return nil, resp, err
		}
		return map[string]any{"deleted": path, "sha": opt.SHA}, resp, nil
	},
	MethodListBranches: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo, opt := a.owner(), a.repo(), gitea.ListRepoBranchesOptions{ListOptions: a.list()}
		if a.err != nil {
			return nil, nil, nil
		}
		return c.ListRepoBranches(owner, repo, opt)
	},
	MethodCreateBranch: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo := a.owner(), a.repo()
		opt := gitea.CreateBranchOption{BranchName: a.str("name", true), OldBranchName: a.str("from", false)}
		if a.err != nil {
			return nil, nil, nil
		}
		return c.CreateBranch(owner, repo, opt)
	},
	MethodListIssues: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo := a.owner(), a.repo()
		opt := gitea.ListIssueOption{ListOptions: a.list(), State: a.state(), Type: gitea.IssueTypeIssue, KeyWord: a.str("q", false)}
		if a.err != nil {
			return nil, nil, nil
		}
		return c.ListRepoIssues(owner, repo, opt)
	},
	MethodCreateIssue: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo := a.owner(), a.repo()
		opt := gitea.CreateIssueOption{Title: a.str("title", true), Body: a.str("body", false)}
		if a.err != nil {
			return nil, nil, nil
		}
		return c.CreateIssue(owner, repo, opt)
	},
	MethodCommentIssue: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo, n := a.owner(), a.repo(), a.int("number", true)
		opt := gitea.CreateIssueCommentOption{Body: a.str("body", true)}
		if a.err == nil && n <= 0 {
			a.fail(`param "number" must be a positive issue number, got %d`, n)
		}
		if a.err != nil {
			return nil, nil, nil
		}
		return c.CreateIssueComment(owner, repo, n, opt)
	},
	MethodListPulls: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo := a.owner(), a.repo()
		opt := gitea.ListPullRequestsOptions{ListOptions: a.list(), State: a.state()}
		if a.err != nil {
			return nil, nil, nil
		}
		return c.ListRepoPullRequests(owner, repo, opt)
	},
	MethodCreatePull: func(c *gitea.Client, a *args) (any, *gitea.Response, error) {
		owner, repo := a.owner(), a.repo()
		opt := gitea.CreatePullRequestOption{Head: a.str("head", true), Base: a.str("base", true), Title: a.str("title", true), Body: a.str("body", false)}
		if a.err != nil {
			return nil, nil, nil
		}
		return c.CreatePullRequest(owner, repo, opt)
	},
}

// currentSHA returns the blob SHA of path on branch ("" = default branch),
// which update and delete need.
func currentSHA(c *gitea.Client, owner, repo, branch, path string) (string, *gitea.Response, error) {
	f, resp, err := c.GetContents(owner, repo, branch, path)
	if err != nil {
		return "", resp, fmt.Errorf("look up the current sha of %s: %w", path, err)
	}
	return f.SHA, resp, nil
}

// decodeContent replaces base64 content by the text it encodes when that
// text is valid UTF-8 (encoding becomes "utf-8"); binary content stays
// base64.
func decodeContent(f *gitea.ContentsResponse) {
	if f == nil || f.Content == nil || f.Encoding == nil || *f.Encoding != "base64" {
		return
	}
	raw, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(*f.Content, "\n", ""))
	if err != nil || !utf8.Valid(raw) {
		return
	}
	s, enc := string(raw), "utf-8"
	f.Content, f.Encoding = &s, &enc
}
