package forgejo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"code.gitea.io/sdk/gitea"

	"github.com/toolagent/toolagent/internal/executors"
)

// countLimit is how many bytes past the cap a response body is still read
// (and counted, then discarded) so OutputBytes says how large it was; then
// the body is closed unread.
const countLimit = 1 << 20

// lookupBodyBytes caps the answer a sha lookup reads: Gitea and Forgejo
// send a file's content with its sha, base64, up to their blob size limit
// (10 MiB by default).
const lookupBodyBytes = 32 << 20

// answer is one HTTP response as read: the status and the body, cut at the
// reader's cap.
type answer struct {
	status     int
	statusText string // "404 Not Found"
	body       []byte
	n          int64 // bytes read, including those counted past the cap
	truncated  bool
}

func (a answer) ok() bool { return a.status >= 200 && a.status <= 299 }

// send makes one request below {URL}/api/v1 and reads the answer's body
// keeping at most limit bytes. The error wraps ErrUnreachable when no
// complete answer came (the answer then holds what did); the token goes in
// the Authorization header, never in the error.
func (e *Executor) send(ctx context.Context, verb, target string, body []byte, limit int64) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, verb, e.url+"/api/v1"+target, rd)
	if err != nil {
		return answer{}, err
	}
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", "toolagent")
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if e.token != "" {
		hreq.Header.Set("Authorization", "token "+e.token)
	}
	resp, err := e.client.Do(hreq)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return answer{}, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer resp.Body.Close() // unread rest: the connection is dropped, the server stops sending
	a := answer{status: resp.StatusCode, statusText: resp.Status}
	a.body, a.n, err = readCapped(resp.Body, limit)
	a.truncated = a.n > limit
	if err != nil {
		return a, fmt.Errorf("%w: reading the answer (HTTP %s) after %d bytes: %v", ErrUnreachable, resp.Status, a.n, err)
	}
	return a, nil
}

// readCapped reads r keeping at most limit bytes, counting up to
// countLimit more; n is the number of bytes read. It never reads further,
// so an endless body costs limit bytes of memory and limit+countLimit of
// reading.
func readCapped(r io.Reader, limit int64) (buf []byte, n int64, err error) {
	buf, err = io.ReadAll(io.LimitReader(r, limit))
	n = int64(len(buf))
	if err != nil || n < limit {
		return buf, n, err
	}
	m, err := io.Copy(io.Discard, io.LimitReader(r, countLimit))
	return buf, n + m, err
}

// outcome is the answer as an Outcome; a status other than 2xx puts
// "HTTP <status>: <what><the server's reason>" in Stderr.
func (a answer) outcome(what string) executors.Outcome {
	out := executors.Outcome{HTTPStatus: a.status, Output: a.body, OutputBytes: a.n, Truncated: a.truncated}
	if a.status != 0 && !a.ok() {
		out.Stderr = []byte("HTTP " + a.statusText + ": " + what + a.reason() + "\n")
	}
	return out
}

// reason is what an error answer says went wrong: the server's own
// message, or failing that a description of the body.
func (a answer) reason() string {
	if msg, ok := serverMessage(a.body); ok {
		if msg != "" {
			return msg
		}
		if a.status >= 500 {
			return "the server sent no message (Gitea and Forgejo hide the reason of a 500 from tokens that are not an admin's; the server's log has it)"
		}
		return "the server sent no message"
	}
	text := strings.TrimSpace(string(a.body))
	if text == "" {
		return "empty body"
	}
	if line, _, _ := strings.Cut(text, "\n"); len(line) <= 200 && utf8.ValidString(line) {
		return strings.TrimSpace(line)
	}
	return fmt.Sprintf("a body of %d bytes that is not an API error (the output holds it)", a.n)
}

// serverMessage returns the reason of a Gitea or Forgejo error body. Their
// shapes: {"message": "...", "url": "..."}; for a 404 also an "errors"
// array, {"errors": ["object does not exist [id: , rel_path: x]"],
// "message": "GetContentsOrList", "url": "..."}, whose message may be
// only the handler's name, so the entries follow it ("GetContentsOrList:
// object does not exist [...]"); and a bare array of binding errors
// ({"fieldNames": [...], "message": ...}). ok is false for a body of
// another shape; msg is "" when the body has the shape but says nothing.
func serverMessage(body []byte) (msg string, ok bool) {
	body = bytes.TrimSpace(body)
	var entries []json.RawMessage
	var message string
	switch {
	case len(body) > 0 && body[0] == '[':
		if json.Unmarshal(body, &entries) != nil {
			return "", false
		}
	default:
		var e struct {
			Message *string           `json:"message"`
			Errors  []json.RawMessage `json:"errors"`
		}
		if json.Unmarshal(body, &e) != nil || e.Message == nil && e.Errors == nil {
			return "", false
		}
		if e.Message != nil {
			message = strings.TrimSpace(*e.Message)
		}
		entries = e.Errors
	}
	var parts []string
	for _, raw := range entries {
		if s := errorEntry(raw); s != "" {
			parts = append(parts, s)
		}
	}
	switch {
	case len(parts) == 0:
		return message, true
	case message == "":
		return strings.Join(parts, "; "), true
	default:
		return message + ": " + strings.Join(parts, "; "), true
	}
}

// errorEntry is one entry of an "errors" array: a string as it is, an
// object by its fields and message, anything else as compact JSON.
func errorEntry(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	var o struct {
		FieldNames []string `json:"fieldNames"`
		Message    string   `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		if len(o.FieldNames) > 0 {
			return strings.Join(o.FieldNames, ", ") + ": " + o.Message
		}
		return o.Message
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

// lookupSHA asks for the file at ref and returns its blob sha. An answer
// other than 2xx is returned as failed (the outcome of the call).
func (e *Executor) lookupSHA(ctx context.Context, f fileRef, maxOut int64) (sha string, failed *answer, err error) {
	ans, err := e.send(ctx, http.MethodGet, f.target(), nil, max(maxOut, lookupBodyBytes))
	if err != nil {
		return "", nil, err
	}
	if !ans.ok() {
		if ans.n > maxOut { // the lookup read past the tool's cap: show only the cap
			ans.body, ans.truncated = ans.body[:maxOut], true
		}
		return "", &ans, nil
	}
	if ans.truncated {
		return "", nil, fmt.Errorf("look up the current sha of %s: the answer is larger than %d bytes; pass the param \"sha\"", f.path, lookupBodyBytes)
	}
	if b := bytes.TrimSpace(ans.body); len(b) > 0 && b[0] == '[' {
		return "", nil, fmt.Errorf("look up the current sha of %s: it is a directory, not a file", f.path)
	}
	var cr gitea.ContentsResponse
	if err := json.Unmarshal(ans.body, &cr); err != nil || cr.SHA == "" {
		return "", nil, fmt.Errorf("look up the current sha of %s: the answer (HTTP %s) holds no sha", f.path, ans.statusText)
	}
	return cr.SHA, nil, nil
}
