package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"

	"github.com/toolagent/toolagent/internal/dispatch"
)

// apiError is an error with the HTTP status it maps to. Its message is
// sent to the client, so it holds nothing internal.
type apiError struct {
	status int
	msg    string
	// retryAfter, when set, is sent as Retry-After (seconds).
	retryAfter string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON of every error that is not a call result.
type errorBody struct {
	Error string `json:"error"`
}

// decode reads one JSON object from r's body into v: at most limit bytes,
// no unknown fields, nothing after the object. The error is an *apiError
// that says what is wrong in words a client can act on.
//
// Keys must be spelled exactly as v's fields (encoding/json alone would
// take "TOOL" for "tool"), and no object in the body, at any depth, may
// name a key twice (encoding/json alone keeps the last one silently).
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return decodeError(err, limit)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errorf(http.StatusBadRequest, "request body: want one JSON object; found more data after it")
	}
	if err := dispatch.CheckKeys(data, "", fieldNames(v)); err != nil {
		return errorf(http.StatusBadRequest, "request body: %v", err)
	}
	return nil
}

// fieldNames returns the JSON names of the fields of the struct v points
// to.
func fieldNames(v any) map[string]bool {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	names := map[string]bool{}
	if t.Kind() != reflect.Struct {
		return names
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = true
	}
	return names
}

func decodeError(err error, limit int64) *apiError {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, "request body: larger than the limit of %d bytes", limit)
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, "request body: empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "request body: not valid JSON: unexpected end of input")
	case errors.As(err, &se):
		return errorf(http.StatusBadRequest, "request body: not valid JSON at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			return errorf(http.StatusBadRequest, "request body: want a JSON object, found a JSON %s", ute.Value)
		}
		return errorf(http.StatusBadRequest, "request body: field %q: want %s, found a JSON %s", field, jsonKind(ute.Type.Kind().String()), ute.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(http.StatusBadRequest, "request body: unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return errorf(http.StatusBadRequest, "request body: %v", err)
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "a number"
	case "slice":
		return "an array"
	default:
		return "an object"
	}
}

// encode writes v as JSON with the status. HTML characters are not
// escaped, so tool output stays as it was.
func encode(w http.ResponseWriter, log *slog.Logger, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// The status line is gone; the client sees a cut body.
		log.Debug("write response", "err", err)
	}
}

// writeError sends err as {"error": "..."}. An *apiError carries its status
// and message; anything else is a 500 whose detail is logged, not sent.
func writeError(w http.ResponseWriter, log *slog.Logger, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		log.Error("internal error", "err", err)
		ae = errorf(http.StatusInternalServerError, "internal error")
	}
	if ae.retryAfter != "" {
		w.Header().Set("Retry-After", ae.retryAfter)
	}
	encode(w, log, ae.status, errorBody{Error: ae.msg})
}
