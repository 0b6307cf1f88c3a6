package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
)

// TestRelay: the relay answers with the child's standard output byte for
// byte, at a volume that takes many pipe reads, and says when the command
// cannot start.
func TestRelay(t *testing.T) {
	if _, err := exec.LookPath("seq"); err != nil {
		t.Skip("needs seq (coreutils)")
	}
	srv := httptest.NewServer(relay([]string{"seq", "1", "500000"}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := 1; i <= 500000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("status %d, %d bytes (want 200, %d bytes, equal: %v)", resp.StatusCode, len(got), want.Len(), bytes.Equal(got, want.Bytes()))
	}

	bad := httptest.NewServer(relay([]string{"/nonexistent/benchrelay-test"}))
	defer bad.Close()
	resp, err = http.Get(bad.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("a command that cannot start: status %d, want 500", resp.StatusCode)
	}
}
