package api

import (
	"net/http"

	"github.com/toolagent/toolagent/internal/feedback"
)

// handleFeedback answers GET /v1/feedback[?tool=NAME]: the requests
// learned from use, by tool.
func (s *server) handleFeedback(w http.ResponseWriter, r *http.Request) {
	if s.opts.Feedback == nil {
		writeError(w, s.log, errorf(http.StatusNotImplemented, "this server learns nothing from use"))
		return
	}
	encode(w, s.log, http.StatusOK, struct {
		Tools map[string][]feedback.Learned `json:"tools"`
	}{s.opts.Feedback.List(r.URL.Query().Get("tool"))})
}

// handleFeedbackClear answers DELETE /v1/feedback[?tool=NAME]: forget
// what was learned (for one tool, or all).
func (s *server) handleFeedbackClear(w http.ResponseWriter, r *http.Request) {
	if s.opts.Feedback == nil {
		writeError(w, s.log, errorf(http.StatusNotImplemented, "this server learns nothing from use"))
		return
	}
	n, err := s.opts.Feedback.Clear(r.URL.Query().Get("tool"))
	if err != nil {
		writeError(w, s.log, errorf(http.StatusInternalServerError, "forgotten, but not written to disk: %v", err))
		return
	}
	encode(w, s.log, http.StatusOK, struct {
		Cleared int `json:"cleared"`
	}{n})
}
