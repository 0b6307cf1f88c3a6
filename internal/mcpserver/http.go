package mcpserver

import (
	"context"
	"fmt"
	"net/http"
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
// DefaultSessionTimeout filled in when unset. Keep Stateless false: stateful
// sessions are what carry notifications/tools/list_changed to clients of
// the 2025 protocol versions. Authentication is the caller's: wrap the
// handler with RequireToken. So are the Host and Origin checks against DNS
// rebinding and cross-site pages (the daemon's one guard in front of every
// route does them).
func (s *Server) HTTPHandler(opts *mcp.StreamableHTTPOptions) http.Handler {
	var o mcp.StreamableHTTPOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = s.log
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	return s.taskHTTP(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &o), o.MaxRequestBodyBytes)
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
