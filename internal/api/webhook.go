package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolagent/toolagent/internal/telemetry"
)

// Webhook configures POST /v1/hooks/forgejo, the push webhook of a
// Forgejo, Gitea or GitHub-style server. A push to Branch whose body is
// signed with Secret asks for a sync at once, through the same coalescing
// trigger as POST /v1/sync and the schedule.
type Webhook struct {
	// Secret is the HMAC-SHA256 key shared with the server; empty turns the
	// endpoint off (it answers 404). It comes from a file, never from the
	// tools repository, a flag or a log line.
	Secret []byte
	// Branch is the branch the daemon serves; pushes to other refs are
	// answered "ignored" and trigger nothing.
	Branch string
}

// maxWebhookBytes limits a webhook body. Forgejo's push payload lists at
// most a few dozen commits; 5 MiB is far above any real one.
const maxWebhookBytes = 5 << 20

// signatureHeaders are the headers that may carry the body's HMAC-SHA256,
// in the order they are looked at. The first one with a value decides: a
// bad value there is not rescued by another header. Forgejo and Gitea send
// all of them on every delivery, empty ("" and "sha256=") when the webhook
// has no secret: such a delivery is unsigned, not wrongly signed.
var signatureHeaders = []string{"X-Forgejo-Signature", "X-Gitea-Signature", "X-Hub-Signature-256"}

// eventHeaders name the event kind, in the same order.
var eventHeaders = []string{"X-Forgejo-Event", "X-Gitea-Event", "X-GitHub-Event"}

// webhookBody is the answer to a webhook delivery.
type webhookBody struct {
	Status string `json:"status"`           // queued or ignored
	Reason string `json:"reason,omitempty"` // why it was ignored
}

// webhookResults are the values of the result label of
// toolagent_webhook_requests_total.
const (
	whQueued       = "queued"
	whIgnored      = "ignored"
	whUnsigned     = "unsigned"
	whBadSignature = "bad_signature"
	whBadRequest   = "bad_request"
	whTooLarge     = "too_large"
	whOff          = "not_configured"
)

func newWebhookCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolagent_webhook_requests_total",
		Help: "Push webhook deliveries by result: queued (a sync was asked for), ignored (another branch or event), unsigned, bad_signature, bad_request, too_large, not_configured.",
	}, []string{"result"})
	for _, r := range []string{whQueued, whIgnored, whUnsigned, whBadSignature, whBadRequest, whTooLarge, whOff} {
		c.WithLabelValues(r)
	}
	reg.MustRegister(c)
	return c
}

