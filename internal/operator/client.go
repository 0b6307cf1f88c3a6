package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/toolagent/toolagent/internal/host"
)

// Client is a client of a running daemon's HTTP API.
type Client struct {
	URL   string // base URL, no trailing slash
	Token string // sent as a bearer token when not empty
	// Operator is set when Token is the operator token of a daemon on
	// this host; Info its daemon.json (zero for a daemon named by URL).
	Operator bool
	Info     Info
	http     *http.Client
}

// healthWait bounds how long the CLI waits for a daemon's /healthz before
// it treats a daemon.json as left behind.
const healthWait = 3 * time.Second

// Find returns the daemon a CLI command talks to: the one at server (a
// URL) with token, or, when server is "", the one that owns the state
// directory state, when it runs (its daemon.json names a live process
// that answers /healthz), with token or else the operator token. nil
// means no daemon: the command works on the tools tree itself.
func Find(ctx context.Context, state, server, token string) (*Client, error) {
	client := &http.Client{Timeout: 0}
	if server != "" {
		r := &Client{URL: strings.TrimSuffix(server, "/"), Token: token, http: client}
		// The local daemon named by its URL: the operator token works.
		if info, err := ReadInfo(state); err == nil && info.URL == r.URL && r.Token == "" {
			if tok, err := ReadToken(state); err == nil {
				r.Token, r.Operator, r.Info = tok, true, info
			}
		}
		return r, nil
	}
	info, err := ReadInfo(state)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !processAlive(info.PID) || !healthy(ctx, client, info.URL) {
		return nil, nil // left behind by a daemon that is gone
	}
	r := &Client{URL: info.URL, Info: info, http: client}
	if token != "" {
		r.Token = token
	} else if tok, err := ReadToken(state); err == nil {
		r.Token, r.Operator = tok, true
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

// Do sends a request with a JSON body (nil for none) and returns the
// status code and the body. anonymous leaves the token out.
func (r *Client) Do(ctx context.Context, method, path string, body any, anonymous bool) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.URL+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("daemon %s: %w", r.URL, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Token != "" && !anonymous {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("daemon %s: %w", r.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("daemon %s: %s %s: %w", r.URL, method, path, err)
	}
	return resp.StatusCode, b, nil
}

// Stream POSTs body to path asking for an NDJSON stream and returns the
// response with its body unread.
func (r *Client) Stream(ctx context.Context, path string, body any, anonymous bool) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL+path, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("daemon %s: %w", r.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	if r.Token != "" && !anonymous {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("daemon %s: %w", r.URL, err)
	}
	return resp, nil
}

// FindFor is Find for a command that reads the tools tree p (resolved)
// when no daemon answers for it: with server "", the daemon owning the
// state directory answers unless the tree was named (p.ToolsChosen), or
// was found from the working directory and differs from the daemon's;
// then it says so on warn, naming the daemon to ask. nil: use the tree.
func FindFor(ctx context.Context, p *host.Paths, server, token string, warn io.Writer) (*Client, error) {
	rd, err := Find(ctx, p.State, server, token)
	if rd == nil || err != nil || server != "" {
		rd.Say(warn)
		return rd, err
	}
	if p.ToolsChosen {
		p.Beside = true
		return nil, nil
	}
	if p.ToolsFromWorkDir && p.Tools != rd.Info.Tools {
		p.Beside = true
		fmt.Fprintf(warn, "toolagent: using the tools tree %s (found from the working directory); the daemon of this state directory, %s, serves %s: give --server %s to ask it\n",
			p.Tools, rd.URL, rd.Info.Source, rd.URL)
		return nil, nil
	}
	rd.Say(warn)
	return rd, nil
}

// FindSay is Find that says on w which daemon answers, and as whom
// (Client.Say).
func FindSay(ctx context.Context, state, server, token string, w io.Writer) (*Client, error) {
	rd, err := Find(ctx, state, server, token)
	rd.Say(w)
	return rd, err
}

// Say writes one line on w naming the daemon r and who the CLI is to it:
// the daemon's operator (its operator token), the holder of
// TOOLAGENT_TOKEN, or anonymous. A command that asks a daemon says so, so
// nobody mistakes its answer for the tools tree's here. Nothing for nil.
func (r *Client) Say(w io.Writer) {
	if r == nil || w == nil {
		return
	}
	who := "anonymous (no token: set TOOLAGENT_TOKEN)"
	switch {
	case r.Anonymous():
		who = "anonymous for calls, as every caller of an open daemon; " + Name + " for decisions (its operator token)"
	case r.Operator:
		who = Name + " (its operator token, " + TokenFile + " of its state directory)"
	case r.Token != "":
		who = "the holder of TOOLAGENT_TOKEN"
	}
	where := r.URL
	if r.Info.PID > 0 {
		where += fmt.Sprintf(" (pid %d, serving %s)", r.Info.PID, r.Info.Source)
	}
	fmt.Fprintf(w, "toolagent: asking the daemon at %s as %s\n", where, who)
}

// RefuseServed says why `toolagent new` should not write into the tools
// tree tools: the daemon owning the state directory runs and serves that
// very tree, so what is written there is live as soon as it loads. nil
// when force, when no daemon runs, or when it serves another tree.
func RefuseServed(ctx context.Context, state, tools string, force bool) error {
	if force {
		return nil
	}
	rd, err := Find(ctx, state, "", "")
	if err != nil || rd == nil || rd.Info.Tools == "" {
		return nil
	}
	served, err1 := filepath.Abs(rd.Info.Tools)
	here, err2 := filepath.Abs(tools)
	if err1 != nil || err2 != nil || served != here {
		return nil
	}
	return fmt.Errorf("the toolagent daemon at %s (pid %d) serves %s: a tool written there is live once it loads; write it in a tree of your own (--tools DIR), or give --force", rd.URL, rd.Info.PID, served)
}

// AlreadyServing is the error of a second `serve` on the state directory
// state while its daemon runs (its daemon.json names a live process that
// answers /healthz): it names that daemon's address and pid. nil when
// none runs.
func AlreadyServing(state string) error {
	info, err := ReadInfo(state)
	if err != nil || !processAlive(info.PID) || !healthy(context.Background(), &http.Client{}, info.URL) {
		return nil
	}
	return fmt.Errorf("a toolagent daemon already listens on %s (pid %d) with this state directory (%s): the CLI's commands ask it; stop it first, or give this one another --state",
		strings.TrimPrefix(info.URL, "http://"), info.PID, state)
}
