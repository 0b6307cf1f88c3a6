package dispatch_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/shell"
	"github.com/toolagent/toolagent/internal/hldp"
)

const trueTool = `name: sh
display: sh
intent: run a command
method: exec
executor: shell
params_schema:
  cmd: { type: string, required: true, description: "command" }
author: bench
created: 2026-11-30
why: benchmark
`

// BenchmarkDispatchExecTrue is a shell exec of `true` through the whole
// invoke path (lookup, params validation, limits, proc, audit): compare
// with BenchmarkBareExecTrue for the overhead dispatch adds.
func BenchmarkDispatchExecTrue(b *testing.B) {
	tl, err := hldp.Parse("tools/sh/TOOL.hdlp", []byte(trueTool))
	if err != nil {
		b.Fatal(err)
	}
	st := new(catalog.Store)
	st.Swap(catalog.New("r", []catalog.Entry{{Name: "sh", Tool: tl, Rev: "r", Status: catalog.Enabled}}, catalog.Options{LazyIndex: true}))
	d := dispatch.New(st, map[hldp.ExecutorKind]executors.Executor{hldp.Shell: shell.New(shell.Options{})}, dispatch.Options{})
	call := dispatch.Call{Tool: "sh", Params: json.RawMessage(`{"cmd":"true"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if r := d.Invoke(context.Background(), call); r.Status != dispatch.NoData {
			b.Fatalf("status %s: %s", r.Status, r.Error)
		}
	}
}

// BenchmarkBareExecTrue runs the same command with bare os/exec.
func BenchmarkBareExecTrue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
