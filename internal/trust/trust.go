// Package trust decides whether a commit's signature vouches for a path:
// the commit is signed (SSH signatures in the sshsig format, or OpenPGP),
// the key is one the operator allows (git's allowed_signers file, an
// OpenPGP keyring), the key was valid at the commit's time, and the key may
// change that path (toolagent-paths= globs in the operator's file).
//
// It knows nothing of git objects or tools: a caller hands it a Commit (the
// signed payload and its signature), and gets a Verdict it may keep, since
// a verdict depends only on the commit and the Policy (Policy.Digest).
// Cache keeps verdicts and the commits that last changed each tool folder
// across restarts.
//
// Imports no internal package. Imported by the daemon and lint.
package trust

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Namespace is the sshsig namespace git signs commits in.
const Namespace = "git"

// Methods of a signature.
const (
	SSH     = "ssh"
	OpenPGP = "openpgp"
)

// Commit is what a verdict is about: a commit's signed bytes and its
// signature.
type Commit struct {
	Hash string
	// When is the committer's time: a key's validity must cover it.
	When time.Time
	// Signature is the commit's gpgsig header (armored SSH or OpenPGP
	// signature); "" when unsigned.
	Signature string
	// Payload is the commit object without its signature: what was signed.
	Payload []byte
}

// Signer is who signed a commit, for provenance.
type Signer struct {
	Method      string   `json:"method"`          // SSH or OpenPGP
	Principal   string   `json:"principal"`       // allowed_signers principals, or the OpenPGP user id
	Fingerprint string   `json:"fingerprint"`     // SHA256:… for SSH keys, hex for OpenPGP keys
	Paths       []string `json:"paths,omitempty"` // globs the key may change; empty: any
}

// Verdict is what a commit's signature proves under a Policy.
type Verdict struct {
	// Signer is set when an allowed key, valid at the commit's time,
	// signed the commit.
	Signer *Signer `json:"signer,omitempty"`
	// Problem says, when Signer is nil, why the commit is not trusted, as
	// the end of a sentence "… last changed in abc1234 " + Problem.
	Problem string `json:"problem,omitempty"`
}

// Allows reports whether v lets its commit define the folder dir (a
// slash-separated path from the repository root, e.g. tools/db-backup),
// and if not, why.
func (v Verdict) Allows(dir string) (bool, string) {
	if v.Signer == nil {
		return false, v.Problem
	}
	if len(v.Signer.Paths) == 0 {
		return true, ""
	}
	dir = strings.Trim(dir, "/")
	for _, g := range v.Signer.Paths {
		if ok, _ := path.Match(g, dir); ok {
			return true, ""
		}
	}
	return false, fmt.Sprintf("signed by %s (%s), whose key may change only %s", v.Signer.Principal, v.Signer.Fingerprint, strings.Join(v.Signer.Paths, ", "))
}

// Policy is the operator's trust: allowed SSH keys and an OpenPGP
// keyring. It is immutable and safe for concurrent use.
type Policy struct {
	keys    []sshKey
	keyring openpgp.EntityList
	digest  string
}

// Load reads the policy from an allowed_signers file and an armored
// OpenPGP keyring; either path may be empty, not both.
func Load(signersFile, keyringFile string) (*Policy, error) {
	if signersFile == "" && keyringFile == "" {
		return nil, errors.New("trust: neither trusted_signers nor trusted_keyring is set")
	}
	p := &Policy{}
	h := sha256.New()
	if signersFile != "" {
		data, err := os.ReadFile(signersFile)
		if err != nil {
			return nil, fmt.Errorf("trusted_signers: %w", err)
		}
		if p.keys, err = ParseAllowedSigners(signersFile, data); err != nil {
			return nil, fmt.Errorf("trusted_signers: %w", err)
		}
		h.Write(data)
	}
	h.Write([]byte{0})
	if keyringFile != "" {
		data, err := os.ReadFile(keyringFile)
		if err != nil {
			return nil, fmt.Errorf("trusted_keyring: %w", err)
		}
		if p.keyring, err = openpgp.ReadArmoredKeyRing(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("trusted_keyring %s: want an armored OpenPGP public keyring (gpg --export --armor): %w", keyringFile, err)
		}
		h.Write(data)
	}
	// The local zone reads the times of valid-after and valid-before.
	h.Write([]byte(time.Local.String()))
	p.digest = hex.EncodeToString(h.Sum(nil))
	return p, nil
}

// Digest names the policy's content: a verdict reached under one policy
// holds under every policy with its digest.
func (p *Policy) Digest() string { return p.digest }

// Verify returns what c's signature proves under p.
func (p *Policy) Verify(c Commit) Verdict {
	sig := strings.TrimSpace(c.Signature)
	switch {
	case sig == "":
		return Verdict{Problem: "by an unsigned commit"}
	case strings.HasPrefix(sig, "-----BEGIN SSH SIGNATURE-----"):
		return p.verifySSH(c, sig)
	case strings.HasPrefix(sig, "-----BEGIN PGP SIGNATURE-----"):
		return p.verifyPGP(c, sig)
	}
	return Verdict{Problem: "by a commit whose signature is neither SSH nor OpenPGP (X.509 signatures are not supported)"}
}

