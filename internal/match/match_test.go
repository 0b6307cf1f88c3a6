package match

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStem(t *testing.T) {
	tests := []struct{ in, want string }{
		{"caresses", "caress"}, {"ponies", "poni"}, {"cats", "cat"},
		{"feed", "feed"}, {"agreed", "agre"}, {"plastered", "plaster"},
		{"motoring", "motor"}, {"sing", "sing"}, {"hopping", "hop"},
		{"filing", "file"}, {"happy", "happi"}, {"relational", "relat"},
		{"conditional", "condit"}, {"generalization", "gener"},
		{"restarted", "restart"}, {"restarting", "restart"}, {"logs", "log"},
		{"logging", "log"}, {"certificates", "certif"}, {"certificate", "certif"},
		{"deployment", "deploy"}, {"listening", "listen"}, {"a1", "a1"}, {"go", "go"},
	}
	for _, tt := range tests {
		if got := stem(tt.in); got != tt.want {
			t.Errorf("stem(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAnalyze(t *testing.T) {
	v, err := ParseVocab(strings.NewReader(`
the, a, 的, 一下, 看下 ; 0
log, logs, 日志
restart, bounce, 重启
error, errors, 报错, 错误
last lines, 最后几行
host, server, 主机
different, 不同
url, 网址
path, 路径
`))
	if err != nil {
		t.Fatal(err)
	}
	an := analyzer{v: v}
	label := func(tk token) string {
		if tk.kind == kindConcept {
			for _, c := range v.concepts {
				if c.key == tk.key {
					return "C:" + c.label
				}
			}
		}
		return tk.key
	}
	tests := []struct {
		name, in string
		query    bool
		want     []string
	}{
		{"mixed query", "看下 nginx 的 error log 最后几行", true, []string{"nginx", "C:error", "C:log", "C:last lines"}},
		{"english stems and phrase", "Bounce the servers, check errors in last lines", true, []string{"C:restart", "C:host", "check", "C:error", "in", "C:last lines"}},
		{"chinese leftovers become bigrams and unigrams", "重启订单服务", true, []string{"C:restart", "订单", "单服", "服务", "~订", "~单", "~服", "~务"}},
		{"documents keep unigrams of vocabulary words", "重启", false, []string{"C:restart", "~重", "~启"}},
		{"patterns become their class", "curl https://x.example.com/a then web-02 and /var/log/x", true, []string{"curl", "C:url", "then", "C:host", "and", "C:path", "var", "C:log"}},
		{"compound identifiers", "api-gateway", true, []string{"api", "gatewai"}},
		{"full-width folding", "ＬＯＧ", true, []string{"C:log"}},
		{"homophone misspelling", "重起", true, []string{"C:restart"}},
		{"homophone only in queries", "重起", false, []string{"重起", "~重", "~起"}},
		{"homophone needs a word on its own", "重起来", true, []string{"重起", "起来", "~重", "~起", "~来"}},
		{"a negation is no misspelling", "不通", true, []string{"不通", "~不", "~通"}},
	}
	for _, tt := range tests {
		var got []string
		for _, tk := range an.analyze(nil, tt.in, tt.query) {
			got = append(got, label(tk))
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: analyze(%q) mismatch (-want +got):\n%s", tt.name, tt.in, diff)
		}
	}
	// Parts of compound identifiers weigh less than words.
	toks := an.analyze(nil, "api-gateway", true)
	if toks[0].weight >= kindWeight[kindWord] {
		t.Errorf("analyze(api-gateway) weight = %v, want < %v", toks[0].weight, kindWeight[kindWord])
	}
}

// TestAnalyzeDescriptive checks that verbs which describe rather than
// request keep matching but are no longer actions.
func TestAnalyzeDescriptive(t *testing.T) {
	v, err := ParseVocab(strings.NewReader("write, 写 ; 1 action\nrestart, 重启 ; 1 action\nfile, 文件 ; 1 object\n"))
	if err != nil {
		t.Fatal(err)
	}
	an := analyzer{v: v}
	tests := []struct {
		in   string
		want Class // class of the first token
	}{
		{"写一下文件", Action},
		{"文件里写的是什么", Object}, // first token is 文件; checked below
		{"restart it", Action},
		{"who restarted it", Other},
		{"重启过吗", Other},
		{"谁写的", Other},
	}
	for _, tt := range tests {
		toks := an.analyze(nil, tt.in, true)
		if len(toks) == 0 {
			t.Errorf("analyze(%q) = no tokens", tt.in)
			continue
		}
		if got := toks[0].class; got != tt.want {
			t.Errorf("analyze(%q)[0].class = %v, want %v", tt.in, got, tt.want)
		}
	}
	if toks := an.analyze(nil, "文件里写的是什么", true); len(toks) < 2 || toks[1].class != Other {
		t.Errorf("analyze(文件里写的是什么) = %+v, want 写 as Other", toks)
	}
}

// TestAnalyzeReadings checks how a verb's surroundings change what it asks
// for: a question about a text's content asks to read it, a verb read as a
// state asks for a status, and known words joined by '/' are alternatives.
func TestAnalyzeReadings(t *testing.T) {
	v, err := ParseVocab(strings.NewReader(`的, 是, 什么, 在, 不是, 怎么, the, is, it, an ; 0
write, 写 ; 1 action
read, 读 ; 1 action
status, 状态 ; 0.8 object
restart, 重启 ; 1 action
open ; 0.8 action
issue ; 1 object
pull request, pr ; 1 object
file, 文件 ; 1 object
`))
	if err != nil {
		t.Fatal(err)
	}
	an := analyzer{v: v}
	label := func(tk token) string {
		if tk.kind != kindConcept {
			return tk.key
		}
		for _, c := range v.concepts {
			if c.key == tk.key {
				return fmt.Sprintf("%s/%v/%.1f", c.label, tk.class, tk.weight)
			}
		}
		return tk.key
	}
	tests := []struct {
		name, in string
		want     []string
	}{
		{"content question", "文件里写的是什么", []string{"file/object/1.0", "read/action/1.0", "里", "~里"}},
		{"how it was written", "怎么写的", []string{"read/action/1.0"}},
		{"how to write is a request", "怎么写", []string{"write/action/1.0"}},
		{"a request to write", "写文件", []string{"write/action/1.0", "file/object/1.0"}},
		{"progressive is a state", "是不是一直在重启", []string{"restart/other/1.0", "status/other/0.4", "一直", "~一", "~直"}},
		{"now is no progressive", "现在重启", []string{"restart/action/1.0", "现", "~现"}},
		{"still open is a state", "is it still open", []string{"still", "open/other/0.8", "status/other/0.4"}},
		{"open an issue is a request", "open an issue", []string{"open/action/0.8", "issue/object/1.0"}},
		{"known words joined by a slash", "issue/PR", []string{"issue/object/1.0", "pull request/object/1.0"}},
		{"an identifier joined by a slash", "src/issue", []string{"src", "issue/other/0.5"}},
	}
	for _, tt := range tests {
		var got []string
		for _, tk := range an.analyze(nil, tt.in, true) {
			got = append(got, label(tk))
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: analyze(%q) mismatch (-want +got):\n%s", tt.name, tt.in, diff)
		}
	}
}

func TestTypoCorrect(t *testing.T) {
	known := map[string]bool{}
	for _, w := range []string{"launch", "issues", "memory", "restart", "certificate", "move", "table"} {
		known[w] = true
	}
	ti := newTypoIndex(known)
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"restar", "restart", true},
		{"memmory", "memory", true},
		{"cerificate", "certificate", true},
		{"isues", "issues", true},    // five letters, a dropped doubled letter
		{"lunch", "", false},         // five letters, one edit, but a real word
		{"movie", "", false},         // likewise
		{"tabel", "", false},         // short transposition: no guess
		{"restart", "restart", true}, // known words come back as they are
	}
	for _, tt := range tests {
		got, ok := ti.correct(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("correct(%q) = %q, %v, want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// TestContextField checks that an object found only in a document's
// context fields counts for less than the same object in a core field.
func TestContextField(t *testing.T) {
	mk := func(id string, context bool) Doc {
		return Doc{ID: id, Fields: []Field{
			{Name: "intent", Text: "schedule a recurring job", Weight: 2},
			{Name: "params", Text: "user: run the job as this user", Weight: 0.5, Context: context},
		}}
	}
	res := New([]Doc{mk("a-context", true), mk("b-core", false)}, nil).Match("a job for the deploy user", 2)
	if len(res.Candidates) != 2 || res.Candidates[0].ID != "b-core" || res.Candidates[1].Score >= res.Candidates[0].Score {
		t.Errorf("Match = %+v, want b-core first and a-context lower", res.Candidates)
	}
}

// TestOnlyAction checks that a request matched through its verb alone
// scores below one that also names what the document is about.
func TestOnlyAction(t *testing.T) {
	ix := New([]Doc{{ID: "file-write", Fields: []Field{{Name: "intent", Text: "Write text to a file on a server", Weight: 2}}}}, nil)
	poem, file := ix.Match("write me a poem", 1), ix.Match("write the config file", 1)
	if len(poem.Candidates) == 0 || len(file.Candidates) == 0 || poem.Found || poem.Candidates[0].Score >= file.Candidates[0].Score {
		t.Errorf("Match(write me a poem) = %+v, Match(write the config file) = %+v; want the first lower and not found", poem, file)
	}
}

func TestParseVocabErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"restart, 重启\nrestart, ; x", "vocab line 2: weight"},
		{"\n\n ; 1", "vocab line 3: no terms"},
		{"ok, fine\nlog日志", "vocab line 2: term \"log日志\" mixes"},
		{"restart ; -1", "vocab line 1: weight"},
		{"---", "vocab line 1: term \"---\" has no letters"},
		{"restart ; 1 verb", "vocab line 1: class \"verb\""},
		{"restart ; 1 action more", "vocab line 1: \"1 action more\" after ';'"},
	}
	for _, tt := range tests {
		_, err := ParseVocab(strings.NewReader(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseVocab(%q) error = %v, want containing %q", tt.in, err, tt.want)
		}
	}
}

func TestParseVocabClass(t *testing.T) {
	v, err := ParseVocab(strings.NewReader("restart, 重启 ; 1 action\nservice ; 0.8 object\nnightly ; 0.5\nsoon ; 0.4 other\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Class{Action, Object, Other, Other}
	for i, c := range v.concepts {
		if c.class != want[i] {
			t.Errorf("ParseVocab concept %q class = %v, want %v", c.label, c.class, want[i])
		}
	}
}

// TestAbsentAction checks that a request for an action no tool offers
// scores below the same request without it.
func TestAbsentAction(t *testing.T) {
	ix := New([]Doc{{ID: "alerts", Fields: []Field{{Name: "intent", Text: "List the alerts firing now", Weight: 2}}}}, nil)
	with := ix.Match("silence the disk alerts", 1)
	without := ix.Match("the disk alerts", 1)
	if len(with.Candidates) == 0 || len(without.Candidates) == 0 || with.Candidates[0].Score >= without.Candidates[0].Score*absentActionFactor {
		t.Errorf("Match(silence ...) = %+v, Match(without) = %+v; want the first below %v of the second", with, without, absentActionFactor)
	}
}

func TestDefaultVocabParses(t *testing.T) {
	if n := DefaultVocab().Len(); n < 200 {
		t.Errorf("DefaultVocab().Len() = %d, want >= 200 concepts", n)
	}
}

func TestLoadVocabExtends(t *testing.T) {
	docs := []Doc{
		{ID: "fleet-drain", Fields: []Field{{Name: "intent", Text: "把节点从集群调度中摘除", Weight: 2}}},
		{ID: "disk-space", Fields: []Field{{Name: "intent", Text: "Show free disk space", Weight: 2}}},
	}
	q := "cordon it"
	if got := New(docs, nil).Match(q, 1); len(got.Candidates) > 0 && got.Candidates[0].ID == "fleet-drain" {
		t.Fatalf("default vocab already matches %q; the test needs a word it lacks", q)
	}
	v, err := LoadVocab(strings.NewReader("cordon, drain node, 摘除\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := New(docs, v).Match(q, 1)
	if len(got.Candidates) == 0 || got.Candidates[0].ID != "fleet-drain" {
		t.Fatalf("Match(%q) with extra vocab = %+v, want fleet-drain first", q, got)
	}
	if want := "cordon@vocab:摘除"; !slices.Contains(got.Candidates[0].Matched, want) {
		t.Errorf("Match(%q).Matched = %v, want it to contain %q", q, got.Candidates[0].Matched, want)
	}
}

func TestMatchEdges(t *testing.T) {
	ix := New([]Doc{{ID: "a", Fields: []Field{{Name: "intent", Text: "restart a service"}}}}, nil)
	tests := []struct {
		name string
		q    string
		k    int
		want Result
	}{
		{"empty query", "", 3, Result{}},
		{"only stop words", "the 的 一下", 3, Result{}},
		{"k zero", "restart", 0, Result{}},
		{"nothing matches", "sourdough", 3, Result{Candidates: []Candidate{}}},
	}
	for _, tt := range tests {
		got := ix.Match(tt.q, tt.k)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: Match(%q, %d) mismatch (-want +got):\n%s", tt.name, tt.q, tt.k, diff)
		}
	}
	if got := New(nil, nil).Match("restart", 3); got.Found || len(got.Candidates) != 0 {
		t.Errorf("empty index Match = %+v, want nothing", got)
	}
	hi := ix.WithThreshold(1.01)
	if got := hi.Match("restart service", 1); got.Found || hi.Threshold() != 1.01 || ix.Threshold() != DefaultThreshold {
		t.Errorf("WithThreshold(1.01).Match = %+v (threshold %v, original %v), want not found and original unchanged", got, hi.Threshold(), ix.Threshold())
	}
}

// golden reads testdata/queries.txtar.
func golden(t *testing.T) (docs []Doc, queries [][2]string) {
	t.Helper()
	data, err := os.ReadFile("testdata/queries.txtar")
	if err != nil {
		t.Fatal(err)
	}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") {
			section = strings.TrimSuffix(strings.TrimPrefix(line, "-- "), " --")
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		switch section {
		case "docs":
			name, rest, _ := strings.Cut(line, ": ")
			intent, display, _ := strings.Cut(rest, " | ")
			docs = append(docs, Doc{ID: name, Fields: []Field{
				{Name: "name", Text: strings.ReplaceAll(name, "-", " "), Weight: 2.5},
				{Name: "display", Text: display, Weight: 2.5},
				{Name: "intent", Text: intent, Weight: 2},
			}})
		case "queries":
			q, want, ok := strings.Cut(line, " => ")
			if !ok {
				t.Fatalf("queries.txtar: bad line %q", line)
			}
			queries = append(queries, [2]string{q, want})
		}
	}
	return docs, queries
}

func TestGoldenRanking(t *testing.T) {
	docs, queries := golden(t)
	ix := New(docs, nil)
	for _, q := range queries {
		got := ix.Match(q[0], 3)
		want, foundOptional := strings.CutSuffix(q[1], "?")
		if want == "none" {
			if got.Found {
				t.Errorf("Match(%q) = found %+v, want none", q[0], got.Candidates)
			}
			continue
		}
		if !got.Found && !foundOptional || len(got.Candidates) == 0 || !slices.Contains(strings.Split(want, "|"), got.Candidates[0].ID) {
			t.Errorf("Match(%q) = %+v, want %s first and found", q[0], got, want)
			continue
		}
		c := got.Candidates[0]
		if c.Score <= 0 || c.Score > 1 || len(c.Matched) == 0 {
			t.Errorf("Match(%q) top = %+v, want a score in (0, 1] and a reason", q[0], c)
		}
	}
}

func TestMatchConcurrent(t *testing.T) {
	docs, queries := golden(t)
	ix := New(docs, nil)
	want := make([]Result, len(queries))
	for i, q := range queries {
		want[i] = ix.Match(q[0], 3)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i, q := range queries {
				if got := ix.Match(q[0], 3); !cmp.Equal(got, want[i]) {
					t.Errorf("concurrent Match(%q) differs from sequential", q[0])
				}
			}
		})
	}
	wg.Wait()
}

// TestExampleFieldOffersNothing: an Example field's words match like any
// field's, but a vocabulary concept that only examples hold is no
// operation the catalog offers. "before the migration" in a backup tool's
// example is context: the same text as a plain field lets "run the
// database migration now" find the backup tool; as an example it does
// not. Words that are no concept ("orders") and concepts a description
// holds ("back up") count the same either way.
func TestExampleFieldOffersNothing(t *testing.T) {
	index := func(example bool) *Index {
		return New([]Doc{
			{ID: "db-backup", Fields: []Field{
				{Name: "intent", Text: "back up a database to the backup bucket", Weight: 2},
				{Name: "examples", Text: "back up the orders db before the migration", Weight: 3, Example: example},
			}},
			{ID: "db-schema", Fields: []Field{{Name: "intent", Text: "show the schema of a database table", Weight: 2}}},
		}, nil)
	}
	plain, example := index(false), index(true)
	const q = "run the database migration now"
	if r := plain.Match(q, 3); !r.Found || r.Candidates[0].ID != "db-backup" {
		t.Fatalf("plain field: Match(%q) = found %v %+v; want db-backup found (the test's premise)", q, r.Found, r.Candidates)
	}
	if r := example.Match(q, 3); r.Found {
		t.Errorf("example field: Match(%q) = found %+v; want refused: only an example mentions a migration", q, r.Candidates)
	}
	const same = "back up the orders db"
	p, e := plain.Match(same, 1), example.Match(same, 1)
	if !e.Found || e.Candidates[0].ID != "db-backup" || math.Abs(p.Candidates[0].Score-e.Candidates[0].Score) > 1e-9 {
		t.Errorf("Match(%q) = %+v as an example, %+v as a plain field; want db-backup found with the same score", same, e.Candidates, p.Candidates)
	}
	if m := e.Candidates[0].Matched; !slices.Contains(m, "orders@examples") {
		t.Errorf("Match(%q).Matched = %q; want orders@examples", same, m)
	}
}

// TestStandout: a request that scores below the threshold against the one
// tool it touches, because most of its words are names no tool holds, is
// found when that tool stands out from the rest of the catalog; the same
// score among look-alike tools, or a match on the request's verbs alone,
// stays refused.
func TestStandout(t *testing.T) {
	grep := Doc{ID: "fs-grep", Fields: []Field{{Name: "intent", Text: "grep files on a server for a pattern", Weight: 2}}}
	others := []Doc{
		{ID: "svc-restart", Fields: []Field{{Name: "intent", Text: "restart a systemd service", Weight: 2}}},
		{ID: "disk-space", Fields: []Field{{Name: "intent", Text: "show free disk space", Weight: 2}}},
		{ID: "file-write", Fields: []Field{{Name: "intent", Text: "write text to a file on a server", Weight: 2}}},
	}
	const q = "grep files for kubelet flannel calico etcd cilium coredns"
	// The request's names weigh much, so its score is low for any
	// catalog; the threshold is raised so that the test does not depend on
	// how low (the floor follows it).
	ix := New(append([]Doc{grep}, others...), nil).WithThreshold(0.5)
	got, off := ix.Match(q, 3), ix.WithMargin(-1).Match(q, 3)
	if len(got.Candidates) == 0 || got.Candidates[0].ID != "fs-grep" || !got.Found {
		t.Fatalf("Match(%q) = %+v; want fs-grep found", q, got)
	}
	if s := got.Candidates[0].Score; s >= ix.Threshold() || off.Found {
		t.Fatalf("Match(%q): fs-grep scores %.3f (threshold %.2f), found without the rule %v; the test wants a score below the threshold that only the rule lets through", q, s, ix.Threshold(), off.Found)
	}
	// The same request among tools that all grep: the best stands out from
	// none of them.
	var alike []Doc
	for _, where := range []string{"on a server", "in service logs", "in a repository", "in a backup", "in the audit trail"} {
		alike = append(alike, Doc{ID: "grep " + where, Fields: []Field{{Name: "intent", Text: "grep files " + where + " for a pattern", Weight: 2}}})
	}
	if r := New(alike, nil).WithThreshold(0.5).Match(q, 3); r.Found || len(r.Candidates) == 0 || r.Candidates[0].Score < 0.68*0.5 {
		t.Errorf("among look-alikes Match(%q) = %+v; want refused with a score above the stand-out floor (the test's premise)", q, r)
	}
	// Verbs alone never stand out: alone in its catalog, the file-writing
	// tool scores above the floor for a poem, and is still refused.
	write := New(others[2:], nil)
	if r := write.Match("write me a poem", 3); r.Found || len(r.Candidates) == 0 || r.Candidates[0].Score < 0.68*write.Threshold() {
		t.Errorf("Match(write me a poem) = %+v; want refused with a score above the stand-out floor (the test's premise)", r)
	}
}

// TestNegligibleTerm: a term nearly every document holds is not looked
// up, so it makes no document a candidate on its own, while the
// documents that match the rest of the request rank as before.
func TestNegligibleTerm(t *testing.T) {
	var docs []Doc
	// 800 tools: with the background of specificity, a term all of them
	// hold falls below negligible from about 640.
	for i := range 800 {
		docs = append(docs, Doc{ID: fmt.Sprintf("svc-%03d", i), Fields: []Field{{Name: "intent", Text: "show the service " + strings.Repeat("x", 5) + string(rune('a'+i%26)) + string(rune('a'+i/26%26))}}})
	}
	docs = append(docs, Doc{ID: "restart", Fields: []Field{{Name: "intent", Text: "restart the service"}}})
	ix := New(docs, nil)
	r := ix.Match("restart the service", 3)
	if len(r.Candidates) != 1 || r.Candidates[0].ID != "restart" {
		t.Errorf("Match(restart the service) = %+v; want only the restarting tool: every tool holds \"service\"", r.Candidates)
	}
}
