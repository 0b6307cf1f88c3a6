package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"

	"github.com/toolagent/toolagent/internal/api"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/embed"
	"github.com/toolagent/toolagent/internal/executors/hlpdapi"
	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/policy"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/scan"
	"github.com/toolagent/toolagent/internal/settings"
)

// Config is the configuration of the daemon. Each field up to Role is one
// setting, described entirely by its tags (internal/settings reads them):
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
	SandboxMaxMemory  int64              `yaml:"sandbox_max_memory" env:"TOOLAGENT_SANDBOX_MAX_MEMORY" flag:"sandbox-max-memory" default:"4294967296" usage:"most memory of one call, in bytes: all its processes together, where a control group enforces it (memory.max; a result names the limit it hit), else the address space of each process (RLIMIT_AS)"`
	MCPStateless      bool               `yaml:"mcp_stateless" env:"TOOLAGENT_MCP_STATELESS" flag:"mcp-stateless" default:"false" usage:"serve /mcp without sessions for clients of the 2025 MCP revisions too (2026-07-28 clients never have sessions): any replica answers any request, so a load balancer needs no sticky sessions; GET /mcp then carries list_changed alone"`
	PublicHosts       []string           `yaml:"public_hosts" env:"TOOLAGENT_PUBLIC_HOSTS" flag:"public-hosts" default:"" usage:"names clients reach the daemon by besides loopback ones and the listen address: host (any port) or host:port, comma-separated; a request with any other Host gets 421 (against DNS rebinding)"`
	AllowedOrigins    []string           `yaml:"allowed_origins" env:"TOOLAGENT_ALLOWED_ORIGINS" flag:"allowed-origins" default:"" usage:"browser origins (scheme://host[:port], comma-separated) that may use the daemon (/v1, /mcp, /ui) besides its own pages; a request with any other Origin gets 403"`
	MCPAllowedOrigins []string           `yaml:"mcp_allowed_origins" env:"TOOLAGENT_MCP_ALLOWED_ORIGINS" flag:"mcp-allowed-origins" default:"" usage:"the former name of allowed_origins, still read: its origins are allowed like those of allowed_origins, on every route"`
	Profiles          map[string]Profile `yaml:"profiles" env:"TOOLAGENT_PROFILES" flag:"-" default:"" usage:"named MCP surfaces: NAME: {tools: [GLOB...], tags: [TAG...]}, served at /mcp/NAME and by mcp --profile NAME"`
	VocabFile         string             `yaml:"vocab_file" env:"TOOLAGENT_VOCAB" flag:"vocab" default:"" usage:"extra intent-matching vocabulary FILE, merged with the built-in one (format: internal/match/vocab.txt)"`

	// The optional embeddings backend of matching (internal/embed).
	EmbeddingsURL       string        `yaml:"match_embeddings.url" env:"TOOLAGENT_MATCH_EMBEDDINGS_URL" flag:"-" default:"" usage:"base URL of an OpenAI-compatible embeddings endpoint (POST URL/v1/embeddings: Ollama, llama.cpp server, TEI, vLLM) whose ranking is fused with the lexical one; unset: lexical matching alone"`
	EmbeddingsModel     string        `yaml:"match_embeddings.model" env:"TOOLAGENT_MATCH_EMBEDDINGS_MODEL" flag:"-" default:"" usage:"the model name sent to the embeddings endpoint"`
	EmbeddingsTimeout   time.Duration `yaml:"match_embeddings.timeout" env:"TOOLAGENT_MATCH_EMBEDDINGS_TIMEOUT" flag:"-" default:"300ms" usage:"how long a query waits for its vector; then it is answered lexically, saying so"`
	EmbeddingsWeight    float64       `yaml:"match_embeddings.weight" env:"TOOLAGENT_MATCH_EMBEDDINGS_WEIGHT" flag:"-" default:"0.1" usage:"weight of the embeddings' ranking in the fusion, the lexical one's being 1"`
	EmbeddingsLanguages []string      `yaml:"match_embeddings.languages" env:"TOOLAGENT_MATCH_EMBEDDINGS_LANGUAGES" flag:"-" default:"" usage:"the model's languages (en, zh): a request in another is matched lexically alone (default: every request is fused)"`
	EmbeddingsKeyFile   string        `yaml:"match_embeddings.key_file" env:"TOOLAGENT_MATCH_EMBEDDINGS_KEY_FILE" flag:"-" default:"" usage:"FILE holding the embeddings endpoint's API key (sent as a bearer token)"`
	EmbeddingsKey       string        `yaml:"-" env:"TOOLAGENT_MATCH_EMBEDDINGS_KEY" flag:"-" default:"" usage:"the embeddings endpoint's API key (environment only)"`

	// Approvals and policy.
	ReattachGrace       time.Duration     `yaml:"stream_reattach_grace" env:"TOOLAGENT_STREAM_REATTACH_GRACE" flag:"stream-reattach-grace" default:"10s" usage:"how long a streaming call goes on once no client follows it, so a dropped connection can re-attach; then it is cancelled as a hung-up call"`
	StallWindow         time.Duration     `yaml:"stream_stall_window" env:"TOOLAGENT_STREAM_STALL_WINDOW" flag:"stream-stall-window" default:"10s" usage:"how long a streaming call's output waits for a client that stopped reading before events are dropped for it (it then gets a gap event with the bytes it missed); a client that reads loses nothing"`
	RunKeep             time.Duration     `yaml:"run_keep" env:"TOOLAGENT_RUN_KEEP" flag:"run-keep" default:"10m" usage:"how long a call's run (its output events and result) is kept after it ends, for GET /v1/runs/{id}"`
	Store               string            `yaml:"store" env:"TOOLAGENT_STORE" flag:"store" default:"files" usage:"where held calls (approvals) live: files (STATE/approvals, one daemon), postgres (the database whose URL is in the variable store_url_env names; replicas share it), or a postgres:// URL without a password"`
	StoreURLEnv         string            `yaml:"store_url_env" env:"TOOLAGENT_STORE_URL_ENV" flag:"store-url-env" default:"TOOLAGENT_STORE_URL" usage:"the environment variable that holds the database URL for store postgres (it may carry the password, which never goes in a flag or this file)"`
	StoreLease          time.Duration     `yaml:"store_lease" env:"TOOLAGENT_STORE_LEASE" flag:"store-lease" default:"30s" usage:"with store postgres: how long a replica's claim on a running approved call, or on a concurrency slot, holds without renewal (renewed every third of it); a dead replica's claims end after it"`
	ApprovalTTL         time.Duration     `yaml:"approval_ttl" env:"TOOLAGENT_APPROVAL_TTL" flag:"approval-ttl" default:"15m" usage:"how long a held call waits for a decision, and an approval for its run; then it expires"`
	AllowSelfApproval   bool              `yaml:"allow_self_approval" env:"TOOLAGENT_ALLOW_SELF_APPROVAL" flag:"allow-self-approval" default:"false" usage:"let a caller with the approve role approve its own held call (the operator confirms their own without it)"`
	ShellPolicyCommands map[string]string `yaml:"shell_policy.commands" env:"TOOLAGENT_SHELL_POLICY_COMMANDS" flag:"-" default:"" usage:"operator override of the default shell policy by command: NAME: allow | confirm | deny"`
	ShellPolicyClasses  map[string]string `yaml:"shell_policy.classes" env:"TOOLAGENT_SHELL_POLICY_CLASSES" flag:"-" default:"" usage:"operator override of the default shell policy by class (read, write, delete, network, ...): CLASS: allow | confirm | deny"`

	// The git source (source.go). Secrets come from files or the
	// environment only.
	Repo              string        `yaml:"repo" env:"TOOLAGENT_REPO" flag:"repo" default:"" usage:"git URL of the tools repository (https://, http://, ssh:// or user@host:path; or a local path or file:// URL), cloned under STATE/repo and synced on the schedule and the push webhook; instead of tools"`
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
	RepoHistory       bool          `yaml:"repo_history" env:"TOOLAGENT_REPO_HISTORY" flag:"repo-history" default:"false" usage:"keep repo's whole history in the clone, not its head commit alone, so the console shows who changed each tool, when and why, with diffs (always on with trusted_signers or trusted_keyring)"`
	// Trusted definitions (trust.go): a tool is callable only if an
	// allowed key signed the commit that last changed its folder.
	TrustedSigners string `yaml:"trusted_signers" env:"TOOLAGENT_TRUSTED_SIGNERS" flag:"trusted-signers" default:"" usage:"allowed_signers FILE (git's format; toolagent-paths=GLOB,... in a key's comment limits it to those folders): a tool is callable only if the commit that last changed its folder is signed by one of these SSH keys, valid at the commit's time; needs repo"`
	TrustedKeyring string `yaml:"trusted_keyring" env:"TOOLAGENT_TRUSTED_KEYRING" flag:"trusted-keyring" default:"" usage:"armored OpenPGP public keyring FILE (gpg --export --armor) whose keys may sign tool commits, as trusted_signers does for SSH keys; needs repo"`

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
	ApprovalNotify      map[string]NotifyTarget     `yaml:"approval_notify" env:"TOOLAGENT_APPROVAL_NOTIFY" flag:"-" default:"" usage:"who hears of held calls and decisions: NAME: {url or url_env, format json or slack, secret_file or secret_env (json: the HMAC-SHA256 key)}"`
	AuditExport         AuditExport                 `yaml:"audit_export" env:"TOOLAGENT_AUDIT_EXPORT" flag:"-" default:"" usage:"send the audit trail on, at least once from a kept cursor: {syslog: {address: HOST:PORT, tls: true|false, ca_file: FILE, app_name: NAME}, otlp: {endpoint: URL of OTLP/HTTP logs}, poll: DURATION}"`
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

	// Role is what the daemon is started for; the fields after it are
	// given by the process, not settings (they have no env tag).
	Role Role
	// Logger gets the daemon's log lines (nil: discarded).
	Logger *slog.Logger
	// Getenv reads the environment (token_env, store_url_env); nil reads
	// none. Unsetenv, when not nil, removes the secrets' variables from
	// the process environment once they are read.
	Getenv   func(string) string
	Unsetenv func(string) error
	// Embedded is the tools tree compiled into the binary (tools
	// "embedded"); nil: none.
	Embedded fs.FS
	// OnBuild, when not nil, is called with the report of each build as
	// it returns, before its snapshot is published (a benchmark times
	// the start with it).
	OnBuild func(scan.Report)
}

