// Package approval keeps the server-side queue of calls that wait for an
// approver: a call whose policy verdict is Confirm becomes a pending
// Request; a principal with the approve role approves (optionally with
// edited params) or denies it; dispatch then claims it exactly once, bound
// to the tool, the definition revision and the params hash that were
// approved, runs it and stores the result for the caller to fetch.
//
// The state lives here, on the server, never in what a caller sends back:
// a caller holds only the unguessable id. Every request is one JSON file
// under the state directory, written atomically (temp file, fsync,
// rename), so pending approvals survive a restart.
//
// A Store is safe for concurrent use; one mutex orders all changes, so of
// two concurrent Claims of one id exactly one wins. Only one Store may
// have a directory open at a time, in any process: Open takes an exclusive
// lock on Dir/.lock (flock, dropped by the kernel when the process ends)
// and fails with ErrLocked while another Store holds it; Close releases
// it. Two stores on one directory would each trust their own memory, and
// an approval could run twice.
//
// Imports: hldp is allowed but not needed; the package uses the standard
// library only. Imported by dispatch (and by host and the daemon, which
// open the Store under the state directory, and cmd/toolagent).
package approval

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/toolagent/toolagent/internal/grant"
)

// DefaultTTL is how long a request waits for a decision, and how long an
// approval waits to be claimed, unless Options.TTL says otherwise.
const DefaultTTL = 15 * time.Minute

// DefaultRetention is how long a finished request (denied, expired,
// executed, invalid) is kept for GET before it is removed at Open.
const DefaultRetention = 7 * 24 * time.Hour

// Status is where a request stands; the value is the wire word.
type Status string

// The statuses of a request. Pending moves to approved, denied or expired;
// approved moves to running (Claim), expired, or invalid (the binding no
// longer matches); running moves to executed (Complete), or to
// interrupted when a new process opens the store and finds it running.
const (
	Pending  Status = "pending"
	Approved Status = "approved"
	Denied   Status = "denied"
	Expired  Status = "expired"
	Running  Status = "running"
	Executed Status = "executed"
	// Invalid: a Claim found the tool, revision or params changed since
	// the approval; the approval is void and a new one is needed.
	Invalid Status = "invalid"
	// Interrupted: the call was running when the process that ran it
	// stopped (a crash, a SIGKILL); Open finds it so. Its result is
	// unknown and it does not run again by itself: a new call is needed.
	Interrupted Status = "interrupted"
)

// Final reports whether no further transition is possible.
func (s Status) Final() bool {
	return s == Denied || s == Expired || s == Executed || s == Invalid || s == Interrupted
}

// Errors of the Store; test with errors.Is. Messages wrapping them add the
// id and what was found.
var (
	ErrNotFound        = errors.New("approval: no such request")
	ErrExpired         = errors.New("approval: request expired")
	ErrAlreadyDecided  = errors.New("approval: request already decided")
	ErrSelfApproval    = errors.New("approval: a caller cannot approve its own call")
	ErrNoIdentity      = errors.New("approval: the decider has no identity")
	ErrNotApproved     = errors.New("approval: request is not approved")
	ErrAlreadyUsed     = errors.New("approval: approval already used")
	ErrBindingMismatch = errors.New("approval: call does not match what was approved")
	ErrNotRunning      = errors.New("approval: request is not running")
	ErrInvalidEdit     = errors.New("approval: edited params rejected")
	// ErrLocked: another Store (in this or another process, e.g. the
	// daemon) has the directory open.
	ErrLocked = errors.New("approval: the directory is in use by another toolagent process")
	// ErrUnavailable: the store cannot keep or read requests now — the
	// database does not answer, the directory cannot be written. An
	// error wrapping it reads "approval store unavailable: " and the
	// cause, which names no URL, host, password or local path. Nothing
	// was changed; the same request may be made again once it answers.
	ErrUnavailable = errors.New("approval store unavailable")
)

