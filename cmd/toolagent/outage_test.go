package main

import (
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
)

// TestServeStoreOutage: PostgreSQL stopped and started again under a
// running daemon and its calls. While it is down: the approval routes
// and a call that needs an approval answer 503 "approval store
// unavailable: CAUSE", a max_concurrency call 503 "shared store
// unavailable: CAUSE", a plain call runs, /readyz is 503 naming the
// store, /v1/status says the store is down and what still works; the
// slot of a call that ended during the outage is owed, and so is the
// result of an approved call that ended then. Once it is back: /readyz
// is 200, the slot is released by the daemon (not left to its lease) and
// taken again, the approved call reads executed with its result, and the
// request held before the outage is still pending and is approved and
// run. The database URL's password,
// host and port are in no answer; the password in no log line.
func TestServeStoreOutage(t *testing.T) {
	t.Parallel()
	c := pgtest.NewCluster(t)
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	const password = "pw-outage-7c1d9e" // the test cluster trusts loopback: any password connects
	u.User = url.UserPassword("toolagent", password)
	flag := goOnFlag(t)
	tools := t.TempDir()
	putTool(t, tools, "shell-exec", shellExec(t))
	putTool(t, tools, "deploy", testTool("deploy", "intent: deploy\nmethod: run\nexecutor: shell\nargv: [sh, -c, \"while [ ! -e "+flag+" ]; do sleep 0.05; done; echo deployed\"]\nparams_schema: {}\nconstraints:\n  timeout_ms: 120000\n  max_concurrency: 1\n"))
	env := map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + aliceToken + ",bob:approve:" + bobToken, "TOOLAGENT_STORE_URL": u.String()}
	d := startDaemon(t, env, "--tools", tools, "--store", "postgres")
	alice, bob := d.as(aliceToken), d.as(bobToken)
	db, err := pgstore.Open(t.Context(), c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	secrets := []string{password, u.Host, ":" + u.Port()}
	noSecret := func(what, s string) {
		t.Helper()
		for _, x := range secrets {
			if strings.Contains(s, x) {
				t.Errorf("%s shows %q: %s", what, x, s)
			}
		}
	}

	marker := t.TempDir() + "/held"
	code, held := alice.call(t, "shell-exec", map[string]any{"cmd": "rm -f " + marker + "; echo removed"})
	if code != 202 || held.ApprovalID == "" {
		t.Fatalf("a call held before the outage: %d %+v", code, held)
	}
	// An approved call that runs into the outage: it ends while the
	// database is down, and its result is stored once it is back.
	flag2 := flag + "-approved"
	code, running := alice.call(t, "shell-exec", map[string]any{"cmd": "rm -f " + marker + "; while [ ! -e " + flag2 + " ]; do sleep 0.05; done; echo approved-done"})
	if code != 202 || running.ApprovalID == "" {
		t.Fatalf("a second call held before the outage: %d %+v", code, running)
	}
	decided := make(chan string, 1)
	go func() {
		_, _, body := bob.approval(t, "POST", running.ApprovalID, `{"decision":"approve"}`)
		decided <- body
	}()
	pollUntil(t, "the approved call to run", func() bool {
		var st string
		return db.Pool.QueryRow(t.Context(), `SELECT status FROM toolagent_approvals WHERE id = $1`, running.ApprovalID).Scan(&st) == nil && st == "running"
	})
	first := make(chan dispatch.Result, 1)
	go func() {
		_, res := alice.call(t, "deploy", nil)
		first <- res
	}()
	slotHolder := func() (holder *string, err error) {
		err = db.Pool.QueryRow(t.Context(), `SELECT holder FROM toolagent_slots WHERE tool = 'deploy' AND slot = 1`).Scan(&holder)
		return holder, err
	}
	pollUntil(t, "the deploy call to hold its shared slot", func() bool {
		h, err := slotHolder()
		return err == nil && h != nil
	})

	c.Stop(t)
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := <-first; res.Output != "deployed\n" {
		t.Fatalf("the deploy call that ended during the outage: %+v", res)
	}
	if err := os.WriteFile(flag2, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if body := <-decided; !strings.Contains(body, `approved-done\n`) {
		t.Errorf("the approver of the call that ended during the outage got %s; want its result", body)
	}

	for _, r := range []struct {
		who                *liveDaemon
		method, path, body string
	}{
		{bob, "GET", "/v1/approvals", ""},
		{bob, "GET", "/v1/approvals/" + held.ApprovalID, ""},
		{alice, "GET", "/v1/approvals/" + held.ApprovalID + "?wait=1s", ""},
		{bob, "POST", "/v1/approvals/" + held.ApprovalID, `{"decision":"approve"}`},
	} {
		code, body := r.who.request(t, r.method, r.path, r.body)
		if code != 503 || !strings.HasPrefix(string(body), `{"error":"approval store unavailable: `) {
			t.Errorf("%s %s during the outage: %d %s; want 503 approval store unavailable: CAUSE", r.method, r.path, code, body)
		}
		noSecret(r.method+" "+r.path, string(body))
	}
	code, res := alice.call(t, "shell-exec", map[string]any{"cmd": "rm -f " + marker + ".2"})
	if code != 503 || res.Status != dispatch.Unavailable || res.ApprovalID != "" || !strings.HasPrefix(res.Error, "approval store unavailable: ") {
		t.Errorf("a call that needs an approval during the outage: %d %+v; want 503 unavailable, approval store unavailable: CAUSE", code, res)
	}
	noSecret("a held call's answer", res.Error)
	if code, res := alice.call(t, "shell-exec", map[string]any{"cmd": "echo still here"}); code != 200 || res.Output != "still here\n" {
		t.Errorf("a plain call during the outage: %d %+v; want it run", code, res)
	}
	code, res = alice.call(t, "deploy", nil)
	if code != 503 || res.Status != dispatch.Unavailable || !strings.HasPrefix(res.Error, "shared store unavailable: ") {
		t.Errorf("a max_concurrency call during the outage: %d %+v; want 503 shared store unavailable: CAUSE", code, res)
	}
	noSecret("a max_concurrency call's answer", res.Error)
	// /readyz gives the store's answer of up to a second ago (sharedCheck):
	// the first answer during the outage comes within that.
	var body []byte
	pollUntil(t, "/readyz to be 503 during the outage", func() bool {
		code, body = d.request(t, "GET", "/readyz", "")
		return code != 200
	})
	if code != 503 || !strings.Contains(string(body), `"store":"approval store unavailable: `) {
		t.Errorf("/readyz during the outage: %d %s; want 503 naming the store", code, body)
	}
	noSecret("/readyz", string(body))
	var status struct {
		Store struct {
			Kind             string
			Available        bool
			Error            string
			Effect           string
			SlotReleasesOwed int `json:"slot_releases_owed"`
		}
	}
	code, body = bob.request(t, "GET", "/v1/status", "")
	if err := json.Unmarshal(body, &status); err != nil || code != 200 || status.Store.Kind != "postgres" || status.Store.Available ||
		!strings.HasPrefix(status.Store.Error, "approval store unavailable: ") || !strings.Contains(status.Store.Effect, "need no approval") ||
		status.Store.SlotReleasesOwed != 1 {
		t.Errorf("/v1/status during the outage: %d %s; want the store unavailable, what still works, one slot release owed", code, body)
	}
	noSecret("/v1/status", string(body))

	c.Start(t)
	pollUntil(t, "/readyz to be 200 once the database is back", func() bool {
		code, _ := d.request(t, "GET", "/readyz", "")
		return code == 200
	})
	waitFor(t, time.Minute, "the slot of the call that ended during the outage to be released", func() bool {
		h, err := slotHolder()
		return err == nil && h == nil
	})
	if code, res := alice.call(t, "deploy", nil); code != 200 || res.Output != "deployed\n" {
		t.Errorf("a max_concurrency call once the database is back: %d %+v; want it run (no slot left held)", code, res)
	}
	waitFor(t, time.Minute, "the result of the approved call that ended during the outage to be stored", func() bool {
		_, a, _ := alice.approval(t, "GET", running.ApprovalID, "")
		return a.Status == "executed" && strings.Contains(string(a.Result), `approved-done\n`)
	})
	code, a, body2 := bob.approval(t, "GET", held.ApprovalID, "")
	if code != 200 || a.Status != "pending" {
		t.Errorf("the request held before the outage, after it: %d %s; want it pending", code, body2)
	}
	code, a, body2 = bob.approval(t, "POST", held.ApprovalID, `{"decision":"approve"}`)
	if code != 200 || a.Status != "executed" || !strings.Contains(body2, `removed\n`) {
		t.Errorf("approving it once the database is back: %d %s; want it run", code, body2)
	}
	code, body = bob.request(t, "GET", "/v1/approvals?all=1", "")
	var list struct{ Approvals []dispatch.Approval }
	if err := json.Unmarshal(body, &list); err != nil || code != 200 || len(list.Approvals) != 2 {
		t.Errorf("the approvals after the outage: %d %s; want the two held before it (none recorded during it)", code, body)
	}
	// The log is the operator's: it may name the database's address
	// (pgx's errors do), never its password.
	if strings.Contains(d.logs.String(), password) {
		t.Errorf("the daemon's log shows the database password")
	}
}