// Role is what a daemon is started for.
type Role int

const (
	// Serve: the HTTP API, MCP over HTTP and the console; the daemon owns
	// the approval queue of its state directory (Run).
	Serve Role = iota
	// Stdio: MCP over a stream; the approval queue is used when no other
	// process holds it (ServeStdio).
	Stdio
	// Sync: one sync of the source; no tool runs (Sync).
	Sync
)

// Validate checks values that parse but make no sense.
func (c Config) Validate() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.Profiles)) {
		if !profileName.MatchString(name) {
			errs = append(errs, fmt.Errorf("profiles: %q is not a profile name; want 1-64 of a-z 0-9 - (it is a URL path segment: /mcp/NAME)", name))
		}
		if err := c.Profiles[name].Scope().Check(); err != nil {
			errs = append(errs, fmt.Errorf("profiles %s: %w", name, err))
		}
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen %q: want host:port, such as 127.0.0.1:8765 (port 0: any free port): %v", c.Listen, err))
	} else if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		errs = append(errs, fmt.Errorf("listen %q: the port %q is not a number from 0 to 65535", c.Listen, port))
	}
	if err := c.GuardOptions().Check(); err != nil {
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
	}{{"reload_debounce", c.ReloadDebounce}, {"reload_max_wait", c.ReloadMaxWait}, {"reload_retry_min", c.RetryMin}, {"reload_retry_max", c.RetryMax}, {"run_keep", c.RunKeep}, {"stream_reattach_grace", c.ReattachGrace}, {"stream_stall_window", c.StallWindow}} {
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
	errs = append(errs, c.validateNotify()...)
	errs = append(errs, c.AuditExport.validate()...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// KeyHint says, for an unknown key of a config file, where the secret it
// may name comes from instead ("" for other keys).
func KeyHint(key string) string {
	if strings.Contains(key, "token") && !strings.Contains(key, "file") {
		return "tokens are read from tokens_file or the environment (TOOLAGENT_TOKENS), never from a config file"
	}
	return ""
}

// RemovedKeys are settings of earlier versions, and why they are gone.
var RemovedKeys = map[string]string{
	"sandbox_reuse": "a sandbox serves exactly one call and is never handed to another (docs/security.md); delete the key",
}

// GuardOptions are the HTTP surface's settings as api.Guard takes them;
// serve adds the listener's addresses.
func (c Config) GuardOptions() api.GuardOptions {
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

// Profile is a named MCP surface of the config (profiles: NAME: {tools,
// tags}): the tools a client of /mcp/NAME or `toolagent mcp --profile
// NAME` sees, intersected with its token's scope. Tools are name globs,
// tags tool tags; a tool is in the profile when it matches one glob (or
// there are none) and carries one of the tags (or there are none).
type Profile struct {
	Tools []string `yaml:"tools"`
	Tags  []string `yaml:"tags"`
}

var profileName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// Scope is the profile as a catalog scope.
func (p Profile) Scope() catalog.Scope { return catalog.Scope{Tools: p.Tools, Tags: p.Tags} }

// UnmarshalYAML decodes a profile strictly: unknown keys are errors, and
// a profile that names nothing would be every tool, so it is refused.
func (p *Profile) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping {tools: [GLOB...], tags: [TAG...]}", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var dst *[]string
		switch k.Value {
		case "tools":
			dst = &p.Tools
		case "tags":
			dst = &p.Tags
		default:
			return fmt.Errorf("line %d: unknown key %q; want tools or tags", k.Line, k.Value)
		}
		if err := v.Decode(dst); err != nil {
			return fmt.Errorf("line %d: %s: want a list of strings", v.Line, k.Value)
		}
	}
	if len(p.Tools) == 0 && len(p.Tags) == 0 {
		return fmt.Errorf("line %d: a profile names its tools, its tags or both; an empty one would be every tool", n.Line)
	}
	return nil
}

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

// NotifyTarget is a receiver of approval events (approval_notify): a
// webhook that gets signed JSON, or a Slack incoming webhook (whose URL
// is its secret: give it by url_env).
type NotifyTarget struct {
	URL        string `yaml:"url"`
	URLEnv     string `yaml:"url_env"`
	Format     string `yaml:"format"`
	SecretFile string `yaml:"secret_file"`
	SecretEnv  string `yaml:"secret_env"`
}

// UnmarshalYAML decodes a target strictly, as GatekeeperTarget does: an
// unknown key, a secret given in the file, a value that is not a single
// string are errors.
func (t *NotifyTarget) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping {url | url_env, format, secret_file | secret_env}", n.Line)
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
		case "url_env":
			dst = &t.URLEnv
		case "format":
			dst = &t.Format
		case "secret_file":
			dst = &t.SecretFile
		case "secret_env":
			dst = &t.SecretEnv
		case "secret":
			return fmt.Errorf("line %d: secret: a secret never goes in the config file; name a file (secret_file) or an environment variable (secret_env)", k.Line)
		default:
			return fmt.Errorf("line %d: unknown key %q; want url, url_env, format, secret_file or secret_env", k.Line, k.Value)
		}
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: want a single value, not a %s", v.Line, k.Value, settings.NodeKind(v))
		}
		*dst = v.Value
	}
	return nil
}