// Request is one call waiting for, or past, a decision. The Params that
// run are EditedParams when the approver amended them, else Params; the
// ParamsHash is always the hash of the params that will run.
type Request struct {
	ID         string         `json:"id"`
	Tool       string         `json:"tool"`
	Revision   string         `json:"revision"`
	Params     map[string]any `json:"params"`
	ParamsHash string         `json:"params_hash"`
	// Why is the policy rule and reason that required the approval.
	Why string `json:"why,omitempty"`
	// Sandbox is what the call may change and reach once approved (the
	// tool's declared grant, hldp.Sandbox.String), so the approver sees it
	// before deciding; "" for tools that start no process.
	Sandbox string `json:"sandbox,omitempty"`
	Caller  string `json:"caller"`
	// Door is how the call came in (api, mcp, cli); the caller is one
	// name whatever the door, and only names are compared.
	Door      string    `json:"door,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when a pending request expires; once approved, when the
	// approval expires unless claimed.
	ExpiresAt time.Time `json:"expires_at"`
	Status    Status    `json:"status"`
	Decider   string    `json:"decider,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	// DecisionReason says why a decider could approve a call it asked for
	// itself (ReasonOperatorOwn, ReasonSelfApproval); "" for every other
	// decision.
	DecisionReason string         `json:"decision_reason,omitempty"`
	EditedParams   map[string]any `json:"edited_params,omitempty"`
	ClaimedAt      time.Time      `json:"claimed_at,omitzero"`
	CompletedAt    time.Time      `json:"completed_at,omitzero"`
	// InterruptedAt is when a new process found the call still running
	// (status interrupted); Note says why.
	InterruptedAt time.Time       `json:"interrupted_at,omitzero"`
	Result        json.RawMessage `json:"result,omitempty"`
	// CollectedAt is when a retry of the same call by its caller got the
	// Result (Collect): the retry of an MCP client that cannot fetch it
	// otherwise. Only one retry gets it; the next identical call is new.
	CollectedAt time.Time `json:"collected_at,omitzero"`
	// Note says why a request became invalid or expired.
	Note string `json:"note,omitempty"`
	// TraceParent is the W3C traceparent of the span that held the call
	// (tracing on): its approved run's spans link to it.
	TraceParent string `json:"traceparent,omitempty"`
}

// RunParams returns the params the approved call runs with: the edited
// ones when the approver amended them, else the original ones.
func (r Request) RunParams() map[string]any {
	if r.EditedParams != nil {
		return r.EditedParams
	}
	return r.Params
}

// Options configure a Store.
type Options struct {
	// Dir is the directory the requests are kept in (created 0700); e.g.
	// STATE/approvals. Required.
	Dir string
	// TTL is the life of a pending request and of an unclaimed approval
	// (0: DefaultTTL).
	TTL time.Duration
	// Retention is how long finished requests are kept (0: DefaultRetention).
	Retention time.Duration
	// AllowSelfApproval lets the caller of a call approve it.
	AllowSelfApproval bool
	// Now returns the time (nil: time.Now). Tests inject a fake clock.
	Now func() time.Time
	// Logger receives a line per file that could not be loaded (nil: discard).
	Logger *slog.Logger
}

// withDefaults fills in the defaults of every store's options.
func (o Options) withDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Store is the persistent set of requests.
type Store struct {
	opts  Options
	lock  *os.File // holds the flock on Dir/.lock until Close
	mu    sync.Mutex
	reqs  map[string]*Request
	watch watchers
}

// lockName is the lock file Open takes under Options.Dir.
const lockName = ".lock"

// Close releases the directory lock, so another Store may open it. The
// Store must not be used afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil
	}
	err := unlockDir(s.lock)
	s.lock = nil
	return err
}

