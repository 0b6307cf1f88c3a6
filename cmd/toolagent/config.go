package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolagent/toolagent/internal/api"
	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/settings"
)

// Config is the configuration of `toolagent serve`. Each field is one
// setting, described entirely by its tags:
//
//	yaml    the key in the --config file ("-": not allowed there)
//	env     the environment variable
//	flag    the command-line flag ("" or "-": none)
//	default the value when nothing else sets it
//	usage   what it means (flag help; README "Configuration" repeats it)
//
// Precedence: flag > environment > config file > default. Adding a setting
// is one field here and one row in the README table (a test checks the
// table against these tags).
type Config struct {
	Listen            string             `yaml:"listen" env:"TOOLAGENT_LISTEN" flag:"listen" default:"127.0.0.1:8765" usage:"address to listen on, host:port (port 0: any free port)"`
	Tools             string             `yaml:"tools" env:"TOOLAGENT_TOOLS" flag:"tools" default:"" usage:"tools tree DIR, watched for changes (default: found as git finds .git: this directory if it holds */TOOL.hdlp, else ./tools, else the nearest parent's tools/, else the checkout's native-repo/tools, else the embedded copy)"`
	State             string             `yaml:"state" env:"TOOLAGENT_STATE" flag:"state" default:"" usage:"state DIR (default $XDG_STATE_HOME/toolagent or ~/.local/state/toolagent)"`
	FilesRoot         string             `yaml:"files_root" env:"TOOLAGENT_FILES_ROOT" flag:"files-root" default:"" usage:"root DIR of the file-read and file-write tools (default STATE/files)"`
	TokensFile        string             `yaml:"tokens_file" env:"TOOLAGENT_TOKENS_FILE" flag:"tokens-file" default:"" usage:"FILE of API tokens, one name:role:secret a line"`
	Tokens            string             `yaml:"-" env:"TOOLAGENT_TOKENS" flag:"-" default:"" usage:"API tokens name:role:secret, comma-separated (environment only: secrets never go in flags or config files)"`
	LogFormat         string             `yaml:"log_format" env:"TOOLAGENT_LOG_FORMAT" flag:"log-format" default:"text" usage:"log format: text or json"`
	LogLevel          string             `yaml:"log_level" env:"TOOLAGENT_LOG_LEVEL" flag:"log-level" default:"info" usage:"least log level: debug, info, warn or error"`
	MaxConcurrent     int                `yaml:"max_concurrent" env:"TOOLAGENT_MAX_CONCURRENT" flag:"max-concurrent" default:"64" usage:"most tool calls running at once; more get status busy (HTTP 429), not a queue"`
	ShutdownGrace     time.Duration      `yaml:"shutdown_grace" env:"TOOLAGENT_SHUTDOWN_GRACE" flag:"shutdown-grace" default:"10s" usage:"on SIGTERM/SIGINT, how long running calls may finish before they are cancelled"`
	MaxBodyBytes      int64              `yaml:"max_body_bytes" env:"TOOLAGENT_MAX_BODY_BYTES" flag:"max-body-bytes" default:"1048576" usage:"largest request body in bytes (HTTP 413 beyond)"`
	ReloadDebounce    time.Duration      `yaml:"reload_debounce" env:"TOOLAGENT_RELOAD_DEBOUNCE" flag:"reload-debounce" default:"100ms" usage:"reload once the tools tree has been quiet this long"`
	ReloadMaxWait     time.Duration      `yaml:"reload_max_wait" env:"TOOLAGENT_RELOAD_MAX_WAIT" flag:"reload-max-wait" default:"1s" usage:"reload at the latest this long after the first change of a burst"`
	RetryMin          time.Duration      `yaml:"reload_retry_min" env:"TOOLAGENT_RELOAD_RETRY_MIN" flag:"reload-retry-min" default:"1s" usage:"first retry after a failed reload; doubles per failure"`
	RetryMax          time.Duration      `yaml:"reload_retry_max" env:"TOOLAGENT_RELOAD_RETRY_MAX" flag:"reload-retry-max" default:"1m" usage:"longest wait between reload retries"`
	Sandbox           string             `yaml:"sandbox" env:"TOOLAGENT_SANDBOX" flag:"sandbox" default:"on" usage:"run every tool process in a sandbox of its own: on, or off (no sandbox at all: logged as a warning at start and shown in /v1/status)"`
	SandboxMechanism  string             `yaml:"sandbox_mechanism" env:"TOOLAGENT_SANDBOX_MECHANISM" flag:"sandbox-mechanism" default:"auto" usage:"what makes each call's sandbox: landlock (needs root and a kernel with Landlock), bubblewrap, or auto (landlock where it can run, else bubblewrap)"`
	SandboxBwrap      string             `yaml:"sandbox_bwrap" env:"TOOLAGENT_SANDBOX_BWRAP" flag:"sandbox-bwrap" default:"bwrap" usage:"the bubblewrap program (a name is looked up in /usr/local/bin:/usr/bin:/bin)"`
	SandboxUser       string             `yaml:"sandbox_user" env:"TOOLAGENT_SANDBOX_USER" flag:"sandbox-user" default:"" usage:"user (name or uid) every tool process runs as (default: with landlock a user of its own per call, see sandbox_uid_base; with bubblewrap the daemon's own user, which must then not be root)"`
	SandboxUIDBase    int64              `yaml:"sandbox_uid_base" env:"TOOLAGENT_SANDBOX_UID_BASE" flag:"sandbox-uid-base" default:"2000000000" usage:"with landlock, where the blocks of ids of calls start: a daemon claims the first free block of sandbox_uids ids from here; its first id is the group of its calls, the others their users (one per running call); no file on the host should belong to them"`
	SandboxUIDs       int                `yaml:"sandbox_uids" env:"TOOLAGENT_SANDBOX_UIDS" flag:"sandbox-uids" default:"4096" usage:"the size of a block of ids (see sandbox_uid_base): one less than the most calls of one daemon running at once in sandboxes"`
	SandboxMaxProcs   int                `yaml:"sandbox_max_procs" env:"TOOLAGENT_SANDBOX_MAX_PROCS" flag:"sandbox-max-procs" default:"256" usage:"most processes (and threads) of one call (its control group's pids limit, else RLIMIT_NPROC)"`
	SandboxMaxMemory  int64              `yaml:"sandbox_max_memory" env:"TOOLAGENT_SANDBOX_MAX_MEMORY" flag:"sandbox-max-memory" default:"4294967296" usage:"most address space of one process of a call, in bytes (RLIMIT_AS)"`
	MCPStateless      bool               `yaml:"mcp_stateless" env:"TOOLAGENT_MCP_STATELESS" flag:"mcp-stateless" default:"false" usage:"serve /mcp without sessions (the SDK's stateless mode): any replica answers any request, so a load balancer needs no sticky sessions; GET /mcp then carries list_changed alone"`
	PublicHosts       []string           `yaml:"public_hosts" env:"TOOLAGENT_PUBLIC_HOSTS" flag:"public-hosts" default:"" usage:"names clients reach the daemon by besides loopback ones and the listen address: host (any port) or host:port, comma-separated; a request with any other Host gets 421 (against DNS rebinding)"`
	AllowedOrigins    []string           `yaml:"allowed_origins" env:"TOOLAGENT_ALLOWED_ORIGINS" flag:"allowed-origins" default:"" usage:"browser origins (scheme://host[:port], comma-separated) that may use the daemon (/v1, /mcp, /ui) besides its own pages; a request with any other Origin gets 403"`
	MCPAllowedOrigins []string           `yaml:"mcp_allowed_origins" env:"TOOLAGENT_MCP_ALLOWED_ORIGINS" flag:"mcp-allowed-origins" default:"" usage:"the former name of allowed_origins, still read: its origins are allowed like those of allowed_origins, on every route"`
	Profiles          map[string]Profile `yaml:"profiles" env:"TOOLAGENT_PROFILES" flag:"-" default:"" usage:"named MCP surfaces: NAME: {tools: [GLOB...], tags: [TAG...]}, served at /mcp/NAME and by mcp --profile NAME"`
	VocabFile         string             `yaml:"vocab_file" env:"TOOLAGENT_VOCAB" flag:"vocab" default:"" usage:"extra intent-matching vocabulary FILE, merged with the built-in one (format: internal/match/vocab.txt)"`

	// Approvals and policy (approvals.go).
	ReattachGrace       time.Duration     `yaml:"stream_reattach_grace" env:"TOOLAGENT_STREAM_REATTACH_GRACE" flag:"stream-reattach-grace" default:"10s" usage:"how long a streaming call goes on once no client follows it, so a dropped connection can re-attach; then it is cancelled as a hung-up call"`
	RunKeep             time.Duration     `yaml:"run_keep" env:"TOOLAGENT_RUN_KEEP" flag:"run-keep" default:"10m" usage:"how long a call's run (its output events and result) is kept after it ends, for GET /v1/runs/{id}"`
	Store               string            `yaml:"store" env:"TOOLAGENT_STORE" flag:"store" default:"files" usage:"where held calls (approvals) live: files (STATE/approvals, one daemon), postgres (the database whose URL is in the variable store_url_env names; replicas share it), or a postgres:// URL without a password"`
	StoreURLEnv         string            `yaml:"store_url_env" env:"TOOLAGENT_STORE_URL_ENV" flag:"store-url-env" default:"TOOLAGENT_STORE_URL" usage:"the environment variable that holds the database URL for store postgres (it may carry the password, which never goes in a flag or this file)"`
	StoreLease          time.Duration     `yaml:"store_lease" env:"TOOLAGENT_STORE_LEASE" flag:"store-lease" default:"30s" usage:"with store postgres: how long a replica's claim on a running approved call, or on a concurrency slot, holds without renewal (renewed every third of it); a dead replica's claims end after it"`
	ApprovalTTL         time.Duration     `yaml:"approval_ttl" env:"TOOLAGENT_APPROVAL_TTL" flag:"approval-ttl" default:"15m" usage:"how long a held call waits for a decision, and an approval for its run; then it expires"`
	AllowSelfApproval   bool              `yaml:"allow_self_approval" env:"TOOLAGENT_ALLOW_SELF_APPROVAL" flag:"allow-self-approval" default:"false" usage:"let the caller of a held call approve it itself (the operator token is the usual way for one person on a host)"`
	ShellPolicyCommands map[string]string `yaml:"shell_policy.commands" env:"TOOLAGENT_SHELL_POLICY_COMMANDS" flag:"-" default:"" usage:"operator override of the default shell policy by command: NAME: allow | confirm | deny"`
	ShellPolicyClasses  map[string]string `yaml:"shell_policy.classes" env:"TOOLAGENT_SHELL_POLICY_CLASSES" flag:"-" default:"" usage:"operator override of the default shell policy by class (read, write, delete, network, ...): CLASS: allow | confirm | deny"`

	// The git source (source_git.go). Secrets come from files or the
	// environment only.
	Repo              string        `yaml:"repo" env:"TOOLAGENT_REPO" flag:"repo" default:"" usage:"git URL of the tools repository (https://, http://, ssh:// or user@host:path), cloned under STATE/repo and synced on the schedule and the push webhook; instead of tools"`
	Branch            string        `yaml:"branch" env:"TOOLAGENT_BRANCH" flag:"branch" default:"main" usage:"branch of repo to serve"`
	ToolsPath         string        `yaml:"tools_path" env:"TOOLAGENT_TOOLS_PATH" flag:"tools-path" default:"tools" usage:"folder of the tools inside repo, relative to its root (. for the root)"`
	Schedule          string        `yaml:"schedule" env:"TOOLAGENT_SCHEDULE" flag:"schedule" default:"@every 30s" usage:"when to sync repo: @every DURATION, a 5-field cron spec, or 6 fields with seconds first; off for never"`
	SyncTimeout       time.Duration `yaml:"sync_timeout" env:"TOOLAGENT_SYNC_TIMEOUT" flag:"sync-timeout" default:"1m" usage:"deadline of one clone or fetch of repo"`
	WebhookSecretFile string        `yaml:"webhook_secret_file" env:"TOOLAGENT_WEBHOOK_SECRET_FILE" flag:"webhook-secret-file" default:"" usage:"FILE holding the secret of the push webhook POST /v1/hooks/forgejo (HMAC-SHA256); no file, no webhook"`
	RepoTokenFile     string        `yaml:"repo_token_file" env:"TOOLAGENT_REPO_TOKEN_FILE" flag:"repo-token-file" default:"" usage:"FILE holding the access token for repo over HTTP(S), read before every sync"`
	RepoToken         string        `yaml:"-" env:"TOOLAGENT_REPO_TOKEN" flag:"-" default:"" usage:"access token for repo over HTTP(S) (environment only)"`
	RepoUsername      string        `yaml:"repo_username" env:"TOOLAGENT_REPO_USERNAME" flag:"repo-username" default:"" usage:"HTTP user name sent with the token (default toolagent; Forgejo accepts any)"`
	RepoSSHKeyFile    string        `yaml:"repo_ssh_key_file" env:"TOOLAGENT_REPO_SSH_KEY_FILE" flag:"repo-ssh-key-file" default:"" usage:"FILE holding the SSH private key for an ssh:// or user@host:path repo"`
	RepoKnownHosts    string        `yaml:"repo_known_hosts" env:"TOOLAGENT_REPO_KNOWN_HOSTS" flag:"repo-known-hosts" default:"" usage:"known_hosts FILE the SSH server's key is checked against (default ~/.ssh/known_hosts)"`

	// Executors other than shell (executors.go). A key "a.b" is written
	// as a section in the config file (a: {b: ...}). Tokens come from the
	// environment or files only.
	HealthSchedule      string                      `yaml:"health_schedule" env:"TOOLAGENT_HEALTH_SCHEDULE" flag:"health-schedule" default:"@every 30s" usage:"when to check the executors' health: a cron spec or @every DURATION; a change re-checks the tools without a restart"`
	HealthTimeout       time.Duration               `yaml:"health_timeout" env:"TOOLAGENT_HEALTH_TIMEOUT" flag:"health-timeout" default:"10s" usage:"how long one executor health check may take"`
	GatekeeperURL       string                      `yaml:"gatekeeper.url" env:"TOOLAGENT_GATEKEEPER_URL" flag:"gatekeeper-url" default:"" usage:"URL of the gatekeeper server of target main"`
	GatekeeperToken     string                      `yaml:"-" env:"TOOLAGENT_GATEKEEPER_TOKEN" flag:"-" default:"" usage:"bearer token of gatekeeper target main (environment only)"`
	GatekeeperTokenFile string                      `yaml:"gatekeeper.token_file" env:"TOOLAGENT_GATEKEEPER_TOKEN_FILE" flag:"gatekeeper-token-file" default:"" usage:"FILE holding the bearer token of gatekeeper target main"`
	GatekeeperDefault   string                      `yaml:"gatekeeper.default" env:"TOOLAGENT_GATEKEEPER_DEFAULT" flag:"gatekeeper-default" default:"" usage:"gatekeeper target of the tools that name none (default: main, or the only target)"`
	GatekeeperTargets   map[string]GatekeeperTarget `yaml:"gatekeeper.targets" env:"TOOLAGENT_GATEKEEPER_TARGETS" flag:"-" default:"" usage:"more gatekeeper targets: NAME: {url, token_file or token_env}"`
	HlpdURL             string                      `yaml:"hlpd.url" env:"TOOLAGENT_HLPD_URL" flag:"hlpd-url" default:"" usage:"base URL of the HLDP API (hlpd-api executor)"`
	HlpdToken           string                      `yaml:"-" env:"TOOLAGENT_HLPD_TOKEN" flag:"-" default:"" usage:"token of the HLDP API (environment only)"`
	HlpdTokenFile       string                      `yaml:"hlpd.token_file" env:"TOOLAGENT_HLPD_TOKEN_FILE" flag:"hlpd-token-file" default:"" usage:"FILE holding the token of the HLDP API"`
	HlpdAuthHeader      string                      `yaml:"hlpd.auth_header" env:"TOOLAGENT_HLPD_AUTH_HEADER" flag:"hlpd-auth-header" default:"Authorization" usage:"header carrying the HLDP API token (Authorization: Bearer TOKEN; any other header: the bare token)"`
	HlpdRoutes          map[string]string           `yaml:"hlpd.routes" env:"TOOLAGENT_HLPD_ROUTES" flag:"-" default:"" usage:"routes of hlpd-api methods: METHOD: \"VERB /path/{param}\""`
	HlpdHealthPath      string                      `yaml:"hlpd.health_path" env:"TOOLAGENT_HLPD_HEALTH_PATH" flag:"hlpd-health-path" default:"/healthz" usage:"path of the HLDP API's health check (GET, 2xx)"`
	ForgejoURL          string                      `yaml:"forgejo.url" env:"TOOLAGENT_FORGEJO_URL" flag:"forgejo-url" default:"" usage:"base URL of the Forgejo/Gitea server (git-forgejo executor)"`
	ForgejoToken        string                      `yaml:"-" env:"TOOLAGENT_FORGEJO_TOKEN" flag:"-" default:"" usage:"Forgejo access token (environment only)"`
	ForgejoTokenFile    string                      `yaml:"forgejo.token_file" env:"TOOLAGENT_FORGEJO_TOKEN_FILE" flag:"forgejo-token-file" default:"" usage:"FILE holding the Forgejo access token"`
	ForgejoOwner        string                      `yaml:"forgejo.owner" env:"TOOLAGENT_FORGEJO_OWNER" flag:"forgejo-owner" default:"" usage:"default repository owner of git-forgejo tools"`
	ForgejoRepo         string                      `yaml:"forgejo.repo" env:"TOOLAGENT_FORGEJO_REPO" flag:"forgejo-repo" default:"" usage:"default repository name of git-forgejo tools"`
}

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
func loadConfig(e env, name string, args []string, extra func(*flag.FlagSet)) (Config, error) {
	var cfg Config
	ld := settings.New(&cfg, settings.Options{
		Include:      func(flag string) bool { return flagFor(flag, name) },
		Placeholders: placeholders,
		Removed:      removedKeys,
		Hint: func(key string) string {
			if strings.Contains(key, "token") && !strings.Contains(key, "file") {
				return "tokens are read from tokens_file or the environment (TOOLAGENT_TOKENS), never from a config file"
			}
			return ""
		},
	})
	fs := newFlagSet(name, e)
	if extra != nil {
		extra(fs)
	}
	configFile := fs.String("config", "", "YAML config `FILE` (env TOOLAGENT_CONFIG); flags and environment override it")
	ld.Register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return cfg, err
	}
	if len(pos) > 0 {
		return cfg, usageError{fmt.Errorf("%s takes no arguments; got %q", name, pos)}
	}
	var fe *settings.FlagError
	if err := ld.Apply(cmp.Or(*configFile, e.getenv("TOOLAGENT_CONFIG")), e.getenv); errors.As(err, &fe) {
		return cfg, usageError{err}
	} else if err != nil {
		return cfg, err
	}
	return cfg, cfg.validate()
}

