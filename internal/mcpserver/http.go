package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultSessionTimeout is how long HTTPHandler keeps an idle streamable
// HTTP session (no request from its client) before closing it, so sessions
// of clients that went away without DELETE do not pile up.
const DefaultSessionTimeout = 30 * time.Minute

// HTTPHandler returns the streamable HTTP handler of the server. opts may
// be nil; a copy is used, with the server's logger and
// DefaultSessionTimeout filled in when unset. With Stateless false the
// endpoint serves both eras of the protocol (see newHTTPHandler): stateful
// sessions for the clients of 2025-11-25 and before, which is what carries
// notifications/tools/list_changed to them, and the sessionless revision
// (2026-07-28) for requests that speak it. Authentication is the
// caller's: wrap the handler with RequireToken. So are the Host and Origin
// checks against DNS rebinding and cross-site pages (the daemon's one
// guard in front of every route does them).
func (s *Server) HTTPHandler(opts *mcp.StreamableHTTPOptions) http.Handler {
	return newHTTPHandler(s.log, opts, func(*http.Request) (*Server, bool) { return s, true })
}

// Request headers of the streamable HTTP transport (the SDK keeps its
// names unexported).
const (
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerSessionID       = "Mcp-Session-Id"
)

// newHTTPHandler is the streamable HTTP endpoint over the server that
// serverOf picks for a request (ok false: 404, an unknown profile).
//
// The SDK (v1.8.0) serves the sessionless revision only from a handler
// in its stateless mode: its stateful handler answers a 2026-07-28 request
// with -32022 and a list of the handshake-era versions, although
// server/discover on the same endpoint lists 2026-07-28. A dual-era server
// "selects its behavior from how the client opens" (the revision's
// versioning page): a request that carries the revision's per-request
// _meta, or names a version that is not a handshake-era one in
// MCP-Protocol-Version, without a session, is served statelessly; an
// initialize, and every request of a session, by the stateful handler.
// So, with Stateless false, this handler routes each POST to one of two
// SDK handlers over the same mcp.Server: requests of the new revision (and
// of versions nobody knows, which the stateless handler answers with
// UnsupportedProtocolVersionError listing what server/discover lists) to
// a stateless one, everything else to the stateful one. With Stateless
// true, one stateless handler serves both eras, and GET is the
// list_changed stream of serveListChanged.
func newHTTPHandler(log *slog.Logger, opts *mcp.StreamableHTTPOptions, serverOf func(*http.Request) (*Server, bool)) http.Handler {
	return newHTTPHandlerKeepalive(log, opts, serverOf, listChangedKeepalive)
}

// newHTTPHandlerKeepalive is newHTTPHandler with the keepalive interval
// of subscriptions/listen streams (tests shorten it).
func newHTTPHandlerKeepalive(log *slog.Logger, opts *mcp.StreamableHTTPOptions, serverOf func(*http.Request) (*Server, bool), keepalive time.Duration) http.Handler {
	var o mcp.StreamableHTTPOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = log
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.MaxRequestBodyBytes == 0 {
		o.MaxRequestBodyBytes = mcp.DefaultMaxRequestBodyBytes
	}
	// The revision: "Closing the SSE response stream MUST be treated by
	// the server as cancellation of that request" (it has no resumable
	// streams). The SDK does so only when asked; it applies to requests
	// of 2026-07-28 and later alone, so a 2025 session's stream that
	// drops still leaves its call running.
	o.PropagateRequestCancellation = true
	getServer := func(r *http.Request) *mcp.Server {
		s, ok := serverOf(r)
		if !ok {
			return nil
		}
		return s.mcp
	}
	legacy := mcp.NewStreamableHTTPHandler(getServer, &o)
	modern := legacy
	if !o.Stateless {
		so := o
		so.Stateless = true
		modern = mcp.NewStreamableHTTPHandler(getServer, &so)
	}
	// route serves a request of s's by the era it speaks.
	route := func(s *Server, w http.ResponseWriter, r *http.Request) {
		if o.Stateless {
			if r.Method == http.MethodGet {
				serveListChanged(w, r, s)
				return
			}
			legacy.ServeHTTP(w, r)
			return
		}
		isModern, err := sessionless(w, r, o.MaxRequestBodyBytes)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if isModern {
			modern.ServeHTTP(w, r)
			return
		}
		legacy.ServeHTTP(w, r)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := serverOf(r)
		if !ok {
			http.Error(w, "no such MCP profile", http.StatusNotFound)
			return
		}
		if v := r.Header.Get(headerProtocolVersion); r.Method == http.MethodPost && v != "" && v < sessionlessVersion && !slices.Contains(supportedVersions, v) {
			unsupportedVersion(w, r, v, o.MaxRequestBodyBytes)
			return
		}
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "subscriptions/listen" {
			kw := &keepaliveWriter{ResponseWriter: w}
			defer kw.every(keepalive)()
			w = kw
		}
		// Task requests (both eras) are answered below the SDK, which has
		// no tasks (taskwire.go); the rest go by era.
		s.taskHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { route(s, w, r) }), o.MaxRequestBodyBytes).ServeHTTP(w, r)
	})
}

// supportedVersions are the versions the endpoint serves, as
// server/discover lists them.
var supportedVersions = mcp.SupportedProtocolVersions()

