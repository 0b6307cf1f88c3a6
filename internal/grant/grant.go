// Package grant is the signed approval of one gatekeeper call: what a
// toolagent daemon sends with a command it approved, so that the
// gatekeeper server (internal/gatekeeper) can check the approval instead
// of trusting a bare id. Both sides of the protocol import it, and only
// they: the client signs (internal/executors/gatekeeper), the server
// verifies, and the canonical encoding they MAC exists once, here.
//
// A Grant names the format version, the approval, the tool, its revision
// and params hash, the digest of the exact command (CommandDigest), the
// boot id of the gatekeeper process it is for, the sandbox the command
// may use, and an expiry; MAC is HMAC-SHA256 over Message with the key
// KeyFromDigest(SHA-256(bearer token)): HKDF-SHA256 (RFC 5869) of the
// token's digest, labelled with KDFInfo. The key starts from the token's
// digest so that a server configured with token digests only
// (TokenSHA256) can derive it as well; the labelled derivation keeps the
// MAC key apart from every other use of that digest (the server compares
// it to authenticate requests). It binds the grant to the token that
// authenticates the request. The token is the trust root: whoever holds
// it can sign any grant, so a grant proves that a token holder approved
// the command, and the server's allowlist bounds what any grant can run.
// internal/gatekeeper/PROTOCOL.md is the wire contract.
//
// Everything here is a pure function of its arguments: no I/O, no
// package state, safe for concurrent use. That a grant runs once is the
// server's to enforce (it remembers the approvals that ran); a grant only
// carries what it needs for that: the approval id, the boot id and the
// expiry. Standard library only.
package grant

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FormatVersion is the grant format this package signs and verifies
// (Grant.Version). Version 1 had no version field and used SHA-256(token)
// itself as the MAC key; version 2 derives the key with HKDF (KDFInfo)
// and binds the grant to a gatekeeper boot id. Verify refuses every other
// version, naming it: the daemon and the gatekeeper ship together.
const FormatVersion = 2

// Version is the first element of Message: it names the encoding, so a
// later one cannot be confused with it.
const Version = "toolagent-gatekeeper-grant-v2"

// KDFInfo is the HKDF info (the label) of the MAC key derivation.
const KDFInfo = "toolagent gatekeeper grant v2"

// KeySize is the size of a MAC key: 32 bytes, as SHA-256's output.
const KeySize = sha256.Size

// Key is the MAC key of the grants sent with token:
// KeyFromDigest(SHA-256(token)).
func Key(token string) [KeySize]byte { return KeyFromDigest(sha256.Sum256([]byte(token))) }

// KeyFromDigest is the MAC key of the grants sent with the token whose
// SHA-256 is digest: HKDF-SHA256 with the digest as the input keying
// material, no salt (RFC 5869: a string of zeros) and the info KDFInfo,
// 32 bytes. A server that holds only the token's hex digest decodes that
// digest and derives the key.
func KeyFromDigest(digest [sha256.Size]byte) [KeySize]byte {
	k, err := hkdf.Key(sha256.New, digest[:], nil, KDFInfo, KeySize)
	if err != nil {
		// Only a key length above 255 hash sizes fails; 32 bytes cannot.
		panic("grant: hkdf: " + err.Error())
	}
	return [KeySize]byte(k)
}

// Sandbox is what the granted command may change and reach on the server,
// the wire form of proc.Grant. The zero value is read-only with no
// network.
type Sandbox struct {
	// Write lists the absolute paths the command may change.
	Write []string `json:"write"`
	// Network lets the command use the server host's network.
	Network bool `json:"network"`
}

