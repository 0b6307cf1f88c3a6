package daemon

// The streaming of a call's output through a serving daemon's HTTP API
// (moved here from cmd/toolagent, whose tests are of the command line):
// a whole 47 MB output to a client that reads, and gaps for one that
// stopped reading.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/gatekeeper"
	"github.com/toolagent/toolagent/internal/operator"
	"github.com/toolagent/toolagent/internal/proc"
	"github.com/toolagent/toolagent/internal/runs"
	"github.com/toolagent/toolagent/internal/settings"
)

// testServer is a daemon of role Serve running for a test.
type testServer struct {
	url    string
	client *http.Client
	// stop ends the daemon (Run returns, Close) and returns what Run
	// returned; cleanup calls it too.
	stop func() error
}

// serveForTest runs a daemon as `toolagent serve` with args (its flags,
// on the defaults, with no environment) would, on 127.0.0.1:0 with a
// state directory of its own, until the end of the test, and waits until
// it is ready (/readyz).
func serveForTest(t *testing.T, args ...string) *testServer {
	t.Helper()
	var cfg Config
	ld := settings.New(&cfg, settings.Options{})
	fset := flag.NewFlagSet("serve", flag.ContinueOnError)
	ld.Register(fset)
	if err := fset.Parse(append([]string{"--listen", "127.0.0.1:0", "--state", t.TempDir()}, args...)); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) string { return "" }
	if err := ld.Apply("", noEnv); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Role, cfg.Getenv = Serve, noEnv
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stop := sync.OnceValue(func() error {
		cancel()
		defer d.Close()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("Run did not return 30s after cancel")
		}
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run() = %v; want nil after cancel", err)
		}
	})
	info, err := operator.ReadInfo(cfg.State)
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{url: info.URL, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 600}}, stop: stop}
	t.Cleanup(s.client.CloseIdleConnections)
	pollUntil(t, "/readyz", func() bool {
		resp, err := s.client.Get(s.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// pollUntil polls cond until it holds, failing the test after 15s.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// stream makes a call (body: its JSON) asking for its events as NDJSON.
func (s *testServer) stream(t *testing.T, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", s.url+"/v1/call", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/x-ndjson")
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// get returns the status code and body of GET path.
func (s *testServer) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := s.client.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// call makes a call of tool with params and returns the status code and
// the result.
func (s *testServer) call(t *testing.T, tool string, params any) (int, dispatch.Result) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"tool": tool, "params": params})
	resp, err := s.client.Post(s.url+"/v1/call", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Errorf("POST /v1/call %s: %v", body, err)
		return 0, dispatch.Result{}
	}
	defer resp.Body.Close()
	var res dispatch.Result
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Errorf("POST /v1/call %s: %d, not a result: %v", body, resp.StatusCode, err)
	}
	return resp.StatusCode, res
}

// testTool is a TOOL.hdlp of name: the header, then body.
func testTool(name, body string) string {
	return "name: " + name + "\ndisplay: " + name + "\nauthor: test\ncreated: 2026-05-31\nwhy: a test tool\n" + body
}

// writeTestTool writes dir/name/TOOL.hdlp.
func writeTestTool(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, "TOOL.hdlp"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// streamLines is how many lines the streaming tests' tool prints: 47 MB.
const streamLines = 6000000

// streamOutput is what that tool prints, built once (it takes seconds
// under -race) for the tests that compare with it; they only read it.
var streamOutput = sync.OnceValue(func() []byte { return seqLines(streamLines) })

// seqLines is what `seq 1 n` prints.
func seqLines(n int) []byte {
	b := make([]byte, 0, 8*n) // room for every line up to 9,999,999
	for i := 1; i <= n; i++ {
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, '\n')
	}
	return b
}

// seqTool is a tool that prints seq 1 n with the default head cap of 64
// KiB.
func seqTool(n int) string {
	return testTool("seq", "intent: count\nmethod: run\nexecutor: shell\nargv: [seq, \"1\", \""+strconv.Itoa(n)+"\"]\nparams_schema: {}\nconstraints:\n  timeout_ms: 600000\n  max_output_bytes: 65536\n")
}

