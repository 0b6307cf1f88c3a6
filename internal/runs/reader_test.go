package runs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// produce writes total bytes of numbered lines to r as chunks of random
// sizes (as a pipe gives them), then finishes r; it returns what it wrote.
func produce(r *Run, total int, seed uint64) []byte {
	var all bytes.Buffer
	for i := 0; all.Len() < total; i++ {
		fmt.Fprintf(&all, "%d\n", i)
	}
	b := all.Bytes()
	rng := rand.New(rand.NewPCG(seed, 1))
	for p := b; len(p) > 0; {
		n := min(len(p), 1+rng.IntN(40<<10))
		r.Output(EventStdout, p[:n])
		p = p[n:]
	}
	r.Finish("done")
	return b
}

// follow reads rd to the run's end and returns the stdout data and the
// gaps it met.
func follow(t *testing.T, rd *Reader, slow bool) (data []byte, gaps []Event) {
	t.Helper()
	defer rd.Close()
	var buf bytes.Buffer
	for {
		evs, done, changed := rd.Next()
		for _, e := range evs {
			switch e.Event {
			case EventStdout:
				buf.WriteString(e.Data)
				if slow { // a slow client: work per event
					for range 20 {
						_ = strings.Count(e.Data, "7")
					}
				}
			case EventGap:
				gaps = append(gaps, e)
			}
		}
		if done {
			return buf.Bytes(), gaps
		}
		<-changed
	}
}

// TestReaderLosesNothing: readers that read, fast or slow, get every byte
// of a run's output in order with no gap, though the run keeps only 64
// KiB: the producer waits for them.
func TestReaderLosesNothing(t *testing.T) {
	g := New(Options{MaxBytes: 64 << 10, StallWindow: time.Hour})
	r := g.Start("a", "t", "c")
	const readers = 8
	got := make([][]byte, readers)
	gaps := make([][]Event, readers)
	var wg sync.WaitGroup
	for i := range readers {
		rd := r.Attach(0)
		wg.Go(func() { got[i], gaps[i] = follow(t, rd, i%2 == 1) })
	}
	want := produce(r, 4<<20, 1)
	wg.Wait()
	for i := range readers {
		if len(gaps[i]) > 0 || !bytes.Equal(got[i], want) {
			t.Errorf("reader %d: %d of %d bytes, equal %v, gaps %+v", i, len(got[i]), len(want), bytes.Equal(got[i], want), gaps[i])
		}
	}
	if r.Followers() != 0 {
		t.Errorf("%d followers after all readers closed", r.Followers())
	}
}

// TestReaderStalled: a reader that stops taking events holds the producer
// back only for the stall window: then the run drops for it, the producer
// finishes, and the reader's next event is a gap naming exactly the bytes
// it missed; what it has before and after the gap is the output with that
// many bytes cut out. A reader that reads meanwhile loses nothing.
func TestReaderStalled(t *testing.T) {
	// The window is long enough that the reading reader, however the
	// host schedules it, takes something within it: it is the stalled one
	// alone that the producer stops waiting for.
	g := New(Options{MaxBytes: 64 << 10, StallWindow: 2 * time.Second})
	r := g.Start("a", "t", "c")
	stalled := r.Attach(0)
	var reading []byte
	var readingGaps []Event
	var wg sync.WaitGroup
	rd := r.Attach(0)
	wg.Go(func() { reading, readingGaps = follow(t, rd, false) })
	produced := make(chan []byte, 1)
	go func() { produced <- produce(r, 4<<20, 2) }()
	// It takes what there is once, then stops reading until the run ended.
	var before bytes.Buffer
	for before.Len() == 0 {
		evs, _, changed := stalled.Next()
		for _, e := range evs {
			before.WriteString(e.Data)
		}
		if before.Len() == 0 {
			<-changed
		}
	}
	want := <-produced // the producer finished: the stalled reader did not block it for good
	wg.Wait()
	if len(readingGaps) > 0 || !bytes.Equal(reading, want) {
		t.Errorf("the reading reader: %d of %d bytes, gaps %+v", len(reading), len(want), readingGaps)
	}
	after, gaps := follow(t, stalled, false)
	if len(gaps) != 1 || gaps[0].Dropped <= 0 {
		t.Fatalf("the stalled reader's gaps: %+v; want one", gaps)
	}
	n := gaps[0].DroppedBytes
	if int64(before.Len())+n+int64(len(after)) != int64(len(want)) ||
		!bytes.HasPrefix(want, before.Bytes()) || !bytes.HasSuffix(want, after) {
		t.Errorf("stalled reader: %d bytes, a gap of %d, then %d; want them to make the %d written, in place",
			before.Len(), n, len(after), len(want))
	}
}

// TestReaderCloseAndAbandon: a producer waiting for a reader goes on when
// the reader leaves, and a run abandoned never waits.
func TestReaderCloseAndAbandon(t *testing.T) {
	for _, how := range []string{"close", "abandon"} {
		r := New(Options{MaxBytes: 10, StallWindow: time.Hour}).Start("a", "t", "c")
		rd := r.Attach(0)
		r.Output(EventStdout, []byte("0123456789"))
		done := make(chan struct{})
		go func() {
			r.Output(EventStdout, []byte("more")) // the kept bytes are full: it waits
			close(done)
		}()
		if how == "close" {
			rd.Close()
		} else {
			r.Abandon()
		}
		<-done
		if r.Followed() {
			t.Errorf("%s: the run still counts as followed", how)
		}
	}
}

