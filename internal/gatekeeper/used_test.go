package gatekeeper

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/grant"
)

// lines returns the lines of the file at path, none when it is missing.
func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestGrantRunsOnce: a grant starts its command once. A replay of it, or a
// second grant for the same approval, is refused (403 refused, naming the
// approval) and the command's side effect — a line appended to a file —
// happens exactly once; so is a replay to the same server restarted (a new
// handler: a new boot id). A grant whose command was refused after the
// grant verified, or could not start, is not used: it runs when sent
// again.
func TestGrantRunsOnce(t *testing.T) {
	type send struct {
		h      http.Handler
		cwd    string
		status int
		want   string // substring of the error
	}
	tests := []struct {
		name  string
		sends func(h, other http.Handler, refuse *atomic.Bool, dir string) []send
		ran   int // lines in the file at the end
	}{
		{name: "replayed grant", sends: func(h, _ http.Handler, _ *atomic.Bool, _ string) []send {
			return []send{{h: h, status: 200}, {h: h, status: 403, want: "grant refused: grant already used: approval %q ran on this gatekeeper at"}, {h: h, status: 403, want: "already used"}}
		}, ran: 1},
		{name: "replayed after a restart", sends: func(h, other http.Handler, _ *atomic.Bool, _ string) []send {
			return []send{{h: h, status: 200}, {h: other, status: 403, want: "grant refused: grant is for another boot of this gatekeeper"}}
		}, ran: 1},
		{name: "refused after the grant verified", sends: func(h, _ http.Handler, refuse *atomic.Bool, _ string) []send {
			refuse.Store(true)
			return []send{{h: h, status: 403, want: "policy: not now"}, {h: h, status: 200}, {h: h, status: 403, want: "already used"}}
		}, ran: 1},
		{name: "could not start", sends: func(h, _ http.Handler, _ *atomic.Bool, dir string) []send {
			return []send{{h: h, cwd: filepath.Join(dir, "missing"), status: 422, want: "working directory"}, {h: h, status: 200}, {h: h, status: 403, want: "already used"}}
		}, ran: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "ran")
			var refuse atomic.Bool
			opts := Options{Tokens: []string{"t"}}
			opts.Check = func(string, []string) error {
				if refuse.CompareAndSwap(true, false) {
					return errors.New("not now")
				}
				return nil
			}
			// other is the same server restarted: a new handler.
			h, other := NewHandler(opts, nil), NewHandler(opts, nil)
			cmd := "echo ran >> " + out
			g := newGrant("t", bootOf(t, h, "t"), cmd, nil, grant.Sandbox{})
			for i, s := range tt.sends(h, other, &refuse, dir) {
				body, _ := json.Marshal(ExecRequest{Cmd: cmd, Cwd: s.cwd, Grant: g, Tool: "shell-exec", Revision: "rev1"})
				status, m := do(t, s.h, "POST", "/exec", "127.0.0.1:1", "Bearer t", string(body))
				msg, _ := m["error"].(string)
				want := s.want
				if strings.Contains(want, "%q") {
					want = fmt.Sprintf(want, g.Approval)
				}
				if status != s.status || !strings.Contains(msg, want) {
					t.Errorf("send %d = %d %v; want %d and an error saying %q", i, status, m, s.status, want)
				}
				if status == 403 && m["code"] != CodeRefused {
					t.Errorf("send %d: code %v, want %s", i, m["code"], CodeRefused)
				}
			}
			if n := lines(t, out); n != tt.ran {
				t.Errorf("the command ran %d times; want %d", n, tt.ran)
			}
		})
	}

	// A second grant for an approval that ran is refused too: one
	// approval, one run.
	dir := t.TempDir()
	out := filepath.Join(dir, "ran")
	h := NewHandler(Options{Tokens: []string{"t"}}, nil)
	boot := bootOf(t, h, "t")
	cmd := "echo ran >> " + out
	first := newGrant("t", boot, cmd, nil, grant.Sandbox{})
	second := newGrant("t", boot, cmd, nil, grant.Sandbox{})
	second.Approval, second.ExpiresAt = first.Approval, time.Now().Add(2*time.Minute).UTC().Format(time.RFC3339)
	second.Sign(grant.Key("t"))
	for i, g := range []*grant.Grant{first, second} {
		status, m := do(t, h, "POST", "/exec", "127.0.0.1:1", "Bearer t", grantBody(cmd, nil, g))
		if want := []int{200, 403}[i]; status != want {
			t.Errorf("grant %d of approval %s = %d %v; want %d", i+1, first.Approval, status, m, want)
		}
	}
	if n := lines(t, out); n != 1 {
		t.Errorf("two grants of one approval ran the command %d times; want 1", n)
	}
}