// validateNotify checks approval_notify's targets as far as no file or
// variable is read.
func (c Config) validateNotify() []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.ApprovalNotify)) {
		t := c.ApprovalNotify[name]
		at := "approval_notify." + name
		if !targetNameRE.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: the name must match %s", at, targetNameRE))
		}
		if (t.URL == "") == (t.URLEnv == "") {
			errs = append(errs, fmt.Errorf("%s: set one of url and url_env", at))
		}
		if t.Format != "json" && t.Format != "slack" {
			errs = append(errs, fmt.Errorf("%s: format %q: want json or slack", at, t.Format))
		}
		if t.SecretFile != "" && t.SecretEnv != "" {
			errs = append(errs, fmt.Errorf("%s: set one of secret_file and secret_env", at))
		}
		if t.Format == "slack" && (t.SecretFile != "" || t.SecretEnv != "") {
			errs = append(errs, fmt.Errorf("%s: a slack target is not signed (its URL is its secret: give it by url_env)", at))
		}
		for _, e := range []string{t.URLEnv, t.SecretEnv} {
			if e != "" && !envNameRE.MatchString(e) {
				errs = append(errs, fmt.Errorf("%s: %q is not an environment variable name", at, e))
			}
		}
	}
	return errs
}

var (
	targetNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// validateExecutors checks the executor settings that parse but make no
// sense; it reads no file (New does, when it builds the executors).
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
	oneToken("match_embeddings (TOOLAGENT_MATCH_EMBEDDINGS_KEY, match_embeddings.key_file)", c.EmbeddingsKey, c.EmbeddingsKeyFile)
	needsURL := func(what, url string, set ...string) {
		if url == "" && slices.ContainsFunc(set, func(s string) bool { return s != "" }) {
			errs = append(errs, fmt.Errorf("%s is not set, but other settings of that executor are", what))
		}
	}
	needsURL("gatekeeper.url (TOOLAGENT_GATEKEEPER_URL)", c.GatekeeperURL, c.GatekeeperToken, c.GatekeeperTokenFile)
	needsURL("hlpd.url (TOOLAGENT_HLPD_URL)", c.HlpdURL, c.HlpdToken, c.HlpdTokenFile)
	needsURL("forgejo.url (TOOLAGENT_FORGEJO_URL)", c.ForgejoURL, c.ForgejoToken, c.ForgejoTokenFile, c.ForgejoOwner, c.ForgejoRepo)
	needsURL("match_embeddings.url (TOOLAGENT_MATCH_EMBEDDINGS_URL)", c.EmbeddingsURL, c.EmbeddingsModel, c.EmbeddingsKey, c.EmbeddingsKeyFile)
	if c.EmbeddingsURL != "" {
		_, err := embed.New(embed.Options{URL: c.EmbeddingsURL, Model: c.EmbeddingsModel, Languages: c.EmbeddingsLanguages})
		if err != nil {
			errs = append(errs, err)
		}
		if c.EmbeddingsTimeout <= 0 || c.EmbeddingsWeight <= 0 {
			errs = append(errs, fmt.Errorf("match_embeddings.timeout %s, match_embeddings.weight %g: want both more than 0", c.EmbeddingsTimeout, c.EmbeddingsWeight))
		}
	}
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
		if _, ok := c.Targets()[c.GatekeeperDefault]; !ok {
			errs = append(errs, fmt.Errorf("gatekeeper.default %q is not a configured target (configured: %s)",
				c.GatekeeperDefault, strings.Join(slices.Sorted(maps.Keys(c.Targets())), ", ")))
		}
	}
	for m, r := range c.HlpdRoutes {
		if _, err := parseHlpdRoute(r); err != nil {
			errs = append(errs, fmt.Errorf("hlpd.routes.%s: %w", m, err))
		}
	}
	return errs
}

