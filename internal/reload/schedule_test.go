package reload

import (
	"errors"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	"github.com/toolagent/toolagent/internal/scan"
)

func TestParseSchedule(t *testing.T) {
	tests := []struct {
		spec    string
		from    string // RFC 3339
		want    string // first time after from
		wantErr bool
	}{
		{spec: "@every 30s", from: "2026-06-01T10:00:00Z", want: "2026-06-01T10:00:30Z"},
		{spec: "*/5 * * * *", from: "2026-06-01T10:01:00Z", want: "2026-06-01T10:05:00Z"},    // 5 fields: minutes
		{spec: "*/10 * * * * *", from: "2026-06-01T10:00:01Z", want: "2026-06-01T10:00:10Z"}, // 6 fields: seconds first
		{spec: "@hourly", from: "2026-06-01T10:00:01Z", want: "2026-06-01T11:00:00Z"},
		{spec: "  @every 1m ", from: "2026-06-01T10:00:00Z", want: "2026-06-01T10:01:00Z"},
		{spec: "every 30s", wantErr: true},
		{spec: "* * *", wantErr: true},
		{spec: "", wantErr: true},
	}
	for _, tc := range tests {
		s, err := ParseSchedule(tc.spec)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseSchedule(%q) = nil error, want one", tc.spec)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSchedule(%q) error = %v", tc.spec, err)
			continue
		}
		from, _ := time.Parse(time.RFC3339, tc.from)
		if got := s.sched.Next(from).UTC().Format(time.RFC3339); got != tc.want {
			t.Errorf("ParseSchedule(%q).Next(%s) = %s, want %s", tc.spec, tc.from, got, tc.want)
		}
	}
}

// TestScheduleRun: the schedule ticks the trigger at each time (on the
// ticks channel, which Run drops while it backs off), Next tells when,
// and a burst of ticks before the loop reads them coalesces.
func TestScheduleRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := ParseSchedule("@every 30s")
		if err != nil {
			t.Fatal(err)
		}
		tr := NewTrigger()
		go s.Run(t.Context(), tr)
		synctest.Wait()
		start := time.Now()
		if got, want := s.Next(), start.Add(30*time.Second); !got.Equal(want) {
			t.Errorf("Next() = %v, want %v", got, want)
		}
		for i := range 3 {
			time.Sleep(30 * time.Second)
			synctest.Wait()
			select {
			case <-tr.Ticks():
			default:
				t.Fatalf("no poke after %d periods", i+1)
			}
		}
		// Unread pokes coalesce into one.
		time.Sleep(90 * time.Second)
		synctest.Wait()
		<-tr.Ticks()
		select {
		case <-tr.Ticks():
			t.Error("three unread scheduled pokes gave two reloads, want one")
		default:
		}
	})
}

// TestPrime: a tree from an earlier run is served at once, its counts
// recorded but no sync claimed; once the store has a snapshot, Prime does
// nothing.
func TestPrime(t *testing.T) {
	src := &fakeSource{}
	src.set("a/TOOL.hdlp", toolFile("a", "say a"))
	l, st := newLoop(src)
	tree := scan.FromFS(fstest.MapFS{"a/TOOL.hdlp": {Data: []byte(toolFile("a", "say a"))}}, "abc123")
	ok, err := l.Prime(tree)
	if !ok || err != nil {
		t.Fatalf("Prime() = %v, %v; want true, nil", ok, err)
	}
	if snap := st.Load(); snap == nil || snap.Rev() != "abc123" || snap.Len() != 1 {
		t.Fatalf("after Prime the store holds %v; want revision abc123 with one tool", snap)
	}
	s := l.Status()
	if s.Rev != "abc123" || s.Parsed != 1 || !s.LastOK.IsZero() {
		t.Errorf("Status() after Prime = rev %q parsed %d last_ok %v; want abc123, 1, zero (no sync yet)", s.Rev, s.Parsed, s.LastOK)
	}
	if ok, err := l.Prime(tree); ok || err != nil {
		t.Errorf("second Prime() = %v, %v; want false, nil", ok, err)
	}
	// A failing sync keeps the primed snapshot.
	src.fail(errors.New("server down"))
	if _, err := l.Once(t.Context()); err == nil {
		t.Fatal("Once() with the source down = nil error")
	}
	if snap := st.Load(); snap.Rev() != "abc123" {
		t.Errorf("after a failed sync the store serves %s, want the primed abc123", snap.Rev())
	}
}
