package hugeheap

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// vma is one mapping of /proc/self/smaps: its range and the fields this
// test reads.
type vma struct {
	start, end    uintptr
	flags         []string // VmFlags
	anonHugePages int      // kB
}

// mappingOf returns the mapping of /proc/self/smaps holding addr.
func mappingOf(t *testing.T, addr uintptr) vma {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cur *vma
	var found vma
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) > 0 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			lo, hi, _ := strings.Cut(fields[0], "-")
			s, err1 := strconv.ParseUint(lo, 16, 64)
			e, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			if cur != nil && cur.start <= addr && addr < cur.end {
				found = *cur
			}
			cur = &vma{start: uintptr(s), end: uintptr(e)}
			continue
		}
		if cur == nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "VmFlags:"):
			cur.flags = fields[1:]
		case strings.HasPrefix(line, "AnonHugePages:") && len(fields) > 1:
			cur.anonHugePages, _ = strconv.Atoi(fields[1])
		}
	}
	if cur != nil && cur.start <= addr && addr < cur.end {
		found = *cur
	}
	if found.end == 0 {
		t.Fatalf("no mapping holds %#x", addr)
	}
	return found
}

func (v vma) has(flag string) bool {
	for _, f := range v.flags {
		if f == flag {
			return true
		}
	}
	return false
}

// wantAsked skips unless this process asked for huge pages, saying why.
func wantAsked(t *testing.T) (start, length uintptr) {
	t.Helper()
	start, length = Region()
	if length > 0 {
		return start, length
	}
	mode := Mode(ModeFile)
	if mode != "madvise" {
		t.Skipf("the kernel's transparent huge pages are %q: nothing to ask for (only under madvise)", mode)
	}
	if os.Getenv(OffEnv) == "off" {
		t.Skipf("%s=off", OffEnv)
	}
	t.Fatalf("under madvise, nothing was asked for")
	return 0, 0
}

// TestAsked: under madvise the process asked for huge pages on Size
// bytes of its heap less at most one 2 MiB page of alignment, in one
// mapping the kernel marks for them (VmFlags hg); what the process
// allocated afterwards landed in that range, the lowest free addresses
// of the heap; and Settle takes the mark off (nh), once.
func TestAsked(t *testing.T) {
	start, length := wantAsked(t)
	if start%hugePage != 0 || length%hugePage != 0 || length < Size-hugePage || length > Size {
		t.Fatalf("Region() = %#x, %d; want 2 MiB-aligned, %d bytes less at most 2 MiB", start, length, Size)
	}
	m := mappingOf(t, start)
	if m.start > start || m.end < start+length {
		t.Errorf("the range %#x+%d spans several mappings; the first is %#x-%#x", start, length, m.start, m.end)
	}
	if !m.has("hg") {
		t.Fatalf("mapping %#x-%#x has VmFlags %v; want hg (MADV_HUGEPAGE)", m.start, m.end, m.flags)
	}
	// Allocations after init reuse the freed range: of 4,096 objects of
	// 4 KiB (16 MiB), some are in it.
	kept := make([][]byte, 4096)
	in := 0
	for i := range kept {
		kept[i] = make([]byte, 4096)
		kept[i][0] = 1
		if p := uintptr(unsafe.Pointer(&kept[i][0])); p >= start && p < start+length {
			in++
		}
	}
	if in == 0 {
		t.Fatalf("none of 4,096 new objects is in the advised range %#x+%d", start, length)
	}
	// Whether the kernel had a free huge page to give is its business
	// (it falls back to 4 KiB pages): said, not asserted.
	t.Logf("%d of 4,096 new objects in the range; its mapping holds %d kB of huge pages", in, mappingOf(t, start).anonHugePages)

	if !Asking() {
		t.Fatal("Asking() = false before Settle")
	}
	Settle()
	Settle() // a second call does nothing
	if Asking() {
		t.Fatal("Asking() = true after Settle")
	}
	m = mappingOf(t, start)
	if m.has("hg") || !m.has("nh") {
		t.Fatalf("after Settle, VmFlags %v; want nh and no hg", m.flags)
	}
}

// TestNotAsked: with TOOLAGENT_HUGE_HEAP=off, and in the sandbox's
// reaper (TOOLAGENT_SANDBOX_REAPER set), a process asks for nothing;
// with neither it asks (under madvise). Each is this test binary started
// again, reporting its Region (TestMain).
func TestNotAsked(t *testing.T) {
	wantAsked(t)
	for _, tc := range []struct {
		env  string
		want bool
	}{
		{"", true},
		{OffEnv + "=off", false},
		{OffEnv + "=on", true},
		{reaperEnv + "=1", false},
	} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "HUGEHEAP_REPORT=1", OffEnv+"=")
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.env, err, out)
		}
		asked := strings.Contains(string(out), "region: asked")
		if !asked && !strings.Contains(string(out), "region: none") {
			t.Fatalf("%s: no report:\n%s", tc.env, out)
		}
		if asked != tc.want {
			t.Errorf("env %q: asked %v; want %v", tc.env, asked, tc.want)
		}
	}
}

// TestMain is also TestNotAsked's child (HUGEHEAP_REPORT=1): it prints
// what this process asked for and exits.
func TestMain(m *testing.M) {
	if os.Getenv("HUGEHEAP_REPORT") == "1" {
		if _, n := Region(); n > 0 {
			fmt.Println("region: asked", n)
		} else {
			fmt.Println("region: none")
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestMode reads the setting in brackets, one without brackets as it
// is, and "" for a file that is not there.
func TestMode(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{
		"always [madvise] never\n": "madvise",
		"[always] madvise never\n": "always",
		"always madvise [never]\n": "never",
		"never\n":                  "never",
	} {
		f := filepath.Join(dir, "enabled")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := Mode(f); got != want {
			t.Errorf("Mode(%q) = %q; want %q", content, got, want)
		}
	}
	if got := Mode(filepath.Join(dir, "missing")); got != "" {
		t.Errorf("Mode(missing) = %q; want empty", got)
	}
}
