package operator

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
	"os"
	"os/user"
	"path/filepath"
	"strconv"
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

// ControlPath is the socket of the approval queue in the directory
// approvals (STATE/approvals).
func ControlPath(approvals string) string { return filepath.Join(approvals, controlSocket) }

// Decision is the body of POST /approvals/{id}, on the socket and on the
// daemon's API.
type Decision struct {
	Decision string          `json:"decision"` // approve | deny
	Params   json.RawMessage `json:"params,omitempty"`
}

// ServeControl serves the approvals of d on the socket of the queue in
// the directory approvals until ctx is done. It removes a socket a dead
// process left behind: call it only while holding the queue's lock.
func ServeControl(ctx context.Context, approvals string, d *dispatch.Dispatcher, log *slog.Logger) error {
	path := ControlPath(approvals)
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
		var body Decision
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
		// The peer reached the socket in the 0700 state directory: the
		// daemon's user (or root), the operator of this queue.
		a, res, err := d.Decide(r.Context(), r.PathValue("id"), dispatch.Decider{Name: decider, Operator: true}, body.Decision == "approve", body.Params)
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

// ControlClient reaches the control socket of the process that owns an
// approval queue.
type ControlClient struct {
	http *http.Client
}

// DialControl returns a client of the control socket of the queue in the
// directory approvals, or false when there is none (no process serves it).
func DialControl(approvals string) (*ControlClient, bool) {
	path := ControlPath(approvals)
	if fi, err := os.Stat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil, false
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &ControlClient{http: &http.Client{Transport: tr}}, true
}

// Do sends a request and returns the answer's status and body.
func (c *ControlClient) Do(ctx context.Context, method, path string, body any) (int, []byte, error) {
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
