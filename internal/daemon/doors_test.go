package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/cache"
	"github.com/toolagent/toolagent/internal/hldp"
)

// TestCacheSaverHolds: a saver held until the doors serve (holdUntil)
// takes a save it is asked for only once they do; a close, or the end of
// the start's context, lets it save at once, so nothing asked is lost.
func TestCacheSaverHolds(t *testing.T) {
	for _, release := range []string{"doors", "close", "context"} {
		t.Run(release, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "parse.cache")
			c, err := cache.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			tl, err := hldp.Parse("tools/a/TOOL.hdlp", []byte("name: a\ndisplay: A\nintent: say a\nmethod: run\nexecutor: shell\nargv: [echo, a]\nparams_schema: {}\nauthor: t\ncreated: 2026-01-01\nwhy: test\n"))
			if err != nil {
				t.Fatal(err)
			}
			c.Put(cache.Key{Path: "a/TOOL.hdlp", Blob: "b1"}, cache.Outcome{Tool: tl, Rev: "r1"})
			doors := make(chan struct{})
			var opened atomic.Bool // set once the saver gets the cache to save it
			s := newCacheSaver(func() *cache.Cache {
				select {
				case <-doors:
				default:
					if release == "doors" {
						t.Error("saved before the doors served")
					}
				}
				opened.Store(true)
				return c
			}, slog.New(slog.DiscardHandler))
			parked := make(chan struct{})
			s.held = func() { close(parked) }
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s.holdUntil(ctx, doors)
			s.dirty()
			select {
			case <-parked:
			case <-time.After(time.Minute):
				t.Fatal("the save did not wait for the doors within a minute")
			}
			if opened.Load() {
				t.Fatal("the saver took the cache while held")
			}
			switch release {
			case "doors":
				close(doors)
				s.wait()
				s.close()
			case "close":
				s.close() // saves what is pending, held or not
			case "context":
				cancel()
				s.wait()
				s.close()
			}
			if !opened.Load() {
				t.Fatal("nothing saved")
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("no parse cache on disk after the release: %v", err)
			}
		})
	}
}
