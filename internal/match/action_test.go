package match

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// conceptID returns the vocabulary index of a concept key ("@12").
func conceptID(key string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(key, "@"))
	return n
}

// TestActionDecidesFamily: in a deploy/rollback family, a request to roll
// back lowers the members whose title offers another action (deploy) and
// leaves the one that offers it as it was, and a request to deploy leaves
// the deploy tool as it was; the verdict (found) is the same with the
// check off (factor 1).
func TestActionDecidesFamily(t *testing.T) {
	docs := []Doc{
		{ID: "svc-deploy", Fields: []Field{{Name: "name", Text: "svc-deploy", Weight: 2.5}, {Name: "display", Text: "发布服务", Weight: 2.5}, {Name: "intent", Text: "Ship a chosen build of a service to an environment", Weight: 2}}},
		{ID: "svc-rollback", Fields: []Field{{Name: "name", Text: "svc-rollback", Weight: 2.5}, {Name: "display", Text: "回滚服务", Weight: 2.5}, {Name: "intent", Text: "把服务切回之前的稳定版本", Weight: 2}}},
		{ID: "disk-space", Fields: []Field{{Name: "display", Text: "磁盘空间", Weight: 2.5}, {Name: "intent", Text: "查看各挂载点的剩余空间", Weight: 2}}},
	}
	on := New(docs, nil)
	off := on.WithOffAction(1)
	score := func(r Result, id string) float64 {
		for _, c := range r.Candidates {
			if c.ID == id {
				return c.Score
			}
		}
		return 0
	}
	for _, c := range []struct {
		q, right, wrong string
	}{
		{"roll back the build in the environment", "svc-rollback", "svc-deploy"},
		{"把服务的 build 回滚", "svc-rollback", "svc-deploy"},
		{"deploy the service build", "svc-deploy", ""},
	} {
		a, b := on.Match(c.q, 3), off.Match(c.q, 3)
		if a.Found != b.Found {
			t.Errorf("Match(%q): found %v with the action check, %v without; want the same verdict", c.q, a.Found, b.Found)
		}
		if ra, rb := score(a, c.right), score(b, c.right); ra != rb || ra == 0 {
			t.Errorf("Match(%q): %s scores %.3f with the check, %.3f without; want the same, above 0", c.q, c.right, ra, rb)
		}
		if c.wrong != "" {
			if wa, wb := score(a, c.wrong), score(b, c.wrong); !(wa < wb) {
				t.Errorf("Match(%q): %s (another action) scores %.3f with the check, %.3f without; want lower", c.q, c.wrong, wa, wb)
			}
		}
	}
	if r := on.Match("把服务的 build 回滚", 3); r.Candidates[0].ID != "svc-rollback" {
		t.Errorf("Match(把服务的 build 回滚) = %+v; want svc-rollback first", r.Candidates)
	}
}

// familyDocs is a catalog of three families whose members differ by their
// action (deploy and roll back, create and close an issue, commit and
// list the log), in both languages, and a tool of no family. The deploy
// tool's description shares more of "revert the production build" than
// the rollback tool's, as in the development set.
func familyDocs() []Doc {
	tool := func(id, display, intent, why string) Doc {
		d := Doc{ID: id, Fields: []Field{
			{Name: "name", Text: strings.ReplaceAll(id, "-", " "), Weight: 2.5},
			{Name: "display", Text: display, Weight: 2.5},
			{Name: "intent", Text: intent, Weight: 2},
		}}
		if why != "" {
			d.Fields = append(d.Fields, Field{Name: "why", Text: why, Weight: 0.7, Context: true})
		}
		return d
	}
	return []Doc{
		tool("app-deploy", "发布应用", "Roll out a chosen build of an application (tag, branch or commit) to staging or production and wait until its health check passes.", "Releases must be repeatable and recorded."),
		tool("app-rollback", "版本回退", "新版本出问题时，把应用切回之前某个稳定的发布包并重新拉起，只换程序、不动数据库。", "线上出故障时，最快的止血办法往往是先退回上一版。"),
		tool("issue-create", "新建问题单", "File a new issue in a repository's tracker with a title and a body.", ""),
		tool("issue-close", "关闭问题单", "把仓库里一个已有的问题单标记为已解决并关闭，可附一句说明。", ""),
		tool("git-commit", "提交改动", "Record the staged changes of a repository as a new commit with a message.", ""),
		tool("git-log", "提交历史", "列出某个分支最近的提交：哈希、作者、时间和说明。", ""),
		tool("disk-space", "磁盘空间", "查看各挂载点的剩余空间。", ""),
	}
}