// TestResumeAfterDrop: a reader attached after events were dropped with
// no one following gets a gap with the exact bytes, from the start and
// from a seq it had.
func TestResumeAfterDrop(t *testing.T) {
	r := New(Options{MaxBytes: 8}).Start("a", "t", "c")
	rd := r.Attach(0)
	r.Output(EventStdout, []byte("ab"))
	evs, _, _ := rd.Next() // takes seq 1: later chunks do not join it
	rd.Close()
	r.Output(EventStdout, []byte("cdef"))
	r.Output(EventStderr, []byte("ghijk")) // 11 bytes > 8: "ab" and "cdef" go
	if len(evs) != 1 || evs[0].Data != "ab" {
		t.Fatalf("first events %+v", evs)
	}
	for after, want := range map[int64]Event{
		0: {Seq: 2, Event: EventGap, Dropped: 2, DroppedBytes: 6},
		1: {Seq: 2, Event: EventGap, Dropped: 1, DroppedBytes: 4},
	} {
		rd := r.Attach(after)
		evs, _, _ := rd.Next()
		rd.Close()
		if len(evs) != 2 || mustJSON(evs[0]) != mustJSON(want) || evs[1].Data != "ghijk" {
			t.Errorf("after %d: %s; want %s then ghijk", after, mustJSON(evs), mustJSON(want))
		}
	}
}

// TestJoinedChunks: chunks no reader took join into one event; a taken
// event never changes, and a chunk that is not UTF-8 stays on its own.
func TestJoinedChunks(t *testing.T) {
	r := New(Options{}).Start("a", "t", "c")
	r.Output(EventStdout, []byte("a"))
	r.Output(EventStdout, []byte("b"))
	rd := r.Attach(0)
	evs, _, _ := rd.Next()
	r.Output(EventStdout, []byte("c"))
	r.Output(EventStdout, []byte{0xff})
	r.Output(EventStdout, []byte("d"))
	more, _, _ := rd.Next()
	want := `[{"seq":1,"event":"stdout","data":"ab"}]` + `[{"seq":2,"event":"stdout","data":"c"},{"seq":3,"event":"stdout","data":"/w==","encoding":"base64"},{"seq":4,"event":"stdout","data":"d"}]`
	if got := mustJSON(evs) + mustJSON(more); got != want {
		t.Errorf("events %s; want %s", got, want)
	}
	if again, _, _ := r.Since(0); mustJSON(again[:1]) != `[{"seq":1,"event":"stdout","data":"ab"}]` {
		t.Errorf("the taken event changed: %s", mustJSON(again))
	}
}

// TestAppendJSON: an event's JSON is json.Marshal's, byte for byte, for
// every kind of text a tool writes.
func TestAppendJSON(t *testing.T) {
	texts := []string{"", "hello\n", "a<b>&c\"d\\e", "\x00\x01\x08\x0c\x1f\x7f\t\r\n", "é日本\u2028\u2029😀",
		strings.Repeat("x\n", 5000) + "é", "\xff\xfe bad", "cut é\xc3", strings.Repeat("é", 3000)}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		b := make([]byte, rng.IntN(9000))
		for i := range b {
			b[i] = byte(rng.IntN(256))
			if rng.IntN(4) > 0 {
				b[i] &= 0x7f
			}
		}
		texts = append(texts, string(b))
	}
	for _, s := range texts {
		for _, e := range []Event{
			{Seq: 12, Event: EventStdout, Data: s},
			{Seq: 1 << 40, Event: EventStderr, Data: base64.StdEncoding.EncodeToString([]byte(s)), Encoding: "base64"},
			{Seq: 3, Event: EventProgress, Progress: 1, Message: s},
			{Seq: 4, Event: EventGap, Dropped: 2, DroppedBytes: 77},
		} {
			want, _ := json.Marshal(e)
			if got := e.AppendJSON([]byte("x")); string(got[1:]) != string(want) || got[0] != 'x' {
				t.Fatalf("AppendJSON(%q)\n= %q\nwant %q", s, got, want)
			}
		}
	}
}

// BenchmarkFollow: a run's output through a reader that encodes every
// event as the API writes it (through Each: the run reuses its buffers),
// chunks as a pipe gives them.
func BenchmarkFollow(b *testing.B) {
	var all bytes.Buffer
	for i := 1; all.Len() < 8<<20; i++ {
		fmt.Fprintf(&all, "%d\n", i)
	}
	data := all.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := New(Options{}).Start("a", "t", "c")
		rd := r.Attach(0)
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer rd.Close()
			var buf []byte
			for {
				ended, changed, _ := rd.Each(func(e *Event) error {
					buf = e.AppendJSON(buf[:0])
					return nil
				})
				if ended {
					return
				}
				<-changed
			}
		}()
		for p := data; len(p) > 0; {
			n := min(len(p), 8<<10)
			r.Output(EventStdout, p[:n])
			p = p[n:]
		}
		r.Finish("done")
		<-done
	}
}
