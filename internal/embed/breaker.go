package embed

import (
	"fmt"
	"sync"
	"time"
)

// Circuit breaker bounds: after breakerFailures failures in a row the
// endpoint is not asked for breakerCooldown (doubling per failed probe up
// to breakerMaxCooldown); then one request probes it while the others
// still skip it.
const (
	breakerFailures    = 3
	breakerCooldown    = 10 * time.Second
	breakerMaxCooldown = 5 * time.Minute
)

// breaker stops a dead endpoint from being waited on for every query.
type breaker struct {
	now func() time.Time

	mu        sync.Mutex
	fails     int // failures in a row
	cooldown  time.Duration
	openUntil time.Time // the endpoint is not asked before then
	probing   bool      // a probe is under way
	last      string    // the last failure
}

// allow reports whether a request may go to the endpoint; when it may
// not, why. A true answer must be followed by done.
func (b *breaker) allow() (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fails < breakerFailures {
		return true, ""
	}
	now := b.now()
	if now.Before(b.openUntil) || b.probing {
		wait := max(b.openUntil.Sub(now), 0).Round(time.Second)
		return false, fmt.Sprintf("unavailable: %d failures in a row, not asked again for %s (last: %s)", b.fails, wait, b.last)
	}
	b.probing = true
	return true, ""
}

// done records the outcome of an allowed request.
func (b *breaker) done(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if err == nil {
		b.fails, b.cooldown, b.last = 0, 0, ""
		return
	}
	b.fails++
	b.last = describe(err)
	if b.fails >= breakerFailures {
		switch {
		case b.cooldown == 0:
			b.cooldown = breakerCooldown
		case b.fails > breakerFailures:
			b.cooldown = min(2*b.cooldown, breakerMaxCooldown)
		}
		b.openUntil = b.now().Add(b.cooldown)
	}
}
