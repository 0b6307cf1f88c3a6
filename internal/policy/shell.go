// The shell policy: the classes of commands, ShellPolicy and the built-in
// policies, and Judge. The judge's walk of a parsed command line is in
// judge.go; variables in variables.go, words in words.go, redirections
// and standard input in redirects.go; the command table in commands.go.

package policy

import (
	"fmt"
	"strings"
)

// Class is what a simple command (or a redirection) does, as far as the
// shell policy is concerned. A ShellPolicy maps each class to a Decision.
type Class string

// The classes a command is sorted into; see POLICY.md for the lists.
const (
	// ClassRead only reads: ls, cat, grep, git log, systemctl status, ...
	ClassRead Class = "read"
	// ClassWrite creates or changes files: cp, mv, tee FILE, sed -i, > FILE.
	ClassWrite Class = "write"
	// ClassDelete deletes files: rm, rmdir, shred, find -delete.
	ClassDelete Class = "delete"
	// ClassPermissions changes permissions or ownership: chmod, chown.
	ClassPermissions Class = "permissions"
	// ClassNetwork reaches the network: curl, wget, ssh, git push.
	ClassNetwork Class = "network"
	// ClassProcess signals or controls processes: kill, pkill.
	ClassProcess Class = "process"
	// ClassSystem changes system state: systemctl restart, reboot, mount.
	ClassSystem Class = "system"
	// ClassPrivilege raises privileges: sudo, su, doas.
	ClassPrivilege Class = "privilege"
	// ClassExec runs code the policy cannot see: a script file, an
	// interpreter (python, perl, awk with system()), a shell reading a pipe.
	ClassExec Class = "exec"
	// ClassEnvironment changes how later commands are found or run:
	// PATH=..., LD_PRELOAD=..., alias.
	ClassEnvironment Class = "environment"
	// ClassDynamic is not known until the command runs: $cmd or $(...) in
	// command position, sh -c "$x", eval "$x", a redirection to $file.
	ClassDynamic Class = "dynamic"
	// ClassLookalike has non-ASCII or control characters in a command
	// name, e.g. a fullwidth ｒｍ or a Cyrillic с: possibly a look-alike.
	ClassLookalike Class = "lookalike"
	// ClassUnknown is a command the policy has no entry for.
	ClassUnknown Class = "unknown"
	// ClassCatastrophic destroys a system: rm -rf /, mkfs /dev/sda,
	// dd of=/dev/sda, a fork bomb, kill -9 -1.
	ClassCatastrophic Class = "catastrophic"
)

// Limits of the default policies.
const (
	// DefaultMaxBytes caps the length of a command: 128 KiB, Linux's
	// limit on one argv element (MAX_ARG_STRLEN), so a longer command
	// could not be passed to sh -c anyway.
	DefaultMaxBytes = 128 << 10
	// DefaultMaxNesting caps the nesting of ( { $( ${ in a command; the
	// parser's work grows with it.
	DefaultMaxNesting = 64
	// maxScriptDepth caps scripts inside scripts (sh -c, eval, here-docs).
	maxScriptDepth = 8
	// maxSteps caps the simple commands judged in one call.
	maxSteps = 1 << 17
)

// ShellPolicy judges shell command lines. It is read-only once built and
// safe for concurrent use; build a changed copy with Clone.
type ShellPolicy struct {
	// Name appears in rules ("default policy: network").
	Name string
	// Classes maps each class to its decision; a class missing here is
	// denied.
	Classes map[Class]Decision
	// Commands overrides the decision for a command by its name (the base
	// name for /bin/x and /usr/bin/x). Catastrophic patterns are checked
	// first and are not overridden; a wrapper overridden here (sudo, env,
	// sh, ...) is no longer looked through.
	Commands map[string]Decision
	// MaxBytes caps the command length; longer is denied (0: DefaultMaxBytes).
	MaxBytes int
	// MaxNesting caps the nesting depth; deeper is denied (0: DefaultMaxNesting).
	MaxNesting int
}