// Open loads every request under opts.Dir (creating it) and returns the
// store. A file that cannot be read or decoded is skipped and logged, never
// fatal: such a request cannot be claimed, so it fails closed. Finished
// requests older than the retention are removed.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("approval: Options.Dir is required")
	}
	opts = opts.withDefaults()
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	lock, err := lockDir(filepath.Join(opts.Dir, lockName))
	if err != nil {
		return nil, err
	}
	s := &Store{opts: opts, lock: lock, reqs: map[string]*Request{}}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("approval: %w", err)
	}
	now := opts.Now()
	for _, e := range entries {
		name := e.Name()
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || !e.Type().IsRegular() {
			if strings.HasPrefix(name, ".tmp-") {
				os.Remove(filepath.Join(opts.Dir, name)) // a write cut short by a crash
			}
			continue
		}
		file := filepath.Join(opts.Dir, name)
		data, err := os.ReadFile(file)
		if err != nil {
			opts.Logger.Warn("skip approval file", "file", file, "err", err)
			continue
		}
		r, err := decode(data)
		if err == nil && r.ID != id {
			err = fmt.Errorf("holds id %q", r.ID)
		}
		if err != nil {
			opts.Logger.Warn("skip approval file", "file", file, "err", err)
			continue
		}
		if r.Status.Final() && now.Sub(r.lastChange()) > opts.Retention {
			os.Remove(file)
			continue
		}
		if r.Status == Running {
			// This process holds the lock, so whoever was running the
			// call is gone, and with it the call (its sandbox died with
			// it). Say so, and never run it again by itself.
			r.Status, r.InterruptedAt = Interrupted, now
			r.Note = fmt.Sprintf("interrupted: the toolagent process that started this call at %s stopped before the call finished (a crash or a kill), so its result is unknown; it does not run again by itself: call the tool again for a new approval", r.ClaimedAt.UTC().Format(time.RFC3339))
			if err := s.save(r); err != nil {
				opts.Logger.Warn("could not record an interrupted approval", "id", id, "err", err)
			}
			opts.Logger.Warn("approved call interrupted by the previous process's end", "id", id, "tool", r.Tool, "claimed_at", r.ClaimedAt)
		}
		s.reqs[id] = r
	}
	return s, nil
}

func decode(data []byte) (*Request, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers keep their spelling, so hashes stay stable
	var r Request
	if err := dec.Decode(&r); err != nil {
		return nil, err
	}
	if !validID(r.ID) {
		return nil, fmt.Errorf("invalid id %q", r.ID)
	}
	return &r, nil
}

