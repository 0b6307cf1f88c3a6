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
		{Seq: 1, Event: EventGap, Dropped: 1},
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