// Grant is the signed approval of one call. Every field but MAC is
// covered by MAC; see Message for the encoding.
type Grant struct {
	// Version is the grant format, FormatVersion; Sign sets it. A grant
	// of version 1 has none (0).
	Version int `json:"version"`
	// Approval is the id of the approval the daemon claimed for the call.
	Approval string `json:"approval"`
	// Tool and Revision name the tool definition that was approved.
	Tool     string `json:"tool"`
	Revision string `json:"revision"`
	// ParamsHash is ParamsHash of the params the call runs with (the
	// hash the approval is bound to).
	ParamsHash string `json:"params_hash"`
	// Command is CommandDigest of the exact cmd or argv the call sends.
	Command string `json:"command_sha256"`
	// BootID is the boot id of the gatekeeper process the grant is for
	// (its GET /healthz says it): a gatekeeper that restarted, and so
	// forgot which grants ran, refuses the grants signed before.
	BootID string `json:"boot_id"`
	// Sandbox is what the command may use while it runs.
	Sandbox Sandbox `json:"sandbox"`
	// ExpiresAt is the time (RFC 3339) after which the grant is void.
	ExpiresAt string `json:"expires_at"`
	// MAC is hex HMAC-SHA256(Key(token), Message()).
	MAC string `json:"mac"`
}

// CommandDigest is the hex SHA-256 that identifies a command: over
// "cmd\x00" + cmd for a shell command, or over "argv\x00" and the argv
// elements joined by NUL for an argv (argv elements cannot hold NUL). A
// request has one of the two: cmd is used when it is not empty.
func CommandDigest(cmd string, argv []string) string {
	h := sha256.New()
	if cmd != "" {
		h.Write([]byte("cmd\x00"))
		h.Write([]byte(cmd))
	} else {
		h.Write([]byte("argv\x00"))
		h.Write([]byte(strings.Join(argv, "\x00")))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Message is the canonical encoding the MAC covers: netstrings
// (`<decimal length>:<bytes>,`) of, in this order, Version, Approval,
// Tool, Revision, ParamsHash, Command, BootID, the number of write paths (decimal),
// each write path, "true" or "false" for network, and ExpiresAt exactly as
// sent. Netstrings make it unambiguous: no field can borrow bytes from the
// next.
func (g Grant) Message() []byte {
	var b bytes.Buffer
	ns := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
		b.WriteByte(',')
	}
	ns(Version)
	ns(g.Approval)
	ns(g.Tool)
	ns(g.Revision)
	ns(g.ParamsHash)
	ns(g.Command)
	ns(g.BootID)
	ns(strconv.Itoa(len(g.Sandbox.Write)))
	for _, w := range g.Sandbox.Write {
		ns(w)
	}
	ns(strconv.FormatBool(g.Sandbox.Network))
	ns(g.ExpiresAt)
	return b.Bytes()
}

func (g Grant) mac(key [KeySize]byte) []byte {
	m := hmac.New(sha256.New, key[:])
	m.Write(g.Message())
	return m.Sum(nil)
}

// Sign sets g.Version to FormatVersion and g.MAC for key.
func (g *Grant) Sign(key [KeySize]byte) {
	g.Version = FormatVersion
	g.MAC = hex.EncodeToString(g.mac(key))
}

// The reasons Verify refuses a grant; the error wraps one of them.
var (
	// ErrVersion: the grant is of another format version than
	// FormatVersion.
	ErrVersion = errors.New("grant format version mismatch")
	// ErrMalformed: a field is missing or not in its format.
	ErrMalformed = errors.New("malformed grant")
	// ErrBadMAC: the MAC does not match: the grant was not signed with
	// this token, or a field was changed after signing.
	ErrBadMAC = errors.New("grant signature does not match")
	// ErrExpired: the grant's expiry has passed.
	ErrExpired = errors.New("grant expired")
	// ErrOtherCommand: the grant is for a different command.
	ErrOtherCommand = errors.New("grant is for a different command")
	// ErrOtherBoot: the grant was signed for another boot of the
	// gatekeeper (it restarted since).
	ErrOtherBoot = errors.New("grant is for another boot of this gatekeeper")
)

// Verify checks g for a request whose command has digest command
// (CommandDigest), at time now, under key, on the gatekeeper whose boot
// id is boot: the format is FormatVersion, the fields are well formed,
// the MAC matches (in constant time), the grant has not expired, it is
// for this boot and names this command. The error wraps ErrVersion,
// ErrMalformed, ErrBadMAC, ErrExpired, ErrOtherBoot or ErrOtherCommand
// and says why; the MAC is checked before anything the signer could
// choose, so an unsigned grant learns nothing else. Whether the grant
// already ran is the caller's to check.
func (g Grant) Verify(key [KeySize]byte, now time.Time, command, boot string) error {
	if g.Version != FormatVersion {
		return versionError(g.Version)
	}
	got, err := hex.DecodeString(g.MAC)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: mac is not a hex HMAC-SHA256 (64 hex digits)", ErrMalformed)
	}
	if !hmac.Equal(got, g.mac(key)) {
		return fmt.Errorf("%w: it was not signed with this request's token, or a field was changed", ErrBadMAC)
	}
	if g.Approval == "" {
		return fmt.Errorf("%w: no approval id", ErrMalformed)
	}
	exp, err := time.Parse(time.RFC3339, g.ExpiresAt)
	if err != nil {
		return fmt.Errorf("%w: expires_at %q is not an RFC 3339 time", ErrMalformed, g.ExpiresAt)
	}
	if !now.Before(exp) {
		return fmt.Errorf("%w at %s (now %s)", ErrExpired, g.ExpiresAt, now.UTC().Format(time.RFC3339))
	}
	if g.BootID != boot {
		return fmt.Errorf("%w: it was signed for boot %.12s…, this is boot %.12s…: the gatekeeper restarted since, and a restarted gatekeeper does not know which grants already ran", ErrOtherBoot, g.BootID, boot)
	}
	if !hmac.Equal([]byte(g.Command), []byte(command)) {
		return fmt.Errorf("%w: the grant's command_sha256 is %.12s…, this request's command is %.12s…", ErrOtherCommand, g.Command, command)
	}
	return nil
}

