package trust

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// PathsOption is the word in a key line's comment that limits the key to
// path globs: toolagent-paths=GLOB[,GLOB...]. It lives in the comment, not
// among the options, because OpenSSH refuses options it does not know and
// the same file should still work with git verify-commit and ssh-keygen.
const PathsOption = "toolagent-paths="

// sshKey is one line of an allowed_signers file.
type sshKey struct {
	line        int
	principals  string
	key         ssh.PublicKey
	namespaces  []string  // patterns; nil: any namespace
	validAfter  time.Time // zero: no lower bound
	validBefore time.Time // zero: no upper bound
	paths       []string  // globs; nil: any path
}

// ParseAllowedSigners reads git's allowed_signers format (ssh-keygen(1),
// ALLOWED SIGNERS): one key a line, "principals [options] keytype base64
// [comment]", blank lines and lines starting with # ignored. Options
// understood: namespaces="…" (patterns; a key is used for commits only if
// "git" matches), valid-after="…" and valid-before="…" (YYYYMMDD or
// YYYYMMDDHHMM[SS], local time unless followed by Z). cert-authority is
// refused: certificates are not verified here. In the comment, the word
// toolagent-paths=GLOB[,GLOB...] limits the key to those paths of the
// repository (path.Match globs such as tools/db-*, matched against the
// folder of the tool, e.g. tools/db-backup). name is used in errors.
func ParseAllowedSigners(name string, data []byte) ([]sshKey, error) {
	var keys []sshKey
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := parseSignerLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		k.line = n
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return keys, nil
}

func parseSignerLine(line string) (sshKey, error) {
	var k sshKey
	principals, rest, err := firstField(line)
	if err != nil {
		return k, err
	}
	if rest == "" {
		return k, fmt.Errorf("principals %q are not followed by a key (want: principals [options] keytype base64 [comment])", principals)
	}
	k.principals = principals
	pub, comment, opts, _, err := ssh.ParseAuthorizedKey([]byte(rest))
	if err != nil {
		return k, fmt.Errorf("key of %s: %v (want: principals [options] keytype base64 [comment])", principals, err)
	}
	k.key = pub
	for _, o := range opts {
		name, val, hasVal := strings.Cut(o, "=")
		name = strings.ToLower(name)
		if hasVal {
			if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
				return k, fmt.Errorf("option %s of %s: want a quoted value, got %s", name, principals, val)
			}
			val = val[1 : len(val)-1]
		}
		switch {
		case name == "cert-authority":
			return k, fmt.Errorf("option cert-authority of %s: certificate authorities are not supported; list the signers' own keys", principals)
		case name == "namespaces" && hasVal:
			k.namespaces = strings.Split(val, ",")
		case name == "valid-after" && hasVal:
			if k.validAfter, err = parseSSHTime(val); err != nil {
				return k, fmt.Errorf("option valid-after of %s: %w", principals, err)
			}
		case name == "valid-before" && hasVal:
			if k.validBefore, err = parseSSHTime(val); err != nil {
				return k, fmt.Errorf("option valid-before of %s: %w", principals, err)
			}
		default:
			return k, fmt.Errorf("option %q of %s: unknown (want namespaces=, valid-after= or valid-before=; path limits go in the comment as %sGLOB)", o, principals, PathsOption)
		}
	}
	for _, w := range strings.Fields(comment) {
		v, ok := strings.CutPrefix(w, PathsOption)
		if !ok {
			continue
		}
		for _, g := range strings.Split(v, ",") {
			if g == "" {
				continue
			}
			if _, err := path.Match(g, ""); err != nil {
				return k, fmt.Errorf("%s of %s: glob %q: %v", PathsOption, principals, g, err)
			}
			k.paths = append(k.paths, strings.Trim(g, "/"))
		}
		if len(k.paths) == 0 {
			return k, fmt.Errorf("%s of %s names no glob (want e.g. %stools/db-*)", PathsOption, principals, PathsOption)
		}
	}
	return k, nil
}

// firstField splits off the principals, which may be quoted.
func firstField(line string) (string, string, error) {
	if strings.HasPrefix(line, `"`) {
		end := strings.Index(line[1:], `"`)
		if end < 0 {
			return "", "", fmt.Errorf("principals: unterminated quote")
		}
		return line[1 : end+1], strings.TrimSpace(line[end+2:]), nil
	}
	i := strings.IndexAny(line, " \t")
	if i < 0 {
		return line, "", nil
	}
	return line[:i], strings.TrimSpace(line[i+1:]), nil
}

// parseSSHTime parses ssh-keygen's time formats.
func parseSSHTime(s string) (time.Time, error) {
	loc := time.Local
	if v, ok := strings.CutSuffix(s, "Z"); ok {
		s, loc = v, time.UTC
	}
	layout := map[int]string{8: "20060102", 12: "200601021504", 14: "20060102150405"}[len(s)]
	if layout == "" {
		return time.Time{}, fmt.Errorf("time %q: want YYYYMMDD, YYYYMMDDHHMM or YYYYMMDDHHMMSS, optionally followed by Z", s)
	}
	t, err := time.ParseInLocation(layout, s, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %v", s, err)
	}
	return t, nil
}

// forGit reports whether the key's namespaces admit "git" (OpenSSH
// pattern lists: * and ? wildcards, a leading ! negates).
func (k *sshKey) forGit() bool {
	if k.namespaces == nil {
		return true
	}
	ok := false
	for _, p := range k.namespaces {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		if m, _ := path.Match(p, "git"); m {
			if neg {
				return false
			}
			ok = true
		}
	}
	return ok
}
