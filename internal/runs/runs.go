// Package runs keeps the calls the API ran, live and for a while after
// they end, as a sequence of events: the chunks of stdout and stderr as
// the tool wrote them, then exactly one result. A streaming call is a
// reader of its run's events; a client whose connection dropped resumes
// with Since(after) while the run is live, and fetches the result once it
// ended.
//
// Memory is bounded: a run keeps at most MaxBytes of output events (the
// oldest go first, and a reader that asks for them learns how many it
// missed), and the registry at most MaxRuns runs, ended ones kept for
// Keep.
//
// Imports: the standard library only. Imported by dispatch, api,
// mcpserver, operator, the daemon and cmd/toolagent.
package runs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The kinds of Event.
const (
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventResult = "result"
	// EventProgress is a progress report of the tool: a line
	// "TOOLAGENT_PROGRESS N[/TOTAL] [message]" it wrote on stderr (the
	// line stays in stderr too).
	EventProgress = "progress"
	// EventGap stands for events a reader asked for that are no longer
	// kept; Dropped says how many.
	EventGap = "gap"
)

// Defaults of Options fields left zero.
const (
	DefaultKeep     = 10 * time.Minute
	DefaultMaxRuns  = 1024
	DefaultMaxBytes = 1 << 20
)

// Event is one thing a run did. Seq counts from 1 within the run.
type Event struct {
	Seq   int64  `json:"seq"`
	Event string `json:"event"`
	// Data is a chunk of output: the bytes as a string when they are
	// valid UTF-8, else base64 (Encoding "base64").
	Data     string `json:"data,omitempty"`
	Encoding string `json:"encoding,omitempty"`
	// Result is the call's final result (EventResult).
	Result json.RawMessage `json:"result,omitempty"`
	// Dropped is how many events a gap stands for (EventGap).
	Dropped int64 `json:"dropped,omitempty"`
	// Progress, Total and Message are a progress report (EventProgress);
	// Total is 0 when the tool gave none.
	Progress float64 `json:"progress,omitempty"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// ProgressPrefix starts a progress line a tool writes on stderr:
// "TOOLAGENT_PROGRESS 40/100 copying files".
const ProgressPrefix = "TOOLAGENT_PROGRESS "

// ParseProgress reads a progress line (without its newline): the amount
// done, the total (0: not given) and a message.
func ParseProgress(line string) (progress, total float64, msg string, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), ProgressPrefix)
	if !ok {
		return 0, 0, "", false
	}
	num, msg, _ := strings.Cut(strings.TrimSpace(rest), " ")
	done, tot, hasTotal := strings.Cut(num, "/")
	p, err := strconv.ParseFloat(done, 64)
	if err != nil || p < 0 || math.IsInf(p, 0) || math.IsNaN(p) {
		return 0, 0, "", false
	}
	if hasTotal {
		if total, err = strconv.ParseFloat(tot, 64); err != nil || total <= 0 || math.IsInf(total, 0) || math.IsNaN(total) {
			return 0, 0, "", false
		}
	}
	if len(msg) > maxProgressMessage {
		msg = msg[:maxProgressMessage]
	}
	return p, total, strings.TrimSpace(msg), true
}

// maxProgressMessage bounds a progress event's message.
const maxProgressMessage = 200

// Options bound a Registry.
type Options struct {
	Keep     time.Duration // how long an ended run is kept
	MaxRuns  int           // most runs kept, live ones included
	MaxBytes int           // most output bytes kept per run
	// Now returns the time (nil: time.Now). Tests set it.
	Now func() time.Time
}

// Registry holds runs by id. It is safe for concurrent use.
type Registry struct {
	opts  Options
	mu    sync.Mutex
	byID  map[string]*Run
	order []*Run // oldest first
}

// New returns an empty registry.
func New(opts Options) *Registry {
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.MaxRuns <= 0 {
		opts.MaxRuns = DefaultMaxRuns
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Registry{opts: opts, byID: map[string]*Run{}}
}

// Start records a new live run.
func (g *Registry) Start(id, tool, caller string) *Run {
	r := &Run{ID: id, Tool: tool, Caller: caller, Started: g.opts.Now(), maxBytes: g.opts.MaxBytes, now: g.opts.Now, changed: make(chan struct{})}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireLocked(1)
	g.byID[id] = r
	g.order = append(g.order, r)
	return r
}

// Get returns the run id, live or ended and still kept.
func (g *Registry) Get(id string) (*Run, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireLocked(0)
	r, ok := g.byID[id]
	return r, ok
}

// expireLocked drops ended runs older than Keep, and the oldest ended
// runs beyond MaxRuns less room. Live runs stay: their callers are
// reading them.
func (g *Registry) expireLocked(room int) {
	cut := g.opts.Now().Add(-g.opts.Keep)
	over := len(g.order) - g.opts.MaxRuns + room
	n := 0
	for _, r := range g.order {
		ended, at := r.ended()
		if ended && (at.Before(cut) || over > 0) {
			delete(g.byID, r.ID)
			over--
			continue
		}
		g.order[n] = r
		n++
	}
	clear(g.order[n:])
	g.order = g.order[:n]
}

// Run is one call's events. Its methods are safe for concurrent use.
type Run struct {
	ID, Tool, Caller string
	Started          time.Time

	maxBytes int
	now      func() time.Time

	mu      sync.Mutex
	events  []Event // kept events; events[0].Seq is the oldest kept
	bytes   int     // bytes of the kept events' Data
	next    int64   // Seq of the next event
	done    bool
	endedAt time.Time
	changed chan struct{} // closed and replaced at every change
	// stderrLine is the unfinished last line of stderr, scanned for
	// progress lines (at most maxLine bytes of it are kept).
	stderrLine []byte
	// followers counts the readers attached (Attach); orphaned, when
	// set, runs when the last one leaves a live run.
	followers int
	orphaned  func()
}

// OnOrphaned sets f to run (on a goroutine of its own) whenever the last
// attached reader leaves while the run is live.
func (r *Run) OnOrphaned(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.orphaned = f
}

// Attach counts a reader of the run's events; call the returned func when
// it leaves.
func (r *Run) Attach() (detach func()) {
	r.mu.Lock()
	r.followers++
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			r.followers--
			var f func()
			if r.followers == 0 && !r.done {
				f = r.orphaned
			}
			r.mu.Unlock()
			if f != nil {
				go f()
			}
		})
	}
}

// Followers returns how many readers are attached.
func (r *Run) Followers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.followers
}

// Output adds a chunk of stdout or stderr (stream EventStdout or
// EventStderr). p is copied.
func (r *Run) Output(stream string, p []byte) {
	if len(p) == 0 {
		return
	}
	e := Event{Event: stream}
	if utf8.Valid(p) {
		e.Data = string(p)
	} else {
		e.Data, e.Encoding = base64.StdEncoding.EncodeToString(p), "base64"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.appendLocked(e, len(e.Data))
	if stream == EventStderr {
		r.scanProgressLocked(p)
	}
	for r.bytes > r.maxBytes && len(r.events) > 1 {
		r.bytes -= len(r.events[0].Data)
		r.events = r.events[1:]
	}
}

// Finish adds the result, which ends the run. A second Finish is ignored.
func (r *Run) Finish(result any) {
	b, err := json.Marshal(result)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.appendLocked(Event{Event: EventResult, Result: b}, 0)
	r.done, r.endedAt = true, r.now()
}

// maxLine bounds the stderr line kept to look for a progress report.
const maxLine = 4 << 10

// scanProgressLocked adds a progress event for each progress line p
// completes.
func (r *Run) scanProgressLocked(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(r.stderrLine)+len(p) <= maxLine {
				r.stderrLine = append(r.stderrLine, p...)
			} else {
				r.stderrLine = append(r.stderrLine[:0], "x"...) // too long to be one
			}
			return
		}
		line := append(r.stderrLine, p[:i]...)
		r.stderrLine, p = r.stderrLine[:0], p[i+1:]
		if len(line) > maxLine {
			continue
		}
		if prog, total, msg, ok := ParseProgress(string(line)); ok {
			r.appendLocked(Event{Event: EventProgress, Progress: prog, Total: total, Message: msg}, 0)
		}
	}
}

func (r *Run) appendLocked(e Event, n int) {
	r.next++
	e.Seq = r.next
	r.events = append(r.events, e)
	r.bytes += n
	close(r.changed)
	r.changed = make(chan struct{})
}

// Since returns the kept events after seq after, whether the run has
// ended, and a channel closed at the next change (nil once ended). When
// events after `after` are no longer kept, the first event is a gap
// saying how many are missing.
func (r *Run) Since(after int64) (evs []Event, done bool, changed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) > 0 {
		if first := r.events[0].Seq; after+1 < first {
			evs = append(evs, Event{Seq: first - 1, Event: EventGap, Dropped: first - 1 - after})
		}
	}
	for _, e := range r.events {
		if e.Seq > after {
			evs = append(evs, e)
		}
	}
	if r.done {
		return evs, true, nil
	}
	return evs, false, r.changed
}

// Result returns the result once the run has ended.
func (r *Run) Result() (json.RawMessage, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		return nil, false
	}
	return r.events[len(r.events)-1].Result, true
}

func (r *Run) ended() (bool, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done, r.endedAt
}
