package proc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWorkerRefusesTheDaemonsPIDNamespace: the worker kills every process
// it may signal between calls, so it must never run outside a sandbox's
// PID namespace: started in the caller's own, it refuses before it reads
// anything.
func TestWorkerRefusesTheDaemonsPIDNamespace(t *testing.T) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skip("no /proc/self/ns/pid:", err)
	}
	cmd := exec.Command(os.Args[0], workerArg, ns, "256", "4294967296", "1024")
	cmd.Env = []string{workerEnv + "=1"}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not in a PID namespace of its own") {
		t.Errorf("worker in the caller's PID namespace: %v, %q; want a refusal", err, out)
	}
}

func TestParseWorkerLimits(t *testing.T) {
	l := Limits{MaxProcs: 16, MaxMemory: 1 << 30, MaxOpenFiles: 64}
	got, err := parseWorkerLimits(workerLimitArgs(l))
	if err != nil || got != l {
		t.Errorf("parseWorkerLimits(workerLimitArgs(%+v)) = %+v, %v", l, got, err)
	}
	for _, bad := range [][]string{nil, {"1", "2"}, {"1", "2", "x"}, {"0", "1", "1"}, {"-1", "1", "1"}} {
		if _, err := parseWorkerLimits(bad); err == nil {
			t.Errorf("parseWorkerLimits(%q) = nil error", bad)
		}
	}
}

// TestFrames: frames keep their boundaries however the stream delivers
// them (two in one read, one across reads), and descriptors arrive with
// the frame they were sent with.
func TestFrames(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "sock")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	a, b := conn(fds[0]), conn(fds[1])
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()

	// Two frames in one write, the first with a descriptor.
	var two bytes.Buffer
	for _, r := range []workerReply{{Started: true}, {Exited: true, Code: 7}} {
		js, _ := json.Marshal(r)
		two.Write(binary.BigEndian.AppendUint32(nil, uint32(len(js))))
		two.Write(js)
	}
	if _, _, err := a.WriteMsgUnix(two.Bytes(), unix.UnixRights(int(pw.Fd())), nil); err != nil {
		t.Fatal(err)
	}
	in := &frameReader{conn: b}
	var r1, r2 workerReply
	got, err := in.readFrame(&r1)
	if err != nil || !r1.Started || len(got) != 1 {
		t.Fatalf("first frame: %+v, fds %v, %v", r1, got, err)
	}
	unix.Close(got[0])
	if got, err := in.readFrame(&r2); err != nil || !r2.Exited || r2.Code != 7 || len(got) != 0 {
		t.Fatalf("second frame from the same read: %+v, fds %v, %v", r2, got, err)
	}

	// A frame across two writes.
	big := workerRequest{Args: []string{strings.Repeat("x", 10000)}}
	js, _ := json.Marshal(big)
	msg := append(binary.BigEndian.AppendUint32(nil, uint32(len(js))), js...)
	go func() {
		a.Write(msg[:3])
		a.Write(msg[3:])
	}()
	var req workerRequest
	if _, err := in.readFrame(&req); err != nil || len(req.Args) != 1 || len(req.Args[0]) != 10000 {
		t.Fatalf("a frame across writes: %d args, %v", len(req.Args), err)
	}

	// A frame that claims too much is an error, not an allocation.
	a.Write(binary.BigEndian.AppendUint32(nil, maxFrame+1))
	if _, err := in.readFrame(&req); err == nil {
		t.Errorf("a frame of maxFrame+1 bytes was accepted")
	}
}
