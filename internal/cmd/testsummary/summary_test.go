package main

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRun feeds test2json event streams, as go test -json writes them, to
// run and compares everything it prints, and whether it reports a failure.
func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		in     string // one event (or other line) per line
		want   string
		failed bool
	}{
		{
			name: "a passing package prints its ok line only",
			in: `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestA"}
{"Action":"output","Package":"ex/a","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"ex/a","Test":"TestA","Output":"    a_test.go:5: quiet\n"}
{"Action":"output","Package":"ex/a","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"ex/a","Test":"TestA","Elapsed":0}
{"Action":"output","Package":"ex/a","Output":"PASS\n"}
{"Action":"output","Package":"ex/a","Output":"ok  \tex/a\t0.012s\n"}
{"Action":"pass","Package":"ex/a","Elapsed":0.012}
`,
			want: `ok  	ex/a	0.012s

== skipped tests: 0
== packages: 1 ok, 0 failed, 0 without tests
tests: 1 passed, 0 failed, 0 skipped
`,
		},
		{
			name: "a skip is listed with its package and its last log entry",
			in: `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestSkip"}
{"Action":"output","Package":"ex/a","Test":"TestSkip","Output":"=== RUN   TestSkip\n"}
{"Action":"output","Package":"ex/a","Test":"TestSkip","Output":"    a_test.go:6: looking for the server\n"}
{"Action":"output","Package":"ex/a","Test":"TestSkip","Output":"    a_test.go:7: TOOLAGENT_TEST_FORGEJO_URL is not set\n"}
{"Action":"output","Package":"ex/a","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"ex/a","Test":"TestSkip","Elapsed":0}
{"Action":"output","Package":"ex/a","Output":"ok  \tex/a\t0.010s\n"}
{"Action":"pass","Package":"ex/a","Elapsed":0.01}
`,
			want: `ok  	ex/a	0.010s

== skipped tests: 1
ex/a TestSkip
    a_test.go:7: TOOLAGENT_TEST_FORGEJO_URL is not set
== packages: 1 ok, 0 failed, 0 without tests
tests: 0 passed, 0 failed, 1 skipped
`,
		},
		{
			name: "skipped subtests of two packages, a reason of two lines, and none",
			in: `{"Action":"start","Package":"ex/b"}
{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/b","Test":"TestB"}
{"Action":"run","Package":"ex/b","Test":"TestB/multi"}
{"Action":"output","Package":"ex/b","Test":"TestB/multi","Output":"=== RUN   TestB/multi\n"}
{"Action":"output","Package":"ex/b","Test":"TestB/multi","Output":"    b_test.go:10: no bwrap:\n"}
{"Action":"output","Package":"ex/b","Test":"TestB/multi","Output":"        install bubblewrap\n"}
{"Action":"output","Package":"ex/b","Test":"TestB/multi","Output":"    --- SKIP: TestB/multi (0.00s)\n"}
{"Action":"skip","Package":"ex/b","Test":"TestB/multi","Elapsed":0}
{"Action":"run","Package":"ex/a","Test":"TestA"}
{"Action":"output","Package":"ex/a","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}
{"Action":"skip","Package":"ex/a","Test":"TestA","Elapsed":0}
{"Action":"output","Package":"ex/b","Test":"TestB","Output":"--- PASS: TestB (0.00s)\n"}
{"Action":"pass","Package":"ex/b","Test":"TestB","Elapsed":0}
{"Action":"output","Package":"ex/b","Output":"ok  \tex/b\t0.020s\n"}
{"Action":"pass","Package":"ex/b","Elapsed":0.02}
{"Action":"output","Package":"ex/a","Output":"ok  \tex/a\t0.010s\n"}
{"Action":"pass","Package":"ex/a","Elapsed":0.01}
`,
			want: `ok  	ex/b	0.020s
ok  	ex/a	0.010s

== skipped tests: 2
ex/a TestA
    (no reason given)
ex/b TestB/multi
    b_test.go:10: no bwrap:
        install bubblewrap
== packages: 2 ok, 0 failed, 0 without tests
tests: 1 passed, 0 failed, 2 skipped
`,
		},
		{
			name: "a failed subtest prints its output and the package's FAIL lines",
			in: `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestF"}
{"Action":"output","Package":"ex/a","Test":"TestF","Output":"=== RUN   TestF\n"}
{"Action":"run","Package":"ex/a","Test":"TestF/ok"}
{"Action":"output","Package":"ex/a","Test":"TestF/ok","Output":"=== RUN   TestF/ok\n"}
{"Action":"output","Package":"ex/a","Test":"TestF/ok","Output":"    a_test.go:8: fine\n"}
{"Action":"pass","Package":"ex/a","Test":"TestF/ok","Elapsed":0}
{"Action":"run","Package":"ex/a","Test":"TestF/bad"}
{"Action":"output","Package":"ex/a","Test":"TestF/bad","Output":"=== RUN   TestF/bad\n"}
{"Action":"output","Package":"ex/a","Test":"TestF/bad","Output":"    a_test.go:9: want 1, got 2\n"}
{"Action":"output","Package":"ex/a","Test":"TestF/bad","Output":"    --- FAIL: TestF/bad (0.00s)\n"}
{"Action":"fail","Package":"ex/a","Test":"TestF/bad","Elapsed":0}
{"Action":"output","Package":"ex/a","Test":"TestF","Output":"--- FAIL: TestF (0.00s)\n"}
{"Action":"fail","Package":"ex/a","Test":"TestF","Elapsed":0}
{"Action":"output","Package":"ex/a","Output":"FAIL\n"}
{"Action":"output","Package":"ex/a","Output":"FAIL\tex/a\t0.008s\n"}
{"Action":"fail","Package":"ex/a","Elapsed":0.008}
`,
			want: `    a_test.go:9: want 1, got 2
    --- FAIL: TestF/bad (0.00s)
--- FAIL: TestF (0.00s)
FAIL
FAIL	ex/a	0.008s

== skipped tests: 0
== failed: 2
ex/a TestF/bad
ex/a TestF
== packages: 0 ok, 1 failed, 0 without tests
tests: 1 passed, 2 failed, 0 skipped
`,
			failed: true,
		},
		{
			name: "a build failure prints the compiler's errors; no test files",
			in: `{"ImportPath":"ex/c [ex/c.test]","Action":"build-output","Output":"# ex/c [ex/c.test]\n"}
{"ImportPath":"ex/c [ex/c.test]","Action":"build-output","Output":"c/c_test.go:5:32: undefined: undefined\n"}
{"ImportPath":"ex/c [ex/c.test]","Action":"build-fail"}
{"Action":"start","Package":"ex/b"}
{"Action":"output","Package":"ex/b","Output":"?   \tex/b\t[no test files]\n"}
{"Action":"skip","Package":"ex/b","Elapsed":0}
{"Action":"start","Package":"ex/c"}
{"Action":"output","Package":"ex/c","Output":"FAIL\tex/c [build failed]\n"}
{"Action":"fail","Package":"ex/c","Elapsed":0,"FailedBuild":"ex/c [ex/c.test]"}
`,
			want: `# ex/c [ex/c.test]
c/c_test.go:5:32: undefined: undefined
?   	ex/b	[no test files]
FAIL	ex/c [build failed]

== skipped tests: 0
== failed: 1
ex/c
    build failed
== packages: 0 ok, 1 failed, 1 without tests
tests: 0 passed, 0 failed, 0 skipped
`,
			failed: true,
		},
		{
			name: "a timeout: the running test did not finish; TestMain failing outside tests",
			in: `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestHang"}
{"Action":"output","Package":"ex/a","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"ex/a","Test":"TestHang","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"ex/a","Test":"TestHang","Output":"\trunning tests:\n"}
{"Action":"output","Package":"ex/a","Output":"FAIL\tex/a\t1.005s\n"}
{"Action":"fail","Package":"ex/a","Elapsed":1.005}
{"Action":"start","Package":"ex/m"}
{"Action":"output","Package":"ex/m","Output":"TestMain: no database\n"}
{"Action":"output","Package":"ex/m","Output":"FAIL\tex/m\t0.002s\n"}
{"Action":"fail","Package":"ex/m","Elapsed":0.002}
`,
			want: `panic: test timed out after 1s
	running tests:
FAIL	ex/a	1.005s
TestMain: no database
FAIL	ex/m	0.002s

== skipped tests: 0
== failed: 2
ex/a TestHang
    did not finish
ex/m
    the package failed outside its tests
== packages: 0 ok, 2 failed, 0 without tests
tests: 0 passed, 1 failed, 0 skipped
`,
			failed: true,
		},
		{
			name: "input that ends mid-package; lines that are not events pass through",
			in: `go: downloading example.com/x v1.0.0
{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestA"}
{"Action":"pass","Package":"ex/a","Test":"TestA","Elapsed":0}
{"Action":"run","Package":"ex/a","Test":"TestB"}
{"Action":"output","Package":"ex/a","Test":"TestB","Output":"    a_test.go:9: halfway"}
{not json
`,
			want: `go: downloading example.com/x v1.0.0
{not json
    a_test.go:9: halfway
FAIL	ex/a	(the input ended before the package did)

== skipped tests: 0
== failed: 1
ex/a TestB
    did not finish
== packages: 0 ok, 1 failed, 0 without tests (1 unfinished)
tests: 1 passed, 1 failed, 0 skipped
`,
			failed: true,
		},
		{
			name: "parallel tests: pause, cont and name lines are not output",
			in: `{"Action":"start","Package":"ex/p"}
{"Action":"run","Package":"ex/p","Test":"TestP1"}
{"Action":"output","Package":"ex/p","Test":"TestP1","Output":"=== PAUSE TestP1\n"}
{"Action":"pause","Package":"ex/p","Test":"TestP1"}
{"Action":"run","Package":"ex/p","Test":"TestP2"}
{"Action":"output","Package":"ex/p","Test":"TestP2","Output":"=== PAUSE TestP2\n"}
{"Action":"pause","Package":"ex/p","Test":"TestP2"}
{"Action":"cont","Package":"ex/p","Test":"TestP1"}
{"Action":"cont","Package":"ex/p","Test":"TestP2"}
{"Action":"output","Package":"ex/p","Test":"TestP2","Output":"=== NAME  TestP2\n"}
{"Action":"output","Package":"ex/p","Test":"TestP2","Output":"    p_test.go:20: skipped: short mode\n"}
{"Action":"skip","Package":"ex/p","Test":"TestP2","Elapsed":0}
{"Action":"pass","Package":"ex/p","Test":"TestP1","Elapsed":0.5}
{"Action":"output","Package":"ex/p","Output":"ok  \tex/p\t0.501s\n"}
{"Action":"pass","Package":"ex/p","Elapsed":0.501}
`,
			want: `ok  	ex/p	0.501s

== skipped tests: 1
ex/p TestP2
    p_test.go:20: skipped: short mode
== packages: 1 ok, 0 failed, 0 without tests
tests: 1 passed, 0 failed, 1 skipped
`,
		},
		{
			name: "no input",
			in:   "",
			want: `
== skipped tests: 0
== packages: 0 ok, 0 failed, 0 without tests
tests: 0 passed, 0 failed, 0 skipped
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := run(strings.NewReader(tt.in), &out)
			if diff := cmp.Diff(tt.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if got := errors.Is(err, errFailed); got != tt.failed || err != nil && !got {
				t.Errorf("run() error = %v, want failed = %v", err, tt.failed)
			}
		})
	}
}

// TestRealGoTest runs go test -json on testdata/mod (a pass, a skip with a
// reason, a failed subtest) through run, so a change in what the go
// command writes shows here.
func TestRealGoTest(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	cmd := exec.Command(gobin, "test", "-json", "-count=1", "./...")
	cmd.Dir = "testdata/mod"
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local")
	events, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("go test -json on testdata/mod: error %v, want exit status 1 (a test fails there)", err)
	}
	var out strings.Builder
	if err := run(strings.NewReader(string(events)), &out); !errors.Is(err, errFailed) {
		t.Errorf("run() error = %v, want errFailed", err)
	}
	got := regexp.MustCompile(`\d+\.\d+s\b`).ReplaceAllString(out.String(), "T")
	want := `    mod_test.go:16: want 1, got 2
--- FAIL: TestFail/bad (T)
--- FAIL: TestFail (T)
FAIL
FAIL	example.com/tsmod	T

== skipped tests: 1
example.com/tsmod TestSkip
    mod_test.go:11: needs TOOLAGENT_EXAMPLE_URL
== failed: 2
example.com/tsmod TestFail/bad
example.com/tsmod TestFail
== packages: 0 ok, 1 failed, 0 without tests
tests: 2 passed, 2 failed, 1 skipped
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("output (-want +got):\n%s\nevents:\n%s", diff, events)
	}
}
