package api

import (
	"net/http"
	"strings"

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

// feedbackRequest is the body of POST /v1/feedback.
type feedbackRequest struct {
	Request string `json:"request"`
	Tool    string `json:"tool"`
}

// handleFeedbackTeach answers POST /v1/feedback {"request", "tool"}: the
// caller says which tool fit a request (typically one that matching
// ranked wrong), and the request is learned for it as if the caller had
// called the tool after asking (internal/feedback); the match index is
// updated at once. The tool must be one the caller may see.
func (s *server) handleFeedbackTeach(w http.ResponseWriter, r *http.Request) {
	if s.opts.Feedback == nil {
		writeError(w, s.log, errorf(http.StatusNotImplemented, "this server learns nothing from use"))
		return
	}
	var req feedbackRequest
	if err := decode(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeError(w, s.log, err)
		return
	}
	req.Request = strings.TrimSpace(req.Request)
	switch {
	case req.Request == "":
		writeError(w, s.log, errorf(http.StatusBadRequest, "request body: request is required: the words a user asked with"))
		return
	case len(req.Request) > feedback.MaxRequest:
		writeError(w, s.log, errorf(http.StatusBadRequest, "request body: request is %d bytes; want at most %d (a request a user types)", len(req.Request), feedback.MaxRequest))
		return
	case req.Tool == "":
		writeError(w, s.log, errorf(http.StatusBadRequest, "request body: tool is required: the exact name of the tool that fit the request"))
		return
	}
	snap, ok := s.snapshot(w)
	if !ok {
		return
	}
	e, ok := snap.Lookup(req.Tool)
	if !ok || e.Tool == nil || !surfaceFrom(r.Context()).AllowsEntry(e) {
		writeError(w, s.log, errorf(http.StatusNotFound, "no tool named %q is registered in the repository", req.Tool))
		return
	}
	s.opts.Feedback.Teach(req.Tool, e.Tool.Intent, req.Request)
	encode(w, s.log, http.StatusOK, struct {
		Learned bool   `json:"learned"`
		Tool    string `json:"tool"`
	}{true, req.Tool})
}