// Targets returns every configured gatekeeper target: main from
// gatekeeper.url and the token settings, and gatekeeper.targets.
func (c Config) Targets() map[string]GatekeeperTarget {
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

// DefaultTarget is the target of gatekeeper tools without `target:`:
// gatekeeper.default, else main when configured, else the only target.
func (c Config) DefaultTarget() string {
	targets := c.Targets()
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

// shellPolicy builds the operator's override of the default shell policy
// from shell_policy.commands and shell_policy.classes; nil when neither is
// set. The catastrophic class is not overridable.
func (c Config) shellPolicy() (*policy.ShellPolicy, error) {
	if len(c.ShellPolicyCommands) == 0 && len(c.ShellPolicyClasses) == 0 {
		return nil, nil
	}
	p := policy.DefaultShellPolicy()
	var errs []error
	for name, word := range c.ShellPolicyCommands {
		d, err := policy.ParseDecision(word)
		if err != nil {
			errs = append(errs, fmt.Errorf("shell_policy.commands %s: %w", name, err))
			continue
		}
		p.Commands[name] = d
	}
	for class, word := range c.ShellPolicyClasses {
		cl := policy.Class(class)
		if _, known := p.Classes[cl]; !known {
			known := make([]string, 0, len(p.Classes))
			for k := range p.Classes {
				known = append(known, string(k))
			}
			slices.Sort(known)
			errs = append(errs, fmt.Errorf("shell_policy.classes: unknown class %q; want one of %v", class, known))
			continue
		}
		if cl == policy.ClassCatastrophic {
			errs = append(errs, errors.New("shell_policy.classes: catastrophic commands are always denied; the class cannot be overridden"))
			continue
		}
		d, err := policy.ParseDecision(word)
		if err != nil {
			errs = append(errs, fmt.Errorf("shell_policy.classes %s: %w", class, err))
			continue
		}
		p.Classes[cl] = d
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// secretFiles are the files holding the daemon's secrets; the sandbox
// hides them from every tool (the state directory is hidden as well).
func (cfg Config) secretFiles() []string {
	// The trust files are no secret, but no tool may read or change
	// what decides which tools run.
	files := []string{cfg.TokensFile, cfg.WebhookSecretFile, cfg.RepoTokenFile, cfg.RepoSSHKeyFile,
		cfg.GatekeeperTokenFile, cfg.HlpdTokenFile, cfg.ForgejoTokenFile, cfg.EmbeddingsKeyFile, cfg.TrustedSigners, cfg.TrustedKeyring}
	for _, t := range cfg.GatekeeperTargets {
		files = append(files, t.TokenFile)
	}
	for _, t := range cfg.ApprovalNotify {
		files = append(files, t.SecretFile)
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
	out := []string{"TOOLAGENT_TOKENS", "TOOLAGENT_REPO_TOKEN", "TOOLAGENT_GATEKEEPER_TOKEN", "TOOLAGENT_HLPD_TOKEN", "TOOLAGENT_FORGEJO_TOKEN", "TOOLAGENT_MATCH_EMBEDDINGS_KEY"}
	for _, t := range cfg.GatekeeperTargets {
		if t.TokenEnv != "" {
			out = append(out, t.TokenEnv)
		}
	}
	for _, t := range cfg.ApprovalNotify {
		for _, e := range []string{t.URLEnv, t.SecretEnv} {
			if e != "" {
				out = append(out, e)
			}
		}
	}
	return out
}

// dropSecretEnv removes the secrets' variables from the process
// environment (no-op without Unsetenv: tests run in-process).
func (cfg Config) dropSecretEnv() {
	if cfg.Unsetenv == nil {
		return
	}
	for _, k := range cfg.secretEnv() {
		_ = cfg.Unsetenv(k)
	}
}

// getenv reads the environment variable k through c.Getenv ("" without).
func (c Config) getenv(k string) string {
	if c.Getenv == nil {
		return ""
	}
	return c.Getenv(k)
}
