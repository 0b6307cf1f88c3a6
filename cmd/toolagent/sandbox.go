package main

import (
	"flag"
	"runtime/debug"

	"github.com/toolagent/toolagent/internal/host"
)

// sandboxFlag registers --sandbox (default: TOOLAGENT_SANDBOX, else on)
// on a subcommand's own flag set; serve, mcp and sync take it from Config.
func sandboxFlag(fs *flag.FlagSet, e env, mode *string, what string) {
	def := e.getenv("TOOLAGENT_SANDBOX")
	if def == "" {
		def = host.SandboxOn
	}
	fs.StringVar(mode, "sandbox", def, "run "+what+" in a sandbox of its own each: on or off (env TOOLAGENT_SANDBOX; default on)")
}

// secretFiles are the files holding the daemon's secrets; the sandbox
// hides them from every tool (the state directory is hidden as well).
func (cfg Config) secretFiles() []string {
	files := []string{cfg.TokensFile, cfg.WebhookSecretFile, cfg.RepoTokenFile, cfg.RepoSSHKeyFile,
		cfg.GatekeeperTokenFile, cfg.HlpdTokenFile, cfg.ForgejoTokenFile}
	for _, t := range cfg.GatekeeperTargets {
		files = append(files, t.TokenFile)
	}
	var out []string
	for _, f := range files {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// secretEnv names the environment variables holding the daemon's secrets;
// the daemon removes them from its own environment once read.
func (cfg Config) secretEnv() []string {
	out := []string{"TOOLAGENT_TOKENS", "TOOLAGENT_REPO_TOKEN", "TOOLAGENT_GATEKEEPER_TOKEN", "TOOLAGENT_HLPD_TOKEN", "TOOLAGENT_FORGEJO_TOKEN"}
	for _, t := range cfg.GatekeeperTargets {
		if t.TokenEnv != "" {
			out = append(out, t.TokenEnv)
		}
	}
	return out
}

// dropSecretEnv removes the secrets' variables from the process
// environment (no-op in tests, whose env has no unsetenv).
func dropSecretEnv(e env, cfg Config) {
	if e.unsetenv == nil {
		return
	}
	for _, k := range cfg.secretEnv() {
		_ = e.unsetenv(k)
	}
}

// buildVersion is the version of this binary, for MCP's serverInfo: the
// module version of a released build, else "devel" with the VCS revision
// the binary was built from (and "-dirty" for uncommitted changes).
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return "devel"
	}
	return "devel+" + rev + dirty
}