// unsupportedVersion answers a POST whose MCP-Protocol-Version names a
// version older than the sessionless revision that nobody serves (say
// 1900-01-01): the SDK answers it with a plain-text 400, where the
// revision wants UnsupportedProtocolVersionError (-32022, HTTP 400) listing
// the supported versions, so that a client can pick one. (A newer unknown
// version reaches the SDK's stateless handler, which answers so itself.)
func unsupportedVersion(w http.ResponseWriter, r *http.Request, requested string, limit int64) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	if r.Body != nil {
		if body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit)); err == nil {
			json.Unmarshal(body, &req) // no id (a batch, not JSON): the error has none
		}
	}
	if len(req.ID) == 0 {
		req.ID = json.RawMessage("null")
	}
	data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: supportedVersions, Requested: requested})
	resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{
		"code": mcp.CodeUnsupportedProtocolVersion, "message": "unsupported protocol version " + requested, "data": json.RawMessage(data)}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(resp)
}

// keepaliveWriter is the ResponseWriter of a subscriptions/listen stream:
// the SDK sends nothing on it between notifications, so proxies and
// clients with idle timeouts would close a quiet one; every writes an SSE
// comment on it at an interval, as the revision encourages, between the
// SDK's own writes (the mutex keeps the two apart).
type keepaliveWriter struct {
	http.ResponseWriter
	mu     sync.Mutex
	wrote  bool // the SDK began the response
	failed bool // a write failed: the client is gone
}

func (k *keepaliveWriter) WriteHeader(code int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ResponseWriter.WriteHeader(code)
}

func (k *keepaliveWriter) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.wrote = true
	return k.ResponseWriter.Write(p)
}

func (k *keepaliveWriter) Flush() {
	k.mu.Lock()
	defer k.mu.Unlock()
	http.NewResponseController(k.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (k *keepaliveWriter) Unwrap() http.ResponseWriter { return k.ResponseWriter }

// every writes a keepalive comment each interval once the SDK has begun
// an SSE response, until the returned stop is called (before the handler
// returns: nothing is written after).
func (k *keepaliveWriter) every(interval time.Duration) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			k.mu.Lock()
			if k.wrote && !k.failed && strings.HasPrefix(k.Header().Get("Content-Type"), "text/event-stream") {
				if _, err := io.WriteString(k.ResponseWriter, ": keepalive\n\n"); err != nil {
					k.failed = true
				} else {
					http.NewResponseController(k.ResponseWriter).Flush()
				}
			}
			k.mu.Unlock()
		}
	}()
	return func() { close(done); <-ended }
}

// handshakeVersions are the protocol versions of the initialize handshake
// that the SDK serves (2025-11-25 and before); any other version a request
// names is the sessionless revision's, or one nobody serves.
var handshakeVersions = slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= sessionlessVersion })

// sessionlessVersion is the first protocol revision without sessions.
const sessionlessVersion = "2026-07-28"

// sessionless reports whether the POST r is a request of the sessionless
// protocol: no session, and either a version in MCP-Protocol-Version that
// is not of the handshake era, or the revision's _meta protocol version in
// its body. The body is read (up to limit bytes) only for a POST without
// a session whose header names a handshake-era version or none (an
// initialize, or a client of the new revision that left the header out:
// the SDK then answers -32020, as the revision requires); r.Body is
// replaced by what was read.
func sessionless(w http.ResponseWriter, r *http.Request, limit int64) (bool, error) {
	if r.Method != http.MethodPost || r.Header.Get(headerSessionID) != "" {
		return false, nil
	}
	if v := r.Header.Get(headerProtocolVersion); v != "" && !slices.Contains(handshakeVersions, v) {
		return true, nil
	}
	if r.Body == nil {
		return false, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	r.Body.Close()
	if err != nil {
		return false, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil { // a batch, or not JSON: the SDK's to answer
		return false, nil
	}
	_, ok := msg.Params.Meta[mcp.MetaKeyProtocolVersion]
	return ok, nil
}

// TokenCheck looks up the secret of a bearer token: the caller's name (for
// the audit line), the roles the token holds (each role it includes, e.g.
// "read", "call"), and whether the secret is known at all. It must be safe
// for concurrent use and compare secrets in constant time.
type TokenCheck func(secret string) (caller string, roles []string, ok bool)

// RequireToken returns h behind bearer-token authentication: a request
// without a known token gets 401, one whose token lacks the role need
// (e.g. "call") gets 403, and an admitted request carries the caller in
// auth.TokenInfo.UserID, where DefaultCaller finds it for the audit line
// and the SDK binds each session to it (a session cannot be used with
// another caller's token). It uses the SDK's own middleware, so every
// request of a session, not only the first, is checked.
func RequireToken(check TokenCheck, need string, h http.Handler) http.Handler {
	verify := func(_ context.Context, secret string, _ *http.Request) (*auth.TokenInfo, error) {
		caller, roles, ok := check(secret)
		if !ok {
			return nil, fmt.Errorf("unauthorized: send a valid API token as Authorization: Bearer <token> (%w)", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: caller, Scopes: roles}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{Scopes: []string{need}, AllowMissingExpiration: true})(h)
}
