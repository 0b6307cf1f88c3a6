package console

import (
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestConsolesShareTemplates: the pages are parsed once for the process
// (templates), not per console at New, and consoles render them at once
// from many requests (run with -race).
func TestConsolesShareTemplates(t *testing.T) {
	st := deployStore(t)
	var wg sync.WaitGroup
	for range 2 {
		srv := httptest.NewServer(New(st, nil, Options{Open: true}).Handler())
		t.Cleanup(srv.Close)
		for range 8 {
			wg.Go(func() {
				resp, err := srv.Client().Get(srv.URL + "/ui/tools/deploy")
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				page, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != 200 || !strings.Contains(string(page), "deploy") {
					t.Errorf("GET /ui/tools/deploy = %d, %v:\n%s", resp.StatusCode, err, page)
				}
			})
		}
	}
	wg.Wait()
	if a, b := templates(), templates(); len(a) != len(pages)+1 || a["tool"] != b["tool"] {
		t.Errorf("templates: %d pages, the same map twice: %v; want %d, true", len(a), a["tool"] == b["tool"], len(pages)+1)
	}
}
