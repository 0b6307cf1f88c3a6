package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/proc/proctest"
)

// TestServeRequires runs a real daemon (sandbox on, as shipped) with a
// tool requiring a file and one requiring a check: both are disabled
// with the reason, left out of GET /v1/tools, the OpenAI export, MCP
// tools/list and matching, and refuse calls; once the file appears and
// the check passes they come back without a restart. The check runs in
// the sandbox, so what it looks at lies outside /tmp (private there).
func TestServeRequires(t *testing.T) {
	t.Parallel()
	host := proctest.HostDir(t)
	conf, flag := filepath.Join(host, "ready.conf"), filepath.Join(host, "flag")
	tools := t.TempDir()
	putTool(t, tools, "needs-file", testTool("needs-file", "intent: print the ready configuration\nmethod: run\nexecutor: shell\n"+
		"argv: [cat, "+conf+"]\nparams_schema: {}\nrequires:\n  files: ["+conf+"]\ntags: [config]\n"))
	checkCmd := "test -e " + flag + " || { echo 'no flag yet' >&2; exit 3; }"
	putTool(t, tools, "needs-check", testTool("needs-check", "intent: say the flag is up\nmethod: run\nexecutor: shell\n"+
		"argv: [echo, up]\nparams_schema: {}\nrequires:\n  programs: [sh]\n  check: [sh, -c, \""+checkCmd+"\"]\n"))
	putTool(t, tools, "plain", testTool("plain", "intent: print the date\nmethod: run\nexecutor: shell\nargv: [date]\nparams_schema: {}\n"))
	d := startDaemon(t, nil, "--tools", tools, "--health-schedule", "@every 1s")

	st := d.tool(t, "needs-file")
	if want := "file " + conf + " not readable: no such file or directory"; st.Status != catalog.Disabled || st.Reason != want {
		t.Errorf("needs-file = %s %q; want disabled %q", st.Status, st.Reason, want)
	}
	st = d.tool(t, "needs-check")
	if want := "check [sh -c " + checkCmd + "] exited 3: no flag yet"; st.Status != catalog.Disabled || st.Reason != want {
		t.Errorf("needs-check = %s %q; want disabled %q", st.Status, st.Reason, want)
	}
	for _, path := range []string{"/v1/tools", "/v1/tools?format=openai"} {
		if got := d.listed(t, path); !slices.Equal(got, []string{"plain"}) {
			t.Errorf("GET %s lists %v; want [plain]", path, got)
		}
	}
	if got := d.listed(t, "/v1/tools?tag=config"); len(got) != 0 {
		t.Errorf("GET /v1/tools?tag=config lists %v; want nothing while needs-file is disabled", got)
	}
	code, res := d.call(t, "needs-file", map[string]any{})
	if code != http.StatusConflict || res.Status != dispatch.Disabled || !strings.Contains(res.Error, conf+" not readable") {
		t.Errorf("call needs-file = %d %s %q; want 409 disabled naming the file", code, res.Status, res.Error)
	}
	cs, err := mcpClient(make(chan struct{}, 1)).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect /mcp: %v", err)
	}
	defer cs.Close()
	pollUntil(t, "plain in MCP tools/list", func() bool { return slices.Contains(listNames(t, cs), "plain") })
	if got := listNames(t, cs); slices.Contains(got, "needs-file") || slices.Contains(got, "needs-check") || !slices.Contains(got, "plain") {
		t.Errorf("MCP tools/list = %v; want plain and neither disabled tool", got)
	}
	matchNames := func(intent string) []string {
		_, b := d.request(t, "POST", "/v1/match", `{"intent":"`+intent+`"}`)
		var m catalog.MatchResponse
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("POST /v1/match: %s: %v", b, err)
		}
		var names []string
		for _, c := range m.Candidates {
			names = append(names, c.Name)
		}
		return names
	}
	if got := matchNames("print the ready configuration"); slices.Contains(got, "needs-file") {
		t.Errorf("POST /v1/match offers the disabled needs-file: %v", got)
	}

	if err := os.WriteFile(conf, []byte("ready\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d.waitStatus(t, "needs-file", catalog.Enabled)
	d.waitStatus(t, "needs-check", catalog.Enabled)
	if diff := cmp.Diff([]string{"needs-check", "needs-file", "plain"}, d.listed(t, "/v1/tools")); diff != "" {
		t.Errorf("GET /v1/tools once the prerequisites exist (-want +got):\n%s", diff)
	}
	if got := d.listed(t, "/v1/tools?tag=config"); !slices.Equal(got, []string{"needs-file"}) {
		t.Errorf("GET /v1/tools?tag=config lists %v; want [needs-file]", got)
	}
	// The MCP server publishes a snapshot's tools once it sees the swap,
	// a moment after the API does: wait for it (a deadline, not a margin).
	pollUntil(t, "both tools back in MCP tools/list once the prerequisites exist", func() bool {
		got := listNames(t, cs)
		return slices.Contains(got, "needs-file") && slices.Contains(got, "needs-check")
	})
	if got := matchNames("print the ready configuration"); !slices.Contains(got, "needs-file") {
		t.Errorf("POST /v1/match once the file exists = %v; want needs-file offered", got)
	}
	if code, res := d.call(t, "needs-file", map[string]any{}); code != 200 || res.Status != dispatch.Success || res.Output != "ready\n" {
		t.Errorf("call needs-file = %d %s %q %q; want 200 success %q", code, res.Status, res.Output, res.Error, "ready\n")
	}
}

// TestValidateRejectsBadRequiresAndTags: validate names the file, line,
// column and field of a bad requires or tags, and fails.
func TestValidateRejectsBadRequiresAndTags(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	writeTool(t, tools, "bad-requires", "method: run\nexecutor: shell\nargv: [kubectl]\nparams_schema: {}\n"+
		"requires:\n  programs: [kubectl, \"\"]\n  files: [etc/kubeconfig]\n  chek: [kubectl, version]\n")
	writeTool(t, tools, "bad-tags", "method: run\nexecutor: shell\nargv: [date]\nparams_schema: {}\ntags: [Read-Only, ok, ok]\n")
	writeTool(t, tools, "remote-requires", "method: exec\nexecutor: gatekeeper\n"+
		"params_schema:\n  cmd: { type: string, required: true }\nrequires: { programs: [kubectl] }\n")
	out, _, code := runCLI(t, nil, "validate", "--state", t.TempDir(), tools)
	if code != exitFailed {
		t.Errorf("validate: exit %d; want %d\n%s", code, exitFailed, out)
	}
	for _, want := range []string{
		tools + `/bad-requires/TOOL.hdlp:12:23: requires.programs[1]: want a program name like kubectl, or an absolute path like /opt/tool/bin/tool, got an empty string`,
		tools + `/bad-requires/TOOL.hdlp:13:11: requires.files[0]: not a clean absolute path`,
		tools + `/bad-requires/TOOL.hdlp:14:3: requires.chek: unknown key; want one of programs, files, check (did you mean "check"?)`,
		tools + `/bad-tags/TOOL.hdlp:11:8: tags[0]: invalid tag;`,
		`(did you mean "read-only"?)`,
		tools + `/bad-tags/TOOL.hdlp:11:23: tags[2]: duplicate tag`,
		tools + `/remote-requires/TOOL.hdlp:11:1: requires: only allowed with executor shell; got executor gatekeeper`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks\n%s\ngot:\n%s", want, out)
		}
	}
}

