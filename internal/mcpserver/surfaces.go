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
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}

// Serving is Server.Serving of the full surface's server (the profiles'
// are synced in the same loop, and at their making).
func (p *Surfaces) Serving() bool { return p.Server(nil).Serving() }

// Ready is Server.Ready of the full surface's server.
func (p *Surfaces) Ready() <-chan struct{} { return p.Server(nil).Ready() }

// HTTPHandler is Server.HTTPHandler over the surfaces: each request is
// served by the server of the surface surfaceOf gives it (after
// authentication, so the token is known), and a session stays with the
// server of its first request; ok false answers 404 (an unknown profile).
func (p *Surfaces) HTTPHandler(opts *mcp.StreamableHTTPOptions, surfaceOf func(*http.Request) (catalog.Surface, bool)) http.Handler {
	return newHTTPHandler(p.Server(nil).log, opts, func(r *http.Request) (*Server, bool) {
		sf, ok := surfaceOf(r)
		if !ok {
			return nil, false
		}
		return p.Server(sf), true
	})
}