// streamEvents reads NDJSON events from r, calling each for every one
// until the result event, which it returns.
func streamEvents(t *testing.T, r io.Reader, each func(runs.Event)) dispatch.Result {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e runs.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("a stream line is not an event: %.200q: %v", sc.Bytes(), err)
		}
		if e.Event == runs.EventResult {
			var res dispatch.Result
			if err := json.Unmarshal(e.Result, &res); err != nil {
				t.Fatalf("result event %s: %v", e.Result, err)
			}
			return res
		}
		each(e)
	}
	t.Fatalf("the stream ended without a result: %v", sc.Err())
	return dispatch.Result{}
}

// streamWhole reads a call's NDJSON stream to its result, which it
// returns, and checks the stdout chunks are want byte for byte (the same
// SHA-256 and length), each as text, with no gap.
func streamWhole(t *testing.T, r io.Reader, want []byte) dispatch.Result {
	t.Helper()
	h := sha256.New()
	got := 0
	res := streamEvents(t, r, func(e runs.Event) {
		switch e.Event {
		case runs.EventStdout:
			if e.Encoding != "" {
				t.Fatalf("a chunk of ASCII output came %s", e.Encoding)
			}
			h.Write([]byte(e.Data))
			got += len(e.Data)
		case runs.EventGap:
			t.Fatalf("a gap in the stream of a client that reads: %+v", e)
		}
	})
	if sum := sha256.Sum256(want); !bytes.Equal(h.Sum(nil), sum[:]) || got != len(want) {
		t.Errorf("the stream brought %d bytes, SHA-256 %x; want %d bytes, %x", got, h.Sum(nil), len(want), sum)
	}
	return res
}

// TestServeStreamWhole: 47 MB of a tool's output through NDJSON to a
// client that reads as fast as it can arrives byte for byte (the same
// SHA-256), with no gap, though the tool's max_output_bytes is 64 KiB: a
// followed tool is read to its end; the result carries the head as
// declared and counts every byte.
func TestServeStreamWhole(t *testing.T) {
	t.Parallel()
	want := streamOutput()
	tools := t.TempDir()
	writeTestTool(t, tools, "seq", seqTool(streamLines))
	d := serveForTest(t, "--tools", tools)
	res := streamWhole(t, d.stream(t, `{"tool":"seq"}`).Body, want)
	if res.Status != dispatch.Success || res.OutputBytes != int64(len(want)) || res.Output != string(want[:65536]) || !res.Truncated {
		t.Errorf("result: status %s, output_bytes %d, %d bytes of output, truncated %v, error %q; want success, %d, the first 65536",
			res.Status, res.OutputBytes, len(res.Output), res.Truncated, res.Error, len(want))
	}
}

