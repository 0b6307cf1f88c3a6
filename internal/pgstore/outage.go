package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Outage describes err when it says the database cannot serve now — it
// cannot be reached, the connection was lost, it is shutting down or
// starting, it refuses this user, it has no room, it did not answer in
// time — as opposed to a statement it refused (a constraint, a bug),
// for which ok is false.
//
// The cause is said for the person reading an API answer, a log line or
// /v1/status: what happened ("cannot connect: connection refused", "the
// server answered: terminating connection due to administrator command
// (SQLSTATE 57P01)"), never the connection URL, the host, the user or
// the password. pgx's own messages name the user and the database, and
// a parse error quotes the URL; none of that is copied here, and the
// password the pool was opened with is cut out of whatever remains.
func (db *DB) Outage(err error) (cause string, ok bool) {
	if err == nil {
		return "", false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if !outageCode(pe.Code) {
			return "", false
		}
		cause = fmt.Sprintf("the server answered: %s (SQLSTATE %s)", pe.Message, pe.Code)
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) {
			cause = "cannot connect: " + cause
		}
		return db.scrub(cause), true
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		cause = "cannot connect: " + innermost(err)
	case pgconn.Timeout(err), errors.Is(err, context.DeadlineExceeded):
		cause = "no answer in time"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		cause = "the connection was lost"
	case errors.As(err, &ne):
		cause = "the connection failed: " + innermost(err)
	case pgconn.SafeToRetry(err):
		cause = "the statement could not be sent: " + innermost(err)
	case strings.Contains(err.Error(), "conn closed"), strings.Contains(err.Error(), "closed pool"):
		// pgconn's and pgxpool's own words for a connection or pool
		// that is gone; they export no type for it.
		cause = "the connection was closed"
	default:
		return "", false
	}
	return db.scrub(cause), true
}

// Describe says what went wrong in err for an answer or /v1/status: the
// Outage cause, or what the server refused, or the innermost error —
// never the URL, host, user or password.
func (db *DB) Describe(err error) string {
	if cause, ok := db.Outage(err); ok {
		return cause
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Sprintf("the server answered: %s (SQLSTATE %s)", pe.Message, pe.Code)
	}
	return db.scrub(innermost(err))
}

// outageCode reports whether a SQLSTATE says the server cannot serve now
// rather than that it refused the statement: connection exceptions
// (class 08), insufficient resources (53), operator intervention (57:
// shutdown, crash, cannot connect now, a cancelled statement), a refused
// login (28), and a database that does not exist (3D000: dropped).
func outageCode(code string) bool {
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "08", "53", "57", "28":
		return true
	}
	return code == "3D000"
}

// innermost is the message of the innermost error of err's chain (the
// first branch of a join): "connection refused", not the wrappers that
// name the host, the user and the database.
func innermost(err error) string {
	for {
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next := u.Unwrap()
			if next == nil {
				return err.Error()
			}
			err = next
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			if len(errs) == 0 {
				return err.Error()
			}
			err = errs[0]
		default:
			return err.Error()
		}
	}
}

// scrub cuts the pool's password out of s (a last guard: the causes are
// built from parts that should never hold it).
func (db *DB) scrub(s string) string {
	if db.password != "" {
		s = strings.ReplaceAll(s, db.password, "[password]")
	}
	return s
}

// Ping asks the database to answer, within timeout: the readiness check
// of the shared store. The error is the Outage cause (or, for an answer
// that is not an outage, a generic one).
func (db *DB) Ping(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := db.Pool.Ping(ctx)
	if err == nil {
		return nil
	}
	if cause, ok := db.Outage(err); ok {
		return errors.New(cause)
	}
	return errors.New("the database did not answer a ping")
}
