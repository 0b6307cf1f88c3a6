package mcpserver_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/mcpserver"
)

// Example_stdio is the wiring of `toolagent mcp`: MCP over stdin/stdout,
// the tool list kept live by Run. Logs must go to stderr: stdout is the
// protocol.
func Example_stdio() {
	ctx := context.Background()
	store := new(catalog.Store) // filled by scan.Build + Swap, and by the reload loop
	d := dispatch.New(store, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: shell.New(shell.Options{})}, dispatch.Options{})
	srv := mcpserver.New(store, d, mcpserver.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})

	g, ctx := errgroup.WithContext(ctx)
	runCtx, stop := context.WithCancel(ctx)
	g.Go(func() error { return srv.Run(runCtx) })
	g.Go(func() error {
		defer stop() // the client closed stdin: stop the sync loop too
		return srv.MCP().Run(ctx, &mcp.StdioTransport{})
	})
	_ = g.Wait()
}

// Example_http mounts streamable HTTP at /mcp next to the API, behind the
// same tokens: a token needs the call role.
func Example_http() {
	store := new(catalog.Store)
	d := dispatch.New(store, nil, dispatch.Options{})
	srv := mcpserver.New(store, d, mcpserver.Options{})
	check := func(secret string) (caller string, roles []string, ok bool) {
		return "", nil, false // the API's token table
	}
	var apiHandler http.Handler = http.NotFoundHandler() // api.New(...)

	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpserver.RequireToken(check, "call", srv.HTTPHandler(&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: 1 << 20})))
	mux.Handle("/", apiHandler)
	_ = &http.Server{Addr: "127.0.0.1:8765", Handler: mux}
}
