// Package operator owns how the operator on a host reaches the toolagent
// process that owns a state directory: the operator token
// (STATE/operator.token, made once by the daemon), the daemon's record
// of where it listens (STATE/daemon.json), a Client of that daemon's
// HTTP API as the CLI finds it, and the approvals control socket a
// `toolagent mcp` over stdio serves instead (control.go).
//
// Its values are safe for concurrent use. The daemon (which writes the
// files and serves the socket) and the CLI (which reads them) import it.
package operator

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The operator and the running daemon, as the CLI on the same host finds
// them. At start a daemon makes (once) an operator token in its state
// directory, STATE/operator.token (0600, in the 0700 state directory the
// sandbox hides from every tool), and records where it listens in
// STATE/daemon.json. CLI commands given the same state directory find the
// daemon there and talk to it (list, show, call, match, status,
// approvals), sending the operator token where it is needed: the operator
// is the person who started the daemon, an identity of their own, so on
// an open daemon (every other caller anonymous) they can approve what an
// anonymous caller asked.
const (
	// TokenFile is the operator token's file in the state directory.
	TokenFile = "operator.token"
	// InfoFile is the running daemon's record in the state directory.
	InfoFile = "daemon.json"
	// Name is the caller name of the operator token.
	Name = "operator"
)

// TokenPath is the operator token of the state directory state.
func TokenPath(state string) string { return filepath.Join(state, TokenFile) }

// InfoPath is the record of the daemon owning the state directory state.
func InfoPath(state string) string { return filepath.Join(state, InfoFile) }

// EnsureToken returns the secret of STATE/operator.token, making
// one (32 random bytes, base64url) when there is none. created says it
// was made now.
func EnsureToken(state string) (secret string, created bool, err error) {
	path := TokenPath(state)
	secret, err = ReadToken(state)
	if err == nil {
		return secret, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	secret = base64.RawURLEncoding.EncodeToString(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) { // made by a racing process: use it
		secret, err = ReadToken(state)
		return secret, false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("operator token: %w", err)
	}
	_, werr := f.WriteString(secret + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return "", false, fmt.Errorf("operator token: %w", werr)
	}
	return secret, true, nil
}

// ReadToken reads STATE/operator.token. A file other users may
// read is refused: the token is an approver's identity.
func ReadToken(state string) (string, error) {
	path := TokenPath(state)
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("operator token %s: readable by other users (mode %s); chmod 600 it, or delete it and restart the daemon to make a new one", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("operator token: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("operator token %s: empty; delete it and restart the daemon to make a new one", path)
	}
	return secret, nil
}

// Info is STATE/daemon.json: where the daemon owning a state
// directory listens. It holds no secret.
type Info struct {
	URL    string `json:"url"`
	PID    int    `json:"pid"`
	Source string `json:"source"`
	// Tools is the local tools tree the daemon serves ("embedded" for the
	// compiled-in copy); empty for a git source.
	Tools   string `json:"tools,omitempty"`
	Open    bool   `json:"open"` // no API tokens but the operator's
	Version string `json:"version"`
}

// WriteInfo records info in STATE/daemon.json (written to a
// temporary file and renamed, so a reader never sees half of it) and
// returns a function that removes it again, if it is still this one's.
func WriteInfo(state string, info Info) (remove func(), err error) {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	path := InfoPath(state)
	tmp, err := os.CreateTemp(state, InfoFile+".*")
	if err != nil {
		return nil, fmt.Errorf("daemon info: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("daemon info: %w", werr)
	}
	return func() {
		if cur, err := ReadInfo(state); err == nil && cur.PID == info.PID && cur.URL == info.URL {
			os.Remove(path)
		}
	}, nil
}

// ReadInfo reads STATE/daemon.json.
func ReadInfo(state string) (Info, error) {
	var info Info
	b, err := os.ReadFile(InfoPath(state))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("%s: %w", InfoPath(state), err)
	}
	return info, nil
}
