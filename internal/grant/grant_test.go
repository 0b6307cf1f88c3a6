package grant_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/grant"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const boot = "00112233445566778899aabbccddeeff"

func signed(key [grant.KeySize]byte) grant.Grant {
	g := grant.Grant{
		Approval:   "0123456789abcdef0123456789abcdef",
		Tool:       "shell-exec",
		Revision:   "rev1",
		ParamsHash: grant.ParamsHash(map[string]any{"cmd": "rm -rf /srv/x"}),
		Command:    grant.CommandDigest("rm -rf /srv/x", nil),
		BootID:     boot,
		Sandbox:    grant.Sandbox{Write: []string{"/srv/x"}},
		ExpiresAt:  now.Add(time.Minute).Format(time.RFC3339),
	}
	g.Sign(key)
	return g
}

// TestVerify: a signed grant verifies for its command under its key on
// its boot; a change of any field, another key, another command, another
// boot, another format version or a passed expiry is refused with the
// matching reason.
func TestVerify(t *testing.T) {
	key := grant.Key("token")
	cmd := grant.CommandDigest("rm -rf /srv/x", nil)
	if err := signed(key).Verify(key, now, cmd, boot); err != nil {
		t.Fatalf("Verify(signed grant) = %v, want nil", err)
	}
	tests := []struct {
		name   string
		change func(*grant.Grant)
		key    [grant.KeySize]byte
		now    time.Time
		cmd    string
		boot   string
		want   error
	}{
		{name: "approval", change: func(g *grant.Grant) { g.Approval = "ffff" }, want: grant.ErrBadMAC},
		{name: "tool", change: func(g *grant.Grant) { g.Tool = "other" }, want: grant.ErrBadMAC},
		{name: "revision", change: func(g *grant.Grant) { g.Revision = "rev2" }, want: grant.ErrBadMAC},
		{name: "params hash", change: func(g *grant.Grant) { g.ParamsHash = grant.ParamsHash(nil) }, want: grant.ErrBadMAC},
		{name: "command", change: func(g *grant.Grant) { g.Command = grant.CommandDigest("id", nil) }, want: grant.ErrBadMAC},
		{name: "boot id", change: func(g *grant.Grant) { g.BootID = "ffeeddccbbaa99887766554433221100" }, want: grant.ErrBadMAC},
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
		{name: "another boot of the server", boot: "ffeeddccbbaa99887766554433221100", want: grant.ErrOtherBoot},
		{name: "no version (format 1)", change: func(g *grant.Grant) { g.Version = 0 }, want: grant.ErrVersion},
		{name: "a later version", change: func(g *grant.Grant) { g.Version = grant.FormatVersion + 1 }, want: grant.ErrVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := signed(key)
			if tt.change != nil {
				tt.change(&g)
			}
			k, n, c, b := key, now, cmd, boot
			if tt.boot != "" {
				b = tt.boot
			}
			if tt.key != ([grant.KeySize]byte{}) {
				k = tt.key
			}
			if !tt.now.IsZero() {
				n = tt.now
			}
			if tt.cmd != "" {
				c = tt.cmd
			}
			if err := g.Verify(k, n, c, b); !errors.Is(err, tt.want) {
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

// The known answers below were computed once, independently of this
// package, with Python's hmac and hashlib (RFC 5869 by hand: PRK =
// HMAC-SHA256(32 zero bytes, SHA-256(token)), key = HMAC-SHA256(PRK,
// info || 0x01); the message as netstrings, the MAC as HMAC-SHA256).

// TestKeyKnownAnswer: the MAC key is HKDF-SHA256 of the token's digest
// with the label "toolagent gatekeeper grant v2", not the digest itself,
// and the server's digest-only path derives the same key.
func TestKeyKnownAnswer(t *testing.T) {
	tests := []struct {
		name, token, digest, key string
	}{
		{"ascii", "token",
			"3c469e9d6c5875d37a43f353d4f88e61fcf812c66eee3457465a40b0da4153e0",
			"9ddbd4698f52136eb2ecd5078ed7d91dc0e425eb5ec4f56278035d21b7f446af"},
		{"utf-8", "s3cret-token-\u2713",
			"f5e7e1bb003ce375fb11a3a1240c2177444456e6518e85a231c1c09a7807a175",
			"190fb1247eab2aec13611977fba824a3d704d9e564f13bfdc0d20b9054739e31"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := grant.Key(tt.token)
			if got := hex.EncodeToString(k[:]); got != tt.key {
				t.Errorf("Key(%q) = %s, want %s", tt.token, got, tt.key)
			}
			d, err := hex.DecodeString(tt.digest)
			if err != nil {
				t.Fatal(err)
			}
			if kd := grant.KeyFromDigest([32]byte(d)); kd != k {
				t.Errorf("KeyFromDigest(SHA-256(%q)) = %x, want Key's %x", tt.token, kd, k)
			}
			if hex.EncodeToString(k[:]) == tt.digest {
				t.Errorf("Key(%q) is the token's bare SHA-256", tt.token)
			}
		})
	}
}

// kat is the grant of TestMACKnownAnswer.
func kat() grant.Grant {
	return grant.Grant{
		Approval:   "0123456789abcdef0123456789abcdef",
		Tool:       "shell-exec",
		Revision:   "rev1",
		ParamsHash: "f3dffd7a88fef6e15bf010540ce1eb0a60808bc3fb81170cb0d27a679233e6e4",
		Command:    "e84cd8e20afb1389b78ca1c3674e744041e7b42c675447eb1989bf44c0766c18",
		BootID:     boot,
		Sandbox:    grant.Sandbox{Write: []string{"/srv/x"}},
		ExpiresAt:  "2026-03-01T12:01:00Z",
	}
}

// TestMACKnownAnswer: the message and the MAC of a fixed grant are the
// ones computed outside Go, so either side of the wire can be rebuilt
// from PROTOCOL.md alone.
func TestMACKnownAnswer(t *testing.T) {
	const (
		wantMsg = "29:toolagent-gatekeeper-grant-v2,32:0123456789abcdef0123456789abcdef,10:shell-exec,4:rev1," +
			"64:f3dffd7a88fef6e15bf010540ce1eb0a60808bc3fb81170cb0d27a679233e6e4," +
			"64:e84cd8e20afb1389b78ca1c3674e744041e7b42c675447eb1989bf44c0766c18," +
			"32:00112233445566778899aabbccddeeff,1:1,6:/srv/x,5:false,20:2026-03-01T12:01:00Z,"
		wantMAC = "c3d73e46afe4b499007d72fe52c6179c0719d29be44fb88bcec62fb579a705c3"
	)
	g := kat()
	if got := string(g.Message()); got != wantMsg {
		t.Errorf("Message() =\n%s\nwant\n%s", got, wantMsg)
	}
	g.Sign(grant.Key("token"))
	if g.MAC != wantMAC || g.Version != grant.FormatVersion {
		t.Errorf("Sign: version %d, mac %s; want version %d, mac %s", g.Version, g.MAC, grant.FormatVersion, wantMAC)
	}
	if err := g.Verify(grant.Key("token"), now, g.Command, boot); err != nil {
		t.Errorf("Verify(known-answer grant) = %v", err)
	}
}

// TestOldSchemeRefused: a grant of format 1 (no version field, MAC keyed
// with SHA-256(token) over the v1 message) is refused as a version
// mismatch that names both versions; a grant that claims version 2 but is
// signed with the old key is refused as a bad signature.
func TestOldSchemeRefused(t *testing.T) {
	// Format 1 on the wire, with its MAC as the v1 scheme computed it
	// (Python, as above): HMAC-SHA256(SHA-256("token"), v1 message).
	const v1 = `{"approval":"0123456789abcdef0123456789abcdef","tool":"shell-exec","revision":"rev1",` +
		`"params_hash":"f3dffd7a88fef6e15bf010540ce1eb0a60808bc3fb81170cb0d27a679233e6e4",` +
		`"command_sha256":"e84cd8e20afb1389b78ca1c3674e744041e7b42c675447eb1989bf44c0766c18",` +
		`"sandbox":{"write":["/srv/x"],"network":false},"expires_at":"2026-03-01T12:01:00Z",` +
		`"mac":"4ad167b309cbc51f4f24773b2907afb8a59d65f3d92de959618fe5af1b11e366"}`
	var old grant.Grant
	if err := json.Unmarshal([]byte(v1), &old); err != nil {
		t.Fatal(err)
	}
	err := old.Verify(grant.Key("token"), now, old.Command, "")
	if !errors.Is(err, grant.ErrVersion) || !strings.Contains(err.Error(), "format version 1") || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("Verify(format 1 grant) = %v; want ErrVersion naming versions 1 and 2", err)
	}

	// Version 2, but the MAC keyed the old way.
	g := kat()
	g.Version = grant.FormatVersion
	oldKey := sha256.Sum256([]byte("token"))
	m := hmac.New(sha256.New, oldKey[:])
	m.Write(g.Message())
	g.MAC = hex.EncodeToString(m.Sum(nil))
	if err := g.Verify(grant.Key("token"), now, g.Command, boot); !errors.Is(err, grant.ErrBadMAC) {
		t.Errorf("Verify(grant keyed with SHA-256(token)) = %v; want ErrBadMAC", err)
	}
}
