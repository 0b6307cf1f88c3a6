package proc

import (
	"runtime"
	"testing"
	"time"
)

// TestSysmonPinLetsTheWorldStop: the pin holds a P in a raw pause(2), so
// it must still yield to a stop-the-world (a garbage collection) and park
// once calls stop coming, and a call must wake it.
func TestSysmonPinLetsTheWorldStop(t *testing.T) {
	p := newSysmonPin()
	p.idle = 50 * time.Millisecond
	p.busy()
	go p.run()
	done := make(chan struct{})
	go func() {
		for range 5 {
			runtime.GC() // stops the world: the pin must yield
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("runtime.GC did not return with the pin running: the pin blocks a stop-the-world")
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 2 minutes", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("park without calls", func() bool { return p.parked.Load() >= 1 })
	p.busy() // wakes it; it parks again once idle
	waitFor("second park after a call woke the pin", func() bool { return p.parked.Load() >= 2 })
}