// versionError says which format a grant of version v is and what to
// upgrade: the daemon signs, the gatekeeper verifies.
func versionError(v int) error {
	switch {
	case v == 0 || v == 1:
		return fmt.Errorf("%w: the grant is format version 1 (no \"version\" field, MAC keyed with the token's bare SHA-256), this gatekeeper takes version %d only: upgrade the daemon to the gatekeeper's release (they ship together)", ErrVersion, FormatVersion)
	case v > FormatVersion:
		return fmt.Errorf("%w: the grant is format version %d, this gatekeeper takes version %d only: upgrade the gatekeeper to the daemon's release (they ship together)", ErrVersion, v, FormatVersion)
	default:
		return fmt.Errorf("%w: the grant is format version %d, this gatekeeper takes version %d only", ErrVersion, v, FormatVersion)
	}
}

// HashParams is the SHA-256 (hex) of the canonical JSON of params: object
// keys sorted, no insignificant space, numbers in one spelling (an
// integral value as an integer: 1, 1.0 and json.Number("1") hash alike),
// and an empty or nil map as {}. It is the one params hash of the
// project: approvals (internal/approval) bind to it and grants carry it.
// The error says why params are not JSON.
func HashParams(params map[string]any) (string, error) {
	if params == nil {
		params = map[string]any{}
	}
	b, err := json.Marshal(params)
	if err != nil {
		return "", fmt.Errorf("params are not JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := canonical(&buf, v); err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// ParamsHash is HashParams, with values that are not JSON hashing as
// "unhashable:" plus the error, which matches no approval.
func ParamsHash(params map[string]any) string {
	h, err := HashParams(params)
	if err != nil {
		return "unhashable: " + err.Error()
	}
	return h
}

func canonical(buf *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(v))
	case json.Number:
		buf.WriteString(canonicalNumber(v))
	case string:
		b, _ := json.Marshal(v)
		buf.Write(b)
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := canonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			b, _ := json.Marshal(k)
			buf.Write(b)
			buf.WriteByte(':')
			if err := canonical(buf, v[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("unexpected %T in params", v)
	}
	return nil
}

// canonicalNumber spells a JSON number one way: integers (including 1.0
// and 1e3) as integers, others in Go's shortest float form.
func canonicalNumber(n json.Number) string {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return strconv.FormatInt(i, 10)
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return string(n)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
