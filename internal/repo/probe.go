package repo

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Head asks the server for the head of the branch, as git ls-remote does:
// nothing is cloned and Dir is not touched (toolagent doctor). A missing
// branch is an error matching ErrNoBranch that names the branches the
// server has. No error holds a secret.
func (g *Git) Head(ctx context.Context) (rev string, err error) {
	s, err := g.settings()
	if err != nil {
		return "", err
	}
	auth, secrets, err := g.Auth.method()
	secrets = append(secrets, urlSecret(s.url))
	defer func() { err = redact(err, secrets...) }()
	if err != nil {
		return "", err
	}
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: remoteName, URLs: []string{s.url}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil {
		return "", fmt.Errorf("ls-remote %s: %w", redactURL(s.url), err)
	}
	want := plumbing.NewBranchReferenceName(s.branch)
	var branches []string
	for _, r := range refs {
		if r.Name() == want {
			return r.Hash().String(), nil
		}
		if r.Name().IsBranch() {
			branches = append(branches, r.Name().Short())
		}
	}
	slices.Sort(branches)
	has := "no branch at all"
	if len(branches) > 0 {
		has = "branches " + strings.Join(branches, ", ")
	}
	return "", fmt.Errorf("%s: %w: %s (it has %s)", redactURL(s.url), ErrNoBranch, s.branch, has)
}
