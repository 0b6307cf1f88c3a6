package main

import (
	"net"
	"strings"
	"testing"
)

// TestSyncTimeoutNamed: a server that accepts and never answers makes a
// sync hit sync_timeout, and the error says which setting that was.
func TestSyncTimeoutNamed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	out, errOut, code := runCLI(t, nil, "sync", "--state", t.TempDir(), "--repo", "http://"+ln.Addr().String()+"/tools.git", "--sync-timeout", "300ms")
	if code != exitFailed || !strings.Contains(out+errOut, "sync_timeout 300ms reached") {
		t.Errorf("sync against a silent server = exit %d\n%s\n%s\nwant 1 and an error naming sync_timeout", code, out, errOut)
	}
}
