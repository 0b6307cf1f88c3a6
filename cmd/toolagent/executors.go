package main

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/forgejo"
	"github.com/toolagent/toolagent/internal/executors/gatekeeper"
	"github.com/toolagent/toolagent/internal/executors/hlpdapi"
	"github.com/toolagent/toolagent/internal/health"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/settings"
)

// mainTarget is the name of the gatekeeper target that
// TOOLAGENT_GATEKEEPER_URL (with its token) defines.
const mainTarget = "main"

// GatekeeperTarget is one entry of gatekeeper.targets in the config file.
// Its token is read from a file or from an environment variable named
// here; the config file never holds the token itself.
type GatekeeperTarget struct {
	URL       string `yaml:"url"`
	TokenFile string `yaml:"token_file"`
	TokenEnv  string `yaml:"token_env"`
}

// UnmarshalYAML decodes a target strictly: an unknown key, a token given
// in the file, a value that is not a single string are errors.
func (t *GatekeeperTarget) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping {url, token_file | token_env}", n.Line)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return fmt.Errorf("line %d: key %q is set twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		var dst *string
		switch k.Value {
		case "url":
			dst = &t.URL
		case "token_file":
			dst = &t.TokenFile
		case "token_env":
			dst = &t.TokenEnv
		case "token":
			return fmt.Errorf("line %d: token: a token never goes in the config file; name a file (token_file) or an environment variable (token_env)", k.Line)
		default:
			return fmt.Errorf("line %d: unknown key %q; want url, token_file or token_env", k.Line, k.Value)
		}
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: want a single value, not a %s", v.Line, k.Value, settings.NodeKind(v))
		}
		*dst = v.Value
	}
	return nil
}

