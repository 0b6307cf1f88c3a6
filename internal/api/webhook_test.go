package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/reload"
)

const hookSecret = "s3cret-webhook-key"

func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func TestWebhook(t *testing.T) {
	push := `{"ref":"refs/heads/main","after":"0123abcd","repository":{"full_name":"ops/tools"}}`
	other := `{"ref":"refs/heads/feature","after":"0123abcd"}`
	tag := `{"ref":"refs/tags/v1","after":"0123abcd"}`
	good := sign(hookSecret, push)
	tests := []struct {
		name       string
		secret     string // the daemon's; "" for none
		body       string
		header     map[string]string
		wantCode   int
		wantStatus string // the answer's status, or "" for an error answer
		wantPokes  int
		wantResult string // toolagent_webhook_requests_total label counted
	}{
		{"forgejo signature", hookSecret, push, map[string]string{"X-Forgejo-Signature": good, "X-Forgejo-Event": "push"}, 202, "queued", 1, whQueued},
		{"gitea signature", hookSecret, push, map[string]string{"X-Gitea-Signature": good, "X-Gitea-Event": "push"}, 202, "queued", 1, whQueued},
		{"github-style signature", hookSecret, push, map[string]string{"X-Hub-Signature-256": "sha256=" + good, "X-GitHub-Event": "push"}, 202, "queued", 1, whQueued},
		{"no event header", hookSecret, push, map[string]string{"X-Forgejo-Signature": good}, 202, "queued", 1, whQueued},
		{"missing signature", hookSecret, push, map[string]string{"X-Forgejo-Event": "push"}, 401, "", 0, whUnsigned},
		{"wrong signature", hookSecret, push, map[string]string{"X-Forgejo-Signature": sign("other-secret", push)}, 401, "", 0, whBadSignature},
		{"empty signature", hookSecret, push, map[string]string{"X-Gitea-Signature": ""}, 401, "", 0, whUnsigned},
		{"gitea without a secret: every signature header empty", hookSecret, push, map[string]string{
			"X-Gitea-Signature": "", "X-Gogs-Signature": "", "X-Hub-Signature": "sha1=", "X-Hub-Signature-256": "sha256=", "X-Gitea-Event": "push", "X-GitHub-Event": "push"}, 401, "", 0, whUnsigned},
		{"forgejo without a secret", hookSecret, push, map[string]string{
			"X-Forgejo-Signature": "", "X-Gitea-Signature": "", "X-Hub-Signature-256": "sha256=", "X-Forgejo-Event": "push"}, 401, "", 0, whUnsigned},
		{"empty first header, good second", hookSecret, push, map[string]string{"X-Forgejo-Signature": "", "X-Hub-Signature-256": "sha256=" + good}, 202, "queued", 1, whQueued},
		{"not hex", hookSecret, push, map[string]string{"X-Hub-Signature-256": "sha256=zz"}, 401, "", 0, whBadSignature},
		{"signature of another body", hookSecret, push, map[string]string{"X-Forgejo-Signature": sign(hookSecret, other)}, 401, "", 0, whBadSignature},
		{"bad first header not rescued by a good second", hookSecret, push, map[string]string{"X-Forgejo-Signature": sign("x", push), "X-Hub-Signature-256": "sha256=" + good}, 401, "", 0, whBadSignature},
		{"push to another branch", hookSecret, other, map[string]string{"X-Forgejo-Signature": sign(hookSecret, other), "X-Forgejo-Event": "push"}, 202, "ignored", 0, whIgnored},
		{"tag push", hookSecret, tag, map[string]string{"X-Gitea-Signature": sign(hookSecret, tag), "X-Gitea-Event": "push"}, 202, "ignored", 0, whIgnored},
		{"not a push event", hookSecret, push, map[string]string{"X-Forgejo-Signature": good, "X-Forgejo-Event": "issues"}, 200, "ignored", 0, whIgnored},
		{"signed but not a push payload", hookSecret, `{"zen":"hi"}`, map[string]string{"X-Forgejo-Signature": sign(hookSecret, `{"zen":"hi"}`)}, 400, "", 0, whBadRequest},
		{"no secret configured", "", push, map[string]string{"X-Forgejo-Signature": sign("", push)}, 404, "", 0, whOff},
		{"form content type", hookSecret, push, map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Forgejo-Signature": good}, 415, "", 0, whBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, mustTokens(t))
			reg := prometheus.NewRegistry()
			f.h = New(Options{Tokens: mustTokens(t), Registry: reg, Webhook: Webhook{Secret: []byte(tc.secret), Branch: "main"}},
				f.store, dispatch.New(f.store, execs(), dispatch.Options{}), f.sync, nil)
			req := httptest.NewRequest("POST", "/v1/hooks/forgejo", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, req)
			if w.Code != tc.wantCode {
				t.Errorf("POST /v1/hooks/forgejo = %d %s, want %d", w.Code, w.Body, tc.wantCode)
			}
			if tc.wantStatus != "" && !strings.Contains(w.Body.String(), `"status":"`+tc.wantStatus+`"`) {
				t.Errorf("POST /v1/hooks/forgejo body = %s, want status %s", w.Body, tc.wantStatus)
			}
			if f.sync.pokes != tc.wantPokes {
				t.Errorf("sync pokes = %d, want %d", f.sync.pokes, tc.wantPokes)
			}
			if got := webhookCounts(t, reg)[tc.wantResult]; got != 1 {
				t.Errorf("toolagent_webhook_requests_total{result=%q} = %v, want 1", tc.wantResult, got)
			}
		})
	}
}

