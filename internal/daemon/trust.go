package daemon

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
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
// nothing it verified before. A reload to a commit whose first parent is
// the served one, or to several commits pushed on top of it, under the
// same policy, judges the folders those commits changed alone (vetDelta):
// every other folder's last change, and so its verdict, is the same as
// before.
type trustGate struct {
	signers, keyring string
	prefix           string // the tools folder's path in the repository, with a trailing slash ("" for the root)
	cache            *trust.Cache
	log              *slog.Logger

	mu      sync.Mutex // one vet at a time
	applied string     // Policy.Digest of the last judge; guarded by mu
	judged  string     // the revision whose every tool the last vet judged, "" after a failure; guarded by mu
}

// dirty reports whether the policy files changed since the last build
// (reload.Loop.Dirty): a sync at the same commit then builds again, so an
// added or removed key applies at the next sync.
func (g *trustGate) dirty() bool {
	pol, err := trust.Load(g.signers, g.keyring)
	g.mu.Lock()
	defer g.mu.Unlock()
	return err != nil || pol.Digest() != g.applied
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

// vet is scan.Options.Vet: it judges every tool of t.
func (g *trustGate) vet(t scan.Tree, entries []catalog.Entry) {
	rt, ok := t.(*repo.Tree)
	if !ok {
		g.mu.Lock()
		g.judged = ""
		g.mu.Unlock()
		untrustAll(entries, "the tools come from a directory without commits; trusted_signers needs a git repository (repo)")
		return
	}
	g.apply(rt, entries, "", nil)
}

// vetDelta is scan.Options.VetDelta. The verdicts of prev's tools hold
// at t for every folder t's commit did not change when that commit's
// first parent is prev's revision, the last vet judged all of prev's
// tools under the policy in force now, and the trust cache's record of
// each folder's last change is of prev: a folder the commit did not
// change was last changed where it was at prev. Then only the entries of
// the folders it changed are judged. A merge is compared with its first
// parent, as LastChanged does. Several commits pushed at once are judged
// the same way when prev's revision is on their first-parent history and
// every folder they changed is one the scan looks at again (pushedOnto);
// anything else (a force-push, a merge whose first parent is another
// branch, an edited policy, a restart) judges every tool.
func (g *trustGate) vetDelta(t scan.Tree, prev *catalog.Snapshot) (func(fresh []catalog.Entry), bool) {
	rt, ok := t.(*repo.Tree)
	if !ok {
		return nil, false
	}
	base := prev.Rev()
	var known map[string]string // a push of several commits: the newest that changed each folder
	if parents, _ := rt.Parents(); len(parents) == 0 || parents[0] != base {
		if known, ok = g.pushedOnto(rt, base); !ok {
			return nil, false
		}
	}
	pol, err := trust.Load(g.signers, g.keyring)
	if err != nil {
		return nil, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.judged != base || g.applied != pol.Digest() || g.cache.Head() != base {
		return nil, false
	}
	return func(fresh []catalog.Entry) { g.apply(rt, fresh, base, known) }, true
}

// maxDeltaCommits bounds the commits pushedOnto walks: a longer push is
// judged whole.
const maxDeltaCommits = 100

// pushedOnto reports whether rt's commit is base with commits on top, on
// the first-parent history (at most maxDeltaCommits), none of which
// changed a folder that rt and base hold alike, and returns the newest of
// those commits that changed each folder they changed. A folder changed
// and changed back within the push was last changed by a commit of the
// push, but the scan carries its entry from base with base's verdict: a
// push that has one is judged whole.
func (g *trustGate) pushedOnto(rt *repo.Tree, base string) (map[string]string, bool) {
	from, delta, ok := rt.Delta()
	if !ok || from != base {
		return nil, false
	}
	changed, ok, err := rt.ChangedSince(base, maxDeltaCommits)
	if err != nil || !ok {
		return nil, false
	}
	rescanned := make(map[string]bool, len(delta))
	for _, n := range delta {
		rescanned[n] = true
	}
	for n := range changed {
		if !rescanned[n] {
			return nil, false
		}
	}
	return changed, true
}

// apply judges entries, tools of rt, and makes the ones not trusted
// Untrusted; base and known are as judge's.
func (g *trustGate) apply(rt *repo.Tree, entries []catalog.Entry, base string, known map[string]string) {
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name)
	}
	verdicts, err := g.judge(rt, names, base, known)
	if err != nil {
		g.log.Error("no tool is trusted", "revision", rt.Rev(), "err", err)
		untrustAll(entries, err.Error())
		return
	}
	for i := range entries {
		e := &entries[i]
		v := verdicts[e.Name]
		if v.signed == nil {
			untrust(e, v.reason)
			continue
		}
		e.Signed = v.signed
	}
}

// toolTrust is the verdict on one tool: its provenance when trusted, else
// why not.
type toolTrust struct {
	signed *catalog.Signature
	reason string
}

