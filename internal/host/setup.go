package host

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/health"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/match"
	"github.com/toolagent/toolagent/internal/policy"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/scan"
)

// Setup is how a command reads the tools tree and runs its tools on this
// host.
type Setup struct {
	Paths
	// Vocab is the intent-matching vocabulary (nil: the built-in one).
	Vocab *match.Vocab
	// ShellPolicy is the operator's override of the default shell policy
	// (nil: the built-in one); dispatch gets the same value.
	ShellPolicy *policy.ShellPolicy
	// Sandbox is SandboxOn (or "") or SandboxOff; SandboxOptions its
	// settings; Hidden the secret files beyond the state directory
	// (token and key files), which the sandbox hides too.
	Sandbox        string
	SandboxOptions proc.SandboxOptions
	Hidden         []string
	// RunsTools is set for the commands that run tools (serve, mcp, call,
	// approvals approve): only they build, and need, a sandbox.
	RunsTools bool
}

// newSandbox builds the sandbox of s (nil when it is off). It hides the
// state directory (approvals, parse cache, repository clone) and every
// secret file, and shows the files root read-only inside it.
func (s *Setup) newSandbox() (*proc.Sandbox, error) {
	opts := s.SandboxOptions
	opts.Hide = append(append([]string{s.State}, s.Hidden...), opts.Hide...)
	opts.Expose = append(opts.Expose, s.FilesRoot)
	return OpenSandbox(s.Sandbox, opts)
}

// ProbeSandbox builds the sandbox Executors would (nil when it is off)
// without making a directory: toolagent doctor. The caller closes it.
func (s *Setup) ProbeSandbox() (*proc.Sandbox, error) { return s.newSandbox() }

// Executors makes the state directory and the files root, and builds the
// executors configured on this host (the shell executor) with, for a
// command that runs tools, the sandbox their processes run in (nil
// otherwise, or when it is off). The caller closes the sandbox.
func (s *Setup) Executors() (map[hldp.ExecutorKind]executors.Executor, *proc.Sandbox, error) {
	// The state directory holds approvals, the parse cache and the
	// repository clone: the daemon's user only.
	if err := os.MkdirAll(s.State, 0o700); err != nil {
		return nil, nil, fmt.Errorf("state directory: %w", err)
	}
	if err := os.Chmod(s.State, 0o700); err != nil {
		return nil, nil, fmt.Errorf("state directory: %w", err)
	}
	if err := os.MkdirAll(s.FilesRoot, 0o750); err != nil {
		return nil, nil, fmt.Errorf("files root: %w", err)
	}
	var sb *proc.Sandbox
	if s.RunsTools {
		var err error
		if sb, err = s.newSandbox(); err != nil {
			return nil, nil, err
		}
	}
	if gid, ok := sb.Group(); ok && !(s.Beside && claimedByOther(s.FilesRoot, gid)) {
		if err := shareFilesRoot(s.FilesRoot, int(gid)); err != nil {
			sb.Close()
			return nil, nil, fmt.Errorf("files root: %w", err)
		}
	}
	return map[hldp.ExecutorKind]executors.Executor{
		hldp.Shell: shell.New(shell.Options{FilesRoot: s.FilesRoot, ShellPolicy: s.ShellPolicy, Sandbox: sb}),
	}, sb, nil
}

// claimedByOther reports whether the files root belongs to the sandbox
// group of another live toolagent process. Asked only beside a daemon of
// the same state directory (Paths.Beside), while a CLI command runs a
// tool of its own tree: taking the root over would lock that daemon's
// calls out of their own files root, so it stays theirs and the
// command's calls do without it. A daemon always takes its files root.
func claimedByOther(root string, gid uint32) bool {
	fi, err := os.Stat(root)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Gid != gid && proc.GroupClaimed(st.Gid)
}

// shareFilesRoot gives the files root to the sandbox's group: calls run
// as users of their own in that group, and an approved call may write
// the files root (its grant). Directories get the setgid bit, so what is
// made in them is the group's too; files and directories become group
// writable. Nobody else may enter it.
func shareFilesRoot(root string, gid int) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil // never followed
		}
		if err := os.Lchown(p, -1, gid); err != nil {
			return err
		}
		mode := os.FileMode(0o664)
		if d.IsDir() {
			mode = 0o775 | os.ModeSetgid
			if p == root {
				mode = 0o770 | os.ModeSetgid
			}
		} else if fi, err := d.Info(); err == nil {
			mode = fi.Mode().Perm() | 0o060
		}
		return os.Chmod(p, mode)
	})
}

// Loaded is a catalog loaded once for a CLI command.
type Loaded struct {
	Snap    *catalog.Snapshot
	Report  scan.Report
	Execs   map[hldp.ExecutorKind]executors.Executor
	sandbox *proc.Sandbox
}

// Close releases the sandbox the executors run in.
func (l *Loaded) Close() {
	if l.sandbox != nil {
		l.sandbox.Close()
	}
}

// Load builds the executors and a snapshot of the tools tree once, each
// tool narrowed to what an executor here can run (health.Configured).
// s.Paths must be resolved. The caller closes the result.
func (s *Setup) Load(lazyIndex bool) (*Loaded, error) {
	execs, sb, err := s.Executors()
	if err != nil {
		return nil, err
	}
	l := &Loaded{Execs: execs, sandbox: sb}
	tree, closeTree, err := s.OpenTree()
	if err != nil {
		l.Close()
		return nil, err
	}
	defer closeTree()
	l.Snap, l.Report, err = scan.Build(nil, tree, nil, scan.Options{Check: health.Configured(execs), Catalog: catalog.Options{LazyIndex: lazyIndex, Vocab: s.Vocab}})
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// ProblemLines flattens scan problems into one line per diagnostic.
func ProblemLines(probs []error) []string {
	var out []string
	for _, p := range probs {
		for _, l := range strings.Split(p.Error(), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

// LoadVocab returns the built-in vocabulary, merged with file when given.
func LoadVocab(file string) (*match.Vocab, error) {
	if file == "" {
		return match.DefaultVocab(), nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("vocabulary: %w", err)
	}
	defer f.Close()
	v, err := match.LoadVocab(f)
	if err != nil {
		return nil, fmt.Errorf("vocabulary %s: %w", file, err)
	}
	return v, nil
}

// OpenApprovals opens the approval queue under state. It fails with
// approval.ErrLocked while another process (a daemon) holds it.
func OpenApprovals(state string, ttl time.Duration, allowSelf bool, log *slog.Logger) (*approval.Store, error) {
	st, err := approval.Open(approval.Options{Dir: ApprovalsDir(state), TTL: ttl, AllowSelfApproval: allowSelf,
		Logger: log.With(slog.String("log", "approval"))})
	if errors.Is(err, approval.ErrLocked) {
		return nil, fmt.Errorf("%w: %s (one process owns an approval queue: decide through the daemon's API, POST /v1/approvals/ID, or give this command its own --state)", err, ApprovalsDir(state))
	}
	return st, err
}

// QueueOf is ap as dispatch's approval queue: nil (no queue) when ap is
// nil, never an interface holding a nil *Store.
func QueueOf(ap *approval.Store) approval.Queue {
	if ap == nil {
		return nil
	}
	return ap
}
