// Package runs keeps the calls the API ran, live and for a while after
// they end, as a sequence of events: the chunks of stdout and stderr as
// the tool wrote them, then exactly one result. A streaming call is a
// reader of its run's events; a client whose connection dropped resumes
// with Since(after) while the run is live, and fetches the result once it
// ended.
//
// Memory is bounded: a run keeps at most MaxBytes of output events, and
// the registry at most MaxRuns runs, ended ones kept for Keep. While a
// Reader follows a run, the run does not drop an event that reader has
// not read: the tool's Output waits for it instead (the tool's pipe
// fills, and the tool waits in its write), so a client that reads, however
// slowly, loses nothing. A reader that has not taken an event for
// StallWindow while the run waited on it is stalled: the run drops for it
// from then on, and when it reads again its first event is a gap saying
// how many events and exactly how many output bytes it missed. With no
// reader attached the oldest events go first, and a reader resuming from
// one of them learns the same.
//
// Imports: the standard library only. Imported by dispatch, api,
// mcpserver, operator, the daemon and cmd/toolagent.
package runs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"
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
	// kept; Dropped says how many, DroppedBytes how many bytes of output
	// they carried.
	EventGap = "gap"
)

// Defaults of Options fields left zero.
const (
	DefaultKeep     = 10 * time.Minute
	DefaultMaxRuns  = 1024
	DefaultMaxBytes = 1 << 20
	// DefaultStallWindow is how long the run waits for a reader that
	// stopped taking events before it drops events for it.
	DefaultStallWindow = 10 * time.Second
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
	// Dropped is how many events a gap stands for (EventGap), and
	// DroppedBytes how many bytes of output (stdout and stderr, as the
	// tool wrote them, before any encoding) they carried.
	Dropped      int64 `json:"dropped,omitempty"`
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
	// Progress, Total and Message are a progress report (EventProgress);
	// Total is 0 when the tool gave none.
	Progress float64 `json:"progress,omitempty"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`

	// end is the run's output byte count up to the end of this event.
	end int64
	// raw holds the data of an output event chunks are still joined into
	// (Data is "" until it is sealed).
	raw []byte
}

// size is the bytes of e's data, joined or sealed.
func (e *Event) size() int {
	if e.raw != nil {
		return len(e.raw)
	}
	return len(e.Data)
}

