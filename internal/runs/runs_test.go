package runs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestRunEvents(t *testing.T) {
	g := New(Options{MaxBytes: 10})
	r := g.Start("a", "tool", "alice")
	r.Output(EventStdout, []byte("hello "))
	r.Output(EventStderr, []byte{0xff, 0xfe}) // not UTF-8
	r.Output(EventStdout, []byte("world"))    // 6+4+5 bytes kept > 10: the oldest goes
	evs, done, changed := r.Since(0)
	if done || changed == nil {
		t.Fatalf("a live run: done %v, changed %v", done, changed)
	}
	want := []Event{
		{Seq: 1, Event: EventGap, Dropped: 1, DroppedBytes: 6},
		{Seq: 2, Event: EventStderr, Data: "//4=", Encoding: "base64"},
		{Seq: 3, Event: EventStdout, Data: "world"},
	}
	if got, _ := json.Marshal(evs); string(got) != mustJSON(want) {
		t.Errorf("Since(0) = %s; want %s", got, mustJSON(want))
	}
	if evs, _, _ := r.Since(2); len(evs) != 1 || evs[0].Seq != 3 {
		t.Errorf("Since(2) = %+v; want only seq 3", evs)
	}
	r.Finish(map[string]int{"exit_code": 3})
	select {
	case <-changed:
	default:
		t.Errorf("Finish did not signal the waiting reader")
	}
	evs, done, changed = r.Since(3)
	if !done || changed != nil || len(evs) != 1 || evs[0].Event != EventResult || string(evs[0].Result) != `{"exit_code":3}` {
		t.Errorf("after Finish: %+v done %v", evs, done)
	}
	r.Output(EventStdout, []byte("late"))
	r.Finish("again")
	if res, ok := r.Result(); !ok || string(res) != `{"exit_code":3}` {
		t.Errorf("Result() = %s %v; want the first result, nothing after it", res, ok)
	}
}

func TestRegistryKeepsAndForgets(t *testing.T) {
	now := time.Unix(1000, 0)
	g := New(Options{Keep: time.Minute, MaxRuns: 3, Now: func() time.Time { return now }})
	live := g.Start("live", "t", "c")
	for _, id := range []string{"a", "b"} {
		g.Start(id, "t", "c").Finish(id)
	}
	g.Start("c", "t", "c") // 4 runs > 3: the oldest ended one (a) goes, never the live one
	if _, ok := g.Get("a"); ok {
		t.Errorf("a kept beyond MaxRuns")
	}
	for _, id := range []string{"live", "b", "c"} {
		if _, ok := g.Get(id); !ok {
			t.Errorf("%s forgotten", id)
		}
	}
	now = now.Add(2 * time.Minute) // b ended more than Keep ago
	if _, ok := g.Get("b"); ok {
		t.Errorf("b kept beyond Keep")
	}
	if r, ok := g.Get("live"); !ok || r != live {
		t.Errorf("the live run was forgotten")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return strings.TrimSpace(string(b))
}

// TestProgressEvents: a stderr line TOOLAGENT_PROGRESS N[/TOTAL] [message]
// adds a progress event after its chunk, however the line is split; other
// lines and malformed reports add none.
func TestProgressEvents(t *testing.T) {
	r := New(Options{}).Start("p", "t", "c")
	r.Output(EventStderr, []byte("TOOLAGENT_PRO"))
	r.Output(EventStderr, []byte("GRESS 40/100 copying files\nnoise\nTOOLAGENT_PROGRESS x/1 bad\nTOOLAGENT_PROGRESS 3\n"))
	r.Output(EventStdout, []byte("TOOLAGENT_PROGRESS 9/9 on stdout is output\n"))
	evs, _, _ := r.Since(0)
	var got []Event
	for _, e := range evs {
		if e.Event == EventProgress {
			got = append(got, e)
		}
	}
	want := []Event{
		// The two stderr chunks, untaken, are one event (seq 1).
		{Seq: 2, Event: EventProgress, Progress: 40, Total: 100, Message: "copying files"},
		{Seq: 3, Event: EventProgress, Progress: 3},
	}
	if mustJSON(got) != mustJSON(want) {
		t.Errorf("progress events %s; want %s", mustJSON(got), mustJSON(want))
	}
	for _, bad := range []string{"TOOLAGENT_PROGRESS -1", "TOOLAGENT_PROGRESS 1/0", "TOOLAGENT_PROGRESS NaN", "TOOLAGENT_PROGRESS", "progress 5"} {
		if _, _, _, ok := ParseProgress(bad); ok {
			t.Errorf("ParseProgress(%q) accepted", bad)
		}
	}
}
