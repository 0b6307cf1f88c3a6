package api

import (
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// The paths the Guard treats apart.
const (
	// webhookPath is called by git servers, not browsers, and is
	// authenticated by its HMAC signature: no Host, Origin or Content-Type
	// check applies to it.
	webhookPath = "/v1/hooks/forgejo"
)

// probePaths answer only "ok" or "ready": any Host may ask them, since
// load balancers and orchestrators probe by address (a Kubernetes probe
// sends the pod's IP as Host).
var probePaths = []string{"/healthz", "/readyz"}

// GuardOptions say which requests are the daemon's own: the Host values
// that name it, the browser origins that may use it, and which paths take
// HTML forms instead of JSON.
type GuardOptions struct {
	// Listen holds the addresses the daemon listens on, host:port with the
	// port it got. Each counts as a name of the daemon (0.0.0.0:8765
	// too), and the loopback names (localhost, 127.0.0.1, [::1]) are
	// accepted with these ports.
	Listen []string
	// PublicHosts are the other names clients reach the daemon by (the
	// public_hosts setting): "host" (any port) or "host:port". A daemon
	// behind a reverse proxy, or listening on every address, is reached
	// by names only its operator knows.
	PublicHosts []string
	// AllowedOrigins are browser origins, "scheme://host[:port]", that may
	// use the daemon besides its own pages (the allowed_origins setting).
	AllowedOrigins []string
	// FormPaths are path prefixes whose POSTs are the HTML forms of the
	// daemon's own pages (the console's "/ui/"): their bodies need not be
	// JSON. Host and Origin are checked there as everywhere.
	FormPaths []string
	// Logger gets a line per refused request (nil: discard).
	Logger *slog.Logger
}

// hostName is an accepted Host: a host (an IP in its canonical form) and
// a port ("": any).
type hostName struct{ host, port string }

type guard struct {
	ports   []string   // the listeners' ports: loopback names carry one
	names   []hostName // the listeners' own addresses, then public_hosts
	origins map[string]bool
	forms   []string
	// accepted is what a refused Host is told: the Host values accepted.
	accepted string
	log      *slog.Logger
	next     http.Handler
}

// Check reports the first problems of opts: a listen address that is not
// host:port, a public host or an allowed origin that is not one.
func (opts GuardOptions) Check() error {
	_, err := newGuard(opts, nil)
	return err
}

// Guard returns next behind the checks every request to the daemon
// passes, on every route (/v1, /mcp, /ui, ...), tokens or not. They keep
// web pages of other sites from driving a daemon that a browser can reach,
// directly (a cross-site request) or through DNS rebinding (a name of the
// attacker's that resolves to the daemon's address):
//
//   - Host must name the daemon: a loopback name or address (localhost,
//     127.0.0.1, [::1]) with the listener's port, the listen address
//     itself, or one of PublicHosts; else 421 Misdirected Request, saying
//     which values are accepted and naming public_hosts. A Host without a
//     port means port 80. GET /healthz and /readyz answer any Host.
//   - An Origin header must be the request's own (its host:port is Host)
//     or one of AllowedOrigins; else 403, naming the origin and
//     allowed_origins. "null" is never one. A request without Origin
//     (curl, SDKs, other programs) passes, unless a browser marks it
//     Sec-Fetch-Site cross-site or same-site and its method changes state
//     (anything but GET, HEAD, OPTIONS): then 403.
//   - A request that changes state and carries a body (or a
//     Content-Type) must say Content-Type: application/json (parameters
//     such as charset allowed), except under FormPaths; else 415. A form or
//     text/plain POST is what a page can send cross-site without a
//     preflight; a JSON one is not.
//
// The push webhook (POST /v1/hooks/forgejo) is exempt from all three: git
// servers call it by whatever name reaches the daemon, and its HMAC
// signature authenticates it. Refusals are JSON {"error": ...}.
func Guard(opts GuardOptions, next http.Handler) (http.Handler, error) {
	g, err := newGuard(opts, next)
	if err != nil {
		return nil, err
	}
	return g, nil
}

func newGuard(opts GuardOptions, next http.Handler) (*guard, error) {
	g := &guard{origins: map[string]bool{}, forms: slices.Clone(opts.FormPaths), log: opts.Logger, next: next}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	var words []string
	for _, l := range opts.Listen {
		h, port, err := net.SplitHostPort(l)
		if err != nil || port == "" || !digits(port) {
			errs = append(errs, fmt.Errorf("listen %q: want host:port", l))
			continue
		}
		if !slices.Contains(g.ports, port) {
			g.ports = append(g.ports, port)
			words = append(words, net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("localhost", port), net.JoinHostPort("::1", port))
		}
		if h = canonHost(h); h != "" && !isLoopbackName(h) {
			g.names = append(g.names, hostName{h, port})
			words = append(words, net.JoinHostPort(h, port))
		}
	}
	for _, p := range opts.PublicHosts {
		n, err := parsePublicHost(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("public_hosts: %w", err))
			continue
		}
		g.names = append(g.names, n)
		if n.port == "" {
			words = append(words, bracket(n.host)+" (any port)")
		} else {
			words = append(words, net.JoinHostPort(n.host, n.port))
		}
	}
	for _, o := range opts.AllowedOrigins {
		canon, err := parseOrigin(o)
		if err != nil {
			errs = append(errs, fmt.Errorf("allowed_origins: %w", err))
			continue
		}
		g.origins[canon] = true
	}
	if len(opts.PublicHosts) == 0 {
		words = append(words, "the names in public_hosts (none set)")
	}
	g.accepted = strings.Join(words, ", ")
	return g, errors.Join(errs...)
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == webhookPath {
		g.next.ServeHTTP(w, r)
		return
	}
	if err := g.check(r); err != nil {
		g.log.Info("refused a request", "status", err.status, "method", r.Method, "path", r.URL.Path, "host", r.Host,
			"origin", r.Header.Get("Origin"), "content_type", r.Header.Get("Content-Type"), "remote", r.RemoteAddr)
		if err.status == http.StatusUnsupportedMediaType {
			w.Header().Set("Accept-Post", "application/json")
		}
		writeError(w, g.log, err)
		return
	}
	g.next.ServeHTTP(w, r)
}

