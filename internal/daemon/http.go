package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/api"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/console"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/mcpserver"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/reload"
)

// keptRuns holds the results of the last calls, for the console's
// history to open (bounded: the oldest go first).
type keptRuns struct {
	mu    sync.Mutex
	order []string
	byID  map[string]keptRun
}

type keptRun struct {
	caller string
	res    dispatch.Result
}

// maxKeptRuns bounds keptRuns.
const maxKeptRuns = 256

func (k *keptRuns) keep(c dispatch.Call, r dispatch.Result) {
	if r.RunID == "" {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byID == nil {
		k.byID = map[string]keptRun{}
	}
	if len(k.order) == maxKeptRuns {
		delete(k.byID, k.order[0])
		k.order = k.order[1:]
	}
	k.order = append(k.order, r.RunID)
	k.byID[r.RunID] = keptRun{caller: c.Caller, res: r}
}

func (k *keptRuns) get(id string) (string, dispatch.Result, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	kr, ok := k.byID[id]
	return kr.caller, kr.res, ok
}

// lastDelivery remembers the last push webhook delivery for the console.
type lastDelivery struct {
	mu     sync.Mutex
	at     time.Time
	result string
}

func (d *lastDelivery) saw(result string) {
	d.mu.Lock()
	d.at, d.result = time.Now(), result
	d.mu.Unlock()
}

func (d *lastDelivery) last() (time.Time, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at, d.result
}

// forgeLinks returns the console's links into a Forgejo or Gitea web UI
// for an http(s) repository: the commit, and the file at it; nil for other
// sources. Credentials in the URL are dropped.
func forgeLinks(repoURL, toolsPath string) func(rev, file string) (string, string) {
	u, err := neturl.Parse(repoURL)
	if repoURL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil
	}
	u.User = nil
	base := strings.TrimSuffix(strings.TrimSuffix(u.String(), "/"), ".git")
	hexRev := regexp.MustCompile(`^[0-9a-f]{40}$`)
	return func(rev, file string) (string, string) {
		if !hexRev.MatchString(rev) {
			return "", ""
		}
		return base + "/commit/" + rev, base + "/src/commit/" + rev + "/" + path.Join(toolsPath, file)
	}
}

// sandboxLine is the sandbox as the console's status page says it.
func sandboxLine(st api.SandboxStatus) string {
	if !st.Active {
		return st.Warning
	}
	return st.Mechanism + " (" + st.Version + ")"
}

// toConsole sends a browser that asks for / to the web console; other
// clients get the API's JSON index.
func toConsole(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, "/ui/", http.StatusSeeOther)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// endStreamsOn ends the long-lived MCP streams h serves when ctx is done
// (their request contexts are cancelled): the GET streams of the
// handshake-era revisions and the subscriptions/listen POSTs of the
// sessionless one (which carry their method in Mcp-Method, as that
// revision requires); other requests are left alone to finish.
func endStreamsOn(ctx context.Context, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && (r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "subscriptions/listen") {
			h.ServeHTTP(w, r)
			return
		}
		rctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(ctx, cancel)()
		h.ServeHTTP(w, r.WithContext(rctx))
	})
}

// syncer joins the reload loop's status and its trigger into api.Syncer.
type syncer struct {
	*reload.Loop
	*reload.Trigger
}

// announcingSyncer is the syncer of a replica on the shared store: a
// push webhook or POST /v1/sync also tells the other replicas to sync.
type announcingSyncer struct {
	syncer
	bc  *pgstore.Broadcast
	log *slog.Logger
}

func (s announcingSyncer) Poke() {
	s.syncer.Poke()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.bc.Announce(ctx); err != nil {
			s.log.Warn("the other replicas were not told of the push; they sync on their schedule", "err", err)
		}
	}()
}

// syncer is the API's reload control: announcing to the other replicas
// when there are any.
func (cr *core) syncer() api.Syncer {
	s := syncer{cr.loop, cr.trigger}
	if cr.broadcast == nil {
		return s
	}
	return announcingSyncer{syncer: s, bc: cr.broadcast, log: cr.log.With(slog.String("log", "replicas"))}
}

// sharedStatus is /v1/status's "shared": the store, and the newest
// revision any replica has seen; nil without the shared store.
func (cr *core) sharedStatus() func(context.Context) any {
	if cr.broadcast == nil {
		return nil
	}
	return func(ctx context.Context) any {
		out := struct {
			Store  string                   `json:"store"`
			Newest *pgstore.ReplicaRevision `json:"newest,omitempty"`
			Error  string                   `json:"error,omitempty"`
		}{Store: "postgres"}
		n, err := cr.broadcast.Newest(ctx)
		switch {
		case err != nil:
			out.Error = cr.db.Describe(err) // never the URL, host or password
		case n.Revision != "":
			out.Newest = &n
		}
		return out
	}
}