// TestActionDecidesFamilies: in each family the request's action picks
// the member, in English and Chinese, synonyms included (revert, undo, 回退
// for a rollback; 关掉 for close; 列出 for list), and where the member of
// another action shares more of the request's other words, the check is
// what decides: without it the wrong member ranks first. Each candidate
// the check judged says so in Matched.
func TestActionDecidesFamilies(t *testing.T) {
	on := New(familyDocs(), nil)
	off := on.WithoutActionCheck()
	for _, c := range []struct {
		q, want string
		decides bool // without the check, another member ranks first
	}{
		{"revert the production build", "app-rollback", true},
		{"回滚生产环境的构建", "app-rollback", true},
		{"undo the production build", "app-rollback", true},
		{"把生产环境的构建回退一下", "app-rollback", true},
		{"revert the last deploy of the app", "app-rollback", false},
		{"把上次的发布回滚", "app-rollback", false},
		{"deploy the build to production", "app-deploy", false},
		{"把这个构建发布到生产环境", "app-deploy", false},
		{"open a new issue in the repo about the login bug", "issue-create", false},
		{"在仓库里新建一个问题单", "issue-create", false},
		{"close the issue in the repo about the login bug", "issue-close", false},
		{"把仓库里那个问题单关掉", "issue-close", false},
		{"commit the staged changes of the repo", "git-commit", false},
		{"把仓库里暂存的改动提交一下", "git-commit", false},
		{"show the commit history of the repo", "git-log", false},
		{"列出仓库最近的提交", "git-log", true},
	} {
		r := on.Match(c.q, 3)
		if len(r.Candidates) == 0 || r.Candidates[0].ID != c.want {
			t.Errorf("Match(%q) = %+v; want %s first", c.q, r.Candidates, c.want)
			continue
		}
		if c.decides {
			ro := off.Match(c.q, 3)
			if len(ro.Candidates) == 0 || ro.Candidates[0].ID == c.want {
				t.Errorf("Match(%q) without the action check = %+v; want another first (the case no longer tests the check)", c.q, ro.Candidates)
				continue
			}
			wrong := ro.Candidates[0].ID
			for _, rc := range r.Candidates {
				if rc.ID == wrong && !slices.ContainsFunc(rc.Matched, func(m string) bool { return strings.Contains(m, "@action:") }) {
					t.Errorf("Match(%q): %s matched %v; want an @action:other or @action:below entry", c.q, wrong, rc.Matched)
				}
			}
		}
	}
	r := on.Match("revert the production build", 3)
	if want := []string{"revert@action"}; !slices.Contains(r.Candidates[0].Matched, want[0]) || !slices.Contains(r.Candidates[1].Matched, "revert@action:below") {
		t.Errorf("Match(revert the production build) = %+v; want %s first, with revert@action, and app-deploy with revert@action:below", r.Candidates, "app-rollback")
	}
}

// TestNoActionUnaffected: a request that names no action ranks and scores
// every candidate as it does with the action check off, and no candidate
// says anything of actions.
func TestNoActionUnaffected(t *testing.T) {
	on := New(familyDocs(), nil)
	off := on.WithoutActionCheck()
	for _, q := range []string{"production build of the app", "生产环境的构建版本", "the repo's issue tracker", "仓库的提交记录", "磁盘空间"} {
		a, b := on.Match(q, 5), off.Match(q, 5)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("Match(%q) = %+v with the action check, %+v without; want the same", q, a, b)
		}
		for _, c := range a.Candidates {
			for _, m := range c.Matched {
				if strings.Contains(m, "@action") {
					t.Errorf("Match(%q): %s matched %v; want no action entry", q, c.ID, c.Matched)
				}
			}
		}
	}
}

// TestNounReading: an action read as a noun (after a determiner, a
// possessive or an object, after 的 or 上次) asks for nothing when the request asks for
// another action, and still asks when it is the request's only one.
func TestNounReading(t *testing.T) {
	an := analyzer{v: DefaultVocab()}
	asks := func(q, label string) bool {
		toks := an.analyze(nil, q, true)
		nounActions(toks)
		for _, tk := range toks {
			if tk.kind == kindConcept && tk.class == Action && !tk.noun && an.v.concepts[conceptID(tk.key)].label == label {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		q, label string
		want     bool
	}{
		{"revert the last deploy of api-gateway", "deploy", false},
		{"revert the last deploy of api-gateway", "rollback", true},
		{"roll back to yesterday's release", "deploy", false},
		{"undo the production release of billing", "deploy", false},
		{"undo the production release of billing", "rollback", true},
		{"把上次的发布回滚", "deploy", false},
		{"把上次的发布回滚", "rollback", true},
		{"do the deploy", "deploy", true},
		{"deploy the build", "deploy", true},
		{"create a new issue", "create", true},
		{"刚和前端一起定位完，帮我回复一下", "find", false},
	} {
		if got := asks(c.q, c.label); got != c.want {
			t.Errorf("%q asks for %s = %v; want %v", c.q, c.label, got, c.want)
		}
	}
}
