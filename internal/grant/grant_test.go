package grant_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/grant"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func signed(key [grant.KeySize]byte) grant.Grant {
	g := grant.Grant{
		Approval:   "0123456789abcdef0123456789abcdef",
		Tool:       "shell-exec",
		Revision:   "rev1",
		ParamsHash: grant.ParamsHash(map[string]any{"cmd": "rm -rf /srv/x"}),
		Command:    grant.CommandDigest("rm -rf /srv/x", nil),
		Sandbox:    grant.Sandbox{Write: []string{"/srv/x"}},
		ExpiresAt:  now.Add(time.Minute).Format(time.RFC3339),
	}
	g.Sign(key)
	return g
}

// TestVerify: a signed grant verifies for its command under its key; a
// change of any field, another key, another command or a passed expiry is
// refused with the matching reason.
func TestVerify(t *testing.T) {
	key := grant.Key("token")
	cmd := grant.CommandDigest("rm -rf /srv/x", nil)
	if err := signed(key).Verify(key, now, cmd); err != nil {
		t.Fatalf("Verify(signed grant) = %v, want nil", err)
	}
	tests := []struct {
		name   string
		change func(*grant.Grant)
		key    [grant.KeySize]byte
		now    time.Time
		cmd    string
		want   error
	}{
		{name: "approval", change: func(g *grant.Grant) { g.Approval = "ffff" }, want: grant.ErrBadMAC},
		{name: "tool", change: func(g *grant.Grant) { g.Tool = "other" }, want: grant.ErrBadMAC},
		{name: "revision", change: func(g *grant.Grant) { g.Revision = "rev2" }, want: grant.ErrBadMAC},
		{name: "params hash", change: func(g *grant.Grant) { g.ParamsHash = grant.ParamsHash(nil) }, want: grant.ErrBadMAC},
		{name: "command", change: func(g *grant.Grant) { g.Command = grant.CommandDigest("id", nil) }, want: grant.ErrBadMAC},
		{name: "write path", change: func(g *grant.Grant) { g.Sandbox.Write = []string{"/"} }, want: grant.ErrBadMAC},
		{name: "extra write path", change: func(g *grant.Grant) { g.Sandbox.Write = append(g.Sandbox.Write, "/etc") }, want: grant.ErrBadMAC},
		{name: "network", change: func(g *grant.Grant) { g.Sandbox.Network = true }, want: grant.ErrBadMAC},
		{name: "expiry", change: func(g *grant.Grant) { g.ExpiresAt = now.Add(time.Hour).Format(time.RFC3339) }, want: grant.ErrBadMAC},
		{name: "mac", change: func(g *grant.Grant) { g.MAC = flip(g.MAC) }, want: grant.ErrBadMAC},
		{name: "mac not hex", change: func(g *grant.Grant) { g.MAC = "approved" }, want: grant.ErrMalformed},
		{name: "other key", key: grant.Key("other-token"), want: grant.ErrBadMAC},
		{name: "expired", now: now.Add(time.Minute), want: grant.ErrExpired},
		{name: "other command", cmd: grant.CommandDigest("rm -rf /", nil), want: grant.ErrOtherCommand},
		{name: "argv is not cmd", cmd: grant.CommandDigest("", []string{"rm", "-rf", "/srv/x"}), want: grant.ErrOtherCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := signed(key)
			if tt.change != nil {
				tt.change(&g)
			}
			k, n, c := key, now, cmd
			if tt.key != ([grant.KeySize]byte{}) {
				k = tt.key
			}
			if !tt.now.IsZero() {
				n = tt.now
			}
			if tt.cmd != "" {
				c = tt.cmd
			}
			if err := g.Verify(k, n, c); !errors.Is(err, tt.want) {
				t.Errorf("Verify(%s changed) = %v, want %v", tt.name, err, tt.want)
			}
		})
	}
}

// flip changes the last hex digit of h.
func flip(h string) string {
	last := "0"
	if h[len(h)-1] == '0' {
		last = "1"
	}
	return h[:len(h)-1] + last
}

// TestMessageUnambiguous: moving bytes from one field to the next changes
// the message.
func TestMessageUnambiguous(t *testing.T) {
	a := grant.Grant{Tool: "ab", Revision: "c"}
	b := grant.Grant{Tool: "a", Revision: "bc"}
	if string(a.Message()) == string(b.Message()) {
		t.Errorf("Message() is the same for tool/revision ab/c and a/bc: %q", a.Message())
	}
	c := grant.Grant{Sandbox: grant.Sandbox{Write: []string{"/a,/b"}}}
	d := grant.Grant{Sandbox: grant.Sandbox{Write: []string{"/a", "/b"}}}
	if string(c.Message()) == string(d.Message()) {
		t.Errorf("Message() is the same for one and two write paths: %q", c.Message())
	}
}

func TestCommandDigest(t *testing.T) {
	digests := map[string]string{}
	for name, d := range map[string]string{
		"cmd":            grant.CommandDigest("echo a", nil),
		"argv":           grant.CommandDigest("", []string{"echo", "a"}),
		"argv one":       grant.CommandDigest("", []string{"echo a"}),
		"cmd other":      grant.CommandDigest("echo b", nil),
		"argv two empty": grant.CommandDigest("", []string{"", ""}),
	} {
		if other, ok := digests[d]; ok {
			t.Errorf("CommandDigest of %s = that of %s", name, other)
		}
		digests[d] = name
	}
}

// TestParamsHashIsApprovals: the client binds the grant to the hash the
// approval store computed, so the two must agree (approval.HashParams
// delegates here; this catches a fork of either).
func TestParamsHashIsApprovals(t *testing.T) {
	for _, p := range []map[string]any{
		nil,
		{},
		{"cmd": "rm -rf /srv/x", "cwd": "/srv"},
		{"n": 1, "f": 1.5, "big": 1e21, "j": json.Number("2.0"), "neg": -3},
		{"list": []any{"a", 1, true, nil, map[string]any{"z": 1, "a": []any{}}}},
		{"s": "<&>\u2028é"},
		{"bad": func() {}},
	} {
		if got, want := grant.ParamsHash(p), approval.HashParams(p); got != want {
			t.Errorf("ParamsHash(%v) = %s, approval.HashParams = %s", p, got, want)
		}
	}
}
