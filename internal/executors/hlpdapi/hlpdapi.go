// Package hlpdapi is the hlpd-api executor: a tool's call becomes one plain
// HTTP request to the configured HLDP API, and the raw response body comes
// back as the output. ROUTES.md beside this file documents how a method
// maps to a route and where params go.
//
// In short: Options.Routes maps a method name to a Route{Verb, Path}; a
// method without a route is POST {BaseURL}/{method} with the params as a
// JSON object body. {param} placeholders in a path are filled with the
// URL-escaped param value and removed from the rest; for GET, HEAD and
// DELETE the remaining params go to the query string, otherwise to a JSON
// body. Every request carries Options.Header (e.g. the API's auth header);
// header values never appear in plans, errors or logs.
//
// A response is an Outcome whatever its status: HTTPStatus is set, the
// body (capped at the tool's max_output_bytes, Truncated) is the Output,
// and a non-2xx status adds its status line to Stderr; dispatch reports
// status >= 300 as an error with the body kept. The tool's timeout bounds
// the whole exchange; when it fires the Outcome has TimedOut. Network
// failures are errors wrapping ErrUnreachable.
//
// An Executor is safe for concurrent use. Imports: executors, hldp.
// Imported only by the daemon (internal/daemon).
package hlpdapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
)

// DefaultHealthPath is the path Health requests when Options.HealthPath is "".
const DefaultHealthPath = "/healthz"

// DefaultVerb is the HTTP method of a method without a configured route.
const DefaultVerb = http.MethodPost

// countLimit is how many bytes past the cap a response body is still read
// (and counted, then discarded) so OutputBytes says how large it was.
const countLimit = 1 << 20

// ErrUnreachable marks a request that got no HTTP answer: connection
// refused, DNS or TLS failure, reset.
var ErrUnreachable = errors.New("hlpd-api unreachable")

// Route is the HTTP request a method becomes.
type Route struct {
	// Verb is the HTTP method: GET, HEAD, POST, PUT, PATCH or DELETE.
	Verb string
	// Path is appended to Options.BaseURL; it starts with "/" and may hold
	// {param} placeholders naming params of the tool.
	Path string
}

// Options configure an Executor.
type Options struct {
	// BaseURL is the API's base URL, e.g. https://hlpd.example/api; ""
	// means the executor is not configured.
	BaseURL string
	// Header is sent with every request (e.g. "Authorization": "Bearer …"
	// read by the daemon from the environment or a file). Values are
	// secrets: never logged, never in plans or errors.
	Header map[string]string
	// Routes maps a method name (Tool.Method) to its route.
	Routes map[string]Route
	// HealthPath is requested with GET by Health; "" means DefaultHealthPath.
	HealthPath string
	// Client is the HTTP client; nil means a new one (each call is bounded
	// by the tool's timeout).
	Client *http.Client
	// Logger receives one debug line per call; nil discards.
	Logger *slog.Logger
}

// Executor runs hlpd-api tools. Build it with New.
type Executor struct {
	base       *url.URL // nil when not configured
	header     http.Header
	routes     map[string]route
	healthPath string
	client     *http.Client
	log        *slog.Logger
}

// route is a validated Route with its placeholders.
type route struct {
	Route
	params []string // placeholder names, in order
}

var _ executors.Executor = (*Executor)(nil)

