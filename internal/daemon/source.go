package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/toolagent/toolagent/internal/api"
	"github.com/toolagent/toolagent/internal/cache"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/reload"
	"github.com/toolagent/toolagent/internal/repo"
	"github.com/toolagent/toolagent/internal/scan"
)

// source is where a core's trees come from, and when they are synced
// besides the reload trigger: a local directory (watched), the embedded
// tools, or a git branch (a schedule and the push webhook).
type source struct {
	src      reload.Source
	watchDir string           // local tools dir to watch; "" for none
	git      *repo.Git        // nil unless the source is git
	sched    *reload.Schedule // nil: no schedule
	webhook  api.Webhook      // zero: no webhook
	prefix   string           // put before tool paths in messages
	close    func()           // releases the source's handles
}

// newSource builds the source cfg describes: cfg.Repo selects git,
// otherwise c.Tools (already resolved) names a directory or the embedded
// tree.
func newSource(cfg Config, c host.Setup, log *slog.Logger) (*source, error) {
	if cfg.Repo == "" && (cfg.TrustedSigners != "" || cfg.TrustedKeyring != "") {
		return nil, errors.New("trusted_signers and trusted_keyring need a git source (repo): a local tools directory has no commits whose signatures could be checked, so no tool could be trusted")
	}
	if cfg.Repo == "" {
		src, watchDir, err := toolsSource(&c.Paths, c.Tools, c.State, log)
		if err != nil {
			return nil, err
		}
		s := &source{src: src, watchDir: watchDir, prefix: "tools/", close: func() {}}
		if ls, ok := src.(*localSource); ok {
			s.close = func() { ls.dir.Close() }
		}
		if cfg.WebhookSecretFile != "" {
			return nil, errors.New("webhook_secret_file needs a git source (repo): a local tools directory is watched instead")
		}
		return s, nil
	}
	if cfg.Tools != "" {
		return nil, fmt.Errorf("set either tools (a local directory, %q) or repo (a git URL), not both", cfg.Tools)
	}
	auth := repo.Auth{Username: cfg.RepoUsername, SSHKeyFile: cfg.RepoSSHKeyFile, KnownHostsFile: cfg.RepoKnownHosts}
	switch {
	case cfg.RepoTokenFile != "" && cfg.RepoToken != "":
		return nil, errors.New("set either repo_token_file or TOOLAGENT_REPO_TOKEN, not both")
	case cfg.RepoTokenFile != "":
		// Read again before every sync, so a rotated token needs no restart.
		auth.TokenFile = cfg.RepoTokenFile
		if _, err := os.Stat(cfg.RepoTokenFile); err != nil {
			return nil, fmt.Errorf("repo token file: %w", err)
		}
		warnIfShared(log, "repo token file", cfg.RepoTokenFile)
	case cfg.RepoToken != "":
		auth.Token = cfg.RepoToken
	}
	g := &repo.Git{
		URL:    cfg.Repo,
		Branch: cfg.Branch,
		Path:   cfg.ToolsPath,
		Dir:    host.RepoDir(c.State),
		Auth:   auth,
		Logger: log.With(slog.String("log", "git")),
		// Signatures are checked on the commit that last changed each
		// tool, which may be far back: keep the whole history.
		History: cfg.RepoHistory || cfg.TrustedSigners != "" || cfg.TrustedKeyring != "",
	}
	s := &source{
		src:    &gitSource{git: g, timeout: cfg.SyncTimeout},
		git:    g,
		prefix: strings.Trim(cmp.Or(cfg.ToolsPath, repo.DefaultPath), "/") + "/",
		close:  func() {},
	}
	if s.prefix == "./" {
		s.prefix = ""
	}
	if spec := strings.TrimSpace(cfg.Schedule); spec != "" && spec != "off" {
		sched, err := reload.ParseSchedule(spec)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		s.sched = sched
	}
	if cfg.WebhookSecretFile != "" {
		secret, err := readSecretFile(log, "webhook secret file", cfg.WebhookSecretFile)
		if err != nil {
			return nil, err
		}
		s.webhook = api.Webhook{Secret: secret, Branch: cmp.Or(cfg.Branch, repo.DefaultBranch)}
	}
	return s, nil
}

// next is when the schedule syncs next (zero: no schedule).
func (s *source) next() time.Time {
	if s.sched == nil {
		return time.Time{}
	}
	return s.sched.Next()
}

// readSecretFile reads a secret (surrounding white space trimmed). The
// value is never logged.
func readSecretFile(log *slog.Logger, what, path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	secret := strings.TrimSpace(string(data))
	if secret == "" {
		return nil, fmt.Errorf("%s %s is empty", what, path)
	}
	warnIfShared(log, what, path)
	return []byte(secret), nil
}

// warnIfShared warns when a secret file is readable by other users.
func warnIfShared(log *slog.Logger, what, path string) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn(what+" is readable by other users; chmod 600 it", "file", path, "mode", fi.Mode().Perm().String())
	}
}

