// Package notify delivers approval events to the people who decide them:
// a webhook that receives a JSON document signed with HMAC-SHA256, or a
// Slack incoming webhook. Delivery is asynchronous: Notify never waits for
// a receiver (a held call must not hang on a slow chat server); each target
// has a goroutine of its own that retries a failed delivery with backoff,
// and its state (delivered, failed, the last error) is in Status.
//
// An event carries what an approver needs to decide (who asked, the tool,
// its definition's revision, the exact params, the sandbox grant, why the
// policy held it, when it expires) and links to the console; never a
// token. A Notifier is safe for concurrent use. Imports: the standard
// library only; the daemon imports it.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Format is how a target wants its events.
type Format string

const (
	// JSON posts Event as a JSON document, signed in SignatureHeader.
	JSON Format = "json"
	// Slack posts a Slack incoming-webhook message ({"text": ...}); the
	// URL itself is the secret there.
	Slack Format = "slack"
)

// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the body
// under the target's secret (JSON targets with a secret).
const SignatureHeader = "X-Toolagent-Signature"

// Target is one receiver.
type Target struct {
	// Name names the target in Status and logs.
	Name   string
	URL    string
	Format Format
	// Secret signs a JSON target's bodies; empty sends them unsigned.
	Secret []byte
}

// Event is what happened to a held call.
type Event struct {
	// Kind is "pending" (a new held call), "approved" or "denied".
	Kind       string         `json:"event"`
	ApprovalID string         `json:"approval_id"`
	Tool       string         `json:"tool"`
	Revision   string         `json:"revision"`
	Caller     string         `json:"caller"`
	Params     map[string]any `json:"params"`
	ParamsHash string         `json:"params_hash"`
	// Sandbox is what the call may change and reach once approved.
	Sandbox   string    `json:"sandbox,omitempty"`
	Why       string    `json:"why,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	Decider   string    `json:"decider,omitempty"`
	// DecisionReason says why the decider could approve a call it asked
	// for itself ("confirmed by operator (own request)"); "" otherwise.
	DecisionReason string `json:"decision_reason,omitempty"`
	// URL is the console's page of the approval, where it is approved or
	// denied ("" when the daemon has no address to give).
	URL string    `json:"url,omitempty"`
	At  time.Time `json:"at"`
}

// Options configure New.
type Options struct {
	// Client sends the requests (nil: a client with a 10 s timeout).
	Client *http.Client
	// Attempts is how many times an event is tried per target (0: 6).
	Attempts int
	// Backoff is the wait after the first failure, doubled after each
	// (0: 1 s), at most MaxBackoff (0: 1 min).
	Backoff, MaxBackoff time.Duration
	// Queue is how many events wait per target (0: 256); past it an
	// event is dropped, counted and logged, never waited for.
	Queue int
	// Logger receives delivery failures (nil: discarded).
	Logger *slog.Logger
}

// TargetStatus is a target's delivery state.
type TargetStatus struct {
	Name        string    `json:"name"`
	Format      Format    `json:"format"`
	Delivered   int64     `json:"delivered"`
	Failed      int64     `json:"failed"`
	Dropped     int64     `json:"dropped"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	LastOK      time.Time `json:"last_ok,omitzero"`
}

// Notifier delivers events to its targets. Build it with New; Close
// stops it.
type Notifier struct {
	opts    Options
	targets []*target
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type target struct {
	t     Target
	queue chan Event
	mu    sync.Mutex
	st    TargetStatus
}

// New starts a goroutine per target.
func New(targets []Target, opts Options) (*Notifier, error) {
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 6
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Minute
	}
	if opts.Queue <= 0 {
		opts.Queue = 256
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{opts: opts, cancel: cancel}
	for _, t := range targets {
		if !strings.HasPrefix(t.URL, "https://") && !strings.HasPrefix(t.URL, "http://") {
			cancel()
			return nil, fmt.Errorf("notify target %s: url %q: want http:// or https://", t.Name, t.URL)
		}
		if t.Format != JSON && t.Format != Slack {
			cancel()
			return nil, fmt.Errorf("notify target %s: format %q: want %s or %s", t.Name, t.Format, JSON, Slack)
		}
		tg := &target{t: t, queue: make(chan Event, opts.Queue), st: TargetStatus{Name: t.Name, Format: t.Format}}
		n.targets = append(n.targets, tg)
		n.wg.Go(func() { n.deliverLoop(ctx, tg) })
	}
	return n, nil
}

// Notify queues e for every target and returns at once.
func (n *Notifier) Notify(e Event) {
	if n == nil {
		return
	}
	for _, tg := range n.targets {
		select {
		case tg.queue <- e:
		default:
			tg.mu.Lock()
			tg.st.Dropped++
			tg.mu.Unlock()
			n.opts.Logger.Warn("approval notification dropped: the target's queue is full", "target", tg.t.Name, "approval_id", e.ApprovalID, "event", e.Kind)
		}
	}
}

// Status returns every target's delivery state.
func (n *Notifier) Status() []TargetStatus {
	if n == nil {
		return nil
	}
	out := make([]TargetStatus, len(n.targets))
	for i, tg := range n.targets {
		tg.mu.Lock()
		out[i] = tg.st
		tg.mu.Unlock()
	}
	return out
}

// Close stops the deliveries (queued events are not sent) and waits for
// the goroutines.
func (n *Notifier) Close() {
	if n == nil {
		return
	}
	n.cancel()
	n.wg.Wait()
}

func (n *Notifier) deliverLoop(ctx context.Context, tg *target) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-tg.queue:
			n.deliver(ctx, tg, e)
		}
	}
}

