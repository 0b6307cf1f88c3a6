package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolagent/toolagent/internal/dispatch"
)

// The approvals control socket: while `toolagent mcp` (stdio) owns a state
// directory's approval queue, it serves the queue on a Unix socket inside
// it, STATE/approvals/control.sock, and `toolagent approvals` decides
// through it instead of failing on the queue's lock. The socket lives in
// the 0700 state directory, so only the daemon's user (and root) reach it,
// and no tool does: the sandbox hides the state directory. The decider is
// who the kernel says the peer is (SO_PEERCRED), never a name the client
// sends.
const controlSocket = "control.sock"

// controlPath is the socket of the queue under state.
func controlPath(state string) string { return filepath.Join(approvalsDir(state), controlSocket) }

// controlDecision is the body of POST /approvals/{id}.
type controlDecision struct {
	Decision string          `json:"decision"` // approve | deny
	Params   json.RawMessage `json:"params,omitempty"`
}

// serveControl serves the approvals of d on the socket under state until
// ctx is done. It removes a socket a dead process left behind.
func serveControl(ctx context.Context, state string, d *dispatch.Dispatcher, log *slog.Logger) error {
	path := controlPath(state)
	os.Remove(path) // the queue's lock says no live process serves it
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("approvals control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("approvals control socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /approvals", func(w http.ResponseWriter, r *http.Request) {
		list, err := d.Approvals(r.URL.Query().Get("all") == "")
		if list == nil {
			list = []dispatch.Approval{}
		}
		controlAnswer(w, struct {
			Approvals []dispatch.Approval `json:"approvals"`
		}{list}, err)
	})
	mux.HandleFunc("GET /approvals/{id}", func(w http.ResponseWriter, r *http.Request) {
		a, err := d.Approval(r.PathValue("id"))
		controlAnswer(w, a, err)
	})
	mux.HandleFunc("POST /approvals/{id}", func(w http.ResponseWriter, r *http.Request) {
		var body controlDecision
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || (body.Decision != "approve" && body.Decision != "deny") {
			http.Error(w, `want {"decision":"approve"|"deny","params":{...}}`, http.StatusBadRequest)
			return
		}
		decider, ok := r.Context().Value(peerKey{}).(string)
		if !ok {
			http.Error(w, "who is asking is unknown (no peer credentials)", http.StatusForbidden)
			return
		}
		a, res, err := d.Decide(r.Context(), r.PathValue("id"), decider, body.Decision == "approve", body.Params)
		if err == nil && res != nil && len(a.Result) == 0 {
			if b, merr := json.Marshal(res); merr == nil {
				a.Result = b // busy or disabled: not stored, shown anyway
			}
		}
		controlAnswer(w, a, err)
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if name, err := peerName(c); err == nil {
				return context.WithValue(ctx, peerKey{}, name)
			}
			return ctx
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("approvals of this queue are decided with `toolagent approvals` on this host while it runs", "socket", path)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("approvals control socket: %w", err)
	}
	os.Remove(path)
	return nil
}

type peerKey struct{}

// peerName is the user name of the process at the other end of c, from
// the kernel (SO_PEERCRED); the uid when it has no name.
func peerName(c net.Conn) (string, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return "", errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return "", err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return "", err
	}
	if cerr != nil {
		return "", cerr
	}
	uid := strconv.FormatUint(uint64(cred.Uid), 10)
	if u, err := user.LookupId(uid); err == nil {
		return u.Username, nil
	}
	return uid, nil
}

// controlAnswer writes v, or the approval error with the status the HTTP
// API would give it.
func controlAnswer(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		code := http.StatusConflict
		switch {
		case errors.Is(err, dispatch.ErrApprovalNotFound):
			code = http.StatusNotFound
		case errors.Is(err, dispatch.ErrSelfApproval):
			code = http.StatusForbidden
		case errors.Is(err, dispatch.ErrApprovalExpired):
			code = http.StatusGone
		case errors.Is(err, dispatch.ErrInvalidEdit):
			code = http.StatusUnprocessableEntity
		}
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(struct {
			Error string `json:"error"`
		}{err.Error()})
		return
	}
	json.NewEncoder(w).Encode(v)
}

// controlClient reaches the control socket of the process that owns the
// queue under state.
type controlClient struct {
	http *http.Client
}

// dialControl returns a client of the queue's control socket, or false
// when there is none (no process serves it).
func dialControl(state string) (*controlClient, bool) {
	path := controlPath(state)
	if fi, err := os.Stat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil, false
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &controlClient{http: &http.Client{Transport: tr}}, true
}

// do sends a request and returns the answer's status and body.
func (c *controlClient) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://control"+path, r)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("the approvals control socket does not answer: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// approvalsVia runs an approvals action through the control socket of a
// `toolagent mcp` (prefix "") or a daemon's API (prefix "/v1"), and prints
// what the local queue would print; exit codes as there.
func approvalsVia(ctx context.Context, e env, do func(ctx context.Context, method, path string, body any) (int, []byte, error), prefix, verb, id string, all bool, edits string) error {
	var (
		code int
		body []byte
		err  error
	)
	switch verb {
	case "list":
		q := ""
		if all {
			q = "?all=1"
		}
		code, body, err = do(ctx, "GET", prefix+"/approvals"+q, nil)
	case "show":
		code, body, err = do(ctx, "GET", prefix+"/approvals/"+url.PathEscape(id), nil)
	default:
		d := controlDecision{Decision: verb}
		if edits != "" {
			d.Params = json.RawMessage(edits)
		}
		code, body, err = do(ctx, "POST", prefix+"/approvals/"+url.PathEscape(id), d)
	}
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		var eb struct{ Error string }
		json.Unmarshal(body, &eb)
		msg := strings.TrimSpace(eb.Error)
		switch code {
		case http.StatusNotFound:
			return exitError{code: exitNotFound, msg: msg}
		case http.StatusUnprocessableEntity, http.StatusBadRequest:
			return exitError{code: exitUsage, msg: msg}
		case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable:
			return exitError{code: exitFailed, msg: msg}
		default:
			return exitError{code: exitRefused, msg: msg}
		}
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("the approvals control socket answered %q: %w", body, err)
	}
	if err := printJSON(e.stdout, v); err != nil {
		return err
	}
	if verb == "approve" {
		var a struct {
			Result *struct {
				Status dispatch.ResultStatus `json:"status"`
			} `json:"result"`
		}
		if json.Unmarshal(body, &a) == nil && a.Result != nil {
			return statusExit(a.Result.Status)
		}
	}
	return nil
}
