package audit_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/toolagent/toolagent/internal/audit"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
)

// writeRecords logs n audit records through st's handler, numbered from
// first in the field "n".
func writeRecords(st audit.Store, first, n int) {
	log := slog.New(st.Handler())
	for k := first; k < first+n; k++ {
		log.Info("call", "tool", "t", "caller", "alice", "status", "success", "n", k)
	}
}

// drain steps x until it sends nothing more.
func drain(t *testing.T, x *audit.Exporter) {
	t.Helper()
	for {
		n, err := x.Step(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// collectSink keeps what it is sent.
type collectSink struct {
	mu   sync.Mutex
	seqs []int64
}

func (c *collectSink) Send(_ context.Context, es []audit.Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range es {
		c.seqs = append(c.seqs, e.Seq)
	}
	return nil
}
func (c *collectSink) Close() error { return nil }

// wantEach checks that seqs are 1..n, each once, in order.
func wantEach(t *testing.T, seqs []int64, n int) {
	t.Helper()
	if len(seqs) != n {
		t.Fatalf("%d records sent; want %d", len(seqs), n)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("record %d has seq %d; want %d (each once, in order)", i, s, i+1)
		}
	}
}

// TestFileSourceAcrossRotation: the file store numbers its records, and
// an exporter following it while it rotates (small files) sends each
// once, in order, with its cursor in a file; a reopened store numbers
// on.
func TestFileSourceAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	st, err := audit.Open(dir, 2<<10, 50)
	if err != nil {
		t.Fatal(err)
	}
	sink := &collectSink{}
	x := &audit.Exporter{Name: "t", Source: &audit.FileSource{Dir: dir, Keep: 50}, Cursor: audit.FileCursor{Path: filepath.Join(dir, "c")}, Sink: sink}
	total := 0
	for round := range 20 {
		writeRecords(st, total, 17)
		total += 17
		if round%3 == 0 {
			drain(t, x)
		}
	}
	st.Close()
	if _, err := os.Stat(filepath.Join(dir, "audit.jsonl.3")); err != nil {
		t.Fatalf("the trail did not rotate: %v", err)
	}
	// Reopened: it numbers on from the last record.
	st, err = audit.Open(dir, 2<<10, 50)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	writeRecords(st, total, 5)
	total += 5
	// A new source (a restarted process) resumes from the cursor file.
	x.Source = &audit.FileSource{Dir: dir, Keep: 50}
	drain(t, x)
	wantEach(t, sink.seqs, total)
	// Follow without a cursor writes the whole trail as JSON lines.
	var b strings.Builder
	if err := audit.Follow(t.Context(), &audit.FileSource{Dir: dir, Keep: 50}, nil, &b, false, 0); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	var last struct {
		Seq int64
		N   int
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || len(lines) != total || last.Seq != int64(total) || last.N != total-1 {
		t.Fatalf("Follow wrote %d lines, the last %s (%v); want %d, the last seq %d", len(lines), lines[len(lines)-1], err, total, total)
	}
}

// syslogReceiver is a syslog server on loopback (TCP, or TLS with cfg)
// that parses octet-counted RFC 5424 frames.
type syslogReceiver struct {
	ln   net.Listener
	mu   sync.Mutex
	msgs []string
}

func newSyslogReceiver(t *testing.T, cfg *tls.Config) *syslogReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	r := &syslogReceiver{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	return r
}

func (r *syslogReceiver) serve(c net.Conn) {
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
		r.mu.Lock()
		r.msgs = append(r.msgs, string(msg))
		r.mu.Unlock()
	}
}

func (r *syslogReceiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// testCA makes a CA and a certificate it signed for 127.0.0.1; it
// returns the server's TLS configuration and the CA's PEM file.
func testCA(t *testing.T) (*tls.Config, string) {
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "syslog"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}}, caFile
}

