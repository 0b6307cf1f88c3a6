package daemon

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/repo"
	"github.com/toolagent/toolagent/internal/scan"
	"github.com/toolagent/toolagent/internal/trust"
)

// trustGate makes a tool untrusted unless the commit that last changed
// its folder, on the served branch's first-parent history, is signed by a
// key of trusted_signers or trusted_keyring that was valid at the commit's
// time and may change that folder. It is scan's Vet for every build, and
// records the signer of each trusted tool (catalog.Entry.Signed).
//
// The policy files are read again at every build, so an edited file (a
// key added, one revoked) applies at the next reload. Verdicts and the
// commit of each folder are kept in a trust.Cache under the state
// directory: a restart, or a reload that changed one tool, verifies
// nothing it verified before.
type trustGate struct {
	signers, keyring string
	prefix           string // the tools folder's path in the repository, with a trailing slash ("" for the root)
	cache            *trust.Cache
	log              *slog.Logger

	mu sync.Mutex // one vet at a time
}

// newTrustGate returns the gate cfg asks for, or nil when neither
// trusted_signers nor trusted_keyring is set. It refuses policy files that
// do not load, so that a typo stops the start rather than every tool.
// cacheFile "" keeps the verdicts in memory only.
func newTrustGate(cfg Config, cacheFile, prefix string, log *slog.Logger) (*trustGate, error) {
	if cfg.TrustedSigners == "" && cfg.TrustedKeyring == "" {
		return nil, nil
	}
	if _, err := trust.Load(cfg.TrustedSigners, cfg.TrustedKeyring); err != nil {
		return nil, err
	}
	c, err := trust.OpenCache(cacheFile)
	if err != nil {
		log.Warn("trust cache not used; signatures are verified again", "err", err)
	}
	return &trustGate{signers: cfg.TrustedSigners, keyring: cfg.TrustedKeyring, prefix: prefix, cache: c, log: log}, nil
}

// vet is scan.Options.Vet.
func (g *trustGate) vet(t scan.Tree, entries []catalog.Entry) {
	g.mu.Lock()
	defer g.mu.Unlock()
	start := time.Now()
	pol, err := trust.Load(g.signers, g.keyring)
	if err != nil {
		g.log.Error("trust policy cannot be read; no tool is trusted", "err", err)
		untrustAll(entries, fmt.Sprintf("the trust policy cannot be read: %v", err))
		return
	}
	rt, ok := t.(*repo.Tree)
	if !ok {
		untrustAll(entries, "the tools come from a directory without commits; trusted_signers needs a git repository (repo)")
		return
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name)
	}
	changes, err := g.lastChanged(rt, names)
	if err != nil {
		g.log.Error("cannot find the commits that changed the tools; no tool is trusted", "revision", rt.Rev(), "err", err)
		untrustAll(entries, fmt.Sprintf("the history of revision %s cannot be read: %v", rt.Rev(), err))
		return
	}
	signed := map[string]*catalog.Signature{} // one per commit, shared by its entries
	verified, untrusted := 0, 0
	for i := range entries {
		e := &entries[i]
		dir := g.prefix + e.Name
		commit := changes[e.Name]
		if commit == "" {
			untrust(e, fmt.Sprintf("%s: no commit of the branch's first-parent history changed it", dir))
			untrusted++
			continue
		}
		v, ok := g.cache.Verdict(pol.Digest(), commit)
		if !ok {
			c, err := rt.Commit(commit)
			if err != nil {
				untrust(e, fmt.Sprintf("%s last changed in %s, which cannot be read: %v", dir, short(commit), err))
				untrusted++
				continue
			}
			v = pol.Verify(trust.Commit{Hash: c.Hash, When: c.When, Signature: c.Signature, Payload: c.Payload})
			g.cache.PutVerdict(pol.Digest(), commit, v)
			verified++
		}
		if ok, why := v.Allows(dir); !ok {
			untrust(e, fmt.Sprintf("%s last changed in %s %s", dir, short(commit), why))
			untrusted++
			continue
		}
		s := signed[commit]
		if s == nil {
			s = &catalog.Signature{Commit: commit, Method: v.Signer.Method, Principal: v.Signer.Principal, Fingerprint: v.Signer.Fingerprint}
			signed[commit] = s
		}
		e.Signed = s
	}
	if err := g.cache.Save(); err != nil {
		g.log.Warn("trust cache not saved; a restart verifies again", "err", err)
	}
	g.log.Info("signatures checked", "revision", rt.Rev(), "tools", len(entries), "untrusted", untrusted,
		"verified", verified, "took_ms", time.Since(start).Milliseconds())
}

// lastChanged returns the commit that last changed each of names in t,
// walking t's history back to the head the cache knows at most, and the
// whole history for what is missing (after a force-push, or the first
// time).
func (g *trustGate) lastChanged(t *repo.Tree, names []string) (map[string]string, error) {
	head, known := g.cache.Changes()
	found, reached, err := t.LastChanged(names, head)
	if err != nil {
		return nil, err
	}
	if reached {
		var missing []string
		for _, n := range names {
			if found[n] != "" {
				continue
			}
			if c, ok := known[n]; ok {
				found[n] = c
			} else {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			more, _, err := t.LastChanged(missing, "")
			if err != nil {
				return nil, err
			}
			for n, c := range more {
				found[n] = c
			}
		}
	}
	g.cache.SetChanges(t.Rev(), found)
	return found, nil
}

// untrust makes e untrusted for reason; an entry with no definition at
// all is not callable anyway and keeps its Failed status and reason.
func untrust(e *catalog.Entry, reason string) {
	e.Signed = nil
	if e.Tool == nil {
		return
	}
	e.Status, e.Reason = catalog.Untrusted, reason
}

func untrustAll(entries []catalog.Entry, reason string) {
	for i := range entries {
		untrust(&entries[i], reason)
	}
}

// short is a commit hash's usual abbreviation.
func short(h string) string {
	if len(h) > 7 {
		return h[:7]
	}
	return h
}
