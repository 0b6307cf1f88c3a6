// Command toolagent turns a git repository of tool definitions
// (tools/<name>/TOOL.hdlp) into a live, safe tool catalog: list, show,
// validate and call tools from the command line, or serve them.
//
// This package holds flags, config loading, signals and one file per
// subcommand calling into internal/ (docs/architecture.md); exit codes
// are decided in one place (exitCode).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/host"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// unsetenv: the daemon drops its secrets from its own environment
	// once it has read them (secretEnv).
	e := env{getenv: os.Getenv, unsetenv: os.Unsetenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	err := runEnv(ctx, e, os.Args[1:])
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// env is what a subcommand gets from the process: arguments and streams
// are passed in so tests run subcommands in-process.
type env struct {
	getenv func(string) string
	// unsetenv removes a variable from the process environment; nil in
	// tests, which run subcommands in-process with an environment of
	// their own.
	unsetenv func(string) error
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
}

type command struct {
	name string
	// args is the synopsis after "toolagent NAME [flags]".
	args    string
	summary string
	run     func(ctx context.Context, e env, args []string) error
}

func commands() []command {
	return []command{
		{"serve", "", "run the daemon: HTTP API, MCP, hot reload, auth, metrics", runServe},
		{"mcp", "", "serve MCP over stdin/stdout (--meta-only for very large catalogs)", runMCP},
		{"sync", "", "sync the tools source once (git: clone or fetch), build, save the parse cache; JSON summary", runSync},
		{"gatekeeper", "", "run the gatekeeper server: other hosts' daemons run gatekeeper tools here", runGatekeeper},
		{"list", "", "list the callable tools (--all adds disabled, failed and stale ones)", runList},
		{"show", "NAME", "show one tool's definition, policy, status and JSON Schema", runShow},
		{"call", "NAME [k=v | k:=JSON ...]", "call a tool: params as k=v (converted to the declared type) or --params JSON", runCall},
		{"approvals", "list | show ID | approve ID | deny ID", "decide held calls (a running daemon's, through its API, as its operator)", runApprovals},
		{"audit", "verify | export [--follow]", "the audit trail (store files or postgres): verify its hash chain, or export it as JSON lines (--follow: as it grows, from --cursor-file)", runAudit},
		{"status", "", "the running daemon's status: listen address, tool counts, source, revision, reloads, sandbox", runStatus},
		{"validate", "[DIR | FILE | embedded]", "lint a tools tree or one TOOL.hdlp (--config FILE: a daemon config; --match: the examples): every error, exit 1 on any", runValidate},
		{"new", "NAME", "scaffold tools/NAME/TOOL.hdlp with every field", runNew},
		{"match", "INTENT... | feedback list|clear [TOOL]", "find the 1-3 tools that fit an intent in words; or list or clear what matching learned from use", runMatch},
		{"eval", "--queries FILE", "measure intent matching on a queries.jsonl", runEval},
		{"completion", "bash | zsh | fish", "print a shell completion script", runCompletion},
		{"version", "", "print the build's version (also --version)", runVersion},
		{"doctor", "", "check this host as serve would use it (sandbox, kernel, git, source, store, listen, state, tokens): OK/WARN/FAIL with the fix", runDoctor},
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	return runEnv(ctx, env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}, args)
}

func runEnv(ctx context.Context, e env, args []string) error {
	stdout, stderr := e.stdout, e.stderr
	if len(args) == 0 {
		usage(stderr)
		return usageError{Err: errors.New("no subcommand given")}
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return nil
	case "--version":
		return runVersion(ctx, e, args[1:])
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	msg := fmt.Sprintf("unknown subcommand %q", args[0])
	if near := didYouMean(args[0]); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	return usageError{Err: fmt.Errorf("%s (`toolagent help` lists them)", msg)}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: toolagent <subcommand> [flags] [args]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The tools tree is found as git finds .git (./tools, a parent's tools/, the checkout's")
	fmt.Fprintln(w, "native-repo/tools, else the copy compiled in); --tools DIR names one. While a daemon")
	fmt.Fprintln(w, "runs on the state directory, list, show, call, match, status and approvals ask it.")
	fmt.Fprintln(w, "Run `toolagent <subcommand> -h` for its arguments and flags.")
}

// Exit codes (cli.Exit*, documented in README.md, "A five-minute tour").
const (
	exitOK       = cli.ExitOK
	exitFailed   = cli.ExitFailed
	exitUsage    = cli.ExitUsage
	exitNotFound = cli.ExitNotFound
	exitTimeout  = cli.ExitTimeout
	exitRefused  = cli.ExitRefused
)

// usageError marks bad command-line usage; exitError carries the exit
// code of an outcome already printed.
type (
	usageError = cli.UsageError
	exitError  = cli.ExitError
)

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.Msg != "" {
			fmt.Fprintln(stderr, "toolagent:", ee.Msg)
		}
		return ee.Code
	}
	if errors.Is(err, errFlagHelp) {
		return exitOK // the help was asked for and printed
	}
	fmt.Fprintln(stderr, "toolagent:", err)
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, host.ErrSandboxMode) {
		return exitUsage
	}
	return exitFailed
}

// runVersion prints the build's version: the module version, or devel+
// the VCS revision (the same string as MCP's serverInfo and /v1/status).
func runVersion(_ context.Context, e env, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		writeHelp(e.stdout, "version", flag.NewFlagSet("version", flag.ContinueOnError))
		return nil
	}
	if len(args) > 0 {
		return usageError{Err: fmt.Errorf("version takes no arguments; got %q", args)}
	}
	fmt.Fprintln(e.stdout, "toolagent", daemon.Version())
	return nil
}
