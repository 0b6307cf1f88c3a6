package notify

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// receiver is a real HTTP server on loopback that records the requests
// it gets and answers them with the statuses of fail, in turn, then 200.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []*http.Request
	body [][]byte
	fail []int
	seen chan struct{}
}

func newReceiver(t *testing.T, fail ...int) *receiver {
	r := &receiver{fail: fail, seen: make(chan struct{}, 64)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, req)
		r.body = append(r.body, b)
		status := http.StatusOK
		if len(r.fail) > 0 {
			status, r.fail = r.fail[0], r.fail[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		r.seen <- struct{}{}
	}))
	t.Cleanup(r.Close)
	return r
}

// wait waits for n requests, failing the test after a minute.
func (r *receiver) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-r.seen:
		case <-time.After(time.Minute):
			t.Fatalf("the receiver got fewer than %d requests within a minute", n)
		}
	}
}

// waitStatus waits until cond holds for the target's status.
func waitStatus(t *testing.T, n *Notifier, cond func(TargetStatus) bool) TargetStatus {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := n.Status()[0]
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v: not as wanted within a minute", st)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

var event = Event{Kind: "pending", ApprovalID: "7f3c", Tool: "shell-exec", Revision: "abc1234", Caller: "alice",
	Params: map[string]any{"cmd": "touch /srv/x"}, ParamsHash: "ph", Sandbox: "write /srv, network", Why: "shell: touch writes",
	ExpiresAt: time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC), URL: "http://127.0.0.1:8765/ui/approvals/7f3c", At: time.Date(2026, 12, 4, 2, 45, 0, 0, time.UTC)}

// TestJSONSigned: a JSON target gets the event as it is, signed with its
// secret, and the signature checks with the receiver's copy of it.
func TestJSONSigned(t *testing.T) {
	rcv := newReceiver(t)
	secret := []byte("hook-secret-0123456789")
	n, err := New([]Target{{Name: "ops", URL: rcv.URL, Format: JSON, Secret: secret}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.Notify(event)
	rcv.wait(t, 1)
	rcv.mu.Lock()
	req, body := rcv.got[0], rcv.body[0]
	rcv.mu.Unlock()
	if got, want := req.Header.Get(SignatureHeader), Sign(secret, body); got != want || !strings.HasPrefix(got, "sha256=") {
		t.Errorf("signature %q; want %q", got, want)
	}
	if req.Header.Get("X-Toolagent-Event") != "pending" || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", req.Header)
	}
	var got Event
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.ApprovalID != "7f3c" || got.Caller != "alice" || got.Params["cmd"] != "touch /srv/x" || got.Sandbox != event.Sandbox || !got.ExpiresAt.Equal(event.ExpiresAt) || got.URL != event.URL {
		t.Errorf("body %s; want the event", body)
	}
	if strings.Contains(string(body), string(secret)) {
		t.Errorf("the secret is in the body")
	}
	if st := waitStatus(t, n, func(s TargetStatus) bool { return s.Delivered == 1 }); st.Failed != 0 {
		t.Errorf("status %+v", st)
	}
}

// TestSlack: a Slack target gets {"text": ...} naming the caller, the
// tool, the params, the grant and the console link.
func TestSlack(t *testing.T) {
	rcv := newReceiver(t)
	n, err := New([]Target{{Name: "chat", URL: rcv.URL, Format: Slack}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.Notify(event)
	rcv.wait(t, 1)
	rcv.mu.Lock()
	body := rcv.body[0]
	rcv.mu.Unlock()
	var msg map[string]string
	if err := json.Unmarshal(body, &msg); err != nil || len(msg) != 1 {
		t.Fatalf("body %s: want one text field (%v)", body, err)
	}
	for _, want := range []string{"*alice*", "*shell-exec*", `{"cmd":"touch /srv/x"}`, "write /srv, network", "7f3c", "<" + event.URL + "|"} {
		if !strings.Contains(msg["text"], want) {
			t.Errorf("text %q lacks %q", msg["text"], want)
		}
	}
}

// TestDecisionReason: a decision the operator took on their own call
// says so in the JSON body and in the Slack message.
func TestDecisionReason(t *testing.T) {
	const reason = "confirmed by operator (own request)"
	rcv := newReceiver(t)
	n, err := New([]Target{{Name: "ops", URL: rcv.URL, Format: JSON}, {Name: "chat", URL: rcv.URL, Format: Slack}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	e := event
	e.Kind, e.Caller, e.Decider, e.DecisionReason = "approved", "operator", "operator", reason
	n.Notify(e)
	rcv.wait(t, 2)
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var sawJSON, sawSlack bool
	for _, body := range rcv.body {
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("body %s: %v", body, err)
		}
		if text, ok := m["text"].(string); ok {
			// The reason names the decider: said once, not "approved
			// by operator (confirmed by operator (own request))".
			sawSlack = strings.Contains(text, "*operator*'s call of *"+e.Tool+"* was approved: "+reason+".\n") && strings.Count(text, "operator") == 2
		} else {
			sawJSON = m["decision_reason"] == reason
		}
	}
	if !sawJSON || !sawSlack {
		t.Errorf("the reason in the JSON body: %v, in the Slack text: %v\n%s", sawJSON, sawSlack, rcv.body)
	}
}

// TestRetries: a receiver that fails twice (500, 503) gets the event on
// the third try; one that refuses it (400) is not tried again; one that
// never answers well is given up after the attempts, with the error.
func TestRetries(t *testing.T) {
	opts := Options{Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Attempts: 3}
	for _, tc := range []struct {
		name            string
		fail            []int
		tries           int
		delivered, lost int64
	}{
		{"fails twice", []int{500, 503}, 3, 1, 0},
		{"refused", []int{400}, 1, 0, 1},
		{"rate limited then fine", []int{429}, 2, 1, 0},
		{"never", []int{500, 500, 500}, 3, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.fail...)
			n, err := New([]Target{{Name: "ops", URL: rcv.URL, Format: JSON}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			n.Notify(event)
			rcv.wait(t, tc.tries)
			st := waitStatus(t, n, func(s TargetStatus) bool { return s.Delivered+s.Failed == 1 })
			if st.Delivered != tc.delivered || st.Failed != tc.lost || (tc.lost > 0) != (st.LastError != "") {
				t.Errorf("status %+v; want delivered %d, failed %d", st, tc.delivered, tc.lost)
			}
			select {
			case <-rcv.seen:
				t.Errorf("more than %d tries", tc.tries)
			default:
			}
		})
	}
}

// TestNotifyNeverWaits: a receiver that hangs does not hold up Notify;
// past the queue, events are dropped and counted.
func TestNotifyNeverWaits(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	n, err := New([]Target{{Name: "slow", URL: srv.URL, Format: JSON}}, Options{Queue: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	done := make(chan struct{})
	go func() {
		for range 10 {
			n.Notify(event)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Notify waited for a hanging receiver")
	}
	waitStatus(t, n, func(s TargetStatus) bool { return s.Dropped >= 7 })
}

func TestNewRefusesBadTargets(t *testing.T) {
	for _, tg := range []Target{{Name: "a", URL: "ftp://x", Format: JSON}, {Name: "b", URL: "http://x", Format: "xml"}} {
		if _, err := New([]Target{tg}, Options{}); err == nil || !strings.Contains(err.Error(), tg.Name) {
			t.Errorf("New(%+v) = %v; want an error naming the target", tg, err)
		}
	}
}