// check returns the refusal of r, or nil.
func (g *guard) check(r *http.Request) *apiError {
	probe := (r.Method == http.MethodGet || r.Method == http.MethodHead) && slices.Contains(probePaths, r.URL.Path)
	if !probe && !g.hostOK(r.Host) {
		return errorf(http.StatusMisdirectedRequest, "Host %q does not name this daemon; it accepts %s. "+
			"A daemon reached by another name (a reverse proxy, a listener on every address) needs that name in public_hosts", r.Host, g.accepted)
	}
	origins := r.Header.Values("Origin")
	switch {
	case len(origins) > 1:
		return errorf(http.StatusForbidden, "more than one Origin header; a browser sends one")
	case len(origins) == 1:
		if !g.originOK(origins[0], r.Host) {
			return errorf(http.StatusForbidden, "Origin %q is not this daemon's own (http://%s) nor in allowed_origins: "+
				"pages of other sites may not use it; list a browser origin that should in allowed_origins", origins[0], r.Host)
		}
	case changesState(r.Method):
		if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
			return errorf(http.StatusForbidden, "a %s request from another site's page (Sec-Fetch-Site: %s) is refused; pages of other sites may not use this daemon", r.Method, site)
		}
	}
	if changesState(r.Method) && (r.ContentLength != 0 || r.Header.Get("Content-Type") != "") && !g.isForm(r.URL.Path) {
		ct := r.Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			if ct == "" {
				return errorf(http.StatusUnsupportedMediaType, "%s %s has a body but no Content-Type; send Content-Type: application/json", r.Method, r.URL.Path)
			}
			return errorf(http.StatusUnsupportedMediaType, "Content-Type %q is not accepted: %s %s takes a JSON body; send Content-Type: application/json", ct, r.Method, r.URL.Path)
		}
	}
	return nil
}

// changesState reports whether method is not a safe one (RFC 9110 9.2.1).
func changesState(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

func (g *guard) isForm(path string) bool {
	for _, p := range g.forms {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// hostOK reports whether the Host header hp names the daemon.
func (g *guard) hostOK(hp string) bool {
	host, port, ok := splitHost(hp)
	if !ok {
		return false
	}
	if port == "" {
		port = "80" // a URL without a port, as http:// has it
	}
	if isLoopbackName(host) && slices.Contains(g.ports, port) {
		return true
	}
	for _, n := range g.names {
		if n.host == host && (n.port == "" || n.port == port) {
			return true
		}
	}
	return false
}

// originOK reports whether origin may use the daemon in a request to
// host: the request's own origin, or an allowed one.
func (g *guard) originOK(origin, host string) bool {
	if canon, err := parseOrigin(origin); err == nil && g.origins[canon] {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false // "null" and anything not scheme://host[:port]
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	// A browser leaves the scheme's port out of an origin; a client may
	// still have written it in Host.
	def := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	return u.Port() == "" && strings.EqualFold(net.JoinHostPort(u.Hostname(), def), host)
}

// parseOrigin checks an allowed_origins entry and returns it as compared:
// lower case, without a trailing slash.
func parseOrigin(s string) (string, error) {
	canon := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(s), "/"))
	u, err := url.Parse(canon)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.Contains(u.Host, "*") {
		return "", fmt.Errorf("%q is not an origin; want scheme://host[:port], such as https://console.example:8443", s)
	}
	return canon, nil
}

// parsePublicHost checks a public_hosts entry: a host name or IP address,
// with a port or not; no scheme, path or wildcard.
func parsePublicHost(s string) (hostName, error) {
	host, port, ok := splitHost(strings.TrimSpace(s))
	if !ok || (strings.ContainsAny(host, "/*@:?#") && net.ParseIP(host) == nil) {
		return hostName{}, fmt.Errorf("%q is not a host; want a name or an address, with :port or without (any port), such as toolagent.example.com or 10.0.0.5:8765", s)
	}
	return hostName{host, port}, nil
}

// splitHost splits a Host header value (or a public_hosts entry) into its
// host, lower case and an IP in canonical form, and its port ("" for
// none).
func splitHost(hp string) (host, port string, ok bool) {
	if h, p, err := net.SplitHostPort(hp); err == nil {
		if p == "" || !digits(p) {
			return "", "", false
		}
		host, port = h, p
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]")
		if len(host) != len(hp)-2 && host != hp {
			return "", "", false // one bracket without the other
		}
	}
	if host = canonHost(host); host == "" || strings.ContainsAny(host, "[] ") {
		return "", "", false
	}
	return host, port, true
}

// canonHost is host in lower case, an IP address in its canonical form.
func canonHost(host string) string {
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return strings.ToLower(host)
}

// isLoopbackName reports whether host (canonHost) is localhost or a
// loopback address.
func isLoopbackName(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bracket writes an IPv6 address as a Host holds it.
func bracket(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
