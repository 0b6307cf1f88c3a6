package audit

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"
)

// SyslogSink sends records to a syslog server over TCP or TLS as RFC 5424
// messages with octet-counting framing (RFC 6587 3.4.1, RFC 5425 4.3):
//
//	LEN SP <110>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID - {record JSON}
//
// Facility 13 (log audit), severity 6 (informational): PRI 110. MSGID is
// the record's msg (call, approval). The framing is a few lines, written
// here: no well-kept Go library does RFC 5424 over TLS alone (the
// collector's syslog exporter is a whole collector component).
//
// The connection is made on the first send and again after an error.
// Syslog over TCP has no acknowledgement: a record is sent once the
// kernel took it.
type SyslogSink struct {
	Addr     string      // host:port
	TLS      *tls.Config // nil: plain TCP
	Hostname string      // default os.Hostname
	AppName  string      // default toolagent
	Timeout  time.Duration

	conn net.Conn
}

// SyslogTLS returns the TLS configuration of a syslog server at addr whose
// certificate a CA in caFile ("" : the system's roots) signed.
func SyslogTLS(addr, caFile string) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("audit_export.syslog.address %q: want host:port", addr)
	}
	c := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("audit_export.syslog.ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("audit_export.syslog.ca_file %s: no PEM certificate in it", caFile)
		}
	}
	return c, nil
}

// Send implements Sink.
func (s *SyslogSink) Send(ctx context.Context, es []Entry) error {
	if s.conn == nil {
		d := &net.Dialer{Timeout: s.timeout()}
		var err error
		if s.TLS != nil {
			td := &tls.Dialer{NetDialer: d, Config: s.TLS}
			s.conn, err = td.DialContext(ctx, "tcp", s.Addr)
		} else {
			s.conn, err = d.DialContext(ctx, "tcp", s.Addr)
		}
		if err != nil {
			s.conn = nil
			return fmt.Errorf("syslog %s: %w", s.Addr, err)
		}
	}
	var b bytes.Buffer
	for _, e := range es {
		msg := s.message(e)
		fmt.Fprintf(&b, "%d ", len(msg))
		b.Write(msg)
	}
	s.conn.SetWriteDeadline(time.Now().Add(s.timeout()))
	if _, err := s.conn.Write(b.Bytes()); err != nil {
		s.conn.Close()
		s.conn = nil
		return fmt.Errorf("syslog %s: %w", s.Addr, err)
	}
	return nil
}

func (s *SyslogSink) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return 10 * time.Second
}

// message is one RFC 5424 message of e.
func (s *SyslogSink) message(e Entry) []byte {
	var r struct {
		Time time.Time `json:"time"`
		Msg  string    `json:"msg"`
	}
	json.Unmarshal(e.Line, &r)
	ts := "-"
	if !r.Time.IsZero() {
		ts = r.Time.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	}
	host := s.Hostname
	if host == "" {
		host, _ = os.Hostname()
	}
	app := s.AppName
	if app == "" {
		app = "toolagent"
	}
	return fmt.Appendf(nil, "<110>1 %s %s %s %d %s - %s", ts, header(host, 255), header(app, 48), os.Getpid(), header(r.Msg, 32), e.Line)
}

// header is v as an RFC 5424 header field: printable US-ASCII without
// spaces, at most n characters, "-" when empty.
func header(v string, n int) string {
	b := make([]byte, 0, min(len(v), n))
	for i := 0; i < len(v) && len(b) < n; i++ {
		if c := v[i]; c > 32 && c < 127 {
			b = append(b, c)
		}
	}
	if len(b) == 0 {
		return "-"
	}
	return string(b)
}

// Close implements Sink.
func (s *SyslogSink) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}