var (
	targetNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// validateExecutors checks the executor settings that parse but make no
// sense; it reads no file (newCore does, when it builds the executors).
func (c Config) validateExecutors() []error {
	var errs []error
	if _, err := cron.ParseStandard(c.HealthSchedule); err != nil {
		errs = append(errs, fmt.Errorf("health_schedule %q: %v; want a cron spec such as \"*/5 * * * *\" or \"@every 30s\"", c.HealthSchedule, err))
	}
	if c.HealthTimeout <= 0 {
		errs = append(errs, fmt.Errorf("health_timeout %s: want more than 0", c.HealthTimeout))
	}
	oneToken := func(what, token, file string) {
		if token != "" && file != "" {
			errs = append(errs, fmt.Errorf("%s: both a token and a token file are set; set one", what))
		}
	}
	oneToken("gatekeeper target main (TOOLAGENT_GATEKEEPER_TOKEN, gatekeeper.token_file)", c.GatekeeperToken, c.GatekeeperTokenFile)
	oneToken("hlpd (TOOLAGENT_HLPD_TOKEN, hlpd.token_file)", c.HlpdToken, c.HlpdTokenFile)
	oneToken("forgejo (TOOLAGENT_FORGEJO_TOKEN, forgejo.token_file)", c.ForgejoToken, c.ForgejoTokenFile)
	needsURL := func(what, url string, set ...string) {
		if url == "" && slices.ContainsFunc(set, func(s string) bool { return s != "" }) {
			errs = append(errs, fmt.Errorf("%s is not set, but other settings of that executor are", what))
		}
	}
	needsURL("gatekeeper.url (TOOLAGENT_GATEKEEPER_URL)", c.GatekeeperURL, c.GatekeeperToken, c.GatekeeperTokenFile)
	needsURL("hlpd.url (TOOLAGENT_HLPD_URL)", c.HlpdURL, c.HlpdToken, c.HlpdTokenFile)
	needsURL("forgejo.url (TOOLAGENT_FORGEJO_URL)", c.ForgejoURL, c.ForgejoToken, c.ForgejoTokenFile, c.ForgejoOwner, c.ForgejoRepo)
	for _, name := range slices.Sorted(maps.Keys(c.GatekeeperTargets)) {
		t := c.GatekeeperTargets[name]
		switch {
		case !targetNameRE.MatchString(name):
			errs = append(errs, fmt.Errorf("gatekeeper.targets.%s: a target name is lowercase letters, digits, - and _", name))
		case name == mainTarget && c.GatekeeperURL != "":
			errs = append(errs, fmt.Errorf("gatekeeper.targets.%s: target main is already defined by gatekeeper.url (TOOLAGENT_GATEKEEPER_URL)", name))
		}
		if t.URL == "" {
			errs = append(errs, fmt.Errorf("gatekeeper.targets.%s: url is required", name))
		}
		if t.TokenFile != "" && t.TokenEnv != "" {
			errs = append(errs, fmt.Errorf("gatekeeper.targets.%s: both token_file and token_env are set; set one", name))
		}
		if t.TokenEnv != "" && !envNameRE.MatchString(t.TokenEnv) {
			errs = append(errs, fmt.Errorf("gatekeeper.targets.%s: token_env %q is not an environment variable name", name, t.TokenEnv))
		}
	}
	if c.GatekeeperDefault != "" {
		if _, ok := c.gatekeeperTargets()[c.GatekeeperDefault]; !ok {
			errs = append(errs, fmt.Errorf("gatekeeper.default %q is not a configured target (configured: %s)",
				c.GatekeeperDefault, strings.Join(slices.Sorted(maps.Keys(c.gatekeeperTargets())), ", ")))
		}
	}
	for m, r := range c.HlpdRoutes {
		if _, err := parseHlpdRoute(r); err != nil {
			errs = append(errs, fmt.Errorf("hlpd.routes.%s: %w", m, err))
		}
	}
	return errs
}

// gatekeeperTargets returns every configured target: main from
// gatekeeper.url and the token settings, and gatekeeper.targets.
func (c Config) gatekeeperTargets() map[string]GatekeeperTarget {
	out := maps.Clone(c.GatekeeperTargets)
	if out == nil {
		out = map[string]GatekeeperTarget{}
	}
	if c.GatekeeperURL != "" {
		// The main target's token is c.GatekeeperToken (environment) or
		// the file; remoteExecutors reads it.
		out[mainTarget] = GatekeeperTarget{URL: c.GatekeeperURL, TokenFile: c.GatekeeperTokenFile}
	}
	return out
}

// gatekeeperDefault is the target of gatekeeper tools without `target:`:
// gatekeeper.default, else main when configured, else the only target.
func (c Config) gatekeeperDefault() string {
	targets := c.gatekeeperTargets()
	switch {
	case c.GatekeeperDefault != "":
		return c.GatekeeperDefault
	case c.GatekeeperURL != "":
		return mainTarget
	case len(targets) == 1:
		for name := range targets {
			return name
		}
	}
	return ""
}

// parseHlpdRoute parses "VERB /path/{param}".
func parseHlpdRoute(s string) (hlpdapi.Route, error) {
	verb, path, ok := strings.Cut(strings.TrimSpace(s), " ")
	path = strings.TrimSpace(path)
	if !ok || verb == "" || path == "" {
		return hlpdapi.Route{}, fmt.Errorf("route %q: want \"VERB /path\", e.g. \"GET /v1/items/{id}\"", s)
	}
	return hlpdapi.Route{Verb: verb, Path: path}, nil
}

// readSecret reads a token from file: its content without surrounding
// whitespace. The token itself never appears in an error or a log.
func readSecret(what, file string, log *slog.Logger) (string, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("%s token file: %w", what, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		log.Warn("token file is readable by other users; chmod 600 it", "file", file, "mode", fi.Mode().Perm().String())
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s token file: %w", what, err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("%s token file %s is empty", what, file)
	}
	return tok, nil
}

// remoteExecutors adds to execs the executors configured in cfg —
// gatekeeper, hlpd-api, git-forgejo — and returns the health checker of
// every executor in execs. An executor is added only when configured;
// without it its tools are disabled ("executor X is not configured").
// Errors are configuration errors, reported at start.
func remoteExecutors(execs map[hldp.ExecutorKind]executors.Executor, e env, cfg Config, log *slog.Logger) (*health.Monitor, error) {
	client := &http.Client{} // each call is bounded by its context
	var probes []health.Probe
	gkDefault := cfg.gatekeeperDefault()

	if targets := cfg.gatekeeperTargets(); len(targets) > 0 {
		opts := gatekeeper.Options{Targets: map[string]gatekeeper.Target{}, Default: gkDefault, Client: client,
			Logger: log.With(slog.String("executor", string(hldp.Gatekeeper)))}
		for _, name := range slices.Sorted(maps.Keys(targets)) {
			t := targets[name]
			var tok string
			var err error
			switch {
			case name == mainTarget && cfg.GatekeeperURL != "" && cfg.GatekeeperToken != "":
				tok = cfg.GatekeeperToken
			case t.TokenFile != "":
				tok, err = readSecret("gatekeeper target "+name, t.TokenFile, log)
			case t.TokenEnv != "":
				if tok = e.getenv(t.TokenEnv); tok == "" {
					err = fmt.Errorf("gatekeeper target %s: token_env %s is not set", name, t.TokenEnv)
				}
			}
			if err != nil {
				return nil, err
			}
			opts.Targets[name] = gatekeeper.Target{URL: t.URL, Token: tok}
			// One single-target executor per target, for health only: a
			// target that fails fails only the tools that run on it.
			probes = append(probes, health.Probe{Kind: hldp.Gatekeeper, Target: name, Ex: gatekeeper.New(gatekeeper.Options{
				Targets: map[string]gatekeeper.Target{name: opts.Targets[name]}, Client: client})})
		}
		execs[hldp.Gatekeeper] = gatekeeper.New(opts)
	}

	if cfg.HlpdURL != "" {
		tok := cfg.HlpdToken
		if cfg.HlpdTokenFile != "" {
			var err error
			if tok, err = readSecret("hlpd", cfg.HlpdTokenFile, log); err != nil {
				return nil, err
			}
		}
		header := map[string]string{}
		if tok != "" {
			if http.CanonicalHeaderKey(cfg.HlpdAuthHeader) == "Authorization" {
				header[cfg.HlpdAuthHeader] = "Bearer " + tok
			} else {
				header[cfg.HlpdAuthHeader] = tok
			}
		}
		routes := map[string]hlpdapi.Route{}
		for m, r := range cfg.HlpdRoutes {
			rt, err := parseHlpdRoute(r)
			if err != nil {
				return nil, fmt.Errorf("hlpd.routes.%s: %w", m, err)
			}
			routes[m] = rt
		}
		ex, err := hlpdapi.New(hlpdapi.Options{BaseURL: cfg.HlpdURL, Header: header, Routes: routes, HealthPath: cfg.HlpdHealthPath,
			Client: client, Logger: log.With(slog.String("executor", string(hldp.HlpdAPI)))})
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		execs[hldp.HlpdAPI] = ex
	}

	if cfg.ForgejoURL != "" {
		tok := cfg.ForgejoToken
		if cfg.ForgejoTokenFile != "" {
			var err error
			if tok, err = readSecret("forgejo", cfg.ForgejoTokenFile, log); err != nil {
				return nil, err
			}
		}
		execs[hldp.GitForgejo] = forgejo.New(forgejo.Options{URL: cfg.ForgejoURL, Token: tok, Owner: cfg.ForgejoOwner, Repo: cfg.ForgejoRepo,
			Client: client, Logger: log.With(slog.String("executor", string(hldp.GitForgejo)))})
	}

	for _, kind := range slices.Sorted(maps.Keys(execs)) {
		if kind != hldp.Gatekeeper {
			probes = append(probes, health.Probe{Kind: kind, Ex: execs[kind]})
		}
	}
	sched, err := cron.ParseStandard(cfg.HealthSchedule)
	if err != nil { // validated by loadConfig; a Config built by hand may not be
		return nil, fmt.Errorf("health_schedule %q: %w", cfg.HealthSchedule, err)
	}
	return health.New(health.Options{Probes: probes, GatekeeperDefault: gkDefault, Schedule: sched, Timeout: cfg.HealthTimeout,
		Logger: log.With(slog.String("log", "health"))}), nil
}