func (r *Request) lastChange() time.Time {
	t := r.CreatedAt
	for _, u := range []time.Time{r.DecidedAt, r.ClaimedAt, r.CompletedAt, r.ExpiresAt, r.InterruptedAt} {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// validID reports whether id has the form of an id this package makes:
// 32 lowercase hex digits (128 random bits).
func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("approval: random id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Create records a pending request for a call of tool at definition
// revision rev with validated params, asked by caller; why is the policy
// rule that requires the approval. The request expires after the TTL.
func (s *Store) Create(tool, rev string, params map[string]any, caller, why string) (Request, error) {
	return s.CreateWith(Request{Tool: tool, Revision: rev, Params: params, Caller: caller, Why: why})
}

// CreateWith records a new pending request from the Tool, Revision,
// Params, Caller, Door, Why and Sandbox of r; every other field is set
// here.
func (s *Store) CreateWith(in Request) (Request, error) {
	r, err := newRequest(in, s.opts.Now(), s.opts.TTL)
	if err != nil {
		return Request{}, err
	}
	id := r.ID
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.save(r); err != nil {
		return Request{}, err
	}
	s.reqs[id] = r
	return r.copy(), nil
}

// holdKey is what makes two holds the same call: one caller, one tool at
// one revision, the same params (their hash). Doors do not count: a
// caller is one name whatever the door.
func (r Request) holdKey() string {
	h := sha256.Sum256([]byte(r.Caller + "\x00" + r.Tool + "\x00" + r.Revision + "\x00" + r.ParamsHash))
	return hex.EncodeToString(h[:])
}

// Hold returns the pending request of the same caller for the same call
// (tool, revision, params) when there is one (again is true), else
// records a new one as CreateWith does: asking twice while a decision is
// pending gives one request, not two, on every door.
func (s *Store) Hold(in Request) (r Request, again bool, err error) {
	n, err := newRequest(in, s.opts.Now(), s.opts.TTL)
	if err != nil {
		return Request{}, false, err
	}
	key := n.holdKey()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	for _, p := range s.reqs {
		if p.Status != Pending || p.holdKey() != key {
			continue
		}
		if _, gone := expired(*p, now); gone {
			continue // expired: Get marks it, and a new request is due
		}
		return p.copy(), true, nil
	}
	if err := s.save(n); err != nil {
		return Request{}, false, err
	}
	s.reqs[n.ID] = n
	return n.copy(), false, nil
}

// Collect returns what a retry of the call in (the same caller, tool,
// revision and asked params as a request held before) gets instead of a
// new hold, when ok: the newest request of that call if it is approved
// and waiting to run, running, or executed less than the TTL ago and
// not collected yet. An executed one is marked collected (saved), so of
// two retries exactly one gets its result, and the next identical call
// is a new one. Params edited by the approver do not matter: the call is
// matched on the params it asked with. Pending requests are Hold's;
// denied, expired, void and interrupted ones give nothing (a new call is
// due).
func (s *Store) Collect(in Request) (r Request, ok bool, err error) {
	key, err := askedKey(in)
	if err != nil {
		return Request{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var newest *Request
	for _, p := range s.reqs {
		if p.Caller != in.Caller || p.Tool != in.Tool || p.Revision != in.Revision {
			continue
		}
		if k, err := askedKey(*p); err != nil || k != key {
			continue
		}
		if newest == nil || p.CreatedAt.After(newest.CreatedAt) || p.CreatedAt.Equal(newest.CreatedAt) && p.ID > newest.ID {
			newest = p
		}
	}
	if newest == nil {
		return Request{}, false, nil
	}
	cur, err := s.lookup(newest.ID) // expires it when its time is up
	if err != nil {
		return Request{}, false, err
	}
	next, ok := collected(*cur, s.opts.Now(), s.opts.TTL)
	if !ok {
		return Request{}, false, nil
	}
	if next.Status == Executed {
		if err := s.save(&next); err != nil {
			return Request{}, false, err
		}
		*cur = next
	}
	return cur.copy(), true, nil
}

// collected is r as a retry of its call collects it at now, when it may
// (see Collect): approved or running as it is, executed and uncollected
// marked collected.
func collected(r Request, now time.Time, ttl time.Duration) (Request, bool) {
	switch r.Status {
	case Approved, Running:
		return r, true
	case Executed:
		if !r.CollectedAt.IsZero() || now.Sub(r.CompletedAt) >= ttl {
			return Request{}, false
		}
		r.CollectedAt = now
		return r, true
	}
	return Request{}, false
}

// askedKey is the hold key of r on the params it was asked with (the
// approver's edits aside).
func askedKey(r Request) (string, error) {
	hash, err := grant.HashParams(r.Params)
	if err != nil {
		return "", fmt.Errorf("approval: %w", err)
	}
	r.ParamsHash = hash
	return r.holdKey(), nil
}

// newRequest is a new pending request from the Tool, Revision, Params,
// Caller, Door, Why and Sandbox of in, made at now, expiring after ttl.
func newRequest(in Request, now time.Time, ttl time.Duration) (*Request, error) {
	id, err := newID()
	if err != nil {
		return nil, err
	}
	hash, err := grant.HashParams(in.Params)
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	params, err := clone(in.Params)
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	return &Request{ID: id, Tool: in.Tool, Revision: in.Revision, Params: params, ParamsHash: hash, Why: in.Why, Sandbox: in.Sandbox, Caller: in.Caller, Door: in.Door, TraceParent: in.TraceParent,
		CreatedAt: now, ExpiresAt: now.Add(ttl), Status: Pending}, nil
}

// Get returns the request with id, expiring it first if its time is up.
func (s *Store) Get(id string) (Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(id)
	if err != nil {
		return Request{}, err
	}
	return r.copy(), nil
}

// List returns the requests, oldest first; with pendingOnly only those
// still waiting for a decision.
func (s *Store) List(pendingOnly bool) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, 0, len(s.reqs))
	for id := range s.reqs {
		r, err := s.lookup(id)
		if err != nil || pendingOnly && r.Status != Pending {
			continue
		}
		out = append(out, r.copy())
	}
	sort.Slice(out, func(i, k int) bool {
		if !out[i].CreatedAt.Equal(out[k].CreatedAt) {
			return out[i].CreatedAt.Before(out[k].CreatedAt)
		}
		return out[i].ID < out[k].ID
	})
	return out
}

// Decider is who decides a request: the principal's Name (a token's
// name, the operator's, the user on the host) and whether it is the
// Operator, the person running the daemon authenticated as such (the
// operator token, the console's one-time sign-in, the CLI on the host
// that holds the state directory). The door that authenticated the
// decider sets Operator; a name alone never makes one.
type Decider struct {
	Name     string
	Operator bool
}

// The reasons a decision records (Request.DecisionReason) when its
// decider approves a call it asked for itself.
const (
	// ReasonOperatorOwn: the operator confirmed a call they asked for
	// themselves, as an explicit second step, bound to the asked params.
	ReasonOperatorOwn = "confirmed by operator (own request)"
	// ReasonSelfApproval: a caller approved its own call because the
	// store allows it (Options.AllowSelfApproval).
	ReasonSelfApproval = "approved by its own caller (allow_self_approval)"
)

// AgentDoor is the door of an agent's calls, MCP (dispatch.DoorMCP): a
// call asked through it is an agent's, which nobody confirms as their
// own request, the operator neither.
const AgentDoor = "mcp"

// Decide records the decision of by on a pending request. approve false
// denies it. When approving with editedParams (approve-with-edits), the
// edit is passed through validate, which must check it against the
// tool's schema and the policy again and return the normalized params (or
// an error, which refuses the edit and leaves the request pending); the
// approval then binds to the hash of the normalized params. validate may
// be nil only when editedParams is nil.
//
// A decider approving a call it asked for itself (by.Name is the
// request's Caller) is refused with ErrSelfApproval, except: the operator
// confirms their own call (by.Operator, the call not asked through MCP),
// as asked, without edits (ErrInvalidEdit), recorded as
// ReasonOperatorOwn; and any caller approves its own when
// Options.AllowSelfApproval, recorded as ReasonSelfApproval. A caller may
// always deny, i.e. withdraw, its own call.
//
// Errors: ErrNotFound, ErrExpired, ErrAlreadyDecided, ErrNoIdentity,
// ErrSelfApproval, ErrInvalidEdit.
func (s *Store) Decide(id string, by Decider, approve bool, editedParams map[string]any, validate func(map[string]any) (map[string]any, error)) (Request, error) {
	// Validate outside the lock: it may be slow (schema, policy).
	edited, editedHash, err := checkEdit(by.Name, approve, editedParams, validate)
	if err != nil {
		return Request{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(id)
	if err != nil {
		return Request{}, err
	}
	next, err := decided(*r, decision{by: by, approve: approve, edited: edited, editedHash: editedHash, allowSelf: s.opts.AllowSelfApproval, now: s.opts.Now(), ttl: s.opts.TTL})
	if err != nil {
		return Request{}, err
	}
	if err := s.save(&next); err != nil {
		return Request{}, err
	}
	*r = next
	return r.copy(), nil
}

// checkEdit checks the decider's identity and, when approving with
// edits, validates and normalizes them; it returns the edit to bind to
// and its hash (nil and "" without edits).
func checkEdit(decider string, approve bool, editedParams map[string]any, validate func(map[string]any) (map[string]any, error)) (map[string]any, string, error) {
	if strings.TrimSpace(decider) == "" {
		return nil, "", ErrNoIdentity
	}
	if !approve || editedParams == nil {
		return nil, "", nil
	}
	if validate == nil {
		return nil, "", fmt.Errorf("%w: no validator for edited params", ErrInvalidEdit)
	}
	norm, err := validate(editedParams)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalidEdit, err)
	}
	edited, err := clone(norm)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalidEdit, err)
	}
	hash, err := grant.HashParams(edited)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalidEdit, err)
	}
	return edited, hash, nil
}

