package runs

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// mixedText is total bytes of numbered lines with multi-byte runes in
// them, so chunks cut between runes show.
func mixedText(total int) []byte {
	var all bytes.Buffer
	for i := 0; all.Len() < total; i++ {
		fmt.Fprintf(&all, "%d é日😀\n", i)
	}
	return all.Bytes()
}

// feed writes data to r in chunks of random sizes, some past mergeMax (a
// grown pipe gives up to 256 KiB at once), cut anywhere, even inside a
// rune (each chunk is then not UTF-8 and travels as base64), then
// finishes r.
func feed(r *Run, data []byte, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 5))
	for p := data; len(p) > 0; {
		n := min(len(p), 1+rng.IntN(3*mergeMax))
		if rng.IntN(8) > 0 { // mostly whole runes, as text
			for n < len(p) && !utf8RuneStart(p[n]) {
				n++
			}
		}
		r.Output(EventStdout, p[:n])
		p = p[n:]
	}
	r.Finish("done")
}

func utf8RuneStart(b byte) bool { return b&0xc0 != 0x80 }

// stdoutBytes is the output an event carries, decoded.
func stdoutBytes(t *testing.T, e *Event) []byte {
	t.Helper()
	if e.Encoding == "base64" {
		b, err := base64Decode(e.Data)
		if err != nil {
			t.Fatalf("event %d: %v", e.Seq, err)
		}
		return b
	}
	return []byte(e.Data)
}