// DefaultShellPolicy is the built-in policy of the shipped shell-exec:
// read-only commands run; anything that writes, deletes, changes
// permissions, signals processes, changes the system, raises privileges,
// reaches the network, runs unseen code or is not known until run time
// needs an approval; catastrophic patterns are denied. POLICY.md lists the
// commands. Each call returns a new value the caller may change.
func DefaultShellPolicy() *ShellPolicy {
	p := &ShellPolicy{Name: ShellDefault, Classes: map[Class]Decision{}, Commands: map[string]Decision{}, MaxBytes: DefaultMaxBytes, MaxNesting: DefaultMaxNesting}
	for _, c := range allClasses {
		p.Classes[c] = Confirm
	}
	p.Classes[ClassRead] = Allow
	p.Classes[ClassCatastrophic] = Deny
	return p
}

// StrictShellPolicy runs read-only commands and denies everything else,
// so no approval can run a writing command through the tool.
func StrictShellPolicy() *ShellPolicy {
	p := DefaultShellPolicy()
	p.Name = ShellStrict
	for c := range p.Classes {
		if c != ClassRead {
			p.Classes[c] = Deny
		}
	}
	return p
}

// ShellPolicyFor returns the built-in policy a shell_policy word names;
// nil for "none". "" means "default".
func ShellPolicyFor(mode string) (*ShellPolicy, error) {
	switch mode {
	case "", ShellDefault:
		return DefaultShellPolicy(), nil
	case ShellStrict:
		return StrictShellPolicy(), nil
	case ShellNone:
		return nil, nil
	}
	return nil, fmt.Errorf("policy: unknown shell_policy %q (want default, strict or none)", mode)
}

// Clone returns a deep copy of p, to change without touching p.
func (p *ShellPolicy) Clone() *ShellPolicy {
	q := *p
	q.Classes = make(map[Class]Decision, len(p.Classes))
	for k, v := range p.Classes {
		q.Classes[k] = v
	}
	q.Commands = make(map[string]Decision, len(p.Commands))
	for k, v := range p.Commands {
		q.Commands[k] = v
	}
	return &q
}

var allClasses = []Class{ClassRead, ClassWrite, ClassDelete, ClassPermissions, ClassNetwork, ClassProcess, ClassSystem, ClassPrivilege, ClassExec, ClassEnvironment, ClassDynamic, ClassLookalike, ClassUnknown, ClassCatastrophic}

// classReason explains each class in the Reason of a verdict.
var classReason = map[Class]string{
	ClassRead:         "it only reads",
	ClassWrite:        "it creates or changes files",
	ClassDelete:       "it deletes files",
	ClassPermissions:  "it changes permissions or ownership",
	ClassNetwork:      "it may send or fetch data over the network",
	ClassProcess:      "it signals or controls other processes",
	ClassSystem:       "it changes the state of the system",
	ClassPrivilege:    "it runs with raised privileges",
	ClassExec:         "it runs code the policy cannot see",
	ClassEnvironment:  "it changes how later commands are found or run",
	ClassDynamic:      "what runs is only known when the command runs, so it cannot be judged beforehand",
	ClassLookalike:    "a command name with non-ASCII or control characters may imitate another command",
	ClassUnknown:      "the policy does not know what it does",
	ClassCatastrophic: "it can destroy the system",
}

// Judge parses cmd as a bash command line and judges every simple command
// in it: pipelines, && || ; lists, subshells, blocks, command and process
// substitutions, function bodies, if/while/for/case, here-documents fed to
// a shell, the scripts of sh -c, eval and trap, the commands of wrappers
// (sudo, env, xargs, timeout, find -exec, ...), and every redirection. The
// verdict is the strictest over all of them and names the command that
// decided it. A command that cannot be parsed, is too long or nests too
// deeply is denied. Judge never runs anything.
func (p *ShellPolicy) Judge(cmd string) Verdict {
	j := &judge{p: p, funcs: map[string]bool{}}
	j.script(cmd, stdinSrc{desc: "the standard input of the call"})
	if j.v.Decision == Allow {
		names := j.names
		if len(names) > 12 {
			names = append(names[:12:12], "...")
		}
		j.v.Rule = fmt.Sprintf("shell: every command is read-only (%s policy)", p.Name)
		if len(names) == 0 {
			j.v.Rule = fmt.Sprintf("shell: the command runs nothing (%s policy)", p.Name)
		}
		j.v.Reason = "judged: " + strings.Join(names, ", ")
	}
	return j.v
}