// decision is what Decide was asked, with the store's rules.
type decision struct {
	by         Decider
	approve    bool
	edited     map[string]any // normalized edit, or nil
	editedHash string
	allowSelf  bool
	now        time.Time
	ttl        time.Duration
}

// decided is r after the decision d, or why d cannot be taken: the rules
// every store applies (this one and PGStore).
func decided(r Request, d decision) (Request, error) {
	switch {
	case r.Status == Expired:
		return Request{}, fmt.Errorf("%w: %s expired at %s", ErrExpired, r.ID, r.ExpiresAt.Format(time.RFC3339))
	case r.Status != Pending:
		return Request{}, fmt.Errorf("%w: %s is %s (by %s)", ErrAlreadyDecided, r.ID, r.Status, r.Decider)
	}
	var reason string
	if d.approve && d.by.Name == r.Caller {
		var err error
		if reason, err = ownApproval(r, d); err != nil {
			return Request{}, err
		}
	}
	next := r
	next.Decider, next.DecidedAt, next.DecisionReason = d.by.Name, d.now, reason
	if d.approve {
		next.Status = Approved
		next.ExpiresAt = d.now.Add(d.ttl)
		if d.edited != nil {
			next.EditedParams, next.ParamsHash = d.edited, d.editedHash
		}
	} else {
		next.Status = Denied
	}
	return next, nil
}

