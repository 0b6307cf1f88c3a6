package repo

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

func TestAuthMethod(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	knownHosts := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHosts, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	emptyToken := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyToken, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		auth    Auth
		check   func(t *testing.T, m transport.AuthMethod)
		wantErr bool
	}{
		{name: "none", check: func(t *testing.T, m transport.AuthMethod) {
			if m != nil {
				t.Errorf("method = %v, want nil", m)
			}
		}},
		{name: "token default user", auth: Auth{Token: "tok"}, check: func(t *testing.T, m transport.AuthMethod) {
			if b, ok := m.(*githttp.BasicAuth); !ok || b.Username != DefaultUsername || b.Password != "tok" {
				t.Errorf("method = %#v, want BasicAuth %s:tok", m, DefaultUsername)
			}
		}},
		{name: "token own user", auth: Auth{Username: "bot", Token: "tok"}, check: func(t *testing.T, m transport.AuthMethod) {
			if b, ok := m.(*githttp.BasicAuth); !ok || b.Username != "bot" {
				t.Errorf("method = %#v, want BasicAuth user bot", m)
			}
		}},
		{name: "ssh key", auth: Auth{SSHKeyFile: keyFile, KnownHostsFile: knownHosts}, check: func(t *testing.T, m transport.AuthMethod) {
			k, ok := m.(*gitssh.PublicKeys)
			if !ok || k.User != "git" || k.HostKeyCallback == nil {
				t.Errorf("method = %#v, want PublicKeys for git with a host key check", m)
			}
		}},
		{name: "ssh key missing", auth: Auth{SSHKeyFile: filepath.Join(dir, "none")}, wantErr: true},
		{name: "token and token file", auth: Auth{Token: "a", TokenFile: emptyToken}, wantErr: true},
		{name: "empty token file", auth: Auth{TokenFile: emptyToken}, wantErr: true},
		{name: "token and ssh key", auth: Auth{Token: "a", SSHKeyFile: keyFile}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, err := tt.auth.method()
			if (err != nil) != tt.wantErr {
				t.Fatalf("method() error = %v, want error: %v", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, m)
			}
		})
	}
}

func TestAuthHidesSecrets(t *testing.T) {
	a := Auth{Token: "tok-secret", SSHKeyPassphrase: "pass-secret"}
	for _, s := range []string{fmt.Sprint(a), fmt.Sprintf("%+v", a), fmt.Sprintf("%#v", a), a.LogValue().String(), fmt.Sprintf("%v", &Git{Auth: a})} {
		if strings.Contains(s, "secret") {
			t.Errorf("formatted Auth %q shows a secret", s)
		}
	}
}

func TestRedact(t *testing.T) {
	base := fmt.Errorf("fetch: %w: server said tok-123", transport.ErrAuthenticationRequired)
	err := redact(base, "", "tok-123")
	if strings.Contains(err.Error(), "tok-123") {
		t.Errorf("redact() = %q, still holds the secret", err)
	}
	if !errors.Is(err, transport.ErrAuthenticationRequired) {
		t.Errorf("redact() = %v, no longer matches transport.ErrAuthenticationRequired", err)
	}
	if got := redact(base, "other"); got != base {
		t.Errorf("redact() without a secret in the message = %v, want the error unchanged", got)
	}
	if got, want := redactURL("https://bot:tok@forge.example/x.git"), "https://bot:xxxxx@forge.example/x.git"; got != want {
		t.Errorf("redactURL() = %q, want %q", got, want)
	}
}
