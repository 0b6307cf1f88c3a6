package catalog

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/match"
)

// matchCase is a request and the tool that must come first and be found,
// or "" when no tool fits (found must be false).
type matchCase struct{ q, want string }

func checkMatches(t *testing.T, name string, tools []*hldp.Tool, cases []matchCase) {
	t.Helper()
	docs := make([]match.Doc, len(tools))
	for i, tl := range tools {
		docs[i] = ToolDoc(tl)
	}
	ix := match.New(docs, nil)
	for _, c := range cases {
		r := ix.Match(c.q, 3)
		switch {
		case c.want == "" && r.Found:
			t.Errorf("%s: Match(%q) = found %+v, want no tool", name, c.q, r.Candidates)
		case c.want != "" && (!r.Found || len(r.Candidates) == 0 || r.Candidates[0].ID != c.want):
			t.Errorf("%s: Match(%q) = found %v %+v, want %s first and found (threshold %.2f)", name, c.q, r.Found, r.Candidates, c.want, ix.Threshold())
		}
	}
}

var (
	svcRestart = &hldp.Tool{Name: "svc-restart", Display: "重启服务", Intent: "restart a systemd service on the host", Method: "run", Executor: hldp.Shell}
	svcStatus  = &hldp.Tool{Name: "svc-status", Display: "服务状态", Intent: "show whether a systemd service is running", Method: "run", Executor: hldp.Shell}
)

// TestMatchTwoTools: a score is comparable across catalog sizes, so a
// 2-tool catalog answers the requests its tools plainly fit. With plain
// BM25 idf every request here scored below the threshold (the exact intent
// sentence 0.339 < 0.34).
func TestMatchTwoTools(t *testing.T) {
	checkMatches(t, "2 tools", []*hldp.Tool{svcRestart, svcStatus}, []matchCase{
		{"restart the nginx service", "svc-restart"},
		{"restart a service", "svc-restart"},
		{"重启服务", "svc-restart"},
		{"restart a systemd service on the host", "svc-restart"},
		{"is nginx running", "svc-status"},
		{"write me a poem", ""},
		{"今天天气怎么样", ""},
	})
}

// TestMatchOneTool: a 1-tool catalog finds its tool for the tool's own
// intent sentence.
func TestMatchOneTool(t *testing.T) {
	checkMatches(t, "1 tool", []*hldp.Tool{svcRestart}, []matchCase{
		{svcRestart.Intent, "svc-restart"},
		{"write me a poem", ""},
	})
	checkMatches(t, "1 tool", []*hldp.Tool{svcStatus}, []matchCase{{svcStatus.Intent, "svc-status"}})
}

// TestMatchNativeTools runs the tools shipped in native-repo (5 tools).
func TestMatchNativeTools(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "native-repo", "tools", "*", hldp.FileName))
	if err != nil || len(paths) == 0 {
		t.Skipf("native-repo/tools is absent: %v", err)
	}
	var tools []*hldp.Tool
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tl, err := hldp.Parse(p, data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		tools = append(tools, tl)
	}
	checkMatches(t, "native-repo", tools, []matchCase{
		{"run the command uptime", "shell-exec"},
		{"执行一条命令", "shell-exec"},
		{"show me the last commits", "git-ops"},
		{"查看最近的提交记录", "git-ops"},
		{"read notes/todo.txt", "file-read"},
		{"读取文件内容", "file-read"},
		{"save this text to a file", "file-write"},
		{"把内容写入文件", "file-write"},
		{"fetch https://example.com", "http-request"},
		{"发一个 HTTP 请求", "http-request"},
		{"订一张去上海的机票", ""},
		{"write a poem about autumn", ""},
	})
}

// TestExampleTeachesWords: an example added to a tool makes a request in
// its words find that tool, in English and in Chinese, where the same
// catalog without it found nothing; the other tools' requests and an
// off-topic one are answered as before.
func TestExampleTeachesWords(t *testing.T) {
	logs := &hldp.Tool{Name: "svc-logs", Display: "服务日志", Intent: "show the recent log lines of a systemd service", Method: "run", Executor: hldp.Shell}
	taught := *svcRestart
	taught.Ext = &hldp.Ext{Examples: []string{"the api is wedged again, kick it", "api 又卡死了，踢一下"}}
	requests := []string{"nginx is wedged, kick it", "nginx 卡死了，踢一下", "kick the wedged worker"}
	for _, q := range requests {
		if r := match.New([]match.Doc{ToolDoc(svcRestart), ToolDoc(svcStatus), ToolDoc(logs)}, nil).Match(q, 3); r.Found {
			t.Fatalf("without examples Match(%q) = found %+v; the test needs a request the tools' own text does not answer", q, r.Candidates)
		}
	}
	cases := []matchCase{{"is nginx running", "svc-status"}, {"write me a poem", ""}}
	for _, q := range requests {
		cases = append(cases, matchCase{q, "svc-restart"})
	}
	checkMatches(t, "with examples", []*hldp.Tool{&taught, svcStatus, logs}, cases)
}

// TestToolDocExamples: each example is a field of its own, marked Example,
// weighted above every other field.
func TestToolDocExamples(t *testing.T) {
	tool := *svcRestart
	tool.Keywords = []string{"bounce"}
	tool.Why = "services hang"
	tool.Ext = &hldp.Ext{Examples: []string{"kick nginx", "重启一下 api"}}
	var got []string
	var top, other float64
	for _, f := range ToolDoc(&tool).Fields {
		if f.Example {
			got = append(got, f.Name+":"+f.Text)
			top = max(top, f.Weight)
		} else {
			other = max(other, f.Weight)
		}
	}
	if want := []string{"examples:kick nginx", "examples:重启一下 api"}; !slices.Equal(got, want) {
		t.Errorf("ToolDoc example fields = %q, want %q", got, want)
	}
	if top <= other {
		t.Errorf("examples weigh %v, other fields up to %v; want examples the strongest field", top, other)
	}
}
