package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolagent/toolagent/internal/audit"
	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
)

// syslogServer is a syslog receiver on loopback (TCP) that parses
// octet-counted RFC 5424 frames and keeps the seq of each record.
type syslogServer struct {
	addr string
	mu   sync.Mutex
	msgs []string
}

func newSyslogServer(t *testing.T) *syslogServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &syslogServer{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					n, err := br.ReadString(' ')
					if err != nil {
						return
					}
					size, err := strconv.Atoi(strings.TrimSpace(n))
					if err != nil {
						return
					}
					msg := make([]byte, size)
					if _, err := io.ReadFull(br, msg); err != nil {
						return
					}
					s.mu.Lock()
					s.msgs = append(s.msgs, string(msg))
					s.mu.Unlock()
				}
			}()
		}
	}()
	return s
}

// all returns every message received.
func (s *syslogServer) all() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []byte(strings.Join(s.msgs, "\n"))
}

// seqs returns the seq of every record received, in order.
func (s *syslogServer) seqs(t *testing.T) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, m := range s.msgs {
		_, rec, ok := strings.Cut(m, " - {")
		var r struct{ Seq int64 }
		if !ok || json.Unmarshal([]byte("{"+rec), &r) != nil {
			t.Fatalf("not an RFC 5424 message with a record: %q", m)
		}
		out = append(out, r.Seq)
	}
	return out
}

// trailSeqs reads the seq of every record in STATE/audit/audit.jsonl.
func trailSeqs(t *testing.T, state string) []int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "audit", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct{ Seq int64 }
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Seq == 0 {
			t.Fatalf("audit line without a seq: %q", l)
		}
		out = append(out, r.Seq)
	}
	return out
}

const hiTool = "intent: say hi\nmethod: run\nexecutor: shell\nargv: [echo, hi]\nparams_schema: {}\n"

// TestAuditExportSyslogAcrossRestart (#40 item 3): a syslog receiver on
// loopback gets every audit record of a burst of calls during which the
// daemon is stopped and started again on its state directory: none is
// lost, and what came twice is at most one batch (the in-flight window
// the cursor had not recorded yet).
func TestAuditExportSyslogAcrossRestart(t *testing.T) {
	t.Parallel()
	t.Run("files", func(t *testing.T) { t.Parallel(); testExportAcrossRestart(t, "") })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); testExportAcrossRestart(t, pgtest.URL(t)) })
}

func testExportAcrossRestart(t *testing.T, dbURL string) {
	rcv := newSyslogServer(t)
	tools, state := t.TempDir(), t.TempDir()
	putTool(t, tools, "hi", testTool("hi", hiTool))
	env := map[string]string{"TOOLAGENT_AUDIT_EXPORT": fmt.Sprintf("{syslog: {address: %q}, poll: 20ms}", rcv.addr)}
	store := []string{"--store", "files"}
	trailSeqs := func(t *testing.T, state string) []int64 { return trailSeqs(t, state) }
	if dbURL != "" {
		env["TOOLAGENT_STORE_URL"] = dbURL
		store = []string{"--store", "postgres"}
		trailSeqs = func(t *testing.T, _ string) []int64 { return dbSeqs(t, dbURL) }
	}
	burst := func(d *liveDaemon, n int) {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range n / 4 {
					if code, res := d.call(t, "hi", nil); code != 200 || res.Output != "hi\n" {
						t.Errorf("call: %d %+v", code, res)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	d := startDaemon(t, env, append(store, "--tools", tools, "--state", state)...)
	// The daemon stops while calls run and the exporter sends.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		pollUntil(t, "records to be sent", func() bool { return len(rcv.seqs(t)) >= 60 })
		d.stop(t)
	}()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stopped:
					return
				default:
				}
				// Some fail as the daemon goes: not an error here.
				if resp, err := d.client.Post(d.url+"/v1/call", "application/json", strings.NewReader(`{"tool":"hi"}`)); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	<-stopped
	wg.Wait()
	t.Logf("records before the restart: %d, received: %d", len(trailSeqs(t, state)), len(rcv.seqs(t)))
	d = startDaemon(t, env, append(store, "--tools", tools, "--state", state)...)
	burst(d, 40)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		want := trailSeqs(t, state)
		got := map[int64]int{}
		for _, s := range rcv.seqs(t) {
			got[s]++
		}
		missing, dups := 0, 0
		for _, s := range want {
			if got[s] == 0 {
				missing++
			}
		}
		for _, n := range got {
			dups += n - 1
		}
		if missing == 0 {
			if dups > audit.ExportBatch {
				t.Fatalf("%d records received twice; want at most one batch (%d)", dups, audit.ExportBatch)
			}
			if len(got) != len(want) {
				t.Fatalf("%d distinct records received; the trail has %d", len(got), len(want))
			}
			t.Logf("%d records, each received (%d twice)", len(want), dups)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records never reached the syslog receiver", missing, len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dbSeqs reads the seq of every row of toolagent_audit.
func dbSeqs(t *testing.T, url string) []int64 {
	t.Helper()
	db, err := pgstore.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Pool.Query(t.Context(), `SELECT seq FROM toolagent_audit ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

// runFollow runs `audit export --follow` in-process until it has written
// n lines, then stops it, and returns its lines.
func runFollow(t *testing.T, env map[string]string, n int, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"audit", "export", "--follow"}, args...), func(k string) string { return env[k] }, strings.NewReader(""), out, io.Discard)
	}()
	pollUntil(t, fmt.Sprintf("%d exported lines", n), func() bool { return strings.Count(out.String(), "\n") >= n })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("audit export --follow: %v", err)
	}
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

// TestAuditExportFollowResumes (#40 item 3): `audit export --follow
// --cursor-file F` on the file store writes every record as a JSON line
// and, run again, goes on after the last one it wrote: each record once.
func TestAuditExportFollowResumes(t *testing.T) {
	t.Parallel()
	t.Run("files", func(t *testing.T) { testFollowResumes(t, nil, "--store", "files") })
	t.Run("postgres", func(t *testing.T) {
		testFollowResumes(t, map[string]string{"TOOLAGENT_STORE_URL": pgtest.URL(t)}, "--store", "postgres")
	})
}

func testFollowResumes(t *testing.T, env map[string]string, store ...string) {
	tools, state := t.TempDir(), t.TempDir()
	putTool(t, tools, "hi", testTool("hi", hiTool))
	d := startDaemon(t, env, append(store, "--tools", tools, "--state", state)...)
	for range 5 {
		d.call(t, "hi", nil)
	}
	cursor := filepath.Join(t.TempDir(), "cursor")
	first := runFollow(t, env, 5, append(store, "--state", state, "--cursor-file", cursor)...)
	for range 3 {
		d.call(t, "hi", nil)
	}
	second := runFollow(t, env, 3, append(store, "--state", state, "--cursor-file", cursor)...)
	all := append(first, second...)
	if len(all) != 8 {
		t.Fatalf("%d lines in two runs; want 8:\n%s", len(all), strings.Join(all, "\n"))
	}
	for i, l := range all {
		var r struct {
			Seq       int64
			Msg, Tool string
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Seq != int64(i+1) || r.Msg != "call" || r.Tool != "hi" {
			t.Errorf("line %d: %s; want the call record with seq %d", i, l, i+1)
		}
	}
}