// TestListTag: `toolagent list --tag` keeps the tools carrying every tag
// given, repeated or as a comma list, and shows their tags; a malformed
// tag is a usage error.
func TestListTag(t *testing.T) {
	t.Parallel()
	tools, state := nativeTools(t), t.TempDir()
	list := func(args ...string) []string {
		t.Helper()
		out, errOut, code := runCLI(t, nil, append([]string{"list", "--tools", tools, "--state", state}, args...)...)
		var l struct {
			Tools []struct {
				Name string   `json:"name"`
				Tags []string `json:"tags"`
			} `json:"tools"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
			t.Fatalf("list %v: exit %d\n%s%s", args, code, out, errOut)
		}
		var names []string
		for _, tl := range l.Tools {
			if len(tl.Tags) == 0 {
				t.Errorf("list %v: %s shows no tags", args, tl.Name)
			}
			names = append(names, tl.Name)
		}
		return names
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--tag", "read-only"}, []string{"file-read", "git-ops"}},
		{[]string{"--tag", "git,read-only"}, []string{"git-ops"}},
		{[]string{"--tag", "files", "--tag", "write"}, []string{"file-write"}},
		{[]string{"--tag", "network"}, []string{"http-request"}},
		{[]string{"--tag", "deploy"}, nil},
		{nil, []string{"file-read", "file-write", "git-ops", "http-request", "shell-exec"}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, list(tc.args...)); diff != "" {
			t.Errorf("list %v (-want +got):\n%s", tc.args, diff)
		}
	}
	if _, errOut, code := runCLI(t, nil, "list", "--tools", tools, "--state", state, "--tag", "Git"); code != exitUsage || !strings.Contains(errOut, `"Git" is not a tag`) {
		t.Errorf("list --tag Git: exit %d %q; want a usage error naming the tag", code, errOut)
	}
}