// TestReusedBuffersNeverChange: the run reuses its buffers, and no
// reader ever sees bytes change: not an Each callback while it runs
// (fast, or slow enough that the run waits for it), not the events Next
// or Since gave out however long they are kept, and not a reader that
// leaves and re-attaches after events it had not read were dropped (it
// gets a gap naming the bytes, then the output from there). Run it with
// -race: a buffer written while a reader reads it is a data race too.
func TestReusedBuffersNeverChange(t *testing.T) {
	data := mixedText(6 << 20)
	r := New(Options{MaxBytes: 256 << 10, StallWindow: time.Hour}).Start("a", "t", "c")
	var wg sync.WaitGroup
	check := func(name string, got []byte) {
		if !bytes.Equal(got, data) {
			t.Errorf("%s: %d of %d bytes, equal %v", name, len(got), len(data), bytes.Equal(got, data))
		}
	}
	// each follows r through Each to its end; slow readers work and
	// yield inside the callback, then look again at what they were given.
	each := func(name string, rd *Reader, slow bool) {
		looks := 1
		if slow {
			looks = 30
		}
		defer rd.Close()
		var got []byte
		for {
			done, changed, err := rd.Each(func(e *Event) error {
				if e.Event == EventGap {
					return fmt.Errorf("%s: a gap %+v", name, *e)
				}
				if e.Event != EventStdout {
					return nil
				}
				seen := string(stdoutBytes(t, e)) // a copy
				for range looks {
					if slow {
						time.Sleep(0) // let the producer run
					}
					if now := stdoutBytes(t, e); string(now) != seen {
						return fmt.Errorf("%s: event %d changed while its callback ran", name, e.Seq)
					}
				}
				got = append(got, seen...)
				return nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			if done {
				check(name, got)
				return
			}
			<-changed
		}
	}
	fast, slow := r.Attach(0), r.Attach(0)
	wg.Go(func() { each("fast Each", fast, false) })
	wg.Go(func() { each("slow Each", slow, true) })

	// A reader that leaves after its first events and re-attaches once
	// events past its position were dropped. Attached here, before the
	// output, as fast and slow are: attached in its goroutine, which a
	// busy machine may start late, it began after events no reader held
	// any more were dropped, with a gap its first read did not expect.
	early := r.Attach(0)
	wg.Go(func() {
		rd := early
		var got []byte
		var after int64
		for len(got) == 0 {
			_, changed, err := rd.Each(func(e *Event) error {
				after = e.Seq
				if e.Event == EventStdout {
					got = append(got, stdoutBytes(t, e)...)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			if len(got) == 0 {
				<-changed
			}
		}
		rd.Close()
		for { // until the event after its position is no longer kept
			r.mu.Lock()
			gone := len(r.events) > 0 && r.events[0].Seq > after+1
			done, changed := r.done, r.changedLocked()
			r.mu.Unlock()
			if gone {
				break
			}
			if done {
				t.Errorf("re-attach: the run ended with event %d still kept", after+1)
				return
			}
			<-changed
		}
		rd = r.Attach(after)
		defer rd.Close()
		var gap *Event
		var rest []byte
		for {
			done, changed, err := rd.Each(func(e *Event) error {
				switch e.Event {
				case EventGap:
					if gap != nil || len(rest) > 0 {
						return fmt.Errorf("re-attach: a second gap %+v", *e)
					}
					g := *e
					gap = &g
				case EventStdout:
					rest = append(rest, stdoutBytes(t, e)...)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			if done {
				break
			}
			<-changed
		}
		if gap == nil || gap.DroppedBytes <= 0 {
			t.Fatalf("re-attach: gap %+v; want one with the bytes dropped", gap)
		}
		off := int64(len(got)) + gap.DroppedBytes
		if !bytes.HasPrefix(data, got) || off+int64(len(rest)) != int64(len(data)) || !bytes.Equal(data[off:], rest) {
			t.Errorf("re-attach: %d bytes, a gap of %d, then %d; want them to make the %d written, in place",
				len(got), gap.DroppedBytes, len(rest), len(data))
		}
	})
	feed(r, data, 1)
	wg.Wait()
	if limit := 2*r.maxFree() + 2; r.made > limit {
		t.Errorf("%d buffers allocated for %d bytes; want at most %d: they are reused", r.made, len(data), limit)
	}
}

// TestGivenEventsNeverChange: the events Next and Since give out are
// never reused, however long they are kept, while a reader through Each
// has the run reuse the others.
func TestGivenEventsNeverChange(t *testing.T) {
	for _, how := range []string{"Next", "Since"} {
		t.Run(how, func(t *testing.T) { testGivenEvents(t, how) })
	}
}

func testGivenEvents(t *testing.T, how string) {
	data := mixedText(4 << 20)
	r := New(Options{MaxBytes: 256 << 10, StallWindow: time.Hour}).Start("a", "t", "c")
	var wg sync.WaitGroup
	check := func(name string, got []byte) {
		if !bytes.Equal(got, data) {
			t.Errorf("%s: %d of %d bytes, equal %v", name, len(got), len(data), bytes.Equal(got, data))
		}
	}
	eachRd := r.Attach(0)
	wg.Go(func() {
		defer eachRd.Close()
		var got []byte
		for {
			done, changed, _ := eachRd.Each(func(e *Event) error {
				if e.Event == EventStdout {
					got = append(got, stdoutBytes(t, e)...)
				}
				return nil
			})
			if done {
				check("Each", got)
				return
			}
			<-changed
		}
	})
	// A reader that keeps every event Next gave it, and a poller of
	// Since that keeps every event, both looked at again at the end.
	type kept struct {
		e    Event
		data string // a copy, made when it was given
	}
	keepAll := func(name string, next func() ([]Event, bool, <-chan struct{})) {
		var all []kept
		for {
			evs, done, changed := next()
			for _, e := range evs {
				all = append(all, kept{e, strings.Clone(e.Data)})
			}
			if done {
				break
			}
			<-changed
		}
		var got []byte
		for _, k := range all {
			if k.e.Data != k.data {
				t.Errorf("%s: event %d changed after it was given out", name, k.e.Seq)
			}
			if k.e.Event == EventStdout {
				got = append(got, stdoutBytes(t, &k.e)...)
			}
		}
		if name == "Next" {
			check(name, got)
		}
	}
	if how == "Next" {
		nextRd := r.Attach(0)
		wg.Go(func() {
			defer nextRd.Close()
			keepAll("Next", nextRd.Next)
		})
	} else {
		since := int64(0)
		wg.Go(func() {
			keepAll("Since", func() ([]Event, bool, <-chan struct{}) {
				evs, done, changed := r.Since(since)
				if n := len(evs); n > 0 {
					since = evs[n-1].Seq
				}
				return evs, done, changed
			})
		})
	}

	feed(r, data, 3)
	wg.Wait()
}

// TestBuffersReused: a run followed through Each reuses its buffers: the
// ones it allocates fill its kept bytes, and a few more, however much
// output passes.
func TestBuffersReused(t *testing.T) {
	data := mixedText(8 << 20)
	r := New(Options{MaxBytes: 256 << 10, StallWindow: time.Hour}).Start("a", "t", "c")
	rd := r.Attach(0)
	var got []byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer rd.Close()
		for {
			ended, changed, _ := rd.Each(func(e *Event) error {
				if e.Event == EventStdout {
					got = append(got, stdoutBytes(t, e)...)
				}
				return nil
			})
			if ended {
				return
			}
			<-changed
		}
	}()
	feed(r, data, 2)
	<-done
	if !bytes.Equal(got, data) {
		t.Fatalf("%d of %d bytes, equal %v", len(got), len(data), bytes.Equal(got, data))
	}
	if limit := 2*r.maxFree() + 2; r.made > limit {
		t.Errorf("%d buffers allocated for %d bytes; want at most %d: they are reused", r.made, len(data), limit)
	}
	if r.free != nil {
		t.Errorf("an ended run keeps %d free buffers", len(r.free))
	}
}

func base64Decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// TestSmallOutputNoBuffer: a call that writes a little takes none of the
// run's buffers (a string of its size), and a second chunk joins it.
func TestSmallOutputNoBuffer(t *testing.T) {
	r := New(Options{}).Start("a", "t", "c")
	r.Output(EventStdout, []byte("hello\n"))
	if r.made != 0 {
		t.Errorf("a 6-byte output took %d buffers; want none", r.made)
	}
	r.Output(EventStdout, []byte("world\n"))
	r.Finish("done")
	evs, _, _ := r.Since(0)
	if len(evs) != 2 || evs[0].Data != "hello\nworld\n" || evs[1].Event != EventResult {
		t.Errorf("events %s; want the chunks joined, then the result", mustJSON(evs))
	}
}

// TestLastTakesNothing: a status poll names the newest event and takes
// nothing: the next chunk still joins that event.
func TestLastTakesNothing(t *testing.T) {
	r := New(Options{}).Start("a", "t", "c")
	if seq, done := r.Last(); seq != 0 || done {
		t.Errorf("a new run: Last() = %d, %v; want 0, false", seq, done)
	}
	r.Output(EventStdout, []byte("a"))
	if seq, done := r.Last(); seq != 1 || done {
		t.Errorf("Last() = %d, %v; want 1, false", seq, done)
	}
	r.Output(EventStdout, []byte("b"))
	r.Finish("done")
	evs, _, _ := r.Since(0)
	if seq, done := r.Last(); seq != 2 || !done || len(evs) != 2 || evs[0].Data != "ab" {
		t.Errorf("Last() = %d, %v, events %s; want 2, true, ab joined", seq, done, mustJSON(evs))
	}
}
