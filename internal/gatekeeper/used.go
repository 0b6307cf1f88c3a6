package gatekeeper

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxUsedGrants is how many used grants a gatekeeper remembers at
// once (Options.MaxUsedGrants): an entry is some 150 bytes, so 10,000 is
// about 1.5 MiB, and far more approved commands than people approve
// within the lifetime of their grants (a tool's timeout plus a minute).
const DefaultMaxUsedGrants = 10_000

// ErrUsed: the grant's approval already started a command on this
// gatekeeper (or is starting one now); a grant runs once.
var ErrUsed = errors.New("grant already used")

// usedFull is the refusal of a claim when the memory of used grants is
// full: the gatekeeper refuses new grants, rather than forget used ones,
// until the earliest entry expires.
type usedFull struct {
	max  int
	next time.Time // when the earliest entry expires
}

func (e *usedFull) Error() string {
	return fmt.Sprintf("busy: this gatekeeper remembers %d used grants that have not expired (its limit), so it takes no new grant until the earliest expires at %s; retry later",
		e.max, e.next.UTC().Format(time.RFC3339))
}

// usedGrants remembers the approvals whose grants started a command on
// this gatekeeper, each until its grant expires, so that a grant runs at
// most once: a replay, or a second grant for the same approval signed
// with the same token, is refused with ErrUsed. An approval is claimed
// right before its command would start and counts as used once the
// command started (proc.Spec.Started); a command that could not start
// gives its claim back, so the grant can be sent again. While a claim is
// held, any other claim of the same approval is refused: two racing
// requests with one grant never both run.
//
// The memory is bounded: an entry is dropped once its grant has expired
// (the grant is refused as expired from then on anyway), and at most max
// entries are kept; when that many have not expired, claim refuses
// (*usedFull) instead of forgetting one. It lives in the process: a
// restarted gatekeeper has a new boot id, and grants name the boot they
// are for, so the grants signed before the restart are refused
// (grant.ErrOtherBoot) rather than replayed. Safe for concurrent use.
type usedGrants struct {
	now func() time.Time
	max int

	mu   sync.Mutex
	m    map[[sha256.Size]byte]*usedEntry
	next time.Time // no entry expires before; zero when m is empty
}

// usedEntry is one claimed approval.
type usedEntry struct {
	expires time.Time // the grant's expiry: the entry is dropped after it
	ran     time.Time // when its command started; zero while it is starting
}

func newUsedGrants(limit int, now func() time.Time) *usedGrants {
	return &usedGrants{now: now, max: limit, m: make(map[[sha256.Size]byte]*usedEntry)}
}

// usedKey identifies an approval among the grants of one token: key is
// the grant key of the token (grant.KeyFromDigest), so an approval id
// chosen by one token's holder cannot use up another's.
func usedKey(key [sha256.Size]byte, approval string) [sha256.Size]byte {
	h := sha256.New()
	h.Write(key[:]) // fixed length, so the concatenation is unambiguous
	h.Write([]byte(approval))
	return [sha256.Size]byte(h.Sum(nil))
}

// claim claims approval (identified by id, usedKey) for a command that
// is about to start, with a grant that expires at expires. The error is
// ErrUsed (wrapped, saying when it ran), a grant that expired meanwhile,
// or *usedFull. The caller calls started when the command started and
// done when it is over, whether it started or not.
func (u *usedGrants) claim(id [sha256.Size]byte, approval string, expires time.Time) (*usedClaim, error) {
	now := u.now()
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sweep(now)
	if !now.Before(expires) {
		// Verified a moment ago, expired since: an expired grant never
		// claims, so dropping expired entries cannot let a duplicate in.
		return nil, fmt.Errorf("grant expired at %s (now %s)", expires.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if e, ok := u.m[id]; ok {
		if e.ran.IsZero() {
			return nil, fmt.Errorf("%w: approval %.128q is starting a command on this gatekeeper now; a grant runs once", ErrUsed, approval)
		}
		return nil, fmt.Errorf("%w: approval %.128q ran on this gatekeeper at %s; a grant runs once (it is remembered until the grant expires at %s)",
			ErrUsed, approval, e.ran.UTC().Format(time.RFC3339), e.expires.UTC().Format(time.RFC3339))
	}
	if len(u.m) >= u.max {
		return nil, &usedFull{max: u.max, next: u.next}
	}
	e := &usedEntry{expires: expires}
	u.m[id] = e
	if u.next.IsZero() || expires.Before(u.next) {
		u.next = expires
	}
	return &usedClaim{u: u, id: id, e: e}, nil
}

// sweep drops the entries whose grants have expired at now. It walks
// the map only when the earliest expiry has passed. u.mu is held.
func (u *usedGrants) sweep(now time.Time) {
	if u.next.IsZero() || now.Before(u.next) {
		return
	}
	u.next = time.Time{}
	for id, e := range u.m {
		switch {
		case !now.Before(e.expires):
			delete(u.m, id)
		case u.next.IsZero() || e.expires.Before(u.next):
			u.next = e.expires
		}
	}
}

// len is the number of entries remembered, for tests.
func (u *usedGrants) len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.m)
}

// usedClaim is a held claim of one approval.
type usedClaim struct {
	u  *usedGrants
	id [sha256.Size]byte
	e  *usedEntry
}

// started marks the approval used: its command started.
func (c *usedClaim) started() {
	now := c.u.now()
	c.u.mu.Lock()
	defer c.u.mu.Unlock()
	c.e.ran = now
}

// done ends the claim: an approval whose command never started is
// claimable again.
func (c *usedClaim) done() {
	c.u.mu.Lock()
	defer c.u.mu.Unlock()
	if c.e.ran.IsZero() && c.u.m[c.id] == c.e {
		delete(c.u.m, c.id)
	}
}
