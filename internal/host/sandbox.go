package host

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"github.com/toolagent/toolagent/internal/proc"
)

// Sandbox modes (--sandbox, sandbox).
const (
	SandboxOn  = "on"
	SandboxOff = "off"
)

// ErrSandboxMode is the error of a sandbox mode other than on and off.
var ErrSandboxMode = errors.New("--sandbox: want on or off")

// OpenSandbox returns the sandbox mode asks for: nil when it is off, and
// NewSandbox's error (it names what is missing) when it cannot be built.
// A daemon running as root never gets a bubblewrap sandbox whose tools
// would run as root.
func OpenSandbox(mode string, opts proc.SandboxOptions) (*proc.Sandbox, error) {
	switch mode {
	case SandboxOff:
		return nil, nil
	case "", SandboxOn:
		sb, err := proc.NewSandbox(opts)
		if err != nil {
			return nil, err
		}
		if sb.Mechanism() == proc.MechanismBubblewrap && opts.User == nil && os.Geteuid() == 0 {
			sb.Close()
			return nil, fmt.Errorf("%w: the daemon runs as root and its sandbox is bubblewrap, whose tools would run as root: name a user for them (sandbox_user), or let it use landlock (sandbox_mechanism, which needs a kernel with Landlock); tools never run as the host's root", proc.ErrSandbox)
		}
		return sb, nil
	}
	return nil, fmt.Errorf("%w, got %q", ErrSandboxMode, mode)
}

// LogSandbox says at start what runs the processes of a command (what):
// the sandbox, or a warning that there is none.
func LogSandbox(log *slog.Logger, sb *proc.Sandbox, what string) {
	if sb == nil {
		log.Warn("the sandbox is off (--sandbox=off): "+what+" run unconfined, with this process's view of the host's files, network and processes",
			"flag", "--sandbox=off")
		return
	}
	log.Info("sandbox", "mechanism", sb.Mechanism(), "version", sb.Version(), "hidden", len(sb.Hidden()), "isolation", "a sandbox per call")
}

// SandboxMechanism maps the sandbox_mechanism setting to proc's: "auto"
// lets proc choose.
func SandboxMechanism(m string) string {
	if m == "auto" {
		return ""
	}
	return m
}

// SandboxUser resolves --sandbox-user (a name or a uid) to credentials;
// "" is nil: the daemon's own user.
func SandboxUser(name string) (*syscall.Credential, error) {
	if name == "" {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr != nil {
			return nil, fmt.Errorf("--sandbox-user %q: %w", name, err)
		}
		if u, err = user.LookupId(name); err != nil {
			// A bare uid without a passwd entry: its gid is the uid.
			uid, _ := strconv.ParseUint(name, 10, 32)
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}, nil
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--sandbox-user %q: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--sandbox-user %q: gid %q: %w", name, u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}
