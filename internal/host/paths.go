// Package host owns what a toolagent process finds on the machine it runs
// on: where the tools tree is (found as git finds .git) and the state
// directory with its layout; the sandbox and the shell executor its tool
// processes run with; the local approval queue; and a catalog loaded once
// from the tree, for a command that reads it without a daemon. The
// daemon (internal/daemon) builds on it, and so do the CLI commands.
//
// A Setup is used by one goroutine; what it returns is safe for
// concurrent use. It never reads the process environment itself: the
// caller passes getenv, and the tools compiled into the binary.
package host

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/repo"
	"github.com/toolagent/toolagent/internal/scan"
)

// Embedded is the tools tree value that selects the tools compiled into
// the binary.
const Embedded = "embedded"

// The layout of the state directory (0700, the daemon's user only; the
// sandbox hides it from every tool).
const (
	approvalsDir = "approvals" // the approval queue (and mcp's control socket)
	auditDir     = "audit"     // the audit trail of the file store
	feedbackFile = "feedback/learned.json"
	repoDir      = "repo"              // the clone of a git source
	cacheFile    = "cache/parse.cache" // the parse memo
	listingFile  = "cache/local.listing"
	trustFile    = "cache/trust.json" // verdicts on commit signatures (internal/trust)
)

// Paths are where a command finds the tools tree and keeps its state.
type Paths struct {
	// Tools is the tools tree: a directory, or Embedded; "" is found by
	// Resolve.
	Tools string
	// State is the state directory; "" is found by Resolve.
	State string
	// FilesRoot is the root of the file-read and file-write tools;
	// "" is STATE/files.
	FilesRoot string
	// Embedded is the tools tree compiled into the binary (its tools/
	// folder), served when Tools is Embedded; nil: none.
	Embedded fs.FS

	// Set by Resolve: ToolsChosen when Tools was given, ToolsFromWorkDir
	// when FindTools found it from the working directory.
	ToolsChosen, ToolsFromWorkDir bool
	// Beside is set when a daemon owns the state directory while this
	// command works on a tools tree of its own (operator.FindFor): the
	// files root is then that daemon's, and stays its sandbox group's.
	Beside   bool
	resolved bool
}

// Resolve fills the paths that depend on the machine: the tools tree
// (FindTools), the state directory ($XDG_STATE_HOME/toolagent or
// ~/.local/state/toolagent, by getenv) and the files root.
func (p *Paths) Resolve(getenv func(string) string) error {
	if p.Tools == "" {
		p.Tools, p.ToolsFromWorkDir = FindTools()
	} else if !p.resolved {
		p.ToolsChosen = true
	}
	p.resolved = true
	if p.State == "" {
		base := getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return fmt.Errorf("no state directory: set --state or TOOLAGENT_STATE (%v)", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		p.State = filepath.Join(base, "toolagent")
	}
	if p.FilesRoot == "" {
		p.FilesRoot = filepath.Join(p.State, "files")
	}
	return nil
}

// ApprovalsDir is where the approval queue of a state directory lives.
func ApprovalsDir(state string) string { return filepath.Join(state, approvalsDir) }

// AuditDir is where the file store keeps the audit trail.
func AuditDir(state string) string { return filepath.Join(state, auditDir) }

// FeedbackFile is where the requests learned from use are kept.
func FeedbackFile(state string) string { return filepath.Join(state, filepath.FromSlash(feedbackFile)) }

// RepoDir is the clone of a git source.
func RepoDir(state string) string { return filepath.Join(state, repoDir) }

// CacheFile is the parse memo persisted across restarts.
func CacheFile(state string) string { return filepath.Join(state, filepath.FromSlash(cacheFile)) }

// TrustFile is the memo of signature verdicts and of the commit that last
// changed each tool folder (trust.Cache), so a restart verifies nothing
// twice.
func TrustFile(state string) string { return filepath.Join(state, filepath.FromSlash(trustFile)) }

// ListingFile is the listing of a local tools directory
// (repo.LocalDir.ListingFile), so a restart reads only what changed.
func ListingFile(state string) string { return filepath.Join(state, filepath.FromSlash(listingFile)) }

// FindTools finds the tools tree the way git finds .git: the working
// directory itself when it holds */TOOL.hdlp, else ./tools when it does,
// else the nearest parent whose tools/ does, else a checkout's
// native-repo/tools (this repository), else the copy compiled into the
// binary. fromWorkDir says the tree was found from the working directory
// (itself, its tools/ or a parent's), not a fallback.
func FindTools() (dir string, fromWorkDir bool) {
	dir, err := os.Getwd()
	if err != nil {
		return Embedded, false
	}
	if holdsTools(dir) {
		return dir, true
	}
	native := ""
	for d := dir; ; {
		if t := filepath.Join(d, "tools"); holdsTools(t) {
			return t, true
		}
		if t := filepath.Join(d, "native-repo", "tools"); native == "" && isDir(t) {
			native = t
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if native != "" {
		return native, false
	}
	return Embedded, false
}

// holdsTools reports whether dir has a tool folder: */TOOL.hdlp.
func holdsTools(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*", hldp.FileName))
	return len(m) > 0
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// EmbeddedTree is the tree of the tools compiled into the binary.
func (p *Paths) EmbeddedTree() (scan.Tree, error) {
	if p.Embedded == nil {
		return nil, fmt.Errorf("tools tree %s: this binary has no tools compiled in", Embedded)
	}
	return scan.FromFS(p.Embedded, Embedded), nil
}

// OpenTree opens the tools tree p.Tools names, once. The closer releases
// the directory handle.
func (p *Paths) OpenTree() (scan.Tree, func(), error) {
	if p.Tools == Embedded {
		t, err := p.EmbeddedTree()
		return t, func() {}, err
	}
	// The same source as the daemon's, so the CLI and the daemon report
	// one revision for one tree.
	dir := &repo.LocalDir{Path: p.Tools}
	t, err := dir.Sync(context.Background())
	if err != nil {
		dir.Close()
		return nil, nil, fmt.Errorf("open tools tree: %w", err)
	}
	return t, func() { dir.Close() }, nil
}
