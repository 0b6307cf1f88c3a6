package repo

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

// DefaultUsername is the HTTP user name sent with a token when
// Auth.Username is empty. Forgejo and Gitea accept a token as the password
// with any non-empty user name.
const DefaultUsername = "toolagent"

// Auth holds the credentials of a Git source: either an HTTP token or an
// SSH key file, or neither for anonymous access. Its String, GoString and
// LogValue methods never show secrets, and errors returned by Git never
// contain the token or passphrase.
type Auth struct {
	// Username is the HTTP basic-auth user sent with the token;
	// DefaultUsername if empty.
	Username string
	// Token is sent as the HTTP basic-auth password.
	Token string
	// TokenFile names a file holding the token (surrounding white space is
	// trimmed). It is read again before every Sync, so a rotated token is
	// picked up without a restart. Set at most one of Token and TokenFile.
	TokenFile string

	// SSHKeyFile names a PEM private key file for ssh:// and scp-style URLs.
	SSHKeyFile string
	// SSHKeyPassphrase decrypts SSHKeyFile if it is encrypted.
	SSHKeyPassphrase string
	// SSHUser is the SSH login user; "git" if empty.
	SSHUser string
	// KnownHostsFile names the known_hosts file that server keys are checked
	// against. If empty, go-git's default applies ($SSH_KNOWN_HOSTS, then
	// ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts). Host keys are always
	// checked.
	KnownHostsFile string
}

// String describes the kind of credentials without revealing secrets.
func (a Auth) String() string {
	switch {
	case a.SSHKeyFile != "":
		return fmt.Sprintf("ssh-key(user=%s, file=%s)", cmp.Or(a.SSHUser, "git"), a.SSHKeyFile)
	case a.Token != "" || a.TokenFile != "":
		return fmt.Sprintf("token(user=%s)", cmp.Or(a.Username, DefaultUsername))
	default:
		return "none"
	}
}

// GoString is String, so %#v does not print secrets either.
func (a Auth) GoString() string { return a.String() }

// LogValue lets slog print an Auth without its secrets.
func (a Auth) LogValue() slog.Value { return slog.StringValue(a.String()) }

// method returns the go-git auth method for the credentials and the secret
// strings that must never appear in errors or logs.
func (a Auth) method() (transport.AuthMethod, []string, error) {
	token := a.Token
	if a.TokenFile != "" {
		if a.Token != "" {
			return nil, nil, errors.New("auth: set only one of Token and TokenFile")
		}
		data, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("auth: read token file: %w", err)
		}
		token = strings.TrimSpace(string(data))
		if token == "" {
			return nil, nil, fmt.Errorf("auth: token file %s is empty", a.TokenFile)
		}
	}
	switch {
	case token != "" && a.SSHKeyFile != "":
		return nil, nil, errors.New("auth: set either a token or an SSH key, not both")
	case token != "":
		return &githttp.BasicAuth{Username: cmp.Or(a.Username, DefaultUsername), Password: token}, []string{token}, nil
	case a.SSHKeyFile != "":
		secrets := []string{a.SSHKeyPassphrase}
		keys, err := gitssh.NewPublicKeysFromFile(cmp.Or(a.SSHUser, "git"), a.SSHKeyFile, a.SSHKeyPassphrase)
		if err != nil {
			return nil, secrets, fmt.Errorf("auth: load SSH key %s: %w", a.SSHKeyFile, err)
		}
		if a.KnownHostsFile != "" {
			cb, err := gitssh.NewKnownHostsCallback(a.KnownHostsFile)
			if err != nil {
				return nil, secrets, fmt.Errorf("auth: load known hosts: %w", err)
			}
			keys.HostKeyCallback = cb
		}
		return keys, secrets, nil
	default:
		return nil, nil, nil
	}
}

// redactURL hides a password embedded in an http(s) URL. scp-style SSH
// addresses cannot carry a password and are returned as they are.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// urlSecret returns the password embedded in raw, if any.
func urlSecret(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}

// redactedError replaces secrets in the message of the error it wraps. It
// still unwraps to that error so errors.Is and errors.As keep working; code
// that formats the unwrapped error itself could see the secret, which in
// this package nothing does.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns err with every non-empty secret in its message replaced.
func redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "REDACTED")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &redactedError{msg: msg, err: err}
}
