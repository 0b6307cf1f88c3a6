package mcpserver

import (
	"net/http"
	"strings"
	"time"
)

// listChangedKeepalive is how often an idle list_changed stream carries a
// comment, so that proxies do not close it.
const listChangedKeepalive = 30 * time.Second

// listChangedMessage is notifications/tools/list_changed as one SSE event.
const listChangedMessage = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"

// serveListChanged is the GET stream of a stateless endpoint. The SDK's
// stateless mode has none (it answers 405), because it has no session to
// route a server's messages to; but notifications/tools/list_changed
// concerns no session: every client of a surface gets the same. So a
// client that opens the standalone stream (as MCP clients before the
// sessionless revision do after initialize) gets one event per change of
// its surface's tools, from whichever replica it reached, and lists them
// again. Nothing else is sent on it.
func serveListChanged(w http.ResponseWriter, r *http.Request, s *Server) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		w.Header().Set("Allow", "POST")
		http.Error(w, "GET /mcp is the list_changed stream: Accept must contain text/event-stream", http.StatusMethodNotAllowed)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	keep := time.NewTicker(listChangedKeepalive)
	defer keep.Stop()
	for {
		ch := s.ListChanged()
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
				return
			}
		case <-ch:
			if _, err := w.Write([]byte(listChangedMessage)); err != nil {
				return
			}
		}
		fl.Flush()
	}
}
