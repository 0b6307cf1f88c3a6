package reload

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultSchedule is the schedule of a git source when none is configured.
const DefaultSchedule = "@every 30s"

// scheduleParser accepts the standard 5-field cron spec (minute hour
// day-of-month month day-of-week), a 6-field spec whose first field is the
// second, and descriptors: @every <duration>, @hourly, @daily, @weekly,
// @monthly, @yearly.
var scheduleParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule ticks a Trigger at the times of a cron spec (robfig/cron/v3's
// parser): a tick that finds one pending adds nothing, and Loop.Run drops
// ticks while it backs off after a failure. Next is safe for concurrent use while Run runs.
type Schedule struct {
	spec  string
	sched cron.Schedule
	next  atomic.Int64 // unix nanoseconds of the next poke; 0 when not running
}

// ParseSchedule parses spec: "@every 30s", "*/5 * * * *" (every five
// minutes), "*/10 * * * * *" (every ten seconds: six fields start with
// the second), "@hourly". @every has a floor of one second.
func ParseSchedule(spec string) (*Schedule, error) {
	spec = strings.TrimSpace(spec)
	s, err := scheduleParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w (want e.g. \"@every 30s\", \"*/5 * * * *\" or \"*/10 * * * * *\")", spec, err)
	}
	return &Schedule{spec: spec, sched: s}, nil
}

// String returns the spec.
func (s *Schedule) String() string { return s.spec }

// Next returns when Run pokes next; the zero time when Run is not running.
func (s *Schedule) Next() time.Time {
	n := s.next.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Run ticks trigger at every time of the schedule until ctx is done, then
// returns nil.
func (s *Schedule) Run(ctx context.Context, trigger *Trigger) error {
	defer s.next.Store(0)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		next := s.sched.Next(time.Now())
		if next.IsZero() {
			return nil // a spec that never fires again
		}
		s.next.Store(next.UnixNano())
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			trigger.Tick()
		}
	}
}
