package daemon

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"

	"github.com/robfig/cron/v3"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/forgejo"
	"github.com/toolagent/toolagent/internal/executors/gatekeeper"
	"github.com/toolagent/toolagent/internal/executors/hlpdapi"
	"github.com/toolagent/toolagent/internal/health"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/telemetry"
)

// remoteExecutors adds to execs the executors configured in cfg —
// gatekeeper, hlpd-api, git-forgejo — and returns the health checker of
// every executor in execs. An executor is added only when configured;
// without it its tools are disabled ("executor X is not configured").
// Errors are configuration errors, reported at start.
func remoteExecutors(execs map[hldp.ExecutorKind]executors.Executor, cfg Config, log *slog.Logger) (*health.Monitor, error) {
	client := &http.Client{Transport: telemetry.Transport(nil)} // each call is bounded by its context; traced when tracing is on
	var probes []health.Probe
	gkDefault := cfg.DefaultTarget()

	if targets := cfg.Targets(); len(targets) > 0 {
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
				tok, err = host.ReadSecret("gatekeeper target "+name, t.TokenFile, log)
			case t.TokenEnv != "":
				if tok = cfg.getenv(t.TokenEnv); tok == "" {
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
			if tok, err = host.ReadSecret("hlpd", cfg.HlpdTokenFile, log); err != nil {
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
			if tok, err = host.ReadSecret("forgejo", cfg.ForgejoTokenFile, log); err != nil {
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