// seal turns the joined chunks into Data: without a copy when the buffer
// is mostly used (it is never written again), else into a string of
// their size.
func (e *Event) seal() {
	if e.raw == nil {
		return
	}
	if len(e.raw) >= cap(e.raw)/2 {
		e.Data = unsafe.String(unsafe.SliceData(e.raw), len(e.raw))
	} else {
		e.Data = string(e.raw)
	}
	e.raw = nil
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
	// StallWindow is how long a run waits for a reader that stopped
	// taking events before it drops events for that reader (0:
	// DefaultStallWindow).
	StallWindow time.Duration
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
	if opts.StallWindow <= 0 {
		opts.StallWindow = DefaultStallWindow
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Registry{opts: opts, byID: map[string]*Run{}}
}

// Start records a new live run.
func (g *Registry) Start(id, tool, caller string) *Run {
	r := &Run{ID: id, Tool: tool, Caller: caller, Started: g.opts.Now(), maxBytes: g.opts.MaxBytes, window: g.opts.StallWindow, now: g.opts.Now, changed: make(chan struct{}), advanced: make(chan struct{})}
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
	window   time.Duration
	now      func() time.Time

	mu      sync.Mutex
	events  []Event // kept events; events[0].Seq is the oldest kept
	bytes   int     // bytes of the kept events' Data
	next    int64   // Seq of the next event
	out     int64   // output bytes so far (Event.end of the last one)
	done    bool
	endedAt time.Time
	changed chan struct{} // closed and replaced at every change
	// stderrLine is the unfinished last line of stderr, scanned for
	// progress lines (at most maxLine bytes of it are kept).
	stderrLine []byte
	// readers are the attached readers; orphaned, when set, runs when the
	// last one leaves a live run.
	readers  []*Reader
	orphaned func()
	// advanced is closed and replaced when a reader takes events, leaves,
	// or the run is abandoned: a waiting Output looks again.
	advanced  chan struct{}
	abandoned bool
	// taken is the newest seq a reader has been given: events up to it
	// never change again.
	taken int64
	// dropped remembers where the last dropped events ended, so a
	// reader resuming from one of them learns exactly how many bytes it
	// missed.
	dropped [droppedKept]droppedEnd
}

// droppedKept is how many dropped events' ends a run remembers.
const droppedKept = 256

type droppedEnd struct{ seq, end int64 }

// OnOrphaned sets f to run (on a goroutine of its own) whenever the last
// attached reader leaves while the run is live.
func (r *Run) OnOrphaned(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.orphaned = f
}

// Reader follows a run's events from a position. While it is open the run
// keeps what it has not read yet (see the package doc). Its methods are
// not for concurrent use; Close is.
type Reader struct {
	r     *Run
	after int64 // seq of the last event taken
	off   int64 // output bytes up to the end of that event; -1: unknown
	// behind is when the run first waited for this reader since it last
	// took events (zero: not waited for).
	behind time.Time
	closed bool
}

// Attach opens a reader of the run from the event after seq after (0:
// from the start). Close it when done.
func (r *Run) Attach(after int64) *Reader {
	r.mu.Lock()
	defer r.mu.Unlock()
	rd := &Reader{r: r, after: after, off: r.offsetLocked(after)}
	r.readers = append(r.readers, rd)
	return rd
}

// offsetLocked returns the output bytes up to the end of event seq, or -1
// when the run no longer knows.
func (r *Run) offsetLocked(seq int64) int64 {
	if seq <= 0 {
		return 0
	}
	if seq >= r.next {
		return r.out
	}
	if len(r.events) > 0 && seq >= r.events[0].Seq {
		return r.events[seq-r.events[0].Seq].end
	}
	if d := r.dropped[seq%droppedKept]; d.seq == seq {
		return d.end
	}
	return -1
}

// Close detaches the reader; the run no longer waits for it. A second
// Close does nothing.
func (rd *Reader) Close() {
	r := rd.r
	r.mu.Lock()
	if rd.closed {
		r.mu.Unlock()
		return
	}
	rd.closed = true
	r.readers = slices.DeleteFunc(r.readers, func(x *Reader) bool { return x == rd })
	r.signalAdvancedLocked()
	var f func()
	if len(r.readers) == 0 && !r.done {
		f = r.orphaned
	}
	r.mu.Unlock()
	if f != nil {
		go f()
	}
}

// Next returns the events after the reader's position (first a gap when
// some of them are no longer kept), whether the run has ended with them,
// and a channel closed at the next change (nil once ended). Taking events
// counts as reading: the run stops waiting for the reader until it falls
// behind again.
func (rd *Reader) Next() (evs []Event, done bool, changed <-chan struct{}) {
	r := rd.r
	r.mu.Lock()
	defer r.mu.Unlock()
	evs = r.sinceLocked(rd.after, rd.off)
	if n := len(evs); n > 0 {
		r.taken = max(r.taken, evs[n-1].Seq)
		rd.after = evs[n-1].Seq
		rd.off = r.offsetLocked(rd.after)
		rd.behind = time.Time{}
		r.signalAdvancedLocked()
	}
	if r.done {
		return evs, true, nil
	}
	return evs, false, r.changed
}

// Followers returns how many readers are attached.
func (r *Run) Followers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.readers)
}

// Followed reports whether a reader is attached and the run has not been
// abandoned: whoever feeds the run should then go on past any cap of its
// own, since the reader is shown all of the output.
func (r *Run) Followed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.readers) > 0 && !r.abandoned
}

// Abandon stops the run from ever waiting for its readers again (the call
// is being cancelled): Output never blocks from then on.
func (r *Run) Abandon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.abandoned = true
	r.signalAdvancedLocked()
}

func (r *Run) signalAdvancedLocked() {
	close(r.advanced)
	r.advanced = make(chan struct{})
}

// Output adds a chunk of stdout or stderr (stream EventStdout or
// EventStderr). p is copied. When the kept events are full and a reader
// that is not stalled has not read the oldest one, Output waits until it
// has (or until that reader is stalled, has left, or the run is abandoned).
// A chunk that follows one of the same stream no reader has taken yet
// joins it (up to mergeMax bytes): a fast tool's output makes fewer,
// larger events.
func (r *Run) Output(stream string, p []byte) {
	if len(p) == 0 {
		return
	}
	text := utf8.Valid(p)
	size := len(p)
	if !text {
		size = base64.StdEncoding.EncodedLen(len(p))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for !r.done {
		wait, deadline := r.waitLocked(size)
		if wait == nil {
			break
		}
		r.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-wait:
		case <-t.C:
		}
		t.Stop()
		r.mu.Lock()
	}
	if r.done {
		return
	}
	r.out += int64(len(p))
	if last := r.lastLocked(); text && last != nil && last.Event == stream && last.Encoding == "" &&
		last.Seq > r.taken && last.size()+len(p) <= mergeMax {
		if last.raw == nil {
			last.raw = append(make([]byte, 0, mergeMax), last.Data...)
			last.Data = ""
		}
		last.raw = append(last.raw, p...)
		last.end = r.out
		r.bytes += len(p)
		r.signalChangedLocked()
	} else {
		e := Event{Event: stream, end: r.out}
		if text {
			e.Data = string(p)
		} else {
			e.Data, e.Encoding = base64.StdEncoding.EncodeToString(p), "base64"
		}
		r.appendLocked(e, len(e.Data))
	}
	if stream == EventStderr {
		r.scanProgressLocked(p)
	}
	for r.bytes > r.maxBytes && len(r.events) > 1 {
		first := r.events[0]
		r.dropped[first.Seq%droppedKept] = droppedEnd{first.Seq, first.end}
		r.bytes -= first.size()
		r.events[0] = Event{}
		r.events = r.events[1:]
	}
}

