package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestServeLearnsFromUse (issue 19, item 3): a request no tool fits,
// followed by the same caller's call of a tool, joins that tool's text:
// the same request then finds it. Another caller's call teaches nothing,
// nor does a call that failed with not_found. `toolagent match feedback
// list` shows what was learned, and `clear` forgets it: the request is
// refused again.
func TestServeLearnsFromUse(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "frobber", testTool("frobber", "intent: rotate the archive logs of the billing service\nmethod: run\nexecutor: shell\nargv: [echo, rotated]\nparams_schema: {}\n"))
	putTool(t, tools, "disk", testTool("disk", "intent: show how full the disks are\nmethod: run\nexecutor: shell\nargv: [echo, full]\nparams_schema: {}\n"))
	const alice, bob = "alice-0123456789abcdef", "bob-0123456789abcdef00"
	state := t.TempDir()
	env := map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + alice + ",bob:call:" + bob + ",ops:admin:ops-0123456789abcdef"}
	d := startDaemon(t, env, "--tools", tools, "--state", state)
	const request = "zorblax the quux"
	match := func(token string) (found bool, first string) {
		t.Helper()
		d.token = token
		code, body := d.request(t, "POST", "/v1/match", `{"intent":"`+request+`"}`)
		var resp struct {
			Found      bool
			Candidates []struct{ Name string }
		}
		if code != 200 || json.Unmarshal(body, &resp) != nil {
			t.Fatalf("match = %d %s", code, body)
		}
		if len(resp.Candidates) > 0 {
			first = resp.Candidates[0].Name
		}
		return resp.Found, first
	}
	if found, _ := match(alice); found {
		t.Fatalf("%q found a tool before anything was learned", request)
	}
	// Bob's call and alice's not_found call teach nothing.
	d.token = bob
	d.call(t, "frobber", nil)
	d.token = alice
	if code, _ := d.call(t, "no-such-tool", nil); code != 404 {
		t.Fatalf("call no-such-tool = %d", code)
	}
	d.token = alice
	if code, res := d.call(t, "frobber", nil); code != 200 || res.Output != "rotated\n" {
		t.Fatalf("call frobber = %d %+v", code, res)
	}
	// The not_found call kept the request waiting; this call learned it.
	pollUntil(t, "the learned request to find frobber", func() bool {
		found, first := match(alice)
		return found && first == "frobber"
	})
	// It survives a restart.
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, env, "--tools", tools, "--state", state)
	if found, first := match(alice); !found || first != "frobber" {
		t.Errorf("after a restart: found %v, first %q; want frobber still", found, first)
	}

	cliEnv := []string{"TOOLAGENT_TOKEN=ops-0123456789abcdef"}
	out, stderr, code := runCLI(t, cliEnv, "match", "--server", d.url, "feedback", "list")
	if code != 0 || !strings.Contains(out, `"frobber"`) || !strings.Contains(out, request) || !strings.Contains(out, `"how": "refused"`) {
		t.Fatalf("match feedback list = %d %s %s; want frobber's learned request, after a refusal", code, out, stderr)
	}
	if out, _, code := runCLI(t, cliEnv, "match", "--server", d.url, "feedback", "clear", "frobber"); code != 0 || !strings.Contains(out, `"cleared": 1`) {
		t.Fatalf("match feedback clear frobber = %d %s", code, out)
	}
	pollUntil(t, "the cleared request to be refused again", func() bool {
		found, _ := match(alice)
		return !found
	})
	// A call role cannot read what callers asked.
	d.token = alice
	if code, _ := d.request(t, "GET", "/v1/feedback", ""); code != 403 {
		t.Errorf("GET /v1/feedback with a call token = %d; want 403", code)
	}
}

// TestServeFeedbackTeaches (issue 41, item 5): POST /v1/feedback says
// which tool fit a request that matching ranked wrong; another request in
// those words then ranks that tool first, and it is listed as taught. A
// tool the caller cannot see, an empty request and a read token are
// refused.
func TestServeFeedbackTeaches(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	putTool(t, tools, "frobber", testTool("frobber", "intent: rotate the archive logs of the billing service\nmethod: run\nexecutor: shell\nargv: [echo, rotated]\nparams_schema: {}\n"))
	putTool(t, tools, "disk", testTool("disk", "intent: show how full the disks are\nmethod: run\nexecutor: shell\nargv: [echo, full]\nparams_schema: {}\n"))
	const alice, reader = "alice-0123456789abcdef", "reader-0123456789abcdef"
	env := map[string]string{"TOOLAGENT_TOKENS": "alice:call:" + alice + ",rd:read:" + reader + ",ops:admin:ops-0123456789abcdef"}
	d := startDaemon(t, env, "--tools", tools, "--state", t.TempDir())
	d.token = alice
	first := func(request string) string {
		t.Helper()
		code, body := d.request(t, "POST", "/v1/match", `{"intent":"`+request+`"}`)
		var resp struct{ Candidates []struct{ Name string } }
		if code != 200 || json.Unmarshal(body, &resp) != nil {
			t.Fatalf("match = %d %s", code, body)
		}
		if len(resp.Candidates) == 0 {
			return ""
		}
		return resp.Candidates[0].Name
	}
	const taught, again = "the ledger pile grew huge overnight", "is the ledger pile huge"
	if got := first(again); got == "disk" {
		t.Fatalf("%q ranks disk first before anything was taught; the test needs it wrong", again)
	}
	for _, c := range []struct {
		token, body string
		want        int
	}{
		{alice, `{"request": "` + taught + `", "tool": "no-such-tool"}`, 404},
		{alice, `{"request": "  ", "tool": "disk"}`, 400},
		{alice, `{"request": "` + strings.Repeat("x", 301) + `", "tool": "disk"}`, 400},
		{reader, `{"request": "` + taught + `", "tool": "disk"}`, 403},
		{alice, `{"request": "` + taught + `", "tool": "disk"}`, 200},
	} {
		d.token = c.token
		if code, body := d.request(t, "POST", "/v1/feedback", c.body); code != c.want {
			t.Errorf("POST /v1/feedback %s = %d %s; want %d", c.body, code, body, c.want)
		}
	}
	d.token = alice
	pollUntil(t, "the taught request to rank disk first", func() bool { return first(again) == "disk" })
	d.token = "ops-0123456789abcdef"
	if code, body := d.request(t, "GET", "/v1/feedback?tool=disk", ""); code != 200 || !strings.Contains(string(body), `"how":"taught"`) || !strings.Contains(string(body), taught) {
		t.Errorf("GET /v1/feedback?tool=disk = %d %s; want the request, taught", code, body)
	}
}
