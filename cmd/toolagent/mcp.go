package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/toolagent/toolagent/internal/api"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/mcpserver"
	"github.com/toolagent/toolagent/internal/operator"
)

// runMCP serves the catalog over MCP on stdin/stdout, for clients that
// spawn a process. It takes the same source and limit settings as serve;
// the catalog reloads live and clients get notifications/tools/list_changed.
// Logs go to stderr: stdout is the protocol.
func runMCP(ctx context.Context, e env, args []string) error {
	var metaOnly bool
	var profile string
	cfg, err := loadConfig(e, "mcp", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&metaOnly, "meta-only", false, "list only the find_tool and call_tool meta-tools (for catalogs of hundreds of tools)")
		fs.StringVar(&profile, "profile", "", "serve only the tools of the config's profile `NAME` (profiles: NAME: {tools, tags})")
	})
	if err != nil {
		return err
	}
	var surface catalog.Surface
	if profile != "" {
		p, ok := cfg.Profiles[profile]
		if !ok {
			return usageError{fmt.Errorf("mcp --profile %s: no such profile in the config (profiles: %v)", profile, slices.Sorted(maps.Keys(cfg.Profiles)))}
		}
		surface = surface.With(p.scope())
	}
	log := newLogger(cfg, e.stderr)
	cr, err := newCore(e, cfg, log, approvalsIfFree)
	if err != nil {
		return err
	}
	dropSecretEnv(e, cfg)
	// The first snapshot is loaded before the client connects, so its
	// first tools/list is complete.
	if _, err := cr.loop.Once(ctx); err != nil {
		cr.close()
		return err
	}
	srv := mcpserver.New(cr.store, cr.disp, mcpserver.Options{Version: buildVersion(), Logger: log.With(slog.String("log", "mcp")), MetaOnly: metaOnly, Surface: surface, OnMatch: cr.onMatch()})

	// Calls learn why they end: a signal is a shutdown, the client closing
	// stdin is the client gone (dispatch says which in the result).
	base, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stop(nil)
	defer context.AfterFunc(ctx, func() { stop(dispatch.ErrShutdown) })()
	g, runCtx := errgroup.WithContext(base)
	cr.start(runCtx, g)
	g.Go(func() error { return srv.Run(runCtx) })
	if cr.approvals != nil {
		// Its held calls are decided on this host while it runs.
		g.Go(func() error {
			return operator.ServeControl(runCtx, host.ApprovalsDir(cr.common.State), cr.disp, log.With(slog.String("log", "approvals")))
		})
	}
	g.Go(func() error {
		defer stop(context.Canceled) // the client closed stdin: stop the loops too
		t := &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
		if err := srv.MCP().Run(runCtx, t); err != nil && !clientGone(err) {
			return err
		}
		return nil
	})
	err = g.Wait()
	cr.close() // after every goroutine that reads trees or runs calls has ended
	return err
}

// clientGone reports whether err only says the client went away: stdin
// ended, or stdout was closed under a write.
func clientGone(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpHandler is the streamable HTTP MCP endpoint of the daemon (/mcp),
// behind the same tokens as the API: tools/call needs the call role, so
// the endpoint as a whole does. With no tokens (loopback only) it is open.
// Host and Origin are checked by api.Guard in front of every route.
func mcpHandler(surfaces *mcpserver.Surfaces, tokens *api.Tokens, profiles map[string]Profile, maxBody int64, stateless bool) http.Handler {
	// Each session is served on the caller's surface: its token's scope,
	// narrowed by the profile of /mcp/{profile}.
	surfaceOf := func(r *http.Request) (catalog.Surface, bool) {
		var sf catalog.Surface
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			sf = sf.With(tokens.ScopeOf(ti.UserID))
		}
		if name := r.PathValue("profile"); name != "" {
			p, ok := profiles[name]
			if !ok {
				return nil, false
			}
			sf = sf.With(p.scope())
		}
		return sf, true
	}
	// The SDK's own Host check is off: api.Guard decides Host for every
	// route, with the names of public_hosts, which the SDK would refuse on
	// a loopback listener (behind a reverse proxy).
	h := surfaces.HTTPHandler(&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: maxBody, Stateless: stateless, DisableLocalhostProtection: true}, surfaceOf)
	if tokens.Len() == 0 {
		return h
	}
	checked := mcpserver.RequireToken(func(secret string) (string, []string, bool) {
		name, role, ok := tokens.Lookup(secret)
		var roles []string
		for r := api.RoleRead; ok && r <= role; r++ {
			roles = append(roles, r.String())
		}
		return name, roles, ok
	}, api.RoleCall.String(), h)
	if !tokens.Open() {
		return checked
	}
	// Open but for the operator's token: a request without a token is
	// anonymous, one with a token is checked (as the HTTP API does).
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			h.ServeHTTP(w, r)
			return
		}
		checked.ServeHTTP(w, r)
	})
}
