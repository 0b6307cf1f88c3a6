package daemon

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestAuditExportConfig: audit_export is read strictly (an unknown key is
// an error naming its line and the keys allowed) and checked.
func TestAuditExportConfig(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"syslog: {address: 'siem:6514', tls: true, ca_file: /ca.pem}\notlp: {endpoint: 'http://c:4318/v1/logs'}\npoll: 1s", ""},
		{"syslog: {adress: 'siem:514'}", `line 1: audit_export.syslog: unknown key "adress"`},
		{"kafka: {}", `line 1: audit_export: unknown key "kafka"`},
		{"syslog: {address: siem}", `audit_export.syslog.address "siem": want host:port`},
		{"syslog: {address: 'siem:514', ca_file: /ca.pem}", "ca_file is set without tls: true"},
		{"otlp: {endpoint: 'collector:4318'}", `audit_export.otlp.endpoint "collector:4318": want the http(s)://`},
	} {
		var ae AuditExport
		err := yaml.Unmarshal([]byte(tc.text), &ae)
		if err == nil {
			if errs := ae.validate(); len(errs) > 0 {
				err = errs[0]
			}
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.text, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v; want it to contain %q", tc.text, err, tc.want)
		}
	}
}
