package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/settings"
)

// Which long-running commands take a setting as a flag (all three read the
// same config file, so every key is accepted there): the HTTP server's
// settings only serve; what only matters when tools run not sync.
var (
	serveOnlyFlags = []string{"mcp-stateless", "listen", "tokens-file", "max-body-bytes", "public-hosts", "allowed-origins", "mcp-allowed-origins", "webhook-secret-file", "run-keep", "stream-reattach-grace"}
	runFlags       = []string{"files-root", "max-concurrent", "shutdown-grace", "sandbox", "sandbox-bwrap", "sandbox-user", "sandbox-max-procs", "sandbox-max-memory", "sandbox-mechanism", "sandbox-uid-base", "sandbox-uids",
		"approval-ttl", "allow-self-approval", "health-schedule", "health-timeout", "vocab",
		"gatekeeper-url", "gatekeeper-token-file", "gatekeeper-default", "hlpd-url", "hlpd-token-file", "hlpd-auth-header", "hlpd-health-path",
		"forgejo-url", "forgejo-token-file", "forgejo-owner", "forgejo-repo"}
)

// flagFor reports whether command takes the setting's flag.
func flagFor(flagName, command string) bool {
	command = strings.Replace(command, "doctor", "serve", 1) // doctor checks what serve would use
	switch {
	case flagName == "store" || flagName == "store-url-env" || flagName == "store-lease":
		return command == "serve" || command == "audit"
	case slices.Contains(serveOnlyFlags, flagName):
		return command == "serve"
	case slices.Contains(runFlags, flagName):
		return command != "sync"
	}
	return true
}

// loadConfig builds the configuration of the long-running command name
// (serve, mcp) from defaults, the config file (--config, or env
// TOOLAGENT_CONFIG), the environment and the flags in args, in rising
// precedence. extra, when not nil, registers the command's own flags. It
// rejects positional arguments.
func loadConfig(e env, name string, args []string, extra func(*flag.FlagSet)) (daemon.Config, error) {
	var cfg daemon.Config
	ld := settings.New(&cfg, settings.Options{
		Include:      func(flag string) bool { return flagFor(flag, name) },
		Placeholders: placeholders,
		Removed:      daemon.RemovedKeys,
		Hint:         daemon.KeyHint,
	})
	fs := newFlagSet(name, e)
	if extra != nil {
		extra(fs)
	}
	configFile := fs.String("config", "", "YAML config `FILE` (env TOOLAGENT_CONFIG); flags and environment override it")
	ld.Register(fs)
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return cfg, err
	}
	if len(pos) > 0 {
		return cfg, usageError{Err: fmt.Errorf("%s takes no arguments; got %q", name, pos)}
	}
	var fe *settings.FlagError
	if err := ld.Apply(cmp.Or(*configFile, e.getenv("TOOLAGENT_CONFIG")), e.getenv); errors.As(err, &fe) {
		return cfg, usageError{Err: err}
	} else if err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// placeholders are the words help writes for the values of the flags
// whose type does not say.
var placeholders = map[string]string{
	"vocab": "FILE", "repo-known-hosts": "FILE", "repo": "URL",
	"tools": "DIR", "state": "DIR", "files-root": "DIR", "listen": "HOST:PORT",
}

// daemonConfig is cfg with what the process gives the daemon of role.
func daemonConfig(e env, cfg daemon.Config, role daemon.Role) daemon.Config {
	cfg.Role = role
	cfg.Logger, _ = cli.NewLogger(cfg.LogFormat, cfg.LogLevel, e.stderr) // Config.Validate checked both
	cfg.Getenv, cfg.Unsetenv = e.getenv, e.unsetenv
	cfg.Embedded = embeddedTools()
	return cfg
}