// handleWebhook verifies a push delivery and, when it is for the served
// branch, pokes the sync trigger and answers 202 at once: no git work
// happens in the handler. The signature is checked before the body is
// parsed, and compared in constant time.
func (s *server) handleWebhook(w http.ResponseWriter, r *http.Request) {
	ctx, span := telemetry.Tracer().Start(r.Context(), "webhook")
	defer span.End()
	r = r.WithContext(ctx)
	wh := s.opts.Webhook
	refuse := func(result string, err *apiError) {
		s.sawWebhook(r.Context(), result)
		s.log.WarnContext(r.Context(), "webhook refused", "result", result, "status", err.status, "remote", r.RemoteAddr)
		writeError(w, s.log, err)
	}
	if len(wh.Secret) == 0 || s.sync == nil {
		refuse(whOff, errorf(http.StatusNotFound, "no webhook is configured on this daemon: start it with a git source (--repo) and --webhook-secret-file"))
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		refuse(whBadRequest, errorf(http.StatusUnsupportedMediaType, "content type %q: set the webhook's POST content type to application/json", r.Header.Get("Content-Type")))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			refuse(whTooLarge, errorf(http.StatusRequestEntityTooLarge, "webhook body: larger than the limit of %d bytes", maxWebhookBytes))
			return
		}
		refuse(whBadRequest, errorf(http.StatusBadRequest, "webhook body: %v", err))
		return
	}
	sig, ok := signature(r.Header)
	if !ok {
		refuse(whUnsigned, errorf(http.StatusUnauthorized, "unsigned webhook: set the webhook's secret so that the server signs its deliveries (X-Forgejo-Signature, X-Gitea-Signature or X-Hub-Signature-256; Forgejo and Gitea send them empty when the webhook has no secret)"))
		return
	}
	if !validSignature(wh.Secret, body, sig) {
		refuse(whBadSignature, errorf(http.StatusUnauthorized, "bad webhook signature: the secret differs from this daemon's, or the body was changed"))
		return
	}

	if event, ok := firstHeader(r.Header, eventHeaders); ok && event != "push" {
		s.sawWebhook(r.Context(), whIgnored)
		encode(w, s.log, http.StatusOK, webhookBody{Status: whIgnored, Reason: "event " + event + " is not a push"})
		return
	}
	var push struct {
		Ref   string `json:"ref"`
		After string `json:"after"`
	}
	if err := json.Unmarshal(body, &push); err != nil || push.Ref == "" {
		refuse(whBadRequest, errorf(http.StatusBadRequest, "webhook body: want a push event's JSON with a ref"))
		return
	}
	want := "refs/heads/" + wh.Branch
	if push.Ref != want {
		s.sawWebhook(r.Context(), whIgnored)
		s.log.DebugContext(r.Context(), "webhook ignored", "ref", push.Ref, "serving", want)
		encode(w, s.log, http.StatusAccepted, webhookBody{Status: whIgnored, Reason: "push to " + push.Ref + "; this daemon serves " + want})
		return
	}
	exact := false
	if ex, ok := s.sync.(pushExpecter); ok && isCommitID(push.After) {
		// The push names the commit the branch now points at: the sync
		// need not wait for a burst to settle.
		ex.Expect(push.After)
		exact = true
	}
	s.sync.Poke()
	s.sawWebhook(r.Context(), whQueued)
	s.log.InfoContext(r.Context(), "webhook push", "ref", push.Ref, "after", push.After, "at_once", exact)
	encode(w, s.log, http.StatusAccepted, webhookBody{Status: whQueued})
}

// pushExpecter is the part of a Syncer that takes the commit a push
// names, so that the sync it asks for skips the debounce wait.
// *reload.Loop has it, and so has the daemon's syncer, which embeds one.
type pushExpecter interface {
	Expect(rev string)
}

// isCommitID reports whether s is a full SHA-1 or SHA-256 commit id other
// than the all-zero one a push deleting the branch names.
func isCommitID(s string) bool {
	if len(s) != 40 && len(s) != 64 || strings.Trim(s, "0") == "" {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// signature returns the first signature among signatureHeaders that has a
// value; ok is false when none has (an unsigned delivery).
func signature(h http.Header) (sig string, ok bool) {
	for _, n := range signatureHeaders {
		v := strings.TrimSpace(h.Get(n))
		if strings.TrimPrefix(v, "sha256=") == "" {
			continue
		}
		return v, true
	}
	return "", false
}

// firstHeader returns the value of the first of names present in h.
func firstHeader(h http.Header, names []string) (string, bool) {
	for _, n := range names {
		if vs := h.Values(n); len(vs) > 0 {
			return strings.TrimSpace(vs[0]), true
		}
	}
	return "", false
}

// validSignature reports whether sig, the hex HMAC-SHA256 of body under
// secret (optionally prefixed "sha256=", as GitHub writes it), is right.
// The comparison takes constant time.
func validSignature(secret, body []byte, sig string) bool {
	got, err := hex.DecodeString(strings.TrimPrefix(sig, "sha256="))
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// sawWebhook counts a delivery by its result and tells Options.OnWebhook.
// The delivery's span (tracing on) records the result.
func (s *server) sawWebhook(ctx context.Context, result string) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("toolagent.webhook_result", result))
	s.webhooks.WithLabelValues(result).Inc()
	if s.opts.OnWebhook != nil {
		s.opts.OnWebhook(result)
	}
}