// TestServeStreamGatekeeperWhole: a gatekeeper tool's output followed
// through NDJSON arrives whole, though it goes on past the cap and the
// drain limit (64 KiB + 8 MiB; this one prints 10.9 MB): the daemon tells
// the gatekeeper server someone follows (Toolagent-Follow), so the server
// reads on instead of closing the pipe. The same call not streamed is cut
// there, as without a follower: the remote seq dies of the closed pipe.
func TestServeStreamGatekeeperWhole(t *testing.T) {
	t.Parallel()
	const lines = 1500000
	want := seqLines(lines)
	if int64(len(want)) <= 65536+proc.DrainLimit {
		t.Fatalf("the output is %d bytes; want more than the cap and the drain limit", len(want))
	}
	gk := httptest.NewServer(gatekeeper.NewHandler(gatekeeper.Options{Tokens: []string{"gk-test-token"}}, nil))
	t.Cleanup(gk.Close)
	tokenFile := filepath.Join(t.TempDir(), "gk.token")
	if err := os.WriteFile(tokenFile, []byte("gk-test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tools := t.TempDir()
	writeTestTool(t, tools, "remote-seq", testTool("remote-seq", "intent: count remotely\nmethod: run\nexecutor: gatekeeper\nargv: [seq, \"1\", \""+strconv.Itoa(lines)+"\"]\nparams_schema: {}\nconstraints:\n  timeout_ms: 600000\n  max_output_bytes: 65536\n"))
	d := serveForTest(t, "--tools", tools, "--gatekeeper-url", gk.URL, "--gatekeeper-token-file", tokenFile)
	res := streamWhole(t, d.stream(t, `{"tool":"remote-seq"}`).Body, want)
	if res.Status != dispatch.Success || res.ExitCode != 0 || res.OutputBytes != int64(len(want)) || res.Output != string(want[:65536]) {
		t.Errorf("streamed result: status %s, exit %d, output_bytes %d, error %q; want success, exit 0, %d, the first 65536 bytes",
			res.Status, res.ExitCode, res.OutputBytes, res.Error, len(want))
	}
	code, plain := d.call(t, "remote-seq", nil)
	if code != 200 || plain.ExitCode == 0 || plain.OutputBytes >= int64(len(want)) || plain.Output != string(want[:65536]) {
		t.Errorf("the call not streamed: %d, exit %d, output_bytes %d, error %q; want the remote command cut past the drain limit (a closed pipe), its head kept",
			code, plain.ExitCode, plain.OutputBytes, plain.Error)
	}
}

// TestServeStreamStalled: a client that stops reading holds the tool back
// for the stall window (here 300ms) only: the tool runs to its end while
// the client reads nothing, and when the client reads again it gets a
// gap naming exactly the bytes it missed: every chunk it has sits where
// the output has it, and the gaps skip exactly the bytes they name.
func TestServeStreamStalled(t *testing.T) {
	t.Parallel()
	want := streamOutput()
	tools := t.TempDir()
	writeTestTool(t, tools, "seq", seqTool(streamLines))
	d := serveForTest(t, "--tools", tools, "--stream-stall-window", "300ms")
	resp := d.stream(t, `{"tool":"seq"}`)
	id := resp.Header.Get("X-Run-Id")
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	// Read up to the first chunk of output, then stop reading.
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("the stream ended before any output: %v", err)
		}
		if bytes.Contains(line, []byte(`"event":"stdout"`)) {
			br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(line), br), 64<<10)
			break
		}
	}
	pollUntil(t, "the tool to end while its client reads nothing", func() bool {
		code, body := d.get(t, "/v1/runs/"+id)
		return code == 200 && strings.Contains(string(body), `"state":"done"`)
	})
	// Each chunk must sit where the output has it, each gap skip exactly
	// the bytes it names: off is where the next chunk belongs.
	var off, dropped, events int64
	gaps := 0
	res := streamEvents(t, br, func(e runs.Event) {
		switch e.Event {
		case runs.EventStdout:
			if end := off + int64(len(e.Data)); end > int64(len(want)) || string(want[off:end]) != e.Data {
				t.Fatalf("a chunk of %d bytes at offset %d is not the output there", len(e.Data), off)
			}
			off += int64(len(e.Data))
		case runs.EventGap:
			if e.DroppedBytes <= 0 {
				t.Fatalf("gap %+v; want it to name the bytes dropped", e)
			}
			gaps++
			off += e.DroppedBytes
			dropped += e.DroppedBytes
			events += e.Dropped
		}
	})
	if gaps == 0 || off != int64(len(want)) {
		t.Errorf("%d gap(s); the chunks and the gaps' bytes make %d; want a gap, and %d", gaps, off, len(want))
	}
	if res.Status != dispatch.Success || res.OutputBytes != int64(len(want)) || res.Output != string(want[:65536]) {
		t.Errorf("result: status %s, output_bytes %d, %d bytes of output, error %q; want success with the head as declared",
			res.Status, res.OutputBytes, len(res.Output), res.Error)
	}
	t.Logf("stalled client: %d gap(s) of %d bytes (%d events) in all; %d bytes came", gaps, dropped, events, int64(len(want))-dropped)
}
