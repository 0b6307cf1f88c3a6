// Package hugeheap backs the first Size bytes of this process's Go heap
// with transparent huge pages while it starts, on a kernel that gives
// them only to memory that asks (THP "madvise", the default of Debian and
// Ubuntu). Go does not ask (go.dev/doc/gc-guide#Linux_transparent_huge_pages),
// so there every fresh 4 KiB of heap is a page fault of its own, and on a
// small VM a fault costs 10-40 µs: a warm start of 10,000 tools touches
// some 30 MiB and spent about half its CPU in faults (docs/operations.md,
// "Start time"). A 2 MiB page is one fault for 512 of them.
//
// Its init, which runs before the packages whose initialisation fills the
// heap (it imports only runtime, sync and syscall), allocates one object
// of Size bytes, which the runtime maps fresh and does not touch, asks
// for huge pages on the 2 MiB-aligned part of it (madvise MADV_HUGEPAGE),
// and frees it with a collection: the runtime's allocator takes the
// lowest free addresses first, so what the process allocates next lands
// in that range and is faulted in 2 MiB at a time. Settle ends the
// request once the start is over (a long-running process calls it), so
// that the kernel's khugepaged does not later gather the pages Go
// returned back into huge pages, and the process runs as before.
//
// Nothing is asked under "always" (every anonymous mapping gets huge
// pages already) or "never", nor in the sandbox's reaper (a process that
// only waits), nor with TOOLAGENT_HUGE_HEAP=off. On a kernel whose defrag
// setting compacts memory for a fault that asked (the default
// "madvise"), such a fault may wait for compaction; at most Size/2 MiB
// faults ask, all during the start.
//
// Imports: none of this module.
package hugeheap

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

const (
	// Size is how much of the heap is asked for: about what a cold
	// start of 10,000 tools allocates before it is ready (a warm start
	// takes 30 MiB of it). In one run of 7 rounds, cold starts with 32,
	// 64 and 96 MiB: 1,084, 1,016 and 928 ms; the resident set at ready
	// of a warm start the same (docs/operations.md).
	Size = 96 << 20
	// OffEnv, set to "off", turns the request off.
	OffEnv = "TOOLAGENT_HUGE_HEAP"
	// ModeFile is the kernel's transparent huge page setting.
	ModeFile = "/sys/kernel/mm/transparent_hugepage/enabled"

	hugePage = 2 << 20
	// reaperEnv marks the sandbox's reaper (internal/proc's reaperEnv,
	// the same name), a process that waits on a pipe and allocates next
	// to nothing.
	reaperEnv = "TOOLAGENT_SANDBOX_REAPER"
)

// region is the part of the heap asked for: [start, end), empty when
// nothing was asked.
var region struct{ start, end uintptr }

var (
	settle  sync.Once
	settled atomic.Bool
)

func init() {
	if v, _ := syscall.Getenv(OffEnv); v == "off" {
		return
	}
	if _, reaper := syscall.Getenv(reaperEnv); reaper {
		return
	}
	if Mode(ModeFile) != "madvise" {
		return
	}
	region.start, region.end = advise(Size)
}

// advise allocates size bytes, asks for huge pages on the 2 MiB-aligned
// part of them and frees them, and returns that part (empty when the
// kernel refused).
func advise(size int) (start, end uintptr) {
	b := make([]byte, size)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start = (p + hugePage - 1) &^ (hugePage - 1)
	end = (p + uintptr(size)) &^ (hugePage - 1)
	if end <= start || madvise(start, end, syscall.MADV_HUGEPAGE) != nil {
		start, end = 0, 0
	}
	runtime.KeepAlive(b)
	b = nil
	// The allocation started a collection already; this one waits for it
	// and frees the object, so the range is free before anything else
	// is allocated.
	runtime.GC()
	return start, end
}

// Region returns the part of the heap this process asked huge pages for
// (start, length; 0, 0 when it asked for none).
func Region() (start, length uintptr) { return region.start, region.end - region.start }

// Settle ends the request: from now on the range gets the kernel's
// default pages, and khugepaged stays out of it (MADV_NOHUGEPAGE, which
// under "madvise" is the default). The huge pages already there stay
// until Go returns their memory (debug.FreeOSMemory splits them). Safe
// to call more than once and from any goroutine; it does nothing when
// nothing was asked.
func Settle() {
	settle.Do(func() {
		if region.end > region.start {
			_ = madvise(region.start, region.end, syscall.MADV_NOHUGEPAGE)
		}
		settled.Store(true)
	})
}

// Asking reports whether the process asks for huge pages now: it asked
// at start and has not settled.
func Asking() bool { return region.end > region.start && !settled.Load() }

// madvise gives advice on [start, end), addresses of the heap that no
// Go pointer needs to hold: the kernel only changes how they are paged.
func madvise(start, end uintptr, advice int) error {
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}

// Mode reads the kernel's transparent huge page setting from file (the
// one in brackets: "always [madvise] never" is "madvise"); "" when the
// file cannot be read (a kernel without them).
func Mode(file string) string {
	fd, err := syscall.Open(file, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer syscall.Close(fd)
	var buf [128]byte
	n, err := syscall.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return ""
	}
	// By hand, not with strings.Cut: importing strings puts this init
	// after some 70 others (GODEBUG=inittrace=1: 87th at 19 ms instead of
	// 17th at 5 ms), whose allocations then miss the range.
	s := string(buf[:n])
	for i := 0; i < len(s); i++ {
		if s[i] != '[' {
			continue
		}
		for j := i + 1; j < len(s); j++ {
			if s[j] == ']' {
				return s[i+1 : j]
			}
		}
	}
	// A setting without brackets names itself.
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	return s
}
