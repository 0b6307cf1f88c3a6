package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/toolagent/toolagent/internal/console"
	"github.com/toolagent/toolagent/internal/repo"
	"github.com/toolagent/toolagent/internal/trust"
)

// What the console's tool and status pages read from the daemon: a
// tool's history in git (who changed it, when, why, who signed), diffs
// between its revisions, "Sync now", and the host's facts.

// errLocalHistory is the tool page's note for a source without commits.
var errLocalHistory = errors.New("history unavailable: the tools come from a local directory, which has no commits (serve a git repository with --repo to see who changed a tool, when and why)")

// gitTree is the tree the daemon serves, when it comes from git.
func (cr *core) gitTree() (*repo.Tree, error) {
	rt, ok := cr.loop.Tree().(*repo.Tree)
	if !ok || rt == nil {
		return nil, errLocalHistory
	}
	return rt, nil
}

// toolLog is console.Options.ToolLog: the commits that changed the
// tool's folder, with their signer when a trust policy is set.
func (cr *core) toolLog(name string, limit int) (console.ToolLog, error) {
	rt, err := cr.gitTree()
	if err != nil {
		return console.ToolLog{}, err
	}
	// A revision's history does not change: kept per served revision, so
	// a page view walks and verifies once. The trust policy may change
	// (a key added or revoked): its digest is part of the key.
	key := rt.Rev() + "\x00" + name + "\x00" + fmt.Sprint(limit)
	if g := cr.trust; g != nil {
		if pol, err := trust.Load(g.signers, g.keyring); err == nil {
			key += "\x00" + pol.Digest()
		}
	}
	if l, ok := cr.logs.get(key); ok {
		return l, nil
	}
	l, err := cr.walkToolLog(rt, name, limit)
	if err == nil {
		cr.logs.put(key, l)
	}
	return l, err
}

// logCache keeps the tool histories the console showed, a few hundred.
type logCache struct {
	mu sync.Mutex
	m  map[string]console.ToolLog
}

func (c *logCache) get(k string) (console.ToolLog, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.m[k]
	return l, ok
}

func (c *logCache) put(k string, l console.ToolLog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= 256 {
		c.m = map[string]console.ToolLog{} // dropped whole: a new revision makes the old keys useless anyway
	}
	c.m[k] = l
}

func (cr *core) walkToolLog(rt *repo.Tree, name string, limit int) (console.ToolLog, error) {
	changes, complete, err := rt.FolderLog(name, limit)
	if errors.Is(err, repo.ErrNoHistory) {
		return console.ToolLog{}, errLocalHistory
	}
	if err != nil {
		return console.ToolLog{}, err
	}
	var pol *trust.Policy
	if g := cr.trust; g != nil {
		pol, _ = trust.Load(g.signers, g.keyring)
	}
	out := console.ToolLog{Complete: complete}
	if !complete && cr.src.git != nil && !cr.src.git.History && len(changes) < limit {
		out.Note = "older commits are not in the clone: it keeps only the served commit unless repo_history, trusted_signers or trusted_keyring is set (then the whole history is fetched)"
	}
	for _, c := range changes {
		r := console.Revision{Hash: c.Hash, Parent: c.Parent, Author: c.Author, Message: c.Message, When: c.When, Signed: c.Signature != ""}
		if pol != nil {
			v := pol.Verify(trust.Commit{Hash: c.Hash, When: c.CommitterWhen, Signature: c.Signature, Payload: c.Payload})
			if v.Signer != nil {
				r.Signer = fmt.Sprintf("%s (%s)", v.Signer.Principal, v.Signer.Method)
			} else {
				r.SignerNote = v.Problem
			}
		}
		out.Changes = append(out.Changes, r)
	}
	return out, nil
}

// toolDiff is console.Options.ToolDiff.
func (cr *core) toolDiff(ctx context.Context, name, from, to string) (string, error) {
	rt, err := cr.gitTree()
	if err != nil {
		return "", err
	}
	return rt.FolderDiff(ctx, name, from, to)
}

// consoleFacts is console.Options.Facts: the sandbox's mechanism and
// limits, the store, and where the daemon listens.
func (cr *core) consoleFacts(listen func() string) func(context.Context) []console.Fact {
	return func(ctx context.Context) []console.Fact {
		sb := sandboxStatus(cr.sandbox)
		facts := []console.Fact{{Name: "listen", Value: listen()}}
		if sb.Active {
			facts = append(facts, console.Fact{Name: "sandbox limits", Value: fmt.Sprint(sb.Limits)},
				console.Fact{Name: "limits enforced by", Value: sb.Enforced}, console.Fact{Name: "isolation", Value: sb.Isolation})
		} else {
			facts = append(facts, console.Fact{Name: "sandbox", Value: sb.Warning, Bad: true})
		}
		if st := cr.storeStatus(); st != nil {
			s := st(ctx)
			f := console.Fact{Name: "store", Value: s.Kind + ": available"}
			if !s.Available {
				f.Value, f.Bad = s.Kind+": unavailable: "+s.Error, true
			}
			facts = append(facts, f)
		} else {
			facts = append(facts, console.Fact{Name: "store", Value: "none (no approval queue)"})
		}
		return facts
	}
}