// ownApproval is why d may approve r, a call its decider asked for
// itself (a DecisionReason), or why not.
func ownApproval(r Request, d decision) (string, error) {
	operatorOwn := d.by.Operator && r.Door != AgentDoor
	switch {
	case operatorOwn && d.edited == nil:
		return ReasonOperatorOwn, nil
	case d.allowSelf:
		return ReasonSelfApproval, nil
	case operatorOwn:
		return "", fmt.Errorf("%w: %s: the operator confirms their own call as they asked it, bound to its params; to run other params, call again with them", ErrInvalidEdit, r.ID)
	case d.by.Operator:
		return "", fmt.Errorf("%w: %s was asked through MCP under the operator's identity, so it is an agent's request, which its caller never approves; another approver decides it", ErrSelfApproval, r.ID)
	}
	return "", fmt.Errorf("%w: %s asked for %s and cannot approve it", ErrSelfApproval, d.by.Name, r.ID)
}

// Claim marks an approved request as running, exactly once, after
// checking that the call about to run is the one approved: the same tool,
// the same definition revision and the hash of the same params
// (HashParams of Request.RunParams()). A mismatch voids the approval
// (status invalid) and returns ErrBindingMismatch naming what changed.
//
// Errors: ErrNotFound, ErrExpired, ErrNotApproved (pending or denied),
// ErrAlreadyUsed (claimed before), ErrBindingMismatch.
func (s *Store) Claim(id, tool, rev, paramsHash string) (Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(id)
	if err != nil {
		return Request{}, err
	}
	next, err := claimed(*r, tool, rev, paramsHash, s.opts.Now())
	if next.ID == "" {
		return Request{}, err
	}
	if serr := s.save(&next); serr != nil {
		return Request{}, serr
	}
	*r = next
	if err != nil {
		return Request{}, err
	}
	return r.copy(), nil
}

