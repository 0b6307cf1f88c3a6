package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/toolagent/toolagent/internal/proc"
)

// Sandbox modes (--sandbox).
const (
	sandboxOn  = "on"
	sandboxOff = "off"
)

// sandboxFlag registers --sandbox (default: TOOLAGENT_SANDBOX, else on)
// on a subcommand's own flag set; serve, mcp and sync take it from Config.
func sandboxFlag(fs *flag.FlagSet, e env, mode *string, what string) {
	def := e.getenv("TOOLAGENT_SANDBOX")
	if def == "" {
		def = sandboxOn
	}
	fs.StringVar(mode, "sandbox", def, "run "+what+" in a sandbox of its own each: on or off (env TOOLAGENT_SANDBOX; default on)")
}

// openSandbox returns the sandbox mode asks for: nil when it is off, and
// NewSandbox's error (it names what is missing) when it cannot be built.
func openSandbox(mode string, opts proc.SandboxOptions) (*proc.Sandbox, error) {
	switch mode {
	case sandboxOff:
		return nil, nil
	case "", sandboxOn:
		sb, err := proc.NewSandbox(opts)
		if err != nil {
			return nil, err
		}
		if sb.Mechanism() == proc.MechanismBubblewrap && opts.User == nil && os.Geteuid() == 0 {
			sb.Close()
			return nil, fmt.Errorf("%w: the daemon runs as root and its sandbox is bubblewrap, whose tools would run as root: name a user for them (sandbox_user), or let it use landlock (sandbox_mechanism, which needs a kernel with Landlock); tools never run as the host's root", proc.ErrSandbox)
		}
		return sb, nil
	}
	return nil, usageError{fmt.Errorf("--sandbox: want on or off, got %q", mode)}
}

// logSandbox says at start what runs the processes of a subcommand: the
// sandbox, or a warning that there is none.
func logSandbox(log *slog.Logger, sb *proc.Sandbox, what string) {
	if sb == nil {
		log.Warn("the sandbox is off (--sandbox=off): "+what+" run unconfined, with this process's view of the host's files, network and processes",
			"flag", "--sandbox=off")
		return
	}
	log.Info("sandbox", "mechanism", sb.Mechanism(), "version", sb.Version(), "hidden", len(sb.Hidden()), "isolation", "a sandbox per call")
}

// sandboxMechanism maps sandbox_mechanism to proc's: "auto" chooses.
func sandboxMechanism(m string) string {
	if m == "auto" {
		return ""
	}
	return m
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

// sandboxUser resolves --sandbox-user (a name or a uid) to credentials;
// "" is nil: the daemon's own user.
func sandboxUser(name string) (*syscall.Credential, error) {
	if name == "" {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr != nil {
			return nil, fmt.Errorf("--sandbox-user %q: %w", name, err)
		}
		if u, err = user.LookupId(name); err != nil {
			// A bare uid without a passwd entry: its gid is the uid.
			uid, _ := strconv.ParseUint(name, 10, 32)
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}, nil
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--sandbox-user %q: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--sandbox-user %q: gid %q: %w", name, u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
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
