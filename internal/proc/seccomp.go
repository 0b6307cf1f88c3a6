package proc

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter every tool process runs under, whatever the
// mechanism (installed on the locked thread that forks the tool, or given
// to bubblewrap with --seccomp). It is a list of refusals on top of the
// kernel's own checks, in the manner of Flatpak's and Docker's default
// profiles: the system calls that reach into another process, load code
// into the kernel, change mounts or namespaces, or inject input into a
// terminal answer EPERM; the rest is allowed. The filter is assembled
// once by github.com/elastic/go-seccomp-bpf, which also refuses the x32
// ABI and other architectures' system call numbers.

// deniedSyscalls answer EPERM in every tool process.
var deniedSyscalls = []string{
	// Another process's memory, registers and descriptors.
	"process_vm_readv", "process_vm_writev", "pidfd_getfd",
	// Code into the kernel, and its attack surface for a process that
	// needs none of it.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	// Keys: the user keyring is per user, and so would be shared by
	// calls that run as one user.
	"keyctl", "add_key", "request_key",
	// Mounts and namespaces, old and new mount API.
	"mount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick", "setns",
	// Files by handle: reaches files outside the mount namespace.
	"open_by_handle_at", "name_to_handle_at",
	// The host: clock, swap, reboot, accounting, I/O ports, kernel log.
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "swapon", "swapoff",
	"reboot", "acct", "iopl", "ioperm", "syslog", "quotactl", "vhangup", "lookup_dcookie",
	"uselib",
}

// Terminal ioctls that inject input (TIOCSTI) or reach the console
// (TIOCLINUX). The kernel reads ioctl's request as 32 bits, so the
// filter compares only those.
const (
	ioctlTIOCSTI   = 0x5412
	ioctlTIOCLINUX = 0x541C
)

// cloneNewUser is CLONE_NEWUSER: a user namespace is the one namespace an
// unprivileged process may make, and with it all the others.
const cloneNewUser = unix.CLONE_NEWUSER

// filterProgram is an assembled seccomp filter, ready for
// seccomp(SECCOMP_SET_MODE_FILTER) or for bubblewrap's --seccomp.
type filterProgram struct {
	insts []unix.SockFilter
}

// newFilter assembles the tools' filter. Without network, socket(2) is
// refused for every address family but AF_UNIX (and socketpair for
// those), so UDP, raw, packet and netlink sockets cannot be made even
// where no network namespace of the call's own stops them.
func newFilter(network bool) (*filterProgram, error) {
	deny := seccomp.SyscallGroup{Action: seccomp.ActionErrno, Names: deniedSyscalls}
	for _, req := range []uint64{ioctlTIOCSTI, ioctlTIOCLINUX} {
		deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
			Name: "ioctl", Conditions: low32Equal(1, req),
		})
	}
	// ptrace: every request but PTRACE_TRACEME and PTRACE_DETACH. The
	// daemon's start needs those two (its child stops at its exec until
	// its limits are set, then is let go); with attach, seize, peek and
	// poke refused they reach no other process: a tracee's tracer can do
	// nothing to it but let it go.
	deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
		Name: "ptrace", Conditions: seccomp.ArgumentConditions{
			{Argument: 0, Operation: seccomp.NotEqual, Value: unix.PTRACE_TRACEME},
			{Argument: 0, Operation: seccomp.NotEqual, Value: unix.PTRACE_DETACH},
		},
	})
	for _, name := range []string{"unshare", "clone"} {
		deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
			Name: name, Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: cloneNewUser}},
		})
	}
	if !network {
		for _, name := range []string{"socket", "socketpair"} {
			deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
				Name: name, Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX}},
			})
		}
	}
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			deny,
			// clone3's flags are in memory a filter cannot read: ENOSYS
			// makes the C library fall back to clone, whose flags it
			// can (the practice of Flatpak and Docker).
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
	insts, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("%w: seccomp filter: %v", ErrSandbox, err)
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return nil, fmt.Errorf("%w: seccomp filter: %v", ErrSandbox, err)
	}
	p := &filterProgram{insts: make([]unix.SockFilter, len(raw))}
	for i, r := range raw {
		p.insts[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return p, nil
}

// low32Equal matches argument arg whose low 32 bits are v, whatever its
// high bits: every bit of v set, and no other bit of the low word. The
// library compares both halves of an argument, and its BitsSet means
// "any of these bits", so each bit of v is a condition of its own.
func low32Equal(arg uint32, v uint64) seccomp.ArgumentConditions {
	var cs seccomp.ArgumentConditions
	for rest := v; rest != 0; rest &= rest - 1 {
		bit := uint64(1) << bits.TrailingZeros64(rest)
		cs = append(cs, seccomp.Condition{Argument: arg, Operation: seccomp.BitsSet, Value: bit})
	}
	return append(cs, seccomp.Condition{Argument: arg, Operation: seccomp.BitsNotSet, Value: 0xFFFFFFFF &^ v})
}

// install sets the filter on the calling thread, which must be locked to
// its goroutine and have no_new_privs set; children it starts inherit
// it.
func (p *filterProgram) install() error {
	prog := unix.SockFprog{Len: uint16(len(p.insts)), Filter: &p.insts[0]}
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("%w: seccomp: %v", ErrSandbox, e)
	}
	return nil
}

// bytes is the program as bubblewrap's --seccomp reads it: struct
// sock_filter entries in the machine's byte order.
func (p *filterProgram) bytes() []byte {
	out := make([]byte, 0, 8*len(p.insts))
	for _, in := range p.insts {
		out = binary.NativeEndian.AppendUint16(out, in.Code)
		out = append(out, in.Jt, in.Jf)
		out = binary.NativeEndian.AppendUint32(out, in.K)
	}
	return out
}