// storeStatus is the store as /readyz and /v1/status report it: whether
// it answers (asked at most once a storeCheckFresh, see sharedCheck) and,
// when not, what still works; nil without an approval queue.
func (cr *core) storeStatus() func(context.Context) api.StoreStatus {
	if cr.approvals == nil {
		return nil
	}
	kind, effect := "files", "calls that need no approval keep running; calls that need an approval, and the /v1/approvals routes, answer 503 with the cause until the directory can be written again; the requests already kept are not lost"
	if cr.db != nil {
		kind, effect = "postgres", "calls that need no approval and whose tool has no max_concurrency keep running; calls that need an approval or a max_concurrency slot (counted across the replicas), and the /v1/approvals routes, answer 503 with the cause until the database answers; the requests already kept are not lost, and slots of calls that ended meanwhile are released once it answers"
	}
	return func(ctx context.Context) api.StoreStatus {
		st := api.StoreStatus{Kind: kind, Available: true}
		if cr.slots != nil {
			st.SlotReleasesOwed = cr.slots.Owed()
		}
		if err := cr.storeCheck.Check(ctx); err != nil {
			st.Available, st.Error, st.Effect = false, err.Error(), effect
		}
		return st
	}
}

// LoadTokens reads the API tokens from cfg.TokensFile and cfg.Tokens (the
// environment). Token values are never logged.
func LoadTokens(cfg Config, log *slog.Logger) (*api.Tokens, error) {
	toks := new(api.Tokens)
	if cfg.TokensFile != "" {
		fi, err := os.Stat(cfg.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("tokens file: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			log.Warn("tokens file is readable by other users; chmod 600 it", "file", cfg.TokensFile, "mode", fi.Mode().Perm().String())
		}
		data, err := os.ReadFile(cfg.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("tokens file: %w", err)
		}
		if err := toks.Parse(cfg.TokensFile, string(data)); err != nil {
			return nil, err
		}
	}
	if cfg.Tokens != "" {
		if err := toks.Parse("TOOLAGENT_TOKENS", cfg.Tokens); err != nil {
			return nil, err
		}
	}
	return toks, nil
}

// addOperatorToken adds the operator token of the state directory to
// tokens (making it at first start) and returns its file; "" when a
// configured token already has the operator's name (that token is then the
// operator's way in).
func addOperatorToken(tokens *api.Tokens, state string, log *slog.Logger) (string, error) {
	secret, created, err := operator.EnsureToken(state)
	if err != nil {
		return "", err
	}
	if err := tokens.AddOperator(operator.Name, secret); err != nil {
		if _, _, taken := tokens.Lookup(secret); taken {
			return "", fmt.Errorf("%w: a configured token has the operator token's secret; delete %s and restart", err, operator.TokenPath(state))
		}
		log.Warn("no operator token: a configured token is named "+operator.Name+"; use it to approve", "err", err)
		return "", nil
	}
	if created {
		log.Info("made the operator token", "file", operator.TokenPath(state))
	}
	return operator.TokenPath(state), nil
}

// listenNames are the addresses the daemon listens on as api.Guard takes
// them: the configured one (a host name counts as one of the daemon's)
// and the listener's, both with the port the listener got.
func listenNames(configured string, got net.Addr) []string {
	_, port, err := net.SplitHostPort(got.String())
	if err != nil {
		return nil
	}
	names := []string{got.String()}
	if host, _, err := net.SplitHostPort(configured); err == nil && host != "" {
		names = append(names, net.JoinHostPort(host, port))
	}
	return names
}

// everyAddress reports whether addr (host:port) listens on every address
// of the host.
func everyAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// isLoopback reports whether addr (host:port) only listens on loopback.
// An empty host listens everywhere; a host name other than localhost may
// resolve anywhere, so it counts as not loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// executorHealth is the health monitor's report as the console shows it.
func (cr *core) executorHealth() []console.ExecutorHealth {
	var out []console.ExecutorHealth
	for _, p := range cr.health.Report() {
		out = append(out, console.ExecutorHealth{Name: p.Name, OK: p.OK, Reason: p.Reason})
	}
	return out
}

// sandboxStatus is what /v1/status says of the sandbox sb (nil: off).
func sandboxStatus(sb *proc.Sandbox) api.SandboxStatus {
	if sb == nil {
		return api.SandboxStatus{Warning: "the sandbox is off (--sandbox=off): tool processes run with the daemon's own view of the host: its files, its network and its other processes"}
	}
	enforced, err := sb.Cgroups()
	if err != nil {
		enforced = "rlimits only: " + err.Error()
	} else {
		enforced += ", with rlimits"
	}
	return api.SandboxStatus{Active: true, Mechanism: sb.Mechanism(), Version: sb.Version(), Limits: sb.Limits(), Enforced: enforced, Isolation: "per call: a sandbox serves one call and is gone with it"}
}

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
			sf = sf.With(p.Scope())
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
