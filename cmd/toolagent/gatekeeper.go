package main

import (
	"context"
	"fmt"
	"time"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/gatekeeper"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/hugeheap"
	"github.com/toolagent/toolagent/internal/proc"
)

// defaultGatekeeperListen is where `toolagent gatekeeper` listens unless
// told otherwise: loopback, one port above the daemon's.
const defaultGatekeeperListen = "127.0.0.1:8766"

// gatekeeperTokenEnv holds the gatekeeper's accepted token; it is removed
// from the process environment once read.
const gatekeeperTokenEnv = "TOOLAGENT_GATEKEEPER_TOKEN"

// runGatekeeper serves the gatekeeper protocol (internal/gatekeeper,
// PROTOCOL.md) until ctx ends: other hosts' toolagent daemons run the
// tools of executor gatekeeper here. The token comes from the environment
// (TOOLAGENT_GATEKEEPER_TOKEN, dropped from the environment once read) or
// a file, never from a flag. Every command runs in the bubblewrap sandbox,
// which hides the token file, unless --sandbox=off says otherwise; a
// sandbox that cannot be set up stops the start with the reason.
func runGatekeeper(ctx context.Context, e env, args []string) error {
	var opts gatekeeper.Options
	fs := newFlagSet("gatekeeper", e)
	listen := fs.String("listen", defaultGatekeeperListen, "address to listen on, host:port (port 0: any free port); a non-loopback address needs a token")
	tokenFile := fs.String("token-file", "", "`FILE` holding the accepted bearer token (or set TOOLAGENT_GATEKEEPER_TOKEN)")
	fs.Var((*cli.ListFlag)(&opts.TokenSHA256), "token-sha256", "accepted token given as its hex SHA-256 digest (`printf %s \"$TOKEN\" | sha256sum`); repeatable")
	allow := fs.String("allow", "", "comma-separated `PROGRAMS` that may run (names found in /usr/local/bin:/usr/bin:/bin, or absolute paths); with a list, cmd must be one simple command; empty: any")
	var sandboxMode string
	sandboxFlag(fs, e, &sandboxMode, "every command")
	mech := fs.String("sandbox-mechanism", "auto", "what makes each command's sandbox: landlock (root, a kernel with Landlock), bubblewrap, or auto")
	bwrap := fs.String("sandbox-bwrap", e.getenv("TOOLAGENT_SANDBOX_BWRAP"), "the bubblewrap `PROGRAM` (env TOOLAGENT_SANDBOX_BWRAP; default: bwrap, looked up in /usr/local/bin:/usr/bin:/bin)")
	fs.DurationVar(&opts.MaxTimeout, "max-timeout", gatekeeper.DefaultMaxTimeout, "longest timeout a request may ask for (longer ones are clamped)")
	fs.Int64Var(&opts.MaxOutput, "max-output", gatekeeper.DefaultMaxOutputCap, "largest output cap per stream, in bytes, a request may ask for")
	fs.IntVar(&opts.MaxConcurrent, "max-concurrent", gatekeeper.DefaultMaxConcurrent, "most commands running at once; more get 503 busy")
	fs.Int64Var(&opts.MaxBodyBytes, "body-limit", gatekeeper.DefaultMaxBodyBytes, "largest request body in bytes")
	fs.IntVar(&opts.MaxUsedGrants, "max-used-grants", gatekeeper.DefaultMaxUsedGrants, "most used grants remembered at once, each until it expires (a grant runs once); when full, grants get 503 busy until some expire")
	grace := fs.Duration("shutdown-grace", 10*time.Second, "on SIGTERM/SIGINT, how long running commands may finish before they are killed")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "least log level: debug, info, warn or error")
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{Err: fmt.Errorf("gatekeeper takes no arguments; got %q", pos)}
	}
	log, err := cli.NewLogger(*logFormat, *logLevel, e.stderr)
	if err != nil {
		return usageError{Err: err}
	}

	if tok := e.getenv(gatekeeperTokenEnv); tok != "" {
		opts.Tokens = append(opts.Tokens, tok)
	}
	if e.unsetenv != nil {
		// Read once; no child (and no later reader of os.Environ) gets it.
		_ = e.unsetenv(gatekeeperTokenEnv)
	}
	if *tokenFile != "" {
		tok, err := host.ReadSecret("gatekeeper", *tokenFile, log)
		if err != nil {
			return err
		}
		opts.Tokens = append(opts.Tokens, tok)
	}
	opts.Allow = cli.SplitList(*allow)
	if err := opts.Validate(); err != nil {
		return usageError{Err: err}
	}
	sb, err := host.OpenSandbox(sandboxMode, proc.SandboxOptions{Bwrap: *bwrap, Hide: []string{*tokenFile}, Mechanism: host.SandboxMechanism(*mech)})
	if err != nil {
		return fmt.Errorf("gatekeeper: %w", err)
	}
	if sb != nil {
		defer sb.Close()
	}
	opts.Sandbox = sb
	host.LogSandbox(log, sb, "commands")
	// Started: its heap asks for no more huge pages (a server that runs
	// for months; internal/hugeheap).
	hugeheap.Settle()
	return gatekeeper.Serve(ctx, *listen, opts, *grace, log)
}