// gitSource adapts repo.Git, whose Sync returns the concrete *repo.Tree,
// to reload.Source, and bounds every attempt with a deadline.
type gitSource struct {
	git     *repo.Git
	timeout time.Duration // 0: none
}

func (s *gitSource) Sync(ctx context.Context) (scan.Tree, error) {
	parent := ctx
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	t, err := s.git.Sync(ctx)
	if err != nil {
		if s.timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
			return nil, fmt.Errorf("sync_timeout %s reached (raise sync_timeout, --sync-timeout, for a slow server or a large repository): %w", s.timeout, err)
		}
		return nil, err
	}
	return t, nil
}

// String describes the source without secrets (reload.Status.Source).
func (s *gitSource) String() string { return s.git.String() }

// String describes the source (reload.Status.Source).
func (s *localSource) String() string { return "dir " + s.dir.Path }

// openParseCache opens the parse memo persisted under the state directory,
// with the listing of the last built tree. A memo that cannot be read only
// costs parsing, and a listing that cannot be read only costs reading the
// tree: the problem is logged (the error says which) and what loaded is
// used.
func openParseCache(state string, log *slog.Logger) *cache.Cache {
	start := time.Now()
	c, err := cache.Open(host.CacheFile(state))
	if err != nil {
		log.Warn("parse cache not fully used; what it lacks is rebuilt", "err", err, "outcomes", c.Len())
	}
	// Before the first reload, and not in its took_ms: at 100,000 tools
	// the decoding is most of a warm start.
	log.Info("parse cache loaded", "outcomes", c.Len(), "took_ms", time.Since(start).Milliseconds())
	if c.Len() > 0 {
		// Decoding left its chunks' entries and read buffers behind
		// (about 5 MiB at 10,000 tools): collected now, the first build
		// allocates into their pages instead of fresh ones. A fresh page
		// is the dearest thing in a start (a first touch costs 18-45 µs
		// on a small VM: internal/cmd/benchstart prints it); this takes a
		// restart's resident set at ready from 65 to 61 MiB at 10,000
		// tools (docs/operations.md); without it, since the file is read
		// a chunk at a time, 63 MiB instead of 57 and the start no faster.
		runtime.GC()
	}
	return c
}

// offline reads the tree a source served on an earlier run: the commit
// a git source synced last, or the listing a local directory's last Sync
// kept. nil without error: there is none (a first start).
func (s *source) offline() (scan.Tree, error) {
	switch ls, local := s.src.(*localSource); {
	case s.git != nil:
		t, err := s.git.Offline()
		if errors.Is(err, repo.ErrNoClone) {
			return nil, nil // first start: the first sync clones
		}
		if err != nil {
			return nil, err
		}
		return t, nil
	case local:
		t, err := ls.dir.Offline()
		if errors.Is(err, repo.ErrNoListing) {
			return nil, nil // first start: the first sync lists the directory
		}
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	return nil, nil
}

// startOffline starts reading the source's offline tree (see offline),
// so that it is read while the parse cache is decoded and the sandbox
// probed; get waits for it, and wait lets a start that fails end it
// first. A git source's is read when asked: opening the clone beside the
// decoding raised the resident set at ready by a tenth and saved no
// time.
func startOffline(s *source) (get func() (scan.Tree, error), wait func()) {
	if s.git != nil {
		return sync.OnceValues(s.offline), func() {}
	}
	type read struct {
		t   scan.Tree
		err error
	}
	ch := make(chan read, 1)
	go func() {
		t, err := s.offline()
		ch <- read{t, err}
	}()
	get = sync.OnceValues(func() (scan.Tree, error) {
		r := <-ch
		return r.t, r.err
	})
	return get, func() { get() }
}

// prime serves the catalog of the source's offline tree (see offline)
// before the first sync: a restart serves at once, and even when the
// server is down. The first sync then verifies it (a local directory's
// stats every file) and publishes what changed meanwhile.
func (cr *core) prime() {
	t, err := cr.offline()
	// The tree is read once: holding it past the first sync (its
	// memoised read) kept the last run's listing of a local directory
	// alive for good, 2.2 MB at 10,000 tools.
	cr.offline = nil
	if cr.store.Load() != nil {
		return // synced already (the MCP stdio server syncs first): nothing to prime, and an offline read that lost the race to it is no problem
	}
	if err != nil {
		cr.log.Warn("cannot read the catalog of the last run; waiting for the first sync", "err", err)
		return
	}
	if t == nil {
		return
	}
	if _, err := cr.loop.Prime(t); err != nil {
		cr.log.Warn("cannot serve the catalog of the last run; waiting for the first sync", "err", err)
	}
}

// String describes the embedded tree for logs and /v1/status.
func (s staticSource) String() string { return "embedded (the tools compiled into this binary)" }