// judge returns the verdict on each of names (tool folders of t). base
// is "" when names are all of t's tools; else they are those of the
// folders the commits from base to rt's (base its first parent, or on
// the first-parent history below it) changed, base's verdicts judged
// (see vetDelta). known, when not nil, holds the newest commit of those
// that changed each folder they changed (pushedOnto's walk), so the
// history is not walked again. The error is for a policy or a history
// that cannot be read: then no tool is trusted.
func (g *trustGate) judge(rt *repo.Tree, names []string, base string, known map[string]string) (_ map[string]toolTrust, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.judged = ""
	defer func() {
		if err == nil {
			g.judged = rt.Rev()
		}
	}()
	start := time.Now()
	pol, err := trust.Load(g.signers, g.keyring)
	if err != nil {
		g.applied = ""
		return nil, fmt.Errorf("the trust policy cannot be read: %w", err)
	}
	if base != "" && pol.Digest() != g.applied {
		// vetDelta saw this policy; a file edited since applies to every
		// tool, and a delta has the changed ones alone.
		return nil, fmt.Errorf("the trust policy changed during the reload; the next reload judges every tool")
	}
	g.applied = pol.Digest()
	changes, err := g.lastChanged(rt, names, base, known)
	if err != nil {
		return nil, fmt.Errorf("the history of revision %s cannot be read: %w", rt.Rev(), err)
	}
	out := make(map[string]toolTrust, len(names))
	signed := map[string]*catalog.Signature{} // one per commit, shared by its tools
	verified, untrusted := 0, 0
	for _, name := range names {
		dir := g.prefix + name
		commit := changes[name]
		if commit == "" {
			out[name] = toolTrust{reason: fmt.Sprintf("%s: no commit of the branch's first-parent history changed it (not committed?)", dir)}
			untrusted++
			continue
		}
		v, ok := g.cache.Verdict(pol.Digest(), commit)
		if !ok {
			c, err := rt.Commit(commit)
			if err != nil {
				out[name] = toolTrust{reason: fmt.Sprintf("%s last changed in %s, which cannot be read: %v", dir, short(commit), err)}
				untrusted++
				continue
			}
			v = pol.Verify(trust.Commit{Hash: c.Hash, When: c.When, Signature: c.Signature, Payload: c.Payload})
			g.cache.PutVerdict(pol.Digest(), commit, v)
			verified++
		}
		if ok, why := v.Allows(dir); !ok {
			out[name] = toolTrust{reason: fmt.Sprintf("%s last changed in %s %s", dir, short(commit), why)}
			untrusted++
			continue
		}
		s := signed[commit]
		if s == nil {
			s = &catalog.Signature{Commit: commit, Method: v.Signer.Method, Principal: v.Signer.Principal, Fingerprint: v.Signer.Fingerprint}
			signed[commit] = s
		}
		out[name] = toolTrust{signed: s}
	}
	if err := g.cache.Save(); err != nil {
		g.log.Warn("trust cache not saved; a restart verifies again", "err", err)
	}
	g.log.Info("signatures checked", "revision", rt.Rev(), "tools", len(names), "untrusted", untrusted,
		"verified", verified, "since", base, "took_ms", time.Since(start).Milliseconds())
	return out, nil
}

// lastChanged returns the commit that last changed each of names in t,
// walking t's history back to the head the cache knows at most, and the
// whole history for what is missing (after a force-push, or the first
// time). base and known are judge's: with base, the cache's record moves
// from base to t by names alone; known is the walk to the head the cache
// knows, already made.
func (g *trustGate) lastChanged(t *repo.Tree, names []string, base string, known map[string]string) (map[string]string, error) {
	head := g.cache.Head()
	var found map[string]string
	reached := true
	if known != nil && base == head {
		found = make(map[string]string, len(names))
		for _, n := range names {
			if c := known[n]; c != "" {
				found[n] = c
			}
		}
	} else {
		var err error
		if found, reached, err = t.LastChanged(names, head); err != nil {
			return nil, err
		}
	}
	if reached {
		var missing []string
		for _, n := range names {
			if found[n] != "" {
				continue
			}
			if c, ok := g.cache.Change(n); ok {
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
	if base == "" {
		g.cache.SetChanges(t.Rev(), found)
	} else if !g.cache.MoveChanges(base, t.Rev(), found) {
		return nil, fmt.Errorf("the trust cache's record moved from %s during the reload; the next reload judges every tool", short(base))
	}
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

// TrustProblem is a tool of a checkout that is not trusted, and why.
type TrustProblem struct {
	Tool, Reason string
}

// CheckTrust checks, as serve with trusted_signers and trusted_keyring
// would, the tools names of the tools folder dir of a git checkout at its
// HEAD commit, and returns those that are not trusted (for validate in a
// tools repository's CI), sorted by name, with the HEAD commit.
func CheckTrust(signers, keyring, dir string, names []string) (string, []TrustProblem, error) {
	t, sub, err := repo.OpenCheckout(dir)
	if err != nil {
		return "", nil, err
	}
	prefix := ""
	if sub != "" {
		prefix = sub + "/"
	}
	g, err := newTrustGate(Config{TrustedSigners: signers, TrustedKeyring: keyring}, "", prefix, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", nil, err
	}
	verdicts, err := g.judge(t, names, "", nil)
	if err != nil {
		return "", nil, err
	}
	var out []TrustProblem
	for _, n := range names {
		if v := verdicts[n]; v.signed == nil {
			out = append(out, TrustProblem{Tool: n, Reason: v.reason})
		}
	}
	slices.SortFunc(out, func(a, b TrustProblem) int { return strings.Compare(a.Tool, b.Tool) })
	return t.Rev(), out, nil
}
