// Package feedback is intent matching that learns from use: when a
// caller asks for a tool by intent and then calls one of the candidates
// (or, after a refusal, calls some tool), the request is remembered for
// that tool, and the catalog indexes it as a weaker field of the tool's
// text. What it learned is bounded (PerTool requests a tool, the newest
// kept), kept in a file in the daemon's state directory, listed and
// cleared by the operator, and dropped when the tool's intent changes:
// the tool then means something else.
//
// It learns only from a successful call (never from one that failed with
// not_found or invalid_params: the caller chose wrong), and not from a
// call that came later than Window after the request. The called tool
// need not have been among the candidates: a caller who calls the right
// tool after a wrong top three teaches most. A caller can also say which
// tool fit a request (Teach: POST /v1/feedback). A request weighs less as
// it ages (Weighted: halved every HalfLife), and at most PerTool are kept
// for a tool.
//
// Imports: the standard library only. Imported by api, the daemon
// (internal/daemon) and host.
package feedback

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of Options fields left zero.
const (
	DefaultPerTool  = 32
	DefaultWindow   = 5 * time.Minute
	DefaultHalfLife = 30 * 24 * time.Hour
	// maxPending bounds the callers whose last request is remembered.
	maxPending = 4096
	// maxRequest bounds a remembered request, in bytes.
	maxRequest = 300
)

// How a request was learned.
const (
	// HowMatched: the caller called one of the request's candidates.
	HowMatched = "matched"
	// HowRefused: no tool fit the request, and the caller then called one.
	HowRefused = "refused"
	// HowOther: the caller called a tool that was not among the
	// candidates.
	HowOther = "other"
	// HowTaught: a caller said which tool fit (POST /v1/feedback).
	HowTaught = "taught"
)

// Options configure a Store.
type Options struct {
	PerTool int           // requests kept a tool (the newest)
	Window  time.Duration // longest wait from a request to the call it led to
	// HalfLife is the age at which a learned request weighs half (see
	// Weighted).
	HalfLife time.Duration
	// Now returns the time (nil: time.Now). Tests set it.
	Now func() time.Time
	// OnLearn, when set, is called (on the caller's goroutine, after the
	// store's lock is released) whenever a request was learned.
	OnLearn func(tool string)
}

// Learned is one request learned for a tool.
type Learned struct {
	Request string    `json:"request"`
	How     string    `json:"how"` // HowMatched or HowRefused
	At      time.Time `json:"at"`
}

// toolFile is what the file keeps of one tool: its requests, and a digest
// of the intent they were learned for.
type toolFile struct {
	IntentSum string    `json:"intent_sum"`
	Requests  []Learned `json:"requests"`
}

type file struct {
	Version int                 `json:"version"`
	Tools   map[string]toolFile `json:"tools"`
}

const fileVersion = 1

// pending is a caller's last request.
type pending struct {
	request    string
	candidates []string
	found      bool
	at         time.Time
}

// Store holds what was learned. It is safe for concurrent use.
type Store struct {
	path string
	opts Options

	mu      sync.Mutex
	tools   map[string]toolFile
	pending map[string]pending
}

