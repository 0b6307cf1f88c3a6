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
// A run reuses the buffers its output events are joined in: a reader
// that takes events through Reader.Each sees them only while its callback
// runs, so the buffer of an event dropped since is free once no callback
// reads it. Events Next and Since give out are never reused.
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
	// buf, when set, is the run's buffer raw or Data is in: the run
	// reuses it once the event is dropped and no one can see it (see
	// Reader.Each). Nil when the Data is the garbage collector's.
	buf *[mergeMax]byte
}

// size is the bytes of e's data, joined or sealed.
func (e *Event) size() int {
	if e.raw != nil {
		return len(e.raw)
	}
	return len(e.Data)
}

// sealLocked turns e's joined chunks into Data: without a copy when the
// buffer is mostly used (it is not written again until it is reused, see
// Reader.Each), else into a string of their size, and the buffer is free
// at once: no one has seen it.
func (r *Run) sealLocked(e *Event) {
	if e.raw == nil {
		return
	}
	if len(e.raw) >= cap(e.raw)/2 {
		e.Data = unsafe.String(unsafe.SliceData(e.raw), len(e.raw))
	} else {
		e.Data = string(e.raw)
		r.putLocked(e.buf)
		e.buf = nil
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
	changed chan struct{} // closed and replaced at every change once handed out
	// changedSeen: changed was handed out since it was made.
	changedSeen bool
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

	// The buffers output events are joined in, reused. A buffer is free
	// when its event is dropped (or sealed into a copy) and no one can
	// see it: an event given out by Since or Next is the garbage
	// collector's from then on (its buf is cleared), and one given to a
	// Reader.Each callback is pinned until the callback returns.
	free    []*[mergeMax]byte
	pins    []pin     // the seqs Each callbacks are reading
	retired []retired // dropped events' buffers still pinned
	made    int       // buffers allocated (tests)
}

// pin is the seqs [lo, hi] an Each callback reads.
type pin struct{ lo, hi int64 }

// retired is the buffer of dropped event seq.
type retired struct {
	seq int64
	buf *[mergeMax]byte
}

// maxFree bounds the free buffers of a run: what its kept events fill,
// and some.
func (r *Run) maxFree() int { return r.maxBytes/mergeMax + 4 }

// getLocked returns an empty buffer: a free one, else a new one.
func (r *Run) getLocked() *[mergeMax]byte {
	if n := len(r.free); n > 0 {
		b := r.free[n-1]
		r.free[n-1] = nil
		r.free = r.free[:n-1]
		return b
	}
	r.made++
	return new([mergeMax]byte)
}

// putLocked frees b (nil: nothing), which no one can see any more. An
// ended run keeps none: it is only read from then on.
func (r *Run) putLocked(b *[mergeMax]byte) {
	if b != nil && !r.done && len(r.free) < r.maxFree() {
		r.free = append(r.free, b)
	}
}

// retireLocked frees the buffer of dropped event e, or keeps it until no
// Each callback reads e.
func (r *Run) retireLocked(e *Event) {
	if e.buf == nil {
		return
	}
	if r.pinnedLocked(e.Seq) {
		r.retired = append(r.retired, retired{e.Seq, e.buf})
	} else {
		r.putLocked(e.buf)
	}
	e.buf = nil
}

func (r *Run) pinnedLocked(seq int64) bool {
	for _, p := range r.pins {
		if p.lo <= seq && seq <= p.hi {
			return true
		}
	}
	return false
}

// unpinLocked ends pin p, freeing the retired buffers no pin holds.
func (r *Run) unpinLocked(p pin) {
	if i := slices.Index(r.pins, p); i >= 0 {
		r.pins = slices.Delete(r.pins, i, i+1)
	}
	r.retired = slices.DeleteFunc(r.retired, func(x retired) bool {
		if r.pinnedLocked(x.seq) {
			return false
		}
		r.putLocked(x.buf)
		return true
	})
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
	evs    []Event // Each's events, reused
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
	evs = r.sinceLocked(nil, rd.after, rd.off, true)
	done, changed = rd.tookLocked(evs)
	return evs, done, changed
}

// Each calls f with each event after the reader's position, as Next
// returns them, and returns as Next does; it stops at the first error of
// f and returns it. f must not keep e, its Data or anything made without a
// copy from them once it returns: the run reuses the buffer of an event's
// Data once the event is dropped and no Each callback reads it. (Events
// Next or Since return are never reused.) f runs without the run's lock:
// it may write to a slow client while the tool goes on writing.
func (rd *Reader) Each(f func(e *Event) error) (done bool, changed <-chan struct{}, err error) {
	r := rd.r
	r.mu.Lock()
	evs := r.sinceLocked(rd.evs[:0], rd.after, rd.off, false)
	done, changed = rd.tookLocked(evs)
	if len(evs) == 0 {
		r.mu.Unlock()
		return done, changed, nil
	}
	p := pin{evs[0].Seq, evs[len(evs)-1].Seq}
	r.pins = append(r.pins, p)
	r.mu.Unlock()
	defer func() {
		clear(evs) // no reference to a buffer once it may be reused
		rd.evs = evs[:0]
		r.mu.Lock()
		r.unpinLocked(p)
		r.mu.Unlock()
	}()
	for i := range evs {
		if err = f(&evs[i]); err != nil {
			return done, changed, err
		}
	}
	return done, changed, nil
}

// tookLocked moves the reader past evs, which it took, and returns
// whether the run has ended and its change channel (nil once ended).
func (rd *Reader) tookLocked(evs []Event) (done bool, changed <-chan struct{}) {
	r := rd.r
	if n := len(evs); n > 0 {
		r.taken = max(r.taken, evs[n-1].Seq)
		rd.after = evs[n-1].Seq
		rd.off = r.offsetLocked(rd.after)
		rd.behind = time.Time{}
		r.signalAdvancedLocked()
	}
	if r.done {
		return true, nil
	}
	return false, r.changedLocked()
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
	if text {
		r.joinLocked(stream, p)
	} else {
		r.out += int64(len(p))
		e := Event{Event: stream, end: r.out}
		e.Data, e.Encoding = base64.StdEncoding.EncodeToString(p), "base64"
		r.appendLocked(e, len(e.Data))
	}
	if stream == EventStderr {
		r.scanProgressLocked(p)
	}
	for r.bytes > r.maxBytes && len(r.events) > 1 {
		first := &r.events[0]
		r.dropped[first.Seq%droppedKept] = droppedEnd{first.Seq, first.end}
		r.bytes -= first.size()
		r.retireLocked(first)
		*first = Event{}
		r.events = r.events[1:]
	}
}

// joinLocked adds text p to the newest event while it is of the same
// stream, no reader has taken it and it has room, and the rest to new
// events of at most mergeMax bytes each, cut between runes. A new event
// takes one of the run's buffers, unless its chunk is smaller than
// smallChunk: then it is a string until a chunk joins it.
func (r *Run) joinLocked(stream string, p []byte) {
	for len(p) > 0 {
		last := r.lastLocked()
		if last == nil || last.Event != stream || last.Encoding != "" || last.Seq <= r.taken || last.size() >= mergeMax {
			if len(p) < smallChunk { // a string of its own: most calls write little
				r.out += int64(len(p))
				r.appendLocked(Event{Event: stream, Data: string(p), end: r.out}, len(p))
				return
			}
			r.appendLocked(Event{Event: stream, end: r.out}, 0)
			last = r.lastLocked()
		}
		if last.raw == nil { // the new one, or a sealed one no one took
			if len(last.Data) >= mergeMax/2 {
				r.appendLocked(Event{Event: stream, end: r.out}, 0)
				last = r.lastLocked()
			}
			last.buf = r.getLocked()
			last.raw = append(last.buf[:0], last.Data...)
			last.Data = ""
		}
		n := min(len(p), mergeMax-len(last.raw))
		for n < len(p) && n > 0 && !utf8.RuneStart(p[n]) {
			n-- // a rune is not cut
		}
		if n == 0 { // no room for the rune: a new event
			r.appendLocked(Event{Event: stream, end: r.out}, 0)
			continue
		}
		last.raw = append(last.raw, p[:n]...)
		r.out += int64(n)
		last.end = r.out
		r.bytes += n
		p = p[n:]
	}
	r.signalChangedLocked()
}

// smallChunk: a chunk smaller than this starts an event without a buffer.
const smallChunk = 4 << 10

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
	r.free = nil // an ended run is only read: it joins no more chunks
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
		r.sealLocked(last) // no longer the newest: nothing joins it
	}
	r.next++
	e.Seq = r.next
	r.events = append(r.events, e)
	r.bytes += n
	r.signalChangedLocked()
}