// claimed is r claimed to run tool at rev with params hashed paramsHash
// at now: running, or invalid with ErrBindingMismatch when the call is not
// the one approved. An error with a zero Request changes nothing.
func claimed(r Request, tool, rev, paramsHash string, now time.Time) (Request, error) {
	id := r.ID
	switch r.Status {
	case Approved:
	case Expired:
		return Request{}, fmt.Errorf("%w: %s expired at %s", ErrExpired, id, r.ExpiresAt.Format(time.RFC3339))
	case Running, Executed, Interrupted:
		return Request{}, fmt.Errorf("%w: %s was claimed at %s", ErrAlreadyUsed, id, r.ClaimedAt.Format(time.RFC3339))
	case Invalid:
		return Request{}, fmt.Errorf("%w: %s is void: %s", ErrBindingMismatch, id, r.Note)
	default:
		return Request{}, fmt.Errorf("%w: %s is %s", ErrNotApproved, id, r.Status)
	}
	var changed []string
	if tool != r.Tool {
		changed = append(changed, fmt.Sprintf("tool %q, approved %q", tool, r.Tool))
	}
	if rev != r.Revision {
		changed = append(changed, fmt.Sprintf("definition revision %q, approved %q (the tool changed since)", rev, r.Revision))
	}
	if paramsHash != r.ParamsHash {
		changed = append(changed, fmt.Sprintf("params hash %s, approved %s (the params changed)", short(paramsHash), short(r.ParamsHash)))
	}
	next := r
	if len(changed) > 0 {
		next.Status, next.Note = Invalid, "call does not match the approval: "+strings.Join(changed, "; ")
		return next, fmt.Errorf("%w: %s: %s; a new approval is needed", ErrBindingMismatch, id, strings.Join(changed, "; "))
	}
	next.Status, next.ClaimedAt = Running, now
	return next, nil
}

