package feedback

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLearnsFromMatchThenCall(t *testing.T) {
	now := time.Unix(1000, 0)
	var learned []string
	path := filepath.Join(t.TempDir(), "learned.json")
	s, err := Open(path, Options{PerTool: 2, Window: time.Minute, Now: func() time.Time { return now }, OnLearn: func(tool string) { learned = append(learned, tool) }})
	if err != nil {
		t.Fatal(err)
	}
	// A candidate called: learned; once.
	s.Matched("alice", "show me the last commits", []string{"git-ops", "git-log"}, true)
	if !s.Called("alice", "git-log", "show the log", true) || s.Called("alice", "git-log", "show the log", true) {
		t.Errorf("a candidate's call: want learned once")
	}
	// Another caller's call does not learn from alice's request.
	s.Matched("alice", "disk usage please", []string{"disk"}, true)
	if s.Called("bob", "disk", "disk usage", true) {
		t.Errorf("bob's call learned alice's request")
	}
	// A tool that was not a candidate (the top three were wrong):
	// learned, as other.
	if !s.Called("alice", "http-request", "fetch a URL", true) {
		t.Errorf("a call of a tool the request did not offer was not learned")
	}
	if l := s.List("http-request")["http-request"]; len(l) != 1 || l[0].How != HowOther || l[0].Request != "disk usage please" {
		t.Errorf("List(http-request) = %+v; want the request, learned as other", l)
	}
	// Refused, then a call of some tool: learned, as refused.
	s.Matched("alice", "frobnicate the widgets", nil, false)
	if !s.Called("alice", "frobber", "frobnicate", true) {
		t.Errorf("a call after a refusal: want learned")
	}
	// not_found / invalid_params: nothing, and the request still waits.
	s.Matched("carol", "list pods", []string{"kube"}, true)
	if s.Called("carol", "kube", "list kubernetes pods", false) {
		t.Errorf("a failed call (invalid_params) was learned")
	}
	// Too late: nothing.
	now = now.Add(2 * time.Minute)
	if s.Called("carol", "kube", "list kubernetes pods", true) {
		t.Errorf("a call past the window was learned")
	}
	if got := s.Requests("git-log", "show the log"); !slices.Equal(got, []string{"show me the last commits"}) {
		t.Errorf("Requests(git-log) = %q", got)
	}
	if l := s.List("frobber")["frobber"]; len(l) != 1 || l[0].How != HowRefused {
		t.Errorf("List(frobber) = %+v; want one, learned after a refusal", l)
	}
	if !slices.Equal(learned, []string{"git-log", "http-request", "frobber"}) {
		t.Errorf("OnLearn saw %q", learned)
	}
	// Bounded: the newest PerTool are kept.
	for _, q := range []string{"a", "b", "c"} {
		s.Matched("dan", q, []string{"git-log"}, true)
		s.Called("dan", "git-log", "show the log", true)
	}
	if got := s.Requests("git-log", "show the log"); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("bounded to 2: %q", got)
	}
	// Kept on disk.
	s2, err := Open(path, Options{PerTool: 2})
	if err != nil || !slices.Equal(s2.Requests("git-log", "show the log"), []string{"b", "c"}) {
		t.Errorf("after reopening: %q, %v", s2.Requests("git-log", "show the log"), err)
	}
	// The tool's intent changed: what was learned is dropped.
	if got := s2.Requests("git-log", "send an email"); got != nil {
		t.Errorf("after the intent changed: %q; want nothing", got)
	}
	if len(s2.List("git-log")) != 0 {
		t.Errorf("the requests of the old meaning are still listed")
	}
	// Clear.
	if n, err := s.Clear(""); err != nil || n != 4 {
		t.Errorf("Clear() = %d, %v; want 4 (git-log's 2, http-request's and frobber's 1)", n, err)
	}
	if len(s.List("")) != 0 {
		t.Errorf("after Clear: %v", s.List(""))
	}
}

func TestDamagedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "learned.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err == nil || !strings.Contains(err.Error(), "not a feedback file") || s == nil || len(s.List("")) != 0 {
		t.Errorf("Open(damaged) = %v, %v; want an empty store and an error naming the file", s, err)
	}
	s.Matched("a", "q", []string{"t"}, true)
	if !s.Called("a", "t", "i", true) {
		t.Fatal("learning after a damaged file")
	}
	if s2, err := Open(path, Options{}); err != nil || len(s2.List("t")["t"]) != 1 {
		t.Errorf("the damaged file was not replaced: %v", err)
	}
	// A request no user types (too long) is not remembered.
	s.Matched("a", strings.Repeat("x", maxRequest+1), []string{"t"}, true)
	if s.Called("a", "t", "i", true) {
		t.Errorf("a request longer than %d bytes was learned", maxRequest)
	}
}

// TestTeachAndDecay: a caller's word that a tool fits a request is
// learned (as taught); a learned request weighs 1 when new, half after
// the half-life, and is left out after three; an empty or over-long
// request is not learned.
func TestTeachAndDecay(t *testing.T) {
	now := time.Unix(1000, 0)
	s, err := Open("", Options{HalfLife: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Teach("git-log", "show the log", "  zuijin de tijiao  ") {
		t.Fatal("Teach: not learned")
	}
	if s.Teach("git-log", "show the log", " ") || s.Teach("git-log", "show the log", strings.Repeat("x", MaxRequest+1)) {
		t.Error("an empty or over-long request was taught")
	}
	if l := s.List("git-log")["git-log"]; len(l) != 1 || l[0].How != HowTaught || l[0].Request != "zuijin de tijiao" {
		t.Errorf("List = %+v; want the trimmed request, taught", l)
	}
	for _, c := range []struct {
		age  time.Duration
		want []Weighted
	}{
		{0, []Weighted{{"zuijin de tijiao", 1}}},
		{time.Hour, []Weighted{{"zuijin de tijiao", 0.5}}},
		{90 * time.Minute, []Weighted{{"zuijin de tijiao", 0.25}}}, // 0.354, down to a step of 1/8
		{3*time.Hour + time.Minute, nil},
	} {
		now = time.Unix(1000, 0).Add(c.age)
		if got := s.Weighted("git-log", "show the log"); !slices.Equal(got, c.want) {
			t.Errorf("after %v: Weighted = %v, want %v", c.age, got, c.want)
		}
	}
	if got := s.Weighted("git-log", "another meaning"); got != nil {
		t.Errorf("Weighted for another intent = %v; want nothing", got)
	}
}
