package mcpserver

import (
	"context"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/catalog"
)

// Surfaces serves one catalog to clients that may each see a different
// part of it (a token's scope, a profile): one Server per surface, made
// on first use and kept in step with the store by Run. Surfaces come from
// the daemon's configuration (tokens and profiles), so there are few.
type Surfaces struct {
	store *catalog.Store
	inv   Invoker
	opts  Options

	mu      sync.Mutex
	servers map[string]*Server
}

// NewSurfaces returns the servers of store for opts (opts.Surface is
// ignored: each Server gets its own); the full surface is made at once.
func NewSurfaces(store *catalog.Store, inv Invoker, opts Options) *Surfaces {
	opts.Surface = nil
	p := &Surfaces{store: store, inv: inv, opts: opts, servers: map[string]*Server{}}
	p.Server(nil)
	return p
}

// Server returns the server of surface sf, making it on first use.
func (p *Surfaces) Server(sf catalog.Surface) *Server {
	key := sf.Key()
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.servers[key]; ok {
		return s
	}
	o := p.opts
	o.Surface = sf
	o.AfterSync = nil // Run calls it once for all
	if len(sf) > 0 {
		o.Logger = o.Logger.With("surface", key)
	}
	s := New(p.store, p.inv, o)
	p.servers[key] = s
	return s
}

// Run keeps every server's tool list in step with the store until ctx is
// done (Server.Run for all of them, one loop).
func (p *Surfaces) Run(ctx context.Context) error {
	for {
		ch := p.store.Changed()
		p.mu.Lock()
		all := make([]*Server, 0, len(p.servers))
		for _, s := range p.servers {
			all = append(all, s)
		}
		p.mu.Unlock()
		for _, s := range all {
			s.Sync()
		}
		if p.opts.AfterSync != nil {
			p.opts.AfterSync()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}

// HTTPHandler is Server.HTTPHandler over the surfaces: each new session
// is served by the server of the surface surfaceOf gives its first
// request (after authentication, so the token is known); ok false
// answers 404 (an unknown profile).
func (p *Surfaces) HTTPHandler(opts *mcp.StreamableHTTPOptions, surfaceOf func(*http.Request) (catalog.Surface, bool)) http.Handler {
	full := p.Server(nil)
	var o mcp.StreamableHTTPOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = full.log
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		sf, ok := surfaceOf(r)
		if !ok {
			return nil // the SDK answers 400; the wrapper below answers 404 first
		}
		return p.Server(sf).mcp
	}, &o)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sf, ok := surfaceOf(r)
		if !ok {
			http.Error(w, "no such MCP profile", http.StatusNotFound)
			return
		}
		if o.Stateless && r.Method == http.MethodGet {
			serveListChanged(w, r, p.Server(sf))
			return
		}
		// Task requests are the surface's server's (tasks.go).
		p.Server(sf).taskHTTP(h, o.MaxRequestBodyBytes).ServeHTTP(w, r)
	})
}
