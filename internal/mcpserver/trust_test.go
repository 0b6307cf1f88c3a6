package mcpserver

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/scan"
)

// TestSignedMeta: with trusted signers, a trusted tool's _meta names its
// signer, an untrusted one is not offered, a call's result carries the
// provenance, and a re-signed tool (same definition, another signature)
// is listed again with its new signer.
func TestSignedMeta(t *testing.T) {
	f := newFixture(t, Options{})
	c := connectInMemory(t, f.srv, "")
	sig := &catalog.Signature{Commit: "c0ffee", Method: "ssh", Principal: "alice@example.com", Fingerprint: "SHA256:abc"}
	vetWith := func(s *catalog.Signature) func(scan.Tree, []catalog.Entry) {
		return func(_ scan.Tree, es []catalog.Entry) {
			for i := range es {
				if es[i].Name == "disk-free" {
					es[i].Status, es[i].Reason = catalog.Untrusted, "tools/disk-free last changed in 1234567 by an unsigned commit"
					continue
				}
				es[i].Signed = s
			}
		}
	}
	f.swapVet(t, "rev2", vetWith(sig), "tools")
	f.srv.Sync()
	if names := c.toolNames(t); slices.Contains(names, "disk-free") || !slices.Contains(names, "shell-exec") {
		t.Fatalf("tools/list = %v; want shell-exec and no untrusted disk-free", names)
	}
	meta := func() catalog.Signature {
		t.Helper()
		var got catalog.Signature
		b, _ := json.Marshal(c.tool(t, "shell-exec").Meta[SignedMeta])
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("_meta %s of shell-exec: %s: %v", SignedMeta, b, err)
		}
		return got
	}
	if got := meta(); got != *sig {
		t.Errorf("_meta %s = %+v, want %+v", SignedMeta, got, *sig)
	}
	_, _, r := c.call(t, "shell-exec", map[string]any{"cmd": "true"})
	if r.Signed == nil || *r.Signed != *sig {
		t.Errorf("call result signed = %+v, want %+v", r.Signed, sig)
	}
	for _, want := range []string{`"signer":"alice@example.com"`, `"signer_key":"SHA256:abc"`, `"signed_commit":"c0ffee"`} {
		if !strings.Contains(f.audit.String(), want) {
			t.Errorf("audit line lacks %s:\n%s", want, f.audit.String())
		}
	}

	// Re-signed by another key, same definition: the new signer is listed.
	bob := &catalog.Signature{Commit: "beef", Method: "openpgp", Principal: "bob@example.com", Fingerprint: "ABCD"}
	c.drainListChanged()
	f.swapVet(t, "rev3", vetWith(bob), "tools")
	f.srv.Sync()
	c.waitListChanged(t)
	if got := meta(); got != *bob {
		t.Errorf("after re-signing: _meta %s = %+v, want %+v", SignedMeta, got, *bob)
	}
}