// TestGrantConcurrentDuplicates: many requests with one grant at once,
// over real HTTP: exactly one runs the command, every other is refused as
// already used.
func TestGrantConcurrentDuplicates(t *testing.T) {
	const n = 32
	out := filepath.Join(t.TempDir(), "ran")
	h := NewHandler(Options{Tokens: []string{"t"}, MaxConcurrent: n}, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	cmd := "echo ran >> " + out
	body := grantBody(cmd, nil, newGrant("t", bootOf(t, h, "t"), cmd, nil, grant.Sandbox{}))

	start := make(chan struct{})
	var (
		wg       sync.WaitGroup
		statuses [n]int
		errs     [n]string
	)
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/exec", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer t")
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var m map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&m)
			statuses[i] = resp.StatusCode
			errs[i], _ = m["error"].(string)
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for i := range n {
		switch {
		case statuses[i] == 200:
			ok++
		case statuses[i] != 403 || !strings.Contains(errs[i], "grant already used"):
			t.Errorf("request %d = %d %q; want 200, or 403 grant already used", i, statuses[i], errs[i])
		}
	}
	if ok != 1 {
		t.Errorf("%d of %d requests with one grant ran; want 1", ok, n)
	}
	if got := lines(t, out); got != 1 {
		t.Errorf("the command ran %d times; want 1", got)
	}
}

