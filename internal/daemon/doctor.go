package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/hugeheap"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/repo"
)

// The levels of a doctor check.
const (
	CheckOK   = "OK"
	CheckWarn = "WARN"
	CheckFail = "FAIL"
)

// Check is one line of toolagent doctor: what was checked, how it went,
// what was found and, unless it is OK, how to fix it.
type Check struct {
	Name   string `json:"name"`
	Level  string `json:"level"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// doctorHost is what the checks read of the host; tests replace the
// kernel's files by their own.
type doctorHost struct {
	procSys   string // /proc/sys
	cgroupDir string // /sys/fs/cgroup
	thpDir    string // /sys/kernel/mm/transparent_hugepage
	lookPath  func(string) (string, error)
	// hugeHeapOff: hugeheap.OffEnv says off, so the daemon would not
	// ask for huge pages at start.
	hugeHeapOff bool
}

var realHost = doctorHost{procSys: "/proc/sys", cgroupDir: "/sys/fs/cgroup", thpDir: "/sys/kernel/mm/transparent_hugepage", lookPath: lookMinimal}

// Doctor checks this host as a daemon of cfg would use it, without
// starting one or making a directory: the sandbox and the kernel features
// it needs, bubblewrap, git and curl, the source, the store, the listen
// address, the state directory and the tokens file. Only the store is
// written: opening a shared database brings its schema up to date, as
// the daemon would at start.
func Doctor(ctx context.Context, cfg Config) []Check {
	h := realHost
	h.hugeHeapOff = os.Getenv(hugeheap.OffEnv) == "off"
	return h.run(ctx, cfg)
}

func (h doctorHost) run(ctx context.Context, cfg Config) []Check {
	cs := []Check{{Name: "version", Level: CheckOK, Detail: "toolagent " + Version()}}
	setup, err := cfg.hostSetup()
	if err != nil {
		return append(cs, Check{Name: "config", Level: CheckFail, Detail: err.Error(), Fix: "correct the setting it names"})
	}
	var sb *proc.Sandbox
	if cfg.Sandbox == host.SandboxOff {
		cs = append(cs, Check{Name: "sandbox", Level: CheckWarn, Detail: "off: tool processes would run unconfined", Fix: "set sandbox: on (TOOLAGENT_SANDBOX=on)"})
	} else if sb, err = setup.ProbeSandbox(); err != nil {
		cs = append(cs, Check{Name: "sandbox", Level: CheckFail, Detail: err.Error(), Fix: "install or allow what the message names (the checks below say which kernel feature is missing)"})
	} else {
		defer sb.Close()
		cs = append(cs, Check{Name: "sandbox", Level: CheckOK, Detail: sb.Mechanism() + ": " + sb.Version() + "; " + sb.DescribeLimits()})
	}
	cs = append(cs, h.userns(), h.landlock(), h.cgroups(sb), h.hugePages())
	cs = append(cs, h.bubblewrap(cfg, sb))
	cs = append(cs, h.program("git", "git --version", "git sources and tools that run git need it: apt-get install git"),
		h.program("curl", "curl --version", "the http-request tool runs it: apt-get install curl"))
	cs = append(cs, sourceCheck(ctx, cfg, setup), storeCheck(cfg, setup.State), listenCheck(cfg, setup.State), stateCheck(setup.State), tokensCheck(cfg))
	return cs
}

// WriteChecks prints the checks one a line, each not OK followed by its
// fix, and returns how many failed.
func WriteChecks(w io.Writer, cs []Check) (failed int) {
	for _, c := range cs {
		fmt.Fprintf(w, "%-4s  %-12s %s\n", c.Level, c.Name, c.Detail)
		if c.Level != CheckOK && c.Fix != "" {
			fmt.Fprintf(w, "      %-12s fix: %s\n", "", c.Fix)
		}
		if c.Level == CheckFail {
			failed++
		}
	}
	return failed
}

// sysctl reads a number of /proc/sys (name as sysctl writes it); ok is
// false when the kernel has no such setting.
func (h doctorHost) sysctl(name string) (n int, ok bool) {
	b, err := os.ReadFile(filepath.Join(h.procSys, strings.ReplaceAll(name, ".", "/")))
	if err != nil {
		return 0, false
	}
	n, err = strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// hugePages reports the kernel's transparent huge pages for the heap. Go
// does not ask for them (go.dev/doc/gc-guide#Linux_transparent_huge_pages);
// under "madvise" the daemon asks for the first hugeheap.Size of its heap
// while it starts (internal/hugeheap), which is what a warm start of
// 10,000 tools allocates; beyond that, and under "never", every 4 KiB of
// the heap is a page fault of its own: a warm start of 10,000 tools took
// 2.3 times the CPU of one with "always" (docs/operations.md, "Start
// time"). Nothing fails for it; the line says what a big catalog costs.
func (h doctorHost) hugePages() Check {
	c := Check{Name: "hugepages", Level: CheckOK}
	mode := hugeheap.Mode(filepath.Join(h.thpDir, "enabled"))
	switch {
	case mode == "":
		c.Detail = "no transparent huge pages in this kernel: the heap gets 4 KiB pages"
		return c
	case mode == "always":
		c.Detail = "always: the daemon's heap gets huge pages"
		if n, err := os.ReadFile(filepath.Join(h.thpDir, "khugepaged", "max_ptes_none")); err == nil && strings.TrimSpace(string(n)) != "0" {
			c.Detail += " (khugepaged/max_ptes_none is " + strings.TrimSpace(string(n)) + "; Go's GC guide suggests 0, so memory the daemon returns stays returned)"
		}
		return c
	case mode == "madvise" && !h.hugeHeapOff:
		c.Detail = fmt.Sprintf("madvise: the daemon asks for huge pages for the first %d MiB of its heap while it starts (%s=off turns that off); beyond that, 4 KiB pages, each a page fault: a catalog much larger than 10,000 tools starts faster with always", hugeheap.Size>>20, hugeheap.OffEnv)
		return c
	}
	c.Level = CheckWarn
	c.Detail = mode + ": the daemon's heap gets 4 KiB pages, each a page fault; starts and reloads of a big catalog (10,000 tools) take about twice the CPU"
	if mode == "madvise" {
		c.Detail += " (" + hugeheap.OffEnv + "=off: the daemon does not ask for them at start)"
	}
	c.Fix = "if starts matter more than the kernel's default: echo always > " + filepath.Join(h.thpDir, "enabled") + "; echo defer+madvise > " + filepath.Join(h.thpDir, "defrag") + "; echo 0 > " + filepath.Join(h.thpDir, "khugepaged", "max_ptes_none") + " (see go.dev/doc/gc-guide)"
	return c
}

// userns: bubblewrap needs unprivileged user namespaces.
func (h doctorHost) userns() Check {
	c := Check{Name: "userns", Level: CheckOK}
	if n, ok := h.sysctl("user.max_user_namespaces"); ok && n == 0 {
		c.Level, c.Detail, c.Fix = CheckWarn, "user.max_user_namespaces is 0: bubblewrap cannot run", "sysctl -w user.max_user_namespaces=15000 (and in /etc/sysctl.d/)"
		return c
	}
	if n, ok := h.sysctl("kernel.unprivileged_userns_clone"); ok && n == 0 {
		c.Level, c.Detail, c.Fix = CheckWarn, "kernel.unprivileged_userns_clone is 0: bubblewrap cannot run unprivileged", "sysctl -w kernel.unprivileged_userns_clone=1 (and in /etc/sysctl.d/)"
		return c
	}
	if n, ok := h.sysctl("kernel.apparmor_restrict_unprivileged_userns"); ok && n == 1 {
		c.Level, c.Detail, c.Fix = CheckWarn, "AppArmor restricts unprivileged user namespaces: bubblewrap needs a profile that allows them", "install an AppArmor profile for bwrap (Ubuntu: the bwrap-userns-restrict profile), or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
		return c
	}
	c.Detail = "unprivileged user namespaces allowed"
	return c
}

// landlock: the kernel's Landlock ABI; the landlock mechanism also needs
// the daemon to run as root.
func (h doctorHost) landlock() Check {
	abi := proc.LandlockABI()
	if abi < 1 {
		return Check{Name: "landlock", Level: CheckWarn, Detail: "the kernel offers no Landlock: only bubblewrap can make sandboxes",
			Fix: "a kernel with CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot parameter (Debian 12 and later have it)"}
	}
	d := fmt.Sprintf("Landlock ABI %d", abi)
	if os.Geteuid() != 0 {
		d += " (the landlock mechanism needs the daemon to run as root; as this user, bubblewrap)"
	}
	return Check{Name: "landlock", Level: CheckOK, Detail: d}
}

// cgroups: cgroup v2, and whether this process may make a group per
// sandbox (the sandbox's own probe says).
func (h doctorHost) cgroups(sb *proc.Sandbox) Check {
	c := Check{Name: "cgroups", Level: CheckOK}
	v2 := true
	if _, err := os.Stat(filepath.Join(h.cgroupDir, "cgroup.controllers")); err != nil {
		v2 = false
	}
	if sb == nil {
		c.Level, c.Detail = CheckWarn, "no sandbox to probe delegation with"
		if !v2 {
			c.Detail = "cgroup v1 or hybrid; " + c.Detail
		}
		c.Fix = "a sandbox that builds (the sandbox line) to probe them"
		return c
	}
	where, err := sb.Cgroups()
	if err != nil {
		c.Level, c.Detail = CheckWarn, "no control group per call, rlimits only: "+err.Error()
		c.Fix = "the limits hold as rlimits; for a group per call run the daemon as root (cgroup v1), or where its cgroup v2 group offers pids and memory to its children (cgroup.subtree_control)"
		return c
	}
	c.Detail = "a control group per call: " + where
	return c
}

// bubblewrap: its version; missing is a failure only when the daemon's
// mechanism is bubblewrap.
func (h doctorHost) bubblewrap(cfg Config, sb *proc.Sandbox) Check {
	c := Check{Name: "bubblewrap"}
	if sb != nil && sb.Mechanism() == proc.MechanismBubblewrap {
		c.Level, c.Detail = CheckOK, sb.Version()
		return c
	}
	p, err := h.lookPath(cfg.SandboxBwrap)
	if err != nil {
		c.Level, c.Detail, c.Fix = CheckFail, cfg.SandboxBwrap+" is not installed", "apt-get install bubblewrap"
		if sb != nil || cfg.Sandbox == host.SandboxOff {
			c.Level, c.Detail = CheckWarn, c.Detail+" (not used now)"
		}
		return c
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil {
		return Check{Name: "bubblewrap", Level: CheckWarn, Detail: p + " --version: " + err.Error(), Fix: "reinstall bubblewrap"}
	}
	return Check{Name: "bubblewrap", Level: CheckOK, Detail: strings.TrimSpace(string(out)) + " (" + p + ")"}
}

// program: a program tools or the daemon run, and its version.
func (h doctorHost) program(name, versionCmd, fix string) Check {
	p, err := h.lookPath(name)
	if err != nil {
		return Check{Name: name, Level: CheckWarn, Detail: "not installed", Fix: fix}
	}
	args := strings.Fields(versionCmd)
	out, err := exec.Command(p, args[1:]...).Output()
	if err != nil {
		return Check{Name: name, Level: CheckWarn, Detail: p + ": " + err.Error(), Fix: fix}
	}
	first := strings.Fields(string(out)) // "git version 2.39.5", "curl 7.88.1 (x86_64...) libcurl/..."
	if len(first) > 3 {
		first = first[:3]
	}
	if len(first) == 3 && strings.HasPrefix(first[2], "(") {
		first = first[:2]
	}
	return Check{Name: name, Level: CheckOK, Detail: strings.Join(first, " ") + " (" + p + ")"}
}

// lookMinimal finds a program as tools do: in proc.MinimalPath.
func lookMinimal(name string) (string, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			return "", err
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(proc.MinimalPath) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, proc.MinimalPath)
}

// sourceCheck: the git source answers and has the branch, or the local
// tools directory is there.
func sourceCheck(ctx context.Context, cfg Config, setup host.Setup) Check {
	c := Check{Name: "source", Level: CheckOK}
	if cfg.Repo == "" {
		if setup.Tools == host.Embedded {
			c.Detail = "the tools compiled into this binary (set repo or tools to serve your own)"
			return c
		}
		fi, err := os.Stat(setup.Tools)
		if err != nil || !fi.IsDir() {
			c.Level, c.Detail, c.Fix = CheckFail, "tools directory "+setup.Tools+" is not there", "set tools to a directory of tools/<name>/TOOL.hdlp, or repo to a git URL"
			return c
		}
		c.Detail = "tools directory " + setup.Tools
		return c
	}
	auth := repo.Auth{Username: cfg.RepoUsername, SSHKeyFile: cfg.RepoSSHKeyFile, KnownHostsFile: cfg.RepoKnownHosts, TokenFile: cfg.RepoTokenFile, Token: cfg.RepoToken}
	g := &repo.Git{URL: cfg.Repo, Branch: cfg.Branch, Path: cfg.ToolsPath, Dir: host.RepoDir(setup.State), Auth: auth}
	ctx, cancel := context.WithTimeout(ctx, cfg.SyncTimeout)
	defer cancel()
	rev, err := g.Head(ctx)
	switch {
	case errors.Is(err, repo.ErrNoBranch):
		c.Level, c.Detail, c.Fix = CheckFail, err.Error(), "set branch to one the repository has, or push it"
	case err != nil:
		c.Level, c.Detail, c.Fix = CheckFail, g.String()+": "+err.Error(), "check repo, its credentials (repo_token_file, repo_ssh_key_file, repo_known_hosts) and the network"
	default:
		c.Detail = fmt.Sprintf("%s at %.12s", g.String(), rev)
	}
	return c
}

// storeCheck: the approvals' store answers; a database is migrated.
func storeCheck(cfg Config, state string) Check {
	c := Check{Name: "store", Level: CheckOK}
	if cfg.Store == "files" {
		c.Detail = "files: " + host.ApprovalsDir(state)
		return c
	}
	cfg.Unsetenv = nil // doctor leaves the environment as it is
	db, err := OpenStore(cfg)
	if err != nil {
		c.Level, c.Detail, c.Fix = CheckFail, err.Error(), "start the database, or correct store and the URL in "+cfg.StoreURLEnv
		return c
	}
	defer db.Close()
	c.Detail = fmt.Sprintf("postgres, schema version %d", db.Version)
	return c
}

// listenCheck: the listen address is free (bound and let go at once).
func listenCheck(cfg Config, state string) Check {
	c := Check{Name: "listen", Level: CheckOK}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err == nil {
		ln.Close()
		c.Detail = cfg.Listen + " is free"
		return c
	}
	c.Level, c.Detail = CheckFail, cfg.Listen+": "+err.Error()
	c.Fix = "stop what listens there (ss -ltnp 'sport = :PORT' names it), or set listen to another address"
	if errors.Is(err, syscall.EADDRINUSE) {
		if info, ierr := operator.ReadInfo(state); ierr == nil {
			c.Fix = fmt.Sprintf("a toolagent daemon (pid %d, %s) may hold it: stop it first (systemctl stop toolagent), or set listen to another address", info.PID, info.URL)
		}
	}
	return c
}

// stateCheck: the state directory is this user's, writable and closed
// to others (the daemon makes it 0700 when it is missing).
func stateCheck(state string) Check {
	c := Check{Name: "state", Level: CheckOK}
	fi, err := os.Stat(state)
	if errors.Is(err, fs.ErrNotExist) {
		parent := filepath.Dir(state) // the nearest that exists: the daemon makes the rest
		for _, perr := os.Stat(parent); errors.Is(perr, fs.ErrNotExist) && parent != filepath.Dir(parent); _, perr = os.Stat(parent) {
			parent = filepath.Dir(parent)
		}
		if aerr := unix.Access(parent, unix.W_OK|unix.X_OK); aerr != nil {
			c.Level, c.Detail, c.Fix = CheckFail, state+" is missing and "+parent+" is not writable: "+aerr.Error(), "make "+state+" owned by the daemon's user, mode 0700"
			return c
		}
		c.Detail = state + " is missing; the daemon makes it (0700) at start"
		return c
	}
	if err != nil {
		c.Level, c.Detail, c.Fix = CheckFail, err.Error(), "make "+state+" a directory the daemon's user owns, mode 0700"
		return c
	}
	if !fi.IsDir() {
		c.Level, c.Detail, c.Fix = CheckFail, state+" is not a directory", "remove it, or set state to a directory"
		return c
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		owner := strconv.Itoa(int(st.Uid))
		if u, err := user.LookupId(owner); err == nil {
			owner = u.Username
		}
		// root may use it, but the daemon that owns it runs as its owner
		// (the package's as user toolagent): check as that user.
		c.Level = CheckFail
		if os.Geteuid() == 0 {
			c.Level = CheckWarn
		}
		c.Detail = fmt.Sprintf("%s belongs to %s, not to this user (uid %d)", state, owner, os.Geteuid())
		c.Fix = fmt.Sprintf("run doctor as its owner (runuser -u %s -- toolagent doctor ...), or chown -R %d %s", owner, os.Geteuid(), state)
		return c
	}
	if err := unix.Access(state, unix.W_OK|unix.X_OK); err != nil {
		c.Level, c.Detail, c.Fix = CheckFail, state+" is not writable: "+err.Error(), "chmod 700 "+state
		return c
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		c.Level, c.Detail, c.Fix = CheckWarn, fmt.Sprintf("%s has mode %04o: other users may read approvals and tokens", state, perm), "chmod 700 "+state+" (the daemon does at start)"
		return c
	}
	c.Detail = state + " (0700)"
	return c
}

// tokensCheck: the tokens file parses and only its owner may read it; a
// daemon without tokens listens on loopback only.
func tokensCheck(cfg Config) Check {
	c := Check{Name: "tokens", Level: CheckOK}
	if cfg.TokensFile == "" {
		if cfg.Tokens == "" && !isLoopback(cfg.Listen) {
			c.Level, c.Detail, c.Fix = CheckFail, "no API tokens, and listen "+cfg.Listen+" is not loopback: the daemon refuses to start", "set tokens_file to a file of name:role:secret lines (mode 0600), or listen on 127.0.0.1"
			return c
		}
		c.Detail = "no tokens file"
		if cfg.Tokens != "" {
			c.Detail += " (tokens from TOOLAGENT_TOKENS)"
		}
		return c
	}
	fi, err := os.Stat(cfg.TokensFile)
	if err != nil {
		c.Level, c.Detail, c.Fix = CheckFail, "tokens file: "+err.Error(), "create "+cfg.TokensFile+" (name:role:secret a line, mode 0600) or correct tokens_file"
		return c
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		c.Level, c.Detail, c.Fix = CheckFail, fmt.Sprintf("%s has mode %04o: other users can read the API tokens", cfg.TokensFile, perm), "chmod 600 "+cfg.TokensFile
		return c
	}
	cfg.Tokens = "" // the file alone
	toks, err := LoadTokens(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		c.Level, c.Detail, c.Fix = CheckFail, err.Error(), "correct the line it names: name:role:secret"
		return c
	}
	c.Detail = fmt.Sprintf("%s (%04o, %d tokens)", cfg.TokensFile, fi.Mode().Perm(), toks.Len())
	return c
}
