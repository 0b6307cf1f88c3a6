package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/runs"
)

// Media types of a run stream.
const (
	mediaNDJSON = "application/x-ndjson"
	mediaSSE    = "text/event-stream"
)

// streamMedia returns the stream media type the request accepts, or "".
func streamMedia(r *http.Request) string {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case mediaNDJSON:
			return mediaNDJSON
		case mediaSSE:
			return mediaSSE
		}
	}
	return ""
}

// runView is GET /v1/runs/{id}.
type runView struct {
	RunID   string          `json:"run_id"`
	Tool    string          `json:"tool"`
	State   string          `json:"state"` // running or done
	Started string          `json:"started_at"`
	Events  int64           `json:"events"` // the seq of its last event so far
	Result  json.RawMessage `json:"result,omitempty"`
}

// startRun records a run for a call (nil without a registry).
func (s *server) startRun(id, tool, caller string) *runs.Run {
	if s.opts.Runs == nil {
		return nil
	}
	return s.opts.Runs.Start(id, tool, caller)
}

// streamCall runs the call and answers with its run's events as they
// happen: 200 at once, then the output chunks, then exactly one result
// event with the Result the non-streaming call would have answered.
func (s *server) streamCall(w http.ResponseWriter, r *http.Request, media string, c dispatch.Call) {
	// The run exists before the call, so the stream can follow it; the
	// dispatcher, given the same registry, feeds it.
	run := s.startRun(c.RunID, c.Tool, c.Caller)
	if run == nil { // no registry: a run of this call's own
		run = runs.New(runs.Options{MaxRuns: 1}).Start(c.RunID, c.Tool, c.Caller)
		c.Output, c.Followed = run.Output, run.Followed
	}
	// The call outlives its stream's connection for a grace period, so a
	// client whose connection dropped can re-attach (GET
	// /v1/runs/{id}/events): when no reader is left for that long, the
	// call is cancelled as a hung-up call is. A shutdown cancels it at
	// once.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	defer context.AfterFunc(r.Context(), func() {
		if cause := context.Cause(r.Context()); errors.Is(cause, dispatch.ErrShutdown) {
			cancel(cause)
		}
	})()
	run.OnOrphaned(func() {
		t := time.NewTimer(s.reattachGrace())
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if run.Followers() == 0 {
			cancel(context.Canceled) // client gone
		}
	})
	// A cancelled call's output waits for no reader.
	defer context.AfterFunc(ctx, run.Abandon)()
	// The stream follows the run from before the call starts, so an
	// executor that asks whether anyone follows (the gatekeeper's, once)
	// hears yes.
	rd := run.Attach(0)
	done := make(chan dispatch.Result, 1)
	go func() {
		defer cancel(nil)
		res := s.inv.Invoke(ctx, c)
		run.Finish(res)
		done <- res
	}()
	w.Header().Set("Content-Type", media)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Run-Id", c.RunID)
	w.WriteHeader(http.StatusOK)
	writeRunEvent(w, media, runs.Event{Event: "run", Data: c.RunID})
	if s.followRun(w, r, media, rd) {
		<-done
	}
}

// reattachGrace is Options.ReattachGrace or its default.
func (s *server) reattachGrace() time.Duration {
	if s.opts.ReattachGrace > 0 {
		return s.opts.ReattachGrace
	}
	return DefaultReattachGrace
}

// DefaultReattachGrace is how long a streaming call goes on with no
// reader attached, waiting for its client to re-attach.
const DefaultReattachGrace = 10 * time.Second