// mergeMax bounds the data of an event chunks are joined into.
const mergeMax = 64 << 10

// lastLocked returns the newest kept event, or nil.
func (r *Run) lastLocked() *Event {
	if len(r.events) == 0 {
		return nil
	}
	return &r.events[len(r.events)-1]
}

// waitLocked returns, when adding n bytes would drop events a reader
// has not read, the channel that signals a reader's progress and the
// time the slowest such reader becomes stalled; nil when nothing need
// wait.
func (r *Run) waitLocked(n int) (<-chan struct{}, time.Time) {
	if r.abandoned || len(r.readers) == 0 {
		return nil, time.Time{}
	}
	// last is the seq of the newest event that would go.
	last, free := int64(0), r.maxBytes-r.bytes-n
	for i := 0; free < 0 && i < len(r.events); i++ {
		free += r.events[i].size()
		last = r.events[i].Seq
	}
	if last == 0 {
		return nil, time.Time{}
	}
	now := time.Now()
	var deadline time.Time
	for _, rd := range r.readers {
		if rd.after >= last {
			continue // it has read all that would go
		}
		if rd.behind.IsZero() {
			rd.behind = now
		}
		d := rd.behind.Add(r.window)
		if !now.Before(d) {
			continue // stalled: the run no longer waits for it
		}
		if deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	}
	if deadline.IsZero() {
		return nil, time.Time{}
	}
	return r.advanced, deadline
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
	r.appendLocked(Event{Event: EventResult, Result: b, end: r.out}, 0)
	r.done, r.endedAt = true, r.now()
	r.signalAdvancedLocked()
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
			r.appendLocked(Event{Event: EventProgress, Progress: prog, Total: total, Message: msg, end: r.out}, 0)
		}
	}
}

func (r *Run) appendLocked(e Event, n int) {
	if last := r.lastLocked(); last != nil {
		last.seal() // no longer the newest: nothing joins it
	}
	r.next++
	e.Seq = r.next
	r.events = append(r.events, e)
	r.bytes += n
	r.signalChangedLocked()
}

func (r *Run) signalChangedLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Since returns the kept events after seq after, whether the run has
// ended, and a channel closed at the next change (nil once ended). When
// events after `after` are no longer kept, the first event is a gap
// saying how many are missing. It reads without following: the run never
// waits for it (see Attach).
func (r *Run) Since(after int64) (evs []Event, done bool, changed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs = r.sinceLocked(after, r.offsetLocked(after))
	if n := len(evs); n > 0 {
		r.taken = max(r.taken, evs[n-1].Seq)
	}
	if r.done {
		return evs, true, nil
	}
	return evs, false, r.changed
}

// sinceLocked returns the kept events after seq after, with a gap first
// when some are no longer kept; off is the output bytes up to the end of
// after (-1: unknown, and the gap then says no byte count).
func (r *Run) sinceLocked(after, off int64) (evs []Event) {
	if len(r.events) == 0 {
		return nil
	}
	r.lastLocked().seal() // taken now: nothing joins it any more
	first := r.events[0]
	if after+1 < first.Seq {
		gap := Event{Seq: first.Seq - 1, Event: EventGap, Dropped: first.Seq - 1 - after}
		if off >= 0 {
			gap.DroppedBytes = r.offsetLocked(first.Seq-1) - off
		}
		gap.end = r.offsetLocked(first.Seq - 1)
		evs = append(evs, gap)
	}
	i := max(after+1-first.Seq, 0)
	if i < int64(len(r.events)) {
		evs = append(evs, r.events[i:]...)
	}
	return evs
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