// clock is a settable time for usedGrants.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// TestUsedGrants: the memory of used grants refuses a second claim of an
// approval that started, or is starting, a command; gives back the claim
// of a command that never started; forgets an entry once its grant
// expired; keeps the approvals of different tokens apart; and when full
// refuses new claims instead of forgetting one. The clock is injected.
func TestUsedGrants(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	keyA, keyB := grant.Key("a"), grant.Key("b")
	id := func(approval string) [sha256.Size]byte { return usedKey(keyA, approval) }
	run := func(t *testing.T, u *usedGrants, id [sha256.Size]byte, approval string, exp time.Time) {
		t.Helper()
		c, err := u.claim(id, approval, exp)
		if err != nil {
			t.Fatalf("claim(%s) = %v", approval, err)
		}
		c.started()
		c.done()
	}
	tests := []struct {
		name string
		max  int
		do   func(t *testing.T, u *usedGrants, clk *clock)
	}{
		{name: "used: refused", do: func(t *testing.T, u *usedGrants, clk *clock) {
			run(t, u, id("x"), "x", t0.Add(time.Minute))
			if _, err := u.claim(id("x"), "x", t0.Add(time.Minute)); !errors.Is(err, ErrUsed) || !strings.Contains(err.Error(), `approval "x" ran on this gatekeeper at 2026-03-01T12:00:00Z`) {
				t.Errorf("second claim = %v; want ErrUsed saying when x ran", err)
			}
		}},
		{name: "starting: refused", do: func(t *testing.T, u *usedGrants, clk *clock) {
			c, err := u.claim(id("x"), "x", t0.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer c.done()
			if _, err := u.claim(id("x"), "x", t0.Add(time.Minute)); !errors.Is(err, ErrUsed) || !strings.Contains(err.Error(), "is starting a command") {
				t.Errorf("claim while the first is starting = %v; want ErrUsed", err)
			}
		}},
		{name: "never started: claimable again", do: func(t *testing.T, u *usedGrants, clk *clock) {
			c, err := u.claim(id("x"), "x", t0.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			c.done()
			run(t, u, id("x"), "x", t0.Add(time.Minute))
		}},
		{name: "expired entry forgotten", do: func(t *testing.T, u *usedGrants, clk *clock) {
			run(t, u, id("x"), "x", t0.Add(time.Minute))
			run(t, u, id("y"), "y", t0.Add(time.Hour))
			clk.add(time.Minute)
			// x's grant expired: it cannot claim, and its entry is gone.
			if _, err := u.claim(id("x"), "x", t0.Add(time.Minute)); err == nil || errors.Is(err, ErrUsed) || !strings.Contains(err.Error(), "grant expired") {
				t.Errorf("claim of an expired grant = %v; want grant expired", err)
			}
			if n := u.len(); n != 1 {
				t.Errorf("%d entries after x expired; want 1 (y)", n)
			}
			if _, err := u.claim(id("y"), "y", t0.Add(time.Hour)); !errors.Is(err, ErrUsed) {
				t.Errorf("claim of y = %v; want ErrUsed: y has not expired", err)
			}
			clk.add(time.Hour)
			run(t, u, id("z"), "z", t0.Add(2*time.Hour))
			if n := u.len(); n != 1 {
				t.Errorf("%d entries after y expired; want 1 (z)", n)
			}
		}},
		{name: "tokens apart", do: func(t *testing.T, u *usedGrants, clk *clock) {
			run(t, u, usedKey(keyA, "x"), "x", t0.Add(time.Minute))
			run(t, u, usedKey(keyB, "x"), "x", t0.Add(time.Minute))
		}},
		{name: "full: refused, not forgotten", max: 2, do: func(t *testing.T, u *usedGrants, clk *clock) {
			run(t, u, id("x"), "x", t0.Add(time.Minute))
			run(t, u, id("y"), "y", t0.Add(time.Hour))
			_, err := u.claim(id("z"), "z", t0.Add(time.Hour))
			if full, ok := errors.AsType[*usedFull](err); !ok || !full.next.Equal(t0.Add(time.Minute)) || !strings.Contains(err.Error(), "remembers 2 used grants") {
				t.Errorf("claim when full = %v; want *usedFull naming the limit and x's expiry", err)
			}
			if _, err := u.claim(id("x"), "x", t0.Add(time.Minute)); !errors.Is(err, ErrUsed) {
				t.Errorf("claim of x when full = %v; want ErrUsed (remembered)", err)
			}
			clk.add(time.Minute)
			run(t, u, id("z"), "z", t0.Add(time.Hour))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{t: t0}
			tt.do(t, newUsedGrants(cmp.Or(tt.max, DefaultMaxUsedGrants), clk.now), clk)
		})
	}
}

// TestFullRefusesGrants: a server whose memory of used grants is full
// answers a grant with 503 busy and Retry-After, and does not run it.
func TestFullRefusesGrants(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "ran")
	h := NewHandler(Options{Tokens: []string{"t"}, MaxUsedGrants: 1}, nil)
	boot := bootOf(t, h, "t")
	cmd := "echo ran >> " + out
	for i, want := range []int{200, 503} {
		w := httptest.NewRecorder()
		r := httptest.NewRequestWithContext(t.Context(), "POST", "/exec", strings.NewReader(grantBody(cmd, nil, newGrant("t", boot, cmd, nil, grant.Sandbox{}))))
		r.RemoteAddr = "127.0.0.1:1"
		r.Header.Set("Authorization", "Bearer t")
		h.ServeHTTP(w, r)
		if w.Code != want || want == 503 && (w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), `"code":"busy"`)) {
			t.Errorf("grant %d = %d %s (Retry-After %q); want %d", i+1, w.Code, w.Body, w.Header().Get("Retry-After"), want)
		}
	}
	if n := lines(t, out); n != 1 {
		t.Errorf("the command ran %d times; want 1", n)
	}
}