// followRun writes the events of the run rd reads (those after the seq it
// was attached after) until the run ends (true) or the client goes away
// (false), then closes rd. While the client reads, the tool's output
// waits for it rather than being dropped (runs.Options.StallWindow).
// Once the run changed, the stream waits streamLinger before it takes
// the new events, so a tool that writes fast gathers into few large
// events (runs.Run.Output joins chunks no reader took), written at once:
// a write and a flush per batch, not per chunk of the tool's pipe. After
// a round of a batch or more it takes the next at once: the output
// gathered while it wrote.
func (s *server) followRun(w http.ResponseWriter, r *http.Request, media string, rd *runs.Reader) bool {
	defer rd.Close()
	rc := http.NewResponseController(w)
	linger := time.NewTimer(streamLinger)
	defer linger.Stop()
	var buf []byte
	sent := 0 // bytes of events in this round

	// write encodes e, the run's only until it returns (Reader.Each).
	write := func(e *runs.Event) error {
		n := len(buf)
		buf = appendRunEvent(buf, media, e)
		sent += len(buf) - n
		if len(buf) < streamBatch {
			return nil
		}
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	for {
		sent = 0
		ended, changed, err := rd.Each(write)
		if err != nil {
			return false
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				return false
			}
			buf = buf[:0]
		}
		if rc.Flush() != nil {
			return false
		}
		if ended {
			return true
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return false
		}
		if sent >= streamBatch {
			continue // a busy stream: what came meanwhile is gathered already
		}
		linger.Reset(streamLinger)
		select {
		case <-linger.C:
		case <-r.Context().Done():
			return false
		}
	}
}

// streamLinger is how long a stream lets a run's new output gather
// before it takes it: a delay no reader sees, and fewer, larger events.
const streamLinger = 2 * time.Millisecond

// streamBatch is how many bytes of events a stream writes at once: its
// buffer stays about that size, however many events a batch has.
const streamBatch = 256 << 10

// writeRunEvent writes one event as an NDJSON line or an SSE message.
func writeRunEvent(w http.ResponseWriter, media string, e runs.Event) error {
	_, err := w.Write(appendRunEvent(nil, media, &e))
	return err
}

// appendRunEvent appends one event as an NDJSON line or an SSE message.
func appendRunEvent(b []byte, media string, e *runs.Event) []byte {
	if media == mediaSSE {
		b = fmt.Appendf(b, "id: %d\nevent: %s\ndata: ", e.Seq, e.Event)
		return append(e.AppendJSON(b), "\n\n"...)
	}
	return append(e.AppendJSON(b), '\n')
}

// runFor returns the run the request names, if the caller may see it: its
// own, or any for an approver.
func (s *server) runFor(r *http.Request) (*runs.Run, error) {
	if s.opts.Runs == nil {
		return nil, errorf(http.StatusNotFound, "runs are not kept by this server")
	}
	run, ok := s.opts.Runs.Get(r.PathValue("id"))
	if !ok || (roleFrom(r.Context()) < RoleApprove && run.Caller != callerFrom(r.Context())) {
		return nil, errorf(http.StatusNotFound, "run %q: no such run here (runs are kept for a while after they end, on the daemon that ran them)", r.PathValue("id"))
	}
	return run, nil
}

// handleRun answers GET /v1/runs/{id}: the run's state, and its result
// once it ended.
func (s *server) handleRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.runFor(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	last, ended := run.Last()
	v := runView{RunID: run.ID, Tool: run.Tool, State: "running", Started: run.Started.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Events: last}
	if ended {
		v.State = "done"
		v.Result, _ = run.Result()
	}
	encode(w, s.log, http.StatusOK, v)
}

// handleRunEvents answers GET /v1/runs/{id}/events?after=SEQ: the run's
// events after SEQ (from the start without it), streamed while it is live;
// for SSE, the Last-Event-ID header resumes too.
func (s *server) handleRunEvents(w http.ResponseWriter, r *http.Request) {
	run, err := s.runFor(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	media := streamMedia(r)
	if media == "" {
		media = mediaNDJSON
	}
	after := int64(0)
	arg := r.URL.Query().Get("after")
	if arg == "" && media == mediaSSE {
		arg = r.Header.Get("Last-Event-ID")
	}
	if arg != "" {
		if after, err = strconv.ParseInt(arg, 10, 64); err != nil || after < 0 {
			writeError(w, s.log, errorf(http.StatusBadRequest, "after=%q: want the seq of the last event you have (an integer >= 0)", arg))
			return
		}
	}
	w.Header().Set("Content-Type", media)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	s.followRun(w, r, media, run.Attach(after))
}