// Complete stores the outcome of a claimed request (the call's result
// JSON) and marks it executed, for the caller to fetch with Get.
func (s *Store) Complete(id string, result json.RawMessage) (Request, error) {
	if result != nil && !json.Valid(result) {
		return Request{}, fmt.Errorf("approval: result of %s is not valid JSON", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reqs[id]
	if !ok {
		return Request{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if r.Status != Running {
		return Request{}, fmt.Errorf("%w: %s is %s", ErrNotRunning, id, r.Status)
	}
	next := *r
	next.Status, next.CompletedAt, next.Result = Executed, s.opts.Now(), slices.Clone(result)
	if err := s.save(&next); err != nil {
		return Request{}, err
	}
	*r = next
	return r.copy(), nil
}

// lookup returns the request, expiring it (and saving that) when its time
// is up. s.mu must be held.
func (s *Store) lookup(id string) (*Request, error) {
	r, ok := s.reqs[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if next, ok := expired(*r, s.opts.Now()); ok {
		if err := s.save(&next); err != nil {
			// Expire in memory anyway: an expired approval must never run.
			s.opts.Logger.Warn("save expired approval", "id", id, "err", err)
		}
		*r = next
	}
	return r, nil
}

// expired is r expired at now, when its time is up (ok).
func expired(r Request, now time.Time) (Request, bool) {
	if (r.Status != Pending && r.Status != Approved) || now.Before(r.ExpiresAt) {
		return r, false
	}
	next := r
	next.Status = Expired
	if r.Status == Pending {
		next.Note = "no decision before it expired"
	} else {
		next.Note = "approved but not claimed before it expired"
	}
	return next, true
}

// Queue is what dispatch needs of an approval store: Store keeps the
// requests in files of one daemon's state directory; PGStore keeps them
// in PostgreSQL, shared by replicas.
type Queue interface {
	Hold(in Request) (r Request, again bool, err error)
	Get(id string) (Request, error)
	ListRequests(pendingOnly bool) ([]Request, error)
	Decide(id string, by Decider, approve bool, editedParams map[string]any, validate func(map[string]any) (map[string]any, error)) (Request, error)
	Claim(id, tool, rev, paramsHash string) (Request, error)
	Complete(id string, result json.RawMessage) (Request, error)
	Collect(in Request) (r Request, ok bool, err error)
	MayApprove(r Request, by Decider) error
}

// MayApprove reports whether by may approve r as asked (nil), or why not
// (Decide's error for it): the rules Decide applies, without deciding, so
// that a page offers Approve only to who may use it. Anyone who may decide
// may deny, and a caller may always withdraw its own call.
func (s *Store) MayApprove(r Request, by Decider) error {
	return mayApprove(r, by, s.opts)
}

func mayApprove(r Request, by Decider, o Options) error {
	if strings.TrimSpace(by.Name) == "" {
		return ErrNoIdentity
	}
	_, err := decided(r, decision{by: by, approve: true, allowSelf: o.AllowSelfApproval, now: o.Now(), ttl: o.TTL})
	return err
}

// ListRequests is List for Queue; the files are in memory, so it never
// fails.
func (s *Store) ListRequests(pendingOnly bool) ([]Request, error) { return s.List(pendingOnly), nil }

// save writes r to its file atomically: a temp file in the same
// directory, fsync, rename. s.mu must be held.
func (s *Store) save(r *Request) error {
	data, err := json.Marshal(r) // not indented: Result stays byte for byte
	if err != nil {
		return fmt.Errorf("approval: encode %s: %w", r.ID, err)
	}
	f, err := os.CreateTemp(s.opts.Dir, ".tmp-"+r.ID+"-")
	if err != nil {
		return unwritable(r.ID, err)
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.opts.Dir, r.ID+".json"))
	}
	if err != nil {
		os.Remove(tmp)
		return unwritable(r.ID, err)
	}
	s.watch.changed(r.ID)
	return nil
}

// unwritable is ErrUnavailable for a request file that could not be
// written: the cause is the system's word (permission denied, no space
// left on device), without the directory's path.
func unwritable(id string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return fmt.Errorf("%w: cannot write request %s in the approval directory: %v", ErrUnavailable, id, err)
}

// Check tries to write a file in the store's directory (and removes it):
// nil when it can, else ErrUnavailable with the cause (the readiness of
// the store).
func (s *Store) Check(context.Context) error {
	f, err := os.CreateTemp(s.opts.Dir, ".tmp-check-")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%w: cannot write in the approval directory: %v", ErrUnavailable, err)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// Watch returns a channel closed at the next change of request id (in
// this process: the files belong to one).
func (s *Store) Watch(id string) (<-chan struct{}, func()) { return s.watch.add(id) }

// Watcher is a Queue that can say when a request changes, so a caller
// waiting for a decision or a result need not poll. The channel is only a
// wake-up: read the request again (a change may also be missed, e.g.
// while a database connection is re-made, so wait with a bound too).
type Watcher interface {
	Watch(id string) (changed <-chan struct{}, stop func())
}

// watchers are the channels of the callers waiting on each request.
type watchers struct {
	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
}

func (w *watchers) add(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string]map[chan struct{}]struct{}{}
	}
	if w.m[id] == nil {
		w.m[id] = map[chan struct{}]struct{}{}
	}
	w.m[id][ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if set, ok := w.m[id]; ok {
			if _, ok := set[ch]; ok {
				delete(set, ch)
				close(ch)
			}
			if len(set) == 0 {
				delete(w.m, id)
			}
		}
	}
}

// changed wakes the watchers of id ("" wakes all).
func (w *watchers) changed(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, set := range w.m {
		if id != "" && key != id {
			continue
		}
		for ch := range set {
			close(ch)
		}
		delete(w.m, key)
	}
}

func (r *Request) copy() Request {
	c := *r
	c.Params, _ = clone(r.Params)
	c.EditedParams, _ = clone(r.EditedParams)
	c.Result = slices.Clone(r.Result)
	return c
}

// clone deep-copies params through JSON (numbers kept as json.Number).
func clone(m map[string]any) (map[string]any, error) {
	if m == nil {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("params are not JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// HashParams is the SHA-256 (hex) of the canonical JSON of params
// (grant.HashParams, the project's one params hash): approvals bind to it;
// dispatch and audit lines use it too. Values that are not JSON hash as
// "unhashable:" plus the error, which matches no approval.
func HashParams(params map[string]any) string { return grant.ParamsHash(params) }
