package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
)

// TestPublished: the watcher of a first start waits for the first
// snapshot (published), so its watches do not compete with the first
// parse; it stops waiting when the daemon stops.
func TestPublished(t *testing.T) {
	store := new(catalog.Store)
	got := make(chan bool, 1)
	go func() { got <- published(context.Background(), store) }()
	select {
	case v := <-got:
		t.Fatalf("published returned %v before any snapshot", v)
	case <-time.After(50 * time.Millisecond):
		// Not a timing assertion: returning at any time before the Swap
		// is the failure; this only gives it a chance to show.
	}
	store.Swap(catalog.New("r1", nil, catalog.Options{}))
	select {
	case v := <-got:
		if !v {
			t.Fatal("published returned false after a snapshot was published")
		}
	case <-time.After(time.Minute):
		t.Fatal("published still waiting a minute after the first snapshot")
	}
	// Already published: at once.
	if !published(context.Background(), store) {
		t.Fatal("published returned false with a snapshot in the store")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { got <- published(ctx, new(catalog.Store)) }()
	cancel()
	select {
	case v := <-got:
		if v {
			t.Fatal("published returned true for an empty store whose context ended")
		}
	case <-time.After(time.Minute):
		t.Fatal("published still waiting a minute after its context ended")
	}
}
