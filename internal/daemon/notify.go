package daemon

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/notify"
)

// approvalNotifier hands approval events to the targets of
// approval_notify, with a link to the console's queue once the daemon
// knows its address.
type approvalNotifier struct {
	n       *notify.Notifier
	console atomic.Pointer[string] // "http://host:port/ui/approvals", set once listening
}

// newApprovalNotifier reads the targets' URLs and secrets (files, or
// variables the daemon drops from its environment afterwards) and starts
// the deliveries; nil without targets.
func newApprovalNotifier(cfg Config, log *slog.Logger) (*approvalNotifier, error) {
	if len(cfg.ApprovalNotify) == 0 {
		return nil, nil
	}
	var targets []notify.Target
	for _, name := range slices.Sorted(maps.Keys(cfg.ApprovalNotify)) {
		t := cfg.ApprovalNotify[name]
		at := "approval_notify." + name
		url := t.URL
		if t.URLEnv != "" {
			if url = cfg.getenv(t.URLEnv); url == "" {
				return nil, fmt.Errorf("%s: url_env %s is not set", at, t.URLEnv)
			}
		}
		var secret []byte
		switch {
		case t.SecretFile != "":
			s, err := readSecretFile(log, at+" secret_file", t.SecretFile)
			if err != nil {
				return nil, err
			}
			secret = s
		case t.SecretEnv != "":
			if secret = []byte(cfg.getenv(t.SecretEnv)); len(secret) == 0 {
				return nil, fmt.Errorf("%s: secret_env %s is not set", at, t.SecretEnv)
			}
		}
		targets = append(targets, notify.Target{Name: name, URL: url, Format: notify.Format(t.Format), Secret: secret})
	}
	n, err := notify.New(targets, notify.Options{Logger: log.With(slog.String("log", "notify"))})
	if err != nil {
		return nil, err
	}
	return &approvalNotifier{n: n}, nil
}

// listening sets the console link from the address the daemon serves.
func (an *approvalNotifier) listening(base string) {
	if an == nil {
		return
	}
	s := base + "/ui/approvals"
	an.console.Store(&s)
}

// event turns a request into what the targets get.
func (an *approvalNotifier) event(kind string, a dispatch.Approval) notify.Event {
	e := notify.Event{Kind: kind, ApprovalID: a.ID, Tool: a.Tool, Revision: a.Revision, Caller: a.Caller, Params: a.Params,
		ParamsHash: a.ParamsHash, Sandbox: a.Sandbox, Why: a.Why, ExpiresAt: a.ExpiresAt, Decider: a.Decider, DecisionReason: a.DecisionReason, At: time.Now()}
	if p := an.console.Load(); p != nil {
		e.URL = *p + "#" + a.ID
	}
	return e
}

// held is dispatch.Options.OnHeld.
func (an *approvalNotifier) held(a dispatch.Approval) { an.n.Notify(an.event("pending", a)) }

// decided is dispatch.Options.OnDecided.
func (an *approvalNotifier) decided(a dispatch.Approval) { an.n.Notify(an.event(string(a.Status), a)) }

// notificationStatus is /v1/status's "notifications": each target's
// delivery state; nil without targets.
func (cr *core) notificationStatus() func() any {
	if cr.notifier == nil {
		return nil
	}
	return func() any { return cr.notifier.n.Status() }
}

func (an *approvalNotifier) close() {
	if an != nil {
		an.n.Close()
	}
}
