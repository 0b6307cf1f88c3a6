package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
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
	operatorTokenFile = "operator.token"
	daemonFile        = "daemon.json"
	// operatorName is the caller name of the operator token.
	operatorName = "operator"
)

func operatorTokenPath(state string) string { return filepath.Join(state, operatorTokenFile) }
func daemonInfoPath(state string) string    { return filepath.Join(state, daemonFile) }

// ensureOperatorToken returns the secret of STATE/operator.token, making
// one (32 random bytes, base64url) when there is none. created says it
// was made now.
func ensureOperatorToken(state string) (secret string, created bool, err error) {
	path := operatorTokenPath(state)
	secret, err = readOperatorToken(state)
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
		secret, err = readOperatorToken(state)
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

// readOperatorToken reads STATE/operator.token. A file other users may
// read is refused: the token is an approver's identity.
func readOperatorToken(state string) (string, error) {
	path := operatorTokenPath(state)
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

// daemonInfo is STATE/daemon.json: where the daemon owning a state
// directory listens. It holds no secret.
type daemonInfo struct {
	URL    string `json:"url"`
	PID    int    `json:"pid"`
	Source string `json:"source"`
	// Tools is the local tools tree the daemon serves ("embedded" for the
	// compiled-in copy); empty for a git source.
	Tools   string `json:"tools,omitempty"`
	Open    bool   `json:"open"` // no API tokens but the operator's
	Version string `json:"version"`
}

// writeDaemonInfo records info in STATE/daemon.json (written to a
// temporary file and renamed, so a reader never sees half of it) and
// returns a function that removes it again, if it is still this one's.
func writeDaemonInfo(state string, info daemonInfo) (remove func(), err error) {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	path := daemonInfoPath(state)
	tmp, err := os.CreateTemp(state, daemonFile+".*")
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
		if cur, err := readDaemonInfo(state); err == nil && cur.PID == info.PID && cur.URL == info.URL {
			os.Remove(path)
		}
	}, nil
}

func readDaemonInfo(state string) (daemonInfo, error) {
	var info daemonInfo
	b, err := os.ReadFile(daemonInfoPath(state))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("%s: %w", daemonInfoPath(state), err)
	}
	return info, nil
}

// remote is a client of a running daemon's HTTP API.
type remote struct {
	url   string // base URL, no trailing slash
	token string // sent as a bearer token when not empty
	// operator is set when token is the operator token of a daemon on
	// this host; info its daemon.json (zero for --server).
	operator bool
	info     daemonInfo
	http     *http.Client
}

// healthWait bounds how long the CLI waits for a daemon's /healthz before
// it treats a daemon.json as left behind.
const healthWait = 3 * time.Second

// serverFlag is the --server flag of the commands that can talk to a
// daemon.
type serverFlag struct{ url string }

func (s *serverFlag) register(fs interface {
	StringVar(p *string, name, value, usage string)
}, e env) {
	fs.StringVar(&s.url, "server", e.getenv("TOOLAGENT_SERVER"), "ask the daemon at `URL` (env TOOLAGENT_SERVER; its token from TOOLAGENT_TOKEN); default: the daemon that owns the state directory, if one runs")
}

// findDaemon returns the daemon a CLI command talks to: the one at --server
// (TOOLAGENT_SERVER) with the token in TOOLAGENT_TOKEN, or the one that
// owns the state directory c names, when it runs (its daemon.json names a
// live process that answers /healthz), with the operator token. nil means
// no daemon: the command works on the tools tree itself.
func findDaemon(ctx context.Context, e env, c *common, server string) (*remote, error) {
	if err := c.resolve(e); err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 0}
	if server != "" {
		r := &remote{url: strings.TrimSuffix(server, "/"), token: e.getenv("TOOLAGENT_TOKEN"), http: client}
		// The local daemon named by its URL: the operator token works.
		if info, err := readDaemonInfo(c.state); err == nil && info.URL == r.url && r.token == "" {
			if tok, err := readOperatorToken(c.state); err == nil {
				r.token, r.operator, r.info = tok, true, info
			}
		}
		return r, nil
	}
	info, err := readDaemonInfo(c.state)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !processAlive(info.PID) || !healthy(ctx, client, info.URL) {
		return nil, nil // left behind by a daemon that is gone
	}
	r := &remote{url: info.URL, info: info, http: client}
	if tok := e.getenv("TOOLAGENT_TOKEN"); tok != "" {
		r.token = tok
	} else if tok, err := readOperatorToken(c.state); err == nil {
		r.token, r.operator = tok, true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return r, nil
}

// processAlive reports whether a process with pid exists (EPERM: it does,
// as another user's).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func healthy(ctx context.Context, c *http.Client, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, healthWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// do sends a request with a JSON body (nil for none) and returns the
// status code and the body. anonymous leaves the token out.
func (r *remote) do(ctx context.Context, method, path string, body any, anonymous bool) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.url+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("daemon %s: %w", r.url, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" && !anonymous {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("daemon %s: %w", r.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("daemon %s: %s %s: %w", r.url, method, path, err)
	}
	return resp.StatusCode, b, nil
}

// stream POSTs body to path asking for an NDJSON stream and returns the
// response with its body unread.
func (r *remote) stream(ctx context.Context, path string, body any, anonymous bool) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+path, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("daemon %s: %w", r.url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	if r.token != "" && !anonymous {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("daemon %s: %w", r.url, err)
	}
	return resp, nil
}

// apiErr turns a daemon's error answer into the CLI's: 401/403 refused (5),
// 404 not found (3), others failed (1), with the daemon's own message.
func (r *remote) apiErr(code int, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	msg = fmt.Sprintf("daemon %s answered %d: %s", r.url, code, msg)
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		if r.token == "" {
			msg += " (set TOOLAGENT_TOKEN to a token of that daemon)"
		}
		return exitError{code: exitRefused, msg: msg}
	case http.StatusNotFound:
		return exitError{code: exitNotFound, msg: msg}
	}
	return exitError{code: exitFailed, msg: msg}
}

// printRaw writes a daemon's JSON answer onto stdout as it came, indented
// (json.Indent keeps every byte and the daemon's field order).
func printRaw(w io.Writer, body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		_, err := w.Write(body)
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// daemonFor returns the daemon a catalog command (list, show, match,
// call) asks instead of reading the tools tree itself: the one at
// --server, or the one owning the state directory, unless the tree was
// named (--tools, TOOLAGENT_TOOLS) or found from the working directory and
// differs from the daemon's; then it says on stderr that a daemon runs and
// how to ask it. nil: use the tree.
func (c *common) daemonFor(ctx context.Context, e env, sf serverFlag) (*remote, error) {
	rd, err := findDaemon(ctx, e, c, sf.url)
	if rd == nil || err != nil || sf.url != "" {
		return rd, err
	}
	if c.toolsChosen {
		return nil, nil
	}
	if c.toolsFromWorkDir && c.tools != rd.info.Tools {
		fmt.Fprintf(e.stderr, "toolagent: using the tools tree %s (found from the working directory); the daemon of this state directory, %s, serves %s: give --server %s to ask it\n",
			c.tools, rd.url, rd.info.Source, rd.url)
		return nil, nil
	}
	return rd, nil
}
