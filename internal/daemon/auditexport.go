package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolagent/toolagent/internal/audit"
	"github.com/toolagent/toolagent/internal/host"
	"github.com/toolagent/toolagent/internal/pgstore"
)

// AuditExport is the audit_export block: where the daemon sends its audit
// trail besides keeping it, at least once, from a persisted cursor per
// sink (STATE/audit/export-NAME.cursor, or the database's
// toolagent_audit_export with store postgres).
type AuditExport struct {
	Syslog *SyslogExport `yaml:"syslog"`
	OTLP   *OTLPExport   `yaml:"otlp"`
	// Poll is how often the trail is read for new records (default 500ms).
	Poll time.Duration `yaml:"poll"`
}

// SyslogExport sends RFC 5424 messages over TCP, or TLS.
type SyslogExport struct {
	Address string `yaml:"address"` // host:port
	TLS     bool   `yaml:"tls"`
	CAFile  string `yaml:"ca_file"` // the CA of the server's certificate (default: the system's)
	AppName string `yaml:"app_name"`
}

// OTLPExport posts OTLP/HTTP protobuf logs.
type OTLPExport struct {
	Endpoint string `yaml:"endpoint"` // http(s)://host:4318/v1/logs
}

// UnmarshalYAML decodes the block strictly: an unknown key is an error
// naming its line and the keys allowed.
func (a *AuditExport) UnmarshalYAML(n *yaml.Node) error {
	if err := knownKeys(n, "audit_export", "syslog", "otlp", "poll"); err != nil {
		return err
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		switch k {
		case "syslog":
			if err := knownKeys(v, "audit_export.syslog", "address", "tls", "ca_file", "app_name"); err != nil {
				return err
			}
		case "otlp":
			if err := knownKeys(v, "audit_export.otlp", "endpoint"); err != nil {
				return err
			}
		}
	}
	type plain AuditExport
	return n.Decode((*plain)(a))
}

func knownKeys(n *yaml.Node, at string, keys ...string) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s: want a mapping of %v", n.Line, at, keys)
	}
	for i := 0; i < len(n.Content); i += 2 {
		if k := n.Content[i]; !slices.Contains(keys, k.Value) {
			return fmt.Errorf("line %d: %s: unknown key %q; want one of %v", k.Line, at, k.Value, keys)
		}
	}
	return nil
}

// validate checks the block as far as no file is read.
func (a AuditExport) validate() []error {
	var errs []error
	if s := a.Syslog; s != nil {
		if _, port, err := net.SplitHostPort(s.Address); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("audit_export.syslog.address %q: want host:port of a syslog server (TCP, or TLS with tls: true)", s.Address))
		}
		if s.CAFile != "" && !s.TLS {
			errs = append(errs, fmt.Errorf("audit_export.syslog.ca_file is set without tls: true"))
		}
	}
	if o := a.OTLP; o != nil {
		if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("audit_export.otlp.endpoint %q: want the http(s):// URL of an OTLP/HTTP logs endpoint, e.g. http://collector:4318/v1/logs", o.Endpoint))
		}
	}
	if a.Poll < 0 {
		errs = append(errs, fmt.Errorf("audit_export.poll %s: want more than 0", a.Poll))
	}
	return errs
}

// auditExporters returns the exporters of cfg's audit_export (none
// without one): the trail is read from the database with db, else from
// STATE/audit.
func auditExporters(cfg Config, state string, db *pgstore.DB, log *slog.Logger) ([]*audit.Exporter, error) {
	ae := cfg.AuditExport
	log = log.With(slog.String("log", "audit_export"))
	var out []*audit.Exporter
	add := func(name string, sink audit.Sink) {
		x := &audit.Exporter{Name: name, Sink: sink, Log: log, Poll: ae.Poll}
		if db != nil {
			x.Source, x.Cursor = audit.PGSource{DB: db}, audit.PGCursor{DB: db, Sink: name}
		} else {
			x.Source = &audit.FileSource{Dir: host.AuditDir(state)}
			x.Cursor = audit.FileCursor{Path: filepath.Join(host.AuditDir(state), "export-"+name+".cursor")}
		}
		out = append(out, x)
	}
	if s := ae.Syslog; s != nil {
		sink := &audit.SyslogSink{Addr: s.Address, AppName: s.AppName}
		if s.TLS {
			tc, err := audit.SyslogTLS(s.Address, s.CAFile)
			if err != nil {
				return nil, err
			}
			sink.TLS = tc
		}
		add("syslog", sink)
	}
	if o := ae.OTLP; o != nil {
		add("otlp", &audit.OTLPSink{URL: o.Endpoint})
	}
	return out, nil
}

// AuditCommand is `toolagent audit verify|export` (cmd/toolagent wraps
// it). verify checks the shared store's hash chain and prints the row
// count and head hash (an error names where the chain breaks). export
// writes the trail as JSON lines: on the shared store without --follow,
// every row with its hashes (as kept); with --follow (or on the file
// store), each record with its seq, then, with --follow, new ones as they
// come, resuming after the seq kept in cursorFile.
func AuditCommand(ctx context.Context, cfg Config, verb string, w io.Writer, follow bool, cursorFile string) error {
	switch {
	case verb == "verify":
		res, err := AuditVerify(ctx, cfg)
		if err != nil {
			return fmt.Errorf("audit verify: %w", err)
		}
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(w, string(b))
		if res.Broken != "" {
			return errors.New("audit verify: the chain is broken: " + res.Broken)
		}
		return nil
	case !follow && cursorFile == "":
		// The whole trail with its hash chain, from either store.
		return auditDump(ctx, cfg, w)
	}
	var src audit.Source
	if cfg.Store == "files" {
		p := host.Paths{State: cfg.State, Tools: "-"}
		if err := p.Resolve(cfg.getenv); err != nil {
			return err
		}
		src = &audit.FileSource{Dir: host.AuditDir(p.State)}
	} else {
		db, err := OpenStore(cfg)
		if err != nil {
			return fmt.Errorf("audit export: %w", err)
		}
		defer db.Close()
		src = audit.PGSource{DB: db}
	}
	var cur *audit.FileCursor
	if cursorFile != "" {
		cur = &audit.FileCursor{Path: cursorFile}
	}
	return audit.Follow(ctx, src, cur, w, follow, cfg.AuditExport.Poll)
}