// Open reads the store's file at path ("" keeps nothing on disk). A
// missing file is an empty store; an unreadable or damaged one gives an
// empty store and an error saying so (nothing that worked is lost: the
// file is replaced at the next learn).
func Open(path string, opts Options) (*Store, error) {
	if opts.PerTool <= 0 {
		opts.PerTool = DefaultPerTool
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.HalfLife <= 0 {
		opts.HalfLife = DefaultHalfLife
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{path: path, opts: opts, tools: map[string]toolFile{}, pending: map[string]pending{}}
	if path == "" {
		return s, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("feedback: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil || f.Version != fileVersion {
		if err == nil {
			err = fmt.Errorf("version %d, want %d", f.Version, fileVersion)
		}
		return s, fmt.Errorf("feedback: %s is not a feedback file (ignored; it is replaced when a request is learned): %v", path, err)
	}
	for name, t := range f.Tools {
		if len(t.Requests) > opts.PerTool {
			t.Requests = t.Requests[len(t.Requests)-opts.PerTool:]
		}
		s.tools[name] = t
	}
	return s, nil
}

// IntentSum is the digest of an intent that learned requests are tied to.
func IntentSum(intent string) string {
	h := sha256.Sum256([]byte(strings.TrimSpace(intent)))
	return hex.EncodeToString(h[:8])
}

// Matched records caller's request by intent and what it got: the names
// of the candidates, and whether a tool was found.
func (s *Store) Matched(caller, request string, candidates []string, found bool) {
	request = strings.TrimSpace(request)
	if request == "" {
		return
	}
	if len(request) > maxRequest {
		return // not a request a user types; nothing to learn from it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pending[caller]; !ok && len(s.pending) >= maxPending {
		s.expireLocked()
		if len(s.pending) >= maxPending {
			return
		}
	}
	s.pending[caller] = pending{request: request, candidates: slices.Clone(candidates), found: found, at: s.opts.Now()}
}

// expireLocked forgets the requests older than the window.
func (s *Store) expireLocked() {
	cut := s.opts.Now().Add(-s.opts.Window)
	for c, p := range s.pending {
		if p.at.Before(cut) {
			delete(s.pending, c)
		}
	}
}

// Called records that caller called tool (whose intent is intent); ok is
// false unless the call succeeded (the daemon passes false for not_found,
// invalid_params and a tool's failure). When the
// caller's last request led to it, the request is learned for the tool;
// Called reports whether it was. A request is learned once.
func (s *Store) Called(caller, tool, intent string, ok bool) bool {
	s.mu.Lock()
	p, has := s.pending[caller]
	if !has || !ok || s.opts.Now().Sub(p.at) > s.opts.Window {
		if has && ok {
			delete(s.pending, caller) // the caller moved on
		}
		s.mu.Unlock()
		return false
	}
	delete(s.pending, caller)
	how := HowMatched
	switch {
	case !p.found:
		how = HowRefused
	case !slices.Contains(p.candidates, tool):
		how = HowOther
	}
	s.learnLocked(tool, intent, p.request, how)
	return true
}

// Teach learns request for tool (whose intent is intent), as a caller's
// word that the tool fits it (POST /v1/feedback). It reports false, and
// learns nothing, for an empty request or one longer than a request a
// user types (MaxRequest bytes).
func (s *Store) Teach(tool, intent, request string) bool {
	request = strings.TrimSpace(request)
	if request == "" || len(request) > MaxRequest {
		return false
	}
	s.mu.Lock()
	s.learnLocked(tool, intent, request, HowTaught)
	return true
}

// MaxRequest is the longest request learned, in bytes.
const MaxRequest = maxRequest

// learnLocked records request for tool, saves the file, releases the lock
// and calls OnLearn.
func (s *Store) learnLocked(tool, intent, request, how string) {
	sum := IntentSum(intent)
	t := s.tools[tool]
	if t.IntentSum != sum {
		t = toolFile{IntentSum: sum} // learned for another meaning: gone
	}
	t.Requests = slices.DeleteFunc(t.Requests, func(l Learned) bool { return l.Request == request })
	t.Requests = append(t.Requests, Learned{Request: request, How: how, At: s.opts.Now()})
	if len(t.Requests) > s.opts.PerTool {
		t.Requests = t.Requests[len(t.Requests)-s.opts.PerTool:]
	}
	s.tools[tool] = t
	err := s.saveLocked()
	s.mu.Unlock()
	_ = err // the file is best effort: what was learned is in memory
	if s.opts.OnLearn != nil {
		s.opts.OnLearn(tool)
	}
}

// Weighted is a learned request with its weight.
type Weighted struct {
	Request string
	// Weight is 1 for a new request and halves every HalfLife, in steps
	// of 1/8 (so that the index changes only when a step is passed);
	// requests below 1/8 are left out.
	Weight float64
}

// Weighted returns the requests learned for tool while its intent was
// intent with their weights, for the index (see Requests).
func (s *Store) Weighted(tool, intent string) []Weighted {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.requestsLocked(tool, intent)
	if !ok {
		return nil
	}
	now := s.opts.Now()
	var out []Weighted
	for _, l := range t {
		age := max(0, now.Sub(l.At))
		w := math.Floor(math.Exp2(-float64(age)/float64(s.opts.HalfLife))*8) / 8
		if w > 0 {
			out = append(out, Weighted{l.Request, w})
		}
	}
	return out
}

// requestsLocked returns the requests learned for tool while its intent
// was intent; those learned for another intent are dropped.
func (s *Store) requestsLocked(tool, intent string) ([]Learned, bool) {
	t, ok := s.tools[tool]
	if !ok {
		return nil, false
	}
	if t.IntentSum != IntentSum(intent) {
		delete(s.tools, tool)
		_ = s.saveLocked()
		return nil, false
	}
	return t.Requests, true
}

// Requests returns the requests learned for tool while its intent was
// intent, for the index; those learned for another intent are dropped.
func (s *Store) Requests(tool, intent string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.requestsLocked(tool, intent)
	if !ok {
		return nil
	}
	out := make([]string, len(t))
	for i, l := range t {
		out[i] = l.Request
	}
	return out
}

// List returns what was learned, by tool ("" for every tool).
func (s *Store) List(tool string) map[string][]Learned {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]Learned{}
	for name, t := range s.tools {
		if tool == "" || name == tool {
			out[name] = slices.Clone(t.Requests)
		}
	}
	return out
}

// Clear forgets what was learned for tool ("" for every tool) and returns
// how many requests it forgot.
func (s *Store) Clear(tool string) (int, error) {
	s.mu.Lock()
	n := 0
	for name, t := range s.tools {
		if tool == "" || name == tool {
			n += len(t.Requests)
			delete(s.tools, name)
		}
	}
	err := s.saveLocked()
	s.mu.Unlock()
	if n > 0 && s.opts.OnLearn != nil {
		s.opts.OnLearn(tool)
	}
	return n, err
}

// saveLocked writes the file atomically (a temporary file renamed over).
func (s *Store) saveLocked() error {
	if s.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(file{Version: fileVersion, Tools: s.tools}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".feedback-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), s.path)
}
