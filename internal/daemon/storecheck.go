package daemon

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// storeCheckFresh is how long an answer of the store's check serves
// /readyz and /v1/status before the store is asked again.
const storeCheckFresh = time.Second

// sharedCheck asks the approval store whether it answers on behalf of
// many callers: an answer younger than fresh is given again, and callers
// that come while a check runs wait for that one. /readyz needs no token,
// so without it every request from anyone would write and remove a file in
// the state directory, or take a database connection for a ping.
type sharedCheck struct {
	check func(context.Context) error
	fresh time.Duration
	now   func() time.Time // time.Now; tests move it

	flight singleflight.Group
	mu     sync.Mutex
	at     time.Time // when the last answer came; zero: none yet
	err    error     // the last answer
}

func newSharedCheck(check func(context.Context) error) *sharedCheck {
	return &sharedCheck{check: check, fresh: storeCheckFresh, now: time.Now}
}

// Check returns the store's answer, at most fresh old. A caller whose ctx
// ends stops waiting (its error is ctx's); the check it was waiting for
// runs on for the others, as the first caller's leaving does not end it.
func (c *sharedCheck) Check(ctx context.Context) error {
	if fresh, err := c.recent(); fresh {
		return err
	}
	ch := c.flight.DoChan("", func() (any, error) {
		// A check may have ended between this caller's look and here.
		if fresh, err := c.recent(); fresh {
			return nil, err
		}
		err := c.check(context.WithoutCancel(ctx))
		c.mu.Lock()
		c.at, c.err = c.now(), err
		c.mu.Unlock()
		return nil, err
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recent returns the last answer, and whether it is younger than fresh.
func (c *sharedCheck) recent() (fresh bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.at.IsZero() && c.now().Sub(c.at) < c.fresh, c.err
}