// TestSyslogSinkTLS: over TLS with a generated CA, the receiver gets
// every record once as an RFC 5424 message whose MSG is the record; a
// client that does not trust the CA sends nothing.
func TestSyslogSinkTLS(t *testing.T) {
	srvTLS, caFile := testCA(t)
	rcv := newSyslogReceiver(t, srvTLS)
	dir := t.TempDir()
	st, err := audit.Open(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	writeRecords(st, 0, 30)
	addr := rcv.ln.Addr().String()
	untrusted := &audit.Exporter{Source: &audit.FileSource{Dir: dir}, Cursor: audit.FileCursor{Path: filepath.Join(dir, "u")}, Sink: &audit.SyslogSink{Addr: addr, TLS: &tls.Config{ServerName: "127.0.0.1"}}}
	if _, err := untrusted.Step(t.Context()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client without the CA: %v; want a certificate error", err)
	}
	tc, err := audit.SyslogTLS(addr, caFile)
	if err != nil {
		t.Fatal(err)
	}
	x := &audit.Exporter{Source: &audit.FileSource{Dir: dir}, Cursor: audit.FileCursor{Path: filepath.Join(dir, "c")}, Sink: &audit.SyslogSink{Addr: addr, TLS: tc, Hostname: "host one"}}
	drain(t, x)
	x.Sink.Close()
	deadline := time.Now().Add(time.Minute)
	for len(rcv.got()) < 30 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	msgs := rcv.got()
	if len(msgs) != 30 {
		t.Fatalf("%d messages; want 30", len(msgs))
	}
	for i, m := range msgs {
		f := strings.SplitN(m, " ", 8)
		var rec struct {
			Seq int64
			N   int
		}
		if len(f) != 8 || f[0] != "<110>1" || f[2] != "hostone" || f[3] != "toolagent" || f[5] != "call" || f[6] != "-" || json.Unmarshal([]byte(f[7]), &rec) != nil || rec.Seq != int64(i+1) || rec.N != i {
			t.Fatalf("message %d: %q; want <110>1 TIME hostone toolagent PID call - {record %d}", i, m, i+1)
		}
	}
}

// TestOTLPLogsSink: an OTLP/HTTP logs receiver (protobuf, the collector's
// request type) gets one log record per audit record, its body the
// record and its seq an attribute; a receiver's 503 is an error, and the
// records go again.
func TestOTLPLogsSink(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	fail := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var req collogs.ExportLogsServiceRequest
		if r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		rl := req.ResourceLogs[0]
		if rl.Resource.Attributes[0].Value.GetStringValue() != "toolagent" {
			http.Error(w, "no service.name", http.StatusBadRequest)
			return
		}
		for _, lr := range rl.ScopeLogs[0].LogRecords {
			bodies = append(bodies, fmt.Sprintf("%d %s", lr.Attributes[0].Value.GetIntValue(), lr.Body.GetStringValue()))
		}
		w.Write([]byte{})
	}))
	defer srv.Close()
	dir := t.TempDir()
	st, err := audit.Open(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	writeRecords(st, 0, 12)
	x := &audit.Exporter{Source: &audit.FileSource{Dir: dir}, Cursor: audit.FileCursor{Path: filepath.Join(dir, "c")}, Sink: &audit.OTLPSink{URL: srv.URL + "/v1/logs"}}
	if _, err := x.Step(t.Context()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("first send: %v; want the receiver's 503", err)
	}
	drain(t, x)
	if len(bodies) != 12 {
		t.Fatalf("%d log records; want 12", len(bodies))
	}
	for i, b := range bodies {
		if !strings.HasPrefix(b, fmt.Sprintf(`%d {"seq":%d,`, i+1, i+1)) || !strings.Contains(b, fmt.Sprintf(`"n":%d`, i)) {
			t.Errorf("log record %d: %s", i, b)
		}
	}
}

// TestPGExportOncePerReplicas: two replicas export the shared trail to
// one sink at once, each with its own reader; the sink's row in
// toolagent_audit_export makes each record go once, in order.
func TestPGExportOncePerReplicas(t *testing.T) {
	url := pgtest.URL(t)
	db1, db2 := openDB(t, url), openDB(t, url)
	st := audit.OpenPG(db1, "r1", nil)
	writeRecords(st, 0, 1200)
	st.Close()
	sink := &collectSink{}
	var wg sync.WaitGroup
	for _, db := range []*audit.PGSource{{DB: db1}, {DB: db2}} {
		x := &audit.Exporter{Source: *db, Cursor: audit.PGCursor{DB: db.DB, Sink: "s"}, Sink: sink}
		wg.Go(func() {
			for range 20 {
				if _, err := x.Step(t.Context()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	wantEach(t, sink.seqs, 1200)
	var b strings.Builder
	if err := audit.Follow(t.Context(), audit.PGSource{DB: db1}, &audit.FileCursor{Path: filepath.Join(t.TempDir(), "c")}, &b, false, 0); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n"); n != 1200 || !strings.HasPrefix(b.String(), `{"seq":1,"time":`) {
		t.Fatalf("Follow on the shared trail: %d lines, starting %.40q", n, b.String())
	}
}