func (r *Run) signalChangedLocked() {
	if r.changedSeen { // else no one can be waiting on it
		close(r.changed)
		r.changed, r.changedSeen = make(chan struct{}), false
	}
}

// changedLocked returns the channel closed at the next change.
func (r *Run) changedLocked() <-chan struct{} {
	r.changedSeen = true
	return r.changed
}

// Since returns the kept events after seq after, whether the run has
// ended, and a channel closed at the next change (nil once ended). When
// events after `after` are no longer kept, the first event is a gap
// saying how many are missing. It reads without following: the run never
// waits for it (see Attach).
func (r *Run) Since(after int64) (evs []Event, done bool, changed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs = r.sinceLocked(nil, after, r.offsetLocked(after), true)
	if n := len(evs); n > 0 {
		r.taken = max(r.taken, evs[n-1].Seq)
	}
	if r.done {
		return evs, true, nil
	}
	return evs, false, r.changedLocked()
}

// sinceLocked appends to evs the kept events after seq after, with a gap
// first when some are no longer kept; off is the output bytes up to the
// end of after (-1: unknown, and the gap then says no byte count). With
// give, the events' buffers are given away: never reused.
func (r *Run) sinceLocked(evs []Event, after, off int64, give bool) []Event {
	if len(r.events) == 0 {
		return evs
	}
	r.sealLocked(r.lastLocked()) // taken now: nothing joins it any more
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
		start := len(evs)
		evs = append(evs, r.events[i:]...)
		for k := range evs[start:] {
			evs[start+k].buf = nil // a reader's copy never frees a buffer
			if give {
				r.events[i+int64(k)].buf = nil
			}
		}
	}
	return evs
}

// Last returns the seq of the run's newest event (0: none yet) and
// whether the run has ended. It takes no event: a status poll costs the
// run nothing.
func (r *Run) Last() (seq int64, done bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next, r.done
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