// placeholders are the words help writes for the values of the flags
// whose type does not say.
var placeholders = map[string]string{
	"vocab": "FILE", "repo-known-hosts": "FILE", "repo": "URL",
	"tools": "DIR", "state": "DIR", "files-root": "DIR", "listen": "HOST:PORT",
}

// validate checks values that parse but make no sense.
func (c Config) validate() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.Profiles)) {
		if !profileName.MatchString(name) {
			errs = append(errs, fmt.Errorf("profiles: %q is not a profile name; want 1-64 of a-z 0-9 - (it is a URL path segment: /mcp/NAME)", name))
		}
		if err := c.Profiles[name].scope().Check(); err != nil {
			errs = append(errs, fmt.Errorf("profiles %s: %w", name, err))
		}
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen %q: want host:port, such as 127.0.0.1:8765 (port 0: any free port): %v", c.Listen, err))
	} else if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		errs = append(errs, fmt.Errorf("listen %q: the port %q is not a number from 0 to 65535", c.Listen, port))
	}
	if err := c.guardOptions().Check(); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log_format %q: want text or json", c.LogFormat))
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(c.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("log_level %q: want debug, info, warn or error", c.LogLevel))
	}
	if c.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("shutdown_grace %s: want 0 or more", c.ShutdownGrace))
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, fmt.Errorf("max_body_bytes %d: want more than 0", c.MaxBodyBytes))
	}
	if c.MaxConcurrent < 1 {
		errs = append(errs, fmt.Errorf("max_concurrent %d: want 1 or more", c.MaxConcurrent))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"reload_debounce", c.ReloadDebounce}, {"reload_max_wait", c.ReloadMaxWait}, {"reload_retry_min", c.RetryMin}, {"reload_retry_max", c.RetryMax}, {"run_keep", c.RunKeep}, {"stream_reattach_grace", c.ReattachGrace}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: want more than 0", d.name, d.v))
		}
	}
	if c.Store != "files" && c.Store != "postgres" {
		if err := pgstore.CheckURL(c.Store); err != nil {
			errs = append(errs, fmt.Errorf("store %q: want files, postgres or a postgres:// URL without a password: %v", redactStore(c.Store), err))
		}
	}
	if c.StoreLease < time.Second {
		errs = append(errs, fmt.Errorf("store_lease %s: want at least 1s", c.StoreLease))
	}
	if c.ApprovalTTL <= 0 {
		errs = append(errs, fmt.Errorf("approval_ttl %s: want more than 0", c.ApprovalTTL))
	}
	switch c.SandboxMechanism {
	case "", "auto", proc.MechanismLandlock, proc.MechanismBubblewrap:
	default:
		errs = append(errs, fmt.Errorf("sandbox_mechanism %q: want auto, %s or %s", c.SandboxMechanism, proc.MechanismLandlock, proc.MechanismBubblewrap))
	}
	if c.SandboxUIDBase <= 0 || c.SandboxUIDs <= 0 || c.SandboxUIDBase+int64(c.SandboxUIDs) >= 1<<32-1 {
		errs = append(errs, fmt.Errorf("sandbox_uid_base %d and sandbox_uids %d: want a base above 0 and a count above 0 that stay below uid 4294967295", c.SandboxUIDBase, c.SandboxUIDs))
	}
	if _, err := c.shellPolicy(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateExecutors()...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// removedKeys are settings of earlier versions, and why they are gone.
var removedKeys = map[string]string{
	"sandbox_reuse": "a sandbox serves exactly one call and is never handed to another (docs/security.md); delete the key",
}

// guardOptions are the HTTP surface's settings as api.Guard takes them;
// serve adds the listener's addresses.
func (c Config) guardOptions() api.GuardOptions {
	return api.GuardOptions{PublicHosts: c.PublicHosts, AllowedOrigins: append(slices.Clone(c.AllowedOrigins), c.MCPAllowedOrigins...)}
}

// redactStore is the store setting as it may be shown: a URL's password
// replaced.
func redactStore(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
