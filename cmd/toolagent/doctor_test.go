package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDoctorCommand: `toolagent doctor` takes serve's settings; a tokens
// file other users can read is a FAIL line with the chmod that fixes it
// and exit 1, and the same host with the file at 0600 exits 0; an
// occupied listen address fails too.
func TestDoctorCommand(t *testing.T) {
	t.Parallel()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice:call:secret-of-alice-0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	busy := ln.Addr().String()
	ln.Close()
	args := []string{"doctor", "--tools", nativeTools(t), "--state", filepath.Join(t.TempDir(), "state"), "--tokens-file", tokens, "--listen", busy, "--sandbox", "off"}

	out, errOut, code := runCLI(t, nil, args...)
	if code != exitFailed || !strings.Contains(out, "FAIL  tokens") || !strings.Contains(out, "fix: chmod 600 "+tokens) || !strings.Contains(errOut, "doctor: 1 check(s) failed") {
		t.Errorf("doctor with a 0644 tokens file = exit %d\n%s%s; want 1, FAIL tokens with chmod 600", code, out, errOut)
	}
	if strings.Contains(out+errOut, "secret-of-alice-0123") {
		t.Errorf("doctor printed a token's secret:\n%s%s", out, errOut)
	}
	if err := os.Chmod(tokens, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runCLI(t, nil, args...); code != exitOK || strings.Contains(out, "FAIL") {
		t.Errorf("doctor with a 0600 tokens file = exit %d\n%s%s; want 0", code, out, errOut)
	}

	ln, err = net.Listen("tcp", busy)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if out, _, code := runCLI(t, nil, args...); code != exitFailed || !strings.Contains(out, "FAIL  listen") {
		t.Errorf("doctor on an occupied %s = exit %d\n%s; want 1 and FAIL listen", busy, code, out)
	}
}