// deliver tries e until it is accepted (2xx), the attempts are spent, or
// ctx ends. A 4xx other than 408 and 429 is not retried: the receiver
// refused this event and would again.
func (n *Notifier) deliver(ctx context.Context, tg *target, e Event) {
	body, err := encode(tg.t.Format, e)
	if err != nil {
		n.failed(tg, e, err)
		return
	}
	wait := n.opts.Backoff
	for attempt := 1; ; attempt++ {
		err := n.post(ctx, tg.t, body, e)
		if err == nil {
			tg.mu.Lock()
			tg.st.Delivered++
			tg.st.LastOK = time.Now()
			tg.mu.Unlock()
			return
		}
		var perm *permanentError
		if attempt >= n.opts.Attempts || errors.As(err, &perm) {
			n.failed(tg, e, err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, n.opts.MaxBackoff)
	}
}

func (n *Notifier) failed(tg *target, e Event, err error) {
	tg.mu.Lock()
	tg.st.Failed++
	tg.st.LastError, tg.st.LastErrorAt = err.Error(), time.Now()
	tg.mu.Unlock()
	n.opts.Logger.Warn("approval notification not delivered", "target", tg.t.Name, "approval_id", e.ApprovalID, "event", e.Kind, "err", err)
}

type permanentError struct{ status int }

func (p *permanentError) Error() string {
	return fmt.Sprintf("the receiver refused the event: HTTP %d", p.status)
}

func (n *Notifier) post(ctx context.Context, t Target, body []byte, e Event) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolagent-notify")
	if t.Format == JSON {
		req.Header.Set("X-Toolagent-Event", e.Kind)
		req.Header.Set("X-Toolagent-Approval", e.ApprovalID)
		if len(t.Secret) > 0 {
			req.Header.Set(SignatureHeader, Sign(t.Secret, body))
		}
	}
	resp, err := n.opts.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests:
		return &permanentError{resp.StatusCode}
	}
	return fmt.Errorf("HTTP %d", resp.StatusCode)
}

// Sign returns the SignatureHeader value of body under secret:
// "sha256=" and the hex HMAC-SHA256.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// encode is the body of e in format f.
func encode(f Format, e Event) ([]byte, error) {
	if f == JSON {
		return json.Marshal(e)
	}
	return json.Marshal(map[string]string{"text": slackText(e)})
}

// slackText is the message of e for Slack (mrkdwn).
func slackText(e Event) string {
	params, _ := json.Marshal(e.Params)
	var b strings.Builder
	switch e.Kind {
	case "pending":
		fmt.Fprintf(&b, ":raised_hand: *%s* asks to run *%s*: it needs an approval.\n", e.Caller, e.Tool)
	default:
		// A reason names the decider itself ("confirmed by operator (own
		// request)"): it stands in for "by DECIDER", not beside it.
		if e.DecisionReason != "" {
			fmt.Fprintf(&b, "*%s*'s call of *%s* was %s: %s.\n", e.Caller, e.Tool, e.Kind, e.DecisionReason)
		} else {
			fmt.Fprintf(&b, "*%s*'s call of *%s* was %s by %s.\n", e.Caller, e.Tool, e.Kind, e.Decider)
		}
	}
	fmt.Fprintf(&b, "params: `%s`\n", params)
	if e.Why != "" {
		fmt.Fprintf(&b, "why: %s\n", e.Why)
	}
	if e.Sandbox != "" {
		fmt.Fprintf(&b, "may touch: %s\n", e.Sandbox)
	}
	fmt.Fprintf(&b, "approval %s, definition %s", e.ApprovalID, e.Revision)
	if !e.ExpiresAt.IsZero() && e.Kind == "pending" {
		fmt.Fprintf(&b, ", expires %s", e.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if e.URL != "" {
		fmt.Fprintf(&b, "\n<%s|approve or deny in the console>", e.URL)
	}
	return b.String()
}