var (
	verbs         = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	placeholderRE = regexp.MustCompile(`\{([^{}]*)\}`)
	paramNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// New returns an Executor configured by a copy of opts. It reports every
// configuration problem at once: a BaseURL that is not http(s) with a host
// or that has a query, an unknown verb, a path without a leading "/" or
// with a malformed placeholder, a header that is not a valid field.
func New(opts Options) (*Executor, error) {
	e := &Executor{
		header:     make(http.Header, len(opts.Header)),
		routes:     make(map[string]route, len(opts.Routes)),
		healthPath: opts.HealthPath,
		client:     opts.Client,
		log:        opts.Logger,
	}
	if e.client == nil {
		e.client = &http.Client{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.healthPath == "" {
		e.healthPath = DefaultHealthPath
	}
	var errs []error
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("hlpd-api base URL: %w", err))
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			errs = append(errs, fmt.Errorf("hlpd-api base URL %q: want http:// or https:// with a host", u.Redacted()))
		case u.RawQuery != "" || u.Fragment != "":
			errs = append(errs, fmt.Errorf("hlpd-api base URL %q: must not have a query or fragment", u.Redacted()))
		default:
			u.Path = strings.TrimRight(u.Path, "/")
			u.RawPath = strings.TrimRight(u.RawPath, "/")
			e.base = u
		}
	}
	if !strings.HasPrefix(e.healthPath, "/") {
		errs = append(errs, fmt.Errorf("hlpd-api health path %q must start with /", e.healthPath))
	}
	for k, v := range opts.Header {
		if !validHeaderName(k) || strings.ContainsAny(v, "\r\n\x00") {
			errs = append(errs, fmt.Errorf("hlpd-api header %q: not a valid header name or value", k))
			continue
		}
		e.header.Set(k, v)
	}
	for _, m := range slices.Sorted(maps.Keys(opts.Routes)) {
		r, err := parseRoute(opts.Routes[m])
		if err != nil {
			errs = append(errs, fmt.Errorf("hlpd-api route %q: %w", m, err))
			continue
		}
		e.routes[m] = r
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return e, nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c > 0x7e || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}

func parseRoute(r Route) (route, error) {
	r.Verb = strings.ToUpper(r.Verb)
	if !slices.Contains(verbs, r.Verb) {
		return route{}, fmt.Errorf("verb %q is not one of %s", r.Verb, strings.Join(verbs, ", "))
	}
	if !strings.HasPrefix(r.Path, "/") {
		return route{}, fmt.Errorf("path %q must start with /", r.Path)
	}
	if strings.ContainsAny(r.Path, "?#") {
		return route{}, fmt.Errorf("path %q must not hold a query or fragment (params go there)", r.Path)
	}
	var names []string
	for _, m := range placeholderRE.FindAllStringSubmatch(r.Path, -1) {
		if !paramNameRE.MatchString(m[1]) {
			return route{}, fmt.Errorf("path %q: placeholder %q is not a param name", r.Path, m[0])
		}
		names = append(names, m[1])
	}
	if rest := placeholderRE.ReplaceAllString(r.Path, ""); strings.ContainsAny(rest, "{}") {
		return route{}, fmt.Errorf("path %q: unbalanced { or }", r.Path)
	}
	return route{Route: r, params: names}, nil
}

// routeOf returns the route of method: the configured one, or the
// default POST /{method}.
func (e *Executor) routeOf(method string) route {
	if r, ok := e.routes[method]; ok {
		return r
	}
	return route{Route: Route{Verb: DefaultVerb, Path: "/" + method}}
}

// Check reports whether this executor can run t: the executor is hlpd-api,
// a base URL is configured (else an error wrapping
// executors.ErrNotConfigured), and every placeholder of the method's route
// names a declared param.
func (e *Executor) Check(t *hldp.Tool) error {
	if t == nil {
		return errors.New("no tool")
	}
	if t.Executor != hldp.HlpdAPI {
		return fmt.Errorf("executor is %q, not %q", t.Executor, hldp.HlpdAPI)
	}
	if e.base == nil {
		return fmt.Errorf("hlpd-api base URL %w", executors.ErrNotConfigured)
	}
	if err := executors.CheckHeadOnly(t, "hlpd-api"); err != nil {
		return err
	}
	r := e.routeOf(t.Method)
	for _, p := range r.params {
		if _, ok := t.Param(p); !ok {
			return fmt.Errorf("route %s %s of method %s uses {%s}, which is not in params_schema", r.Verb, r.Path, t.Method, p)
		}
	}
	return nil
}

// request is one prepared call.
type request struct {
	verb    string
	url     string // full URL with the query
	body    []byte // nil: no body
	timeout time.Duration
	maxOut  int64
	route   route
}

func (e *Executor) prepare(req executors.Request) (request, error) {
	t := req.Tool
	if t == nil {
		return request{}, errors.New("hlpd-api executor: request without a tool")
	}
	if err := e.Check(t); err != nil {
		return request{}, fmt.Errorf("tool %s: %w: %w", t.Name, executors.ErrRefused, err)
	}
	r := e.routeOf(t.Method)
	rest := maps.Clone(req.Params)
	if rest == nil {
		rest = map[string]any{}
	}
	var fillErr error
	path := placeholderRE.ReplaceAllStringFunc(r.Path, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := rest[name]
		if !ok || v == nil {
			fillErr = errors.Join(fillErr, fmt.Errorf("param %q fills {%s} in the route path and has no value", name, name))
			return ""
		}
		s, err := scalar(name, v)
		if err != nil {
			fillErr = errors.Join(fillErr, err)
			return ""
		}
		if s == "" {
			fillErr = errors.Join(fillErr, fmt.Errorf("param %q fills {%s} in the route path and is empty", name, name))
		}
		delete(rest, name)
		return url.PathEscape(s)
	})
	if fillErr != nil {
		return request{}, fmt.Errorf("tool %s: %w", t.Name, fillErr)
	}
	rawPath := e.base.EscapedPath() + path
	u := *e.base
	if p, err := url.PathUnescape(rawPath); err == nil {
		u.Path, u.RawPath = p, rawPath
	}
	c := request{verb: r.Verb, route: r}
	switch r.Verb {
	case http.MethodGet, http.MethodHead, http.MethodDelete:
		q := url.Values{}
		for _, k := range slices.Sorted(maps.Keys(rest)) {
			if err := addQuery(q, k, rest[k]); err != nil {
				return request{}, fmt.Errorf("tool %s: %w", t.Name, err)
			}
		}
		u.RawQuery = q.Encode()
	default:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // send "&" and "<" as they are, not \u0026
		if err := enc.Encode(rest); err != nil {
			return request{}, fmt.Errorf("tool %s: params as JSON: %w", t.Name, err)
		}
		c.body = bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	}
	c.url = u.String()
	c.timeout, c.maxOut = t.Constraints.Timeout, t.Constraints.MaxOutputBytes
	if c.timeout <= 0 {
		c.timeout = hldp.DefaultTimeout
	}
	if c.maxOut <= 0 {
		c.maxOut = hldp.DefaultMaxOutputBytes
	}
	return c, nil
}