// expectingSyncer is a Syncer with Expect, as the daemon's (which embeds
// *reload.Loop) is.
type expectingSyncer struct {
	*fakeSyncer
	expected []string
}

func (s *expectingSyncer) Expect(rev string) { s.expected = append(s.expected, rev) }

// TestWebhookExpect: a push that names its full commit id tells the
// syncer to sync at once (Expect, then Poke); one without a usable id
// (abbreviated, or the all-zero id of a deleted branch) only pokes; a
// syncer without Expect is poked all the same.
func TestWebhookExpect(t *testing.T) {
	const head = "3f9c2a1b4d5e6f708192a3b4c5d6e7f801234567"
	tests := []struct {
		name  string
		after string
		want  []string // the commits Expect got
	}{
		{"full sha-1", head, []string{head}},
		{"full sha-256", strings.Repeat("ab", 32), []string{strings.Repeat("ab", 32)}},
		{"abbreviated", "3f9c2a1", nil},
		{"branch deleted", strings.Repeat("0", 40), nil},
		{"not hex", strings.Repeat("z", 40), nil},
		{"none", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			sync := &expectingSyncer{fakeSyncer: f.sync}
			h := New(Options{Registry: prometheus.NewRegistry(), Webhook: Webhook{Secret: []byte(hookSecret), Branch: "main"}},
				f.store, dispatch.New(f.store, execs(), dispatch.Options{}), sync, nil)
			body := `{"ref":"refs/heads/main","after":"` + tc.after + `"}`
			req := httptest.NewRequest("POST", "/v1/hooks/forgejo", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Gitea-Signature", sign(hookSecret, body))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != 202 || sync.pokes != 1 || !slices.Equal(sync.expected, tc.want) {
				t.Errorf("push after=%q: %d %s, %d pokes, Expect(%q); want 202, 1 poke, Expect(%q)", tc.after, w.Code, w.Body, sync.pokes, sync.expected, tc.want)
			}
		})
	}

	// The daemon's syncer embeds a *reload.Loop and a *reload.Trigger
	// (cmd/toolagent/serve.go): Expect must be promoted, not ambiguous.
	var daemon Syncer = struct {
		*reload.Loop
		*reload.Trigger
	}{}
	if _, ok := daemon.(pushExpecter); !ok {
		t.Error("a struct embedding *reload.Loop and *reload.Trigger has no Expect: webhooks would wait for the debounce")
	}
}

// TestWebhookCounts: every delivery is counted by result, and the body
// never echoes the secret.
func TestWebhookCounts(t *testing.T) {
	f := newFixture(t, nil)
	reg := prometheus.NewRegistry()
	var told []string // OnWebhook hears each delivery's result (the console's "last webhook")
	h := New(Options{Registry: reg, Webhook: Webhook{Secret: []byte(hookSecret), Branch: "main"}, OnWebhook: func(r string) { told = append(told, r) }},
		f.store, dispatch.New(f.store, execs(), dispatch.Options{}), f.sync, nil)
	defer func() {
		if want := []string{whQueued, whUnsigned, whBadSignature}; !slices.Equal(told, want) {
			t.Errorf("OnWebhook heard %v; want %v", told, want)
		}
	}()
	body := `{"ref":"refs/heads/main"}`
	for _, sig := range []string{sign(hookSecret, body), "", "deadbeef"} {
		req := httptest.NewRequest("POST", "/v1/hooks/forgejo", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if sig != "" {
			req.Header.Set("X-Forgejo-Signature", sig)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if strings.Contains(w.Body.String(), hookSecret) {
			t.Errorf("webhook answer %q holds the secret", w.Body)
		}
	}
	const name = "toolagent_webhook_requests_total"
	got := webhookCounts(t, reg)
	for _, c := range []struct {
		result string
		want   float64
	}{{whQueued, 1}, {whUnsigned, 1}, {whBadSignature, 1}, {whIgnored, 0}} {
		if got[c.result] != c.want {
			t.Errorf("%s{result=%q} = %v, want %v", name, c.result, got[c.result], c.want)
		}
	}
}

// webhookCounts returns toolagent_webhook_requests_total by result.
func webhookCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "toolagent_webhook_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return got
}

// mustTokens returns API tokens, so the tests show that the webhook needs
// none of them: its signature authenticates it.
func mustTokens(t testing.TB) *Tokens {
	t.Helper()
	toks := new(Tokens)
	if err := toks.Parse("test", "ops:admin:0123456789abcdef0123"); err != nil {
		t.Fatal(err)
	}
	return toks
}