func (p *Policy) verifySSH(c Commit, armored string) Verdict {
	sig, err := sshsig.Unarmor([]byte(armored))
	if err != nil {
		return Verdict{Problem: fmt.Sprintf("by a commit whose SSH signature cannot be read: %v", err)}
	}
	fp := ssh.FingerprintSHA256(sig.PublicKey)
	if err := sshsig.Verify(bytes.NewReader(c.Payload), sig, sig.PublicKey, sig.HashAlgorithm, Namespace); err != nil {
		return Verdict{Problem: fmt.Sprintf("with an SSH signature by %s that does not verify: %v", fp, err)}
	}
	want := sig.PublicKey.Marshal()
	var lines []*sshKey
	for i := range p.keys {
		if bytes.Equal(p.keys[i].key.Marshal(), want) {
			lines = append(lines, &p.keys[i])
		}
	}
	if len(lines) == 0 {
		return Verdict{Problem: fmt.Sprintf("signed by a key not in trusted_signers (%s)", fp)}
	}
	// Every line of the key that admits git at the commit's time counts;
	// otherwise the first line's reason is given.
	var s *Signer
	problem := ""
	anyPath := false
	for _, k := range lines {
		var why string
		switch {
		case !k.forGit():
			why = fmt.Sprintf("signed by %s (%s), whose namespaces in trusted_signers exclude %q", k.principals, fp, Namespace)
		case !k.validAfter.IsZero() && c.When.Before(k.validAfter):
			why = fmt.Sprintf("signed by %s (%s) at %s, before the key is valid (valid-after %s)", k.principals, fp, c.When.UTC().Format(time.RFC3339), k.validAfter.UTC().Format(time.RFC3339))
		case !k.validBefore.IsZero() && !c.When.Before(k.validBefore):
			why = fmt.Sprintf("signed by %s (%s) at %s, but the key expired at %s (valid-before)", k.principals, fp, c.When.UTC().Format(time.RFC3339), k.validBefore.UTC().Format(time.RFC3339))
		}
		if why != "" {
			if problem == "" {
				problem = why
			}
			continue
		}
		if s == nil {
			s = &Signer{Method: SSH, Principal: k.principals, Fingerprint: fp}
		} else if !slices.Contains(strings.Split(s.Principal, ","), k.principals) {
			s.Principal += "," + k.principals
		}
		if k.paths == nil {
			anyPath = true
		}
		s.Paths = append(s.Paths, k.paths...)
	}
	if s == nil {
		return Verdict{Problem: problem}
	}
	if anyPath {
		s.Paths = nil // one line of the key has no limit
	} else {
		slices.Sort(s.Paths)
		s.Paths = slices.Compact(s.Paths)
	}
	return Verdict{Signer: s}
}

func (p *Policy) verifyPGP(c Commit, armored string) Verdict {
	if len(p.keyring) == 0 {
		return Verdict{Problem: "signed with OpenPGP, but no trusted_keyring is set"}
	}
	// The commit's time, not now: a key that expired after the commit
	// still vouches for it, one that expired before does not. git stamps
	// the committer time before gpg signs, so the signature can be a
	// second younger than the commit, and go-crypto reads a signature
	// made after its check time as expired: check at the later of the two.
	// Never earlier than the commit, so a key must still be valid, and not
	// yet revoked, when it signed.
	at := c.When
	if made, ok := pgpSignedAt(armored); ok && made.After(at) {
		at = made
	}
	cfg := &packet.Config{Time: func() time.Time { return at }}
	e, err := openpgp.CheckArmoredDetachedSignature(p.keyring, bytes.NewReader(c.Payload), strings.NewReader(armored), cfg)
	switch {
	case errors.Is(err, pgperrors.ErrUnknownIssuer):
		return Verdict{Problem: "signed by an OpenPGP key not in trusted_keyring"}
	case errors.Is(err, pgperrors.ErrKeyExpired), errors.Is(err, pgperrors.ErrSignatureExpired):
		who := ""
		if e != nil {
			who = " " + pgpPrincipal(e) + " (" + pgpFingerprint(e) + ")"
		}
		return Verdict{Problem: fmt.Sprintf("signed at %s by the OpenPGP key%s, which had expired by then: %v", c.When.UTC().Format(time.RFC3339), who, err)}
	case err != nil:
		return Verdict{Problem: fmt.Sprintf("with an OpenPGP signature that does not verify against trusted_keyring: %v", err)}
	}
	return Verdict{Signer: &Signer{Method: OpenPGP, Principal: pgpPrincipal(e), Fingerprint: pgpFingerprint(e)}}
}

// pgpSignedAt is the creation time an armored detached signature claims.
func pgpSignedAt(armored string) (time.Time, bool) {
	b, err := armor.Decode(strings.NewReader(armored))
	if err != nil {
		return time.Time{}, false
	}
	p, err := packet.Read(b.Body)
	if err != nil {
		return time.Time{}, false
	}
	sig, ok := p.(*packet.Signature)
	if !ok {
		return time.Time{}, false
	}
	return sig.CreationTime, true
}

func pgpPrincipal(e *openpgp.Entity) string {
	if id := e.PrimaryIdentity(); id != nil {
		if id.UserId != nil && id.UserId.Email != "" {
			return id.UserId.Email
		}
		return id.Name
	}
	return pgpFingerprint(e)
}

func pgpFingerprint(e *openpgp.Entity) string {
	return strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))
}