// scalar formats a value for a path segment or a query value.
func scalar(name string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case json.Number:
		return x.String(), nil
	case map[string]any, []any:
		b, err := json.Marshal(x)
		if err != nil {
			return "", fmt.Errorf("param %q: %w", name, err)
		}
		return string(b), nil
	default:
		return fmt.Sprint(x), nil
	}
}

// addQuery adds param k to q: an array as one key per element, anything
// else as one value (objects as compact JSON).
func addQuery(q url.Values, k string, v any) error {
	if v == nil {
		return nil
	}
	if arr, ok := v.([]any); ok {
		for _, el := range arr {
			s, err := scalar(k, el)
			if err != nil {
				return err
			}
			q.Add(k, s)
		}
		return nil
	}
	s, err := scalar(k, v)
	if err != nil {
		return err
	}
	q.Add(k, s)
	return nil
}

// Plan returns the request Execute would send: in Extra the verb ("http"),
// the full URL, the JSON body, and the names (never the values) of the
// configured headers.
func (e *Executor) Plan(req executors.Request) (executors.Plan, error) {
	c, err := e.prepare(req)
	if err != nil {
		return executors.Plan{}, err
	}
	p := executors.Plan{
		Timeout:        c.timeout,
		TimeoutMS:      c.timeout.Milliseconds(),
		MaxOutputBytes: c.maxOut,
		Extra:          map[string]string{"http": c.verb, "url": c.url},
	}
	if c.body != nil {
		p.Extra["body"] = string(c.body)
	}
	if len(e.header) > 0 {
		p.Extra["headers"] = strings.Join(slices.Sorted(maps.Keys(e.header)), ", ")
	}
	return p, nil
}

// errToolTimeout is the cause of the context bounded by the tool timeout.
var errToolTimeout = errors.New("hlpd-api: tool timeout")

