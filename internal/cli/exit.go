package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/toolagent/toolagent/internal/dispatch"
)

// Exit codes (documented in README.md, "A five-minute tour").
const (
	ExitOK       = 0
	ExitFailed   = 1 // the tool ran and failed, or validation found problems
	ExitUsage    = 2 // bad flags or arguments, or invalid params
	ExitNotFound = 3 // no such tool
	ExitTimeout  = 4 // the tool timed out
	ExitRefused  = 5 // disabled, approval required, busy
)

// ExitError carries an exit code for an outcome already printed.
type ExitError struct {
	Code int
	Msg  string // printed to stderr when not empty
}

func (e ExitError) Error() string { return e.Msg }

// StatusExit maps a call's result status to the command's exit: nil for
// success, no_data and dry_run, else an ExitError with its code.
func StatusExit(s dispatch.ResultStatus) error {
	switch s {
	case dispatch.Success, dispatch.NoData, dispatch.DryRun:
		return nil
	case dispatch.InvalidParams:
		return ExitError{Code: ExitUsage}
	case dispatch.NotFound:
		return ExitError{Code: ExitNotFound}
	case dispatch.Timeout:
		return ExitError{Code: ExitTimeout}
	case dispatch.Disabled, dispatch.ApprovalRequired, dispatch.Denied, dispatch.Busy:
		return ExitError{Code: ExitRefused}
	default: // error, cancelled
		return ExitError{Code: ExitFailed}
	}
}

// ApprovalExit maps a decision that could not happen to an exit code:
// not found 3, a rejected edit 2, refused (self-approval, expired,
// decided or used, the binding changed) 5; other errors are returned as
// they are.
func ApprovalExit(err error) error {
	switch {
	case errors.Is(err, dispatch.ErrApprovalNotFound):
		return ExitError{Code: ExitNotFound, Msg: err.Error()}
	case errors.Is(err, dispatch.ErrInvalidEdit):
		return ExitError{Code: ExitUsage, Msg: err.Error()}
	case errors.Is(err, dispatch.ErrSelfApproval), errors.Is(err, dispatch.ErrApprovalExpired),
		errors.Is(err, dispatch.ErrAlreadyDecided), errors.Is(err, dispatch.ErrApprovalUsed),
		errors.Is(err, dispatch.ErrNotApproved), errors.Is(err, dispatch.ErrBindingMismatch):
		return ExitError{Code: ExitRefused, Msg: err.Error()}
	}
	return err
}

// errorOf is the "error" of a JSON error answer, else the whole body.
func errorOf(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(body))
}

// AnswerExit turns a daemon's error answer (code, body) into the CLI's:
// 401/403 refused (5), 404 not found (3), others failed (1), with the
// daemon's own message. withToken says a token was sent.
func AnswerExit(daemonURL string, withToken bool, code int, body []byte) error {
	msg := fmt.Sprintf("daemon %s answered %d: %s", daemonURL, code, errorOf(body))
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		if !withToken {
			msg += " (set TOOLAGENT_TOKEN to a token of that daemon)"
		}
		return ExitError{Code: ExitRefused, Msg: msg}
	case http.StatusNotFound:
		return ExitError{Code: ExitNotFound, Msg: msg}
	}
	return ExitError{Code: ExitFailed, Msg: msg}
}

// ApprovalAnswerExit is ApprovalExit for an approvals answer of a daemon
// or a control socket: not found 3, a rejected edit 2, a server's
// failure 1, refused 5.
func ApprovalAnswerExit(code int, body []byte) error {
	var eb struct{ Error string }
	json.Unmarshal(body, &eb)
	msg := strings.TrimSpace(eb.Error)
	switch code {
	case http.StatusNotFound:
		return ExitError{Code: ExitNotFound, Msg: msg}
	case http.StatusUnprocessableEntity, http.StatusBadRequest:
		return ExitError{Code: ExitUsage, Msg: msg}
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable:
		return ExitError{Code: ExitFailed, Msg: msg}
	default:
		return ExitError{Code: ExitRefused, Msg: msg}
	}
}

// NoSelfApprovalFlag refuses the --allow-self-approval that call and
// approvals once took, saying what replaced it: on this host the user is
// the operator and confirms their own held calls, and
// allow_self_approval is the daemon's setting for tokens of other roles.
func NoSelfApprovalFlag(cmd string, args []string) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "allow-self-approval" {
			return UsageError{Err: fmt.Errorf("%s: --allow-self-approval is gone: on this host you are the operator, and `toolagent approvals approve ID` confirms a call you asked for yourself (recorded as %q); to let tokens of other roles approve their own calls, start the daemon with allow_self_approval (serve --allow-self-approval)", cmd, dispatch.ReasonOperatorOwn)}
		}
	}
	return nil
}

// Caller is who a CLI command acts as: $USER, the same name at every
// door (the door, cli, is recorded apart); anonymous without one.
func Caller(getenv func(string) string) string {
	if u := getenv("USER"); u != "" {
		return u
	}
	return dispatch.Anonymous
}