// Execute sends the request of req and returns the response as an
// Outcome: HTTPStatus, the body as Output (capped, Truncated), and for a
// non-2xx status its status line in Stderr. When the tool's timeout fires
// the Outcome has TimedOut and whatever body arrived. Errors: a bad tool or
// params (wrapping executors.ErrRefused for a tool this executor cannot
// run), ErrUnreachable, or the caller's context error.
func (e *Executor) Execute(ctx context.Context, req executors.Request) (executors.Outcome, error) {
	c, err := e.prepare(req)
	if err != nil {
		return executors.Outcome{}, err
	}
	t := req.Tool
	ctx, cancel := context.WithTimeoutCause(ctx, c.timeout, errToolTimeout)
	defer cancel()
	start := time.Now()
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	hreq, err := http.NewRequestWithContext(ctx, c.verb, c.url, body)
	if err != nil {
		return executors.Outcome{}, fmt.Errorf("tool %s: %w", t.Name, err)
	}
	e.setHeaders(hreq)
	if c.body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(hreq)
	if err != nil {
		if context.Cause(ctx) == errToolTimeout {
			return executors.Outcome{TimedOut: true, ExitCode: -1, Duration: time.Since(start)}, nil // no process: no exit code
		}
		return executors.Outcome{}, e.transportError(ctx, t.Name, c, err)
	}
	defer resp.Body.Close()
	out := executors.Outcome{HTTPStatus: resp.StatusCode}
	out.Output, out.OutputBytes, err = readCapped(resp.Body, c.maxOut)
	out.Truncated = out.OutputBytes > c.maxOut
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		out.Stderr = []byte(fmt.Sprintf("HTTP %s\n", resp.Status))
	}
	out.Duration = time.Since(start)
	if err != nil {
		if context.Cause(ctx) == errToolTimeout {
			out.TimedOut, out.ExitCode = true, -1
			return out, nil
		}
		return executors.Outcome{}, e.transportError(ctx, t.Name, c, err)
	}
	out.Completed = true // the server answered, and the body was read
	e.log.DebugContext(ctx, "hlpd-api call", "tool", t.Name, "method", t.Method, "rev", req.Rev,
		"http", c.verb, "route", c.route.Path, "status", resp.StatusCode, "bytes", out.OutputBytes,
		"truncated", out.Truncated, "duration", out.Duration)
	return out, nil
}

// transportError describes a failure without a (complete) answer. The
// message names the verb and the route template, not the filled URL, so
// param values do not leak into errors; header values never appear.
func (e *Executor) transportError(ctx context.Context, tool string, c request, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("tool %s: hlpd-api %s %s: %w", tool, c.verb, c.route.Path, ctxErr)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("tool %s: hlpd-api %s %s%s: %w: %v", tool, c.verb, e.base.Redacted(), c.route.Path, ErrUnreachable, err)
}

func (e *Executor) setHeaders(r *http.Request) {
	r.Header.Set("User-Agent", "toolagent")
	for k, v := range e.header {
		r.Header[k] = v
	}
}

// readCapped reads r keeping at most maxOut bytes, counting up to
// countLimit more; n is the number of bytes read.
func readCapped(r io.Reader, maxOut int64) (buf []byte, n int64, err error) {
	buf, err = io.ReadAll(io.LimitReader(r, maxOut))
	n = int64(len(buf))
	if err != nil || n < maxOut {
		return buf, n, err
	}
	m, err := io.Copy(io.Discard, io.LimitReader(r, countLimit))
	return buf, n + m, err
}

// Health sends GET {BaseURL}{HealthPath} with the configured headers and
// wants a 2xx answer. Not configured: an error wrapping
// executors.ErrNotConfigured.
func (e *Executor) Health(ctx context.Context) error {
	if e.base == nil {
		return fmt.Errorf("hlpd-api base URL %w", executors.ErrNotConfigured)
	}
	u := e.base.Redacted() + e.healthPath
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base.String()+e.healthPath, nil)
	if err != nil {
		return fmt.Errorf("hlpd-api health %s: %w", u, err)
	}
	e.setHeaders(hreq)
	resp, err := e.client.Do(hreq)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("hlpd-api health GET %s: %w: %v", u, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("hlpd-api health GET %s: HTTP %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
