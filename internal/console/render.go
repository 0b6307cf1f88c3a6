package console

import (
	"bytes"
	"html/template"
	"io"
	"iter"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolagent/toolagent/internal/dispatch"
)

// messages are the interface texts, by language; tool data is shown as
// written.
var messages = map[string]map[string]string{
	"en": {
		"title": "toolagent console", "nav_catalog": "Catalog", "nav_approvals": "Approvals", "nav_status": "Status",
		"signout": "Sign out", "signedin": "signed in as", "search": "Search by intent", "search_button": "Search",
		"callable": "Callable tools", "other": "Disabled, failed and stale tools", "candidates": "Candidates",
		"nofit": "No tool fits", "score": "score", "matched": "matched", "name": "Name", "display": "Display name",
		"status": "Status", "executor": "Executor", "reason": "Reason", "revision": "Revision", "signed": "Signed by", "commit": "commit",
		"definition": "Definition", "schema": "JSON Schema", "try": "Try a call", "dryrun": "Dry run", "run": "Run",
		"result": "Result", "output": "Output", "stderr": "Stderr", "exit_code": "Exit code", "duration": "Duration",
		"truncated": "Truncated", "error": "Error", "required": "required",
		"pending": "Waiting for a decision", "decided": "Decided", "none": "Nothing here.",
		"tool": "Tool", "params": "Params", "params_hash": "Params hash", "rule": "Held by", "asked_by": "Asked by",
		"time_left": "Time left", "grant": "Runs with", "approve": "Approve", "deny": "Deny",
		"edit": "Approve with these params (edit to change them)", "decider": "Decided by", "changes": "Edited params",
		"asked": "asked", "approved": "approved", "login": "Sign in", "token": "API token", "login_button": "Sign in",
		"login_help": "Paste an API token of this daemon (the operator token is in STATE/operator.token). It is checked once and never stored in the browser.",
		"version":    "Version", "sandbox": "Sandbox", "reload": "Reload status", "tools": "Tools",
		"err.signin": "sign in first", "err.csrf": "refused: the form's CSRF token is missing or wrong; reload the page",
		"err.token": "that token is not one of this daemon's", "err.once": "this sign-in link was used or has expired; restart the daemon for a new one",
		"err.notool": "no tool named %q is registered in the repository", "err.role": "refused: your token's role does not allow this",
		"err.notloaded": "the catalog is not loaded yet", "err.noqueue": "this daemon has no approval queue",
		"live":        "This list updates by itself.",
		"nav_history": "History", "tags": "Tags", "executors": "Executors", "on_server": "on the git server", "webhook": "Last push webhook", "err.norun": "no such call is kept (the console keeps the last 256 results)", "problems": "Files that do not load", "time": "Time", "kind": "Kind", "caller": "Caller", "filter": "Filter",
		"err.nohistory": "this daemon keeps no audit file",
		"confirm":       "Confirm and run", "withdraw": "Withdraw", "approval": "Approval",
		"own_help":  "You asked for this call yourself. Check what will run; confirming runs it exactly as asked, with these params.",
		"err.own":   "refused: you asked for this call, and only the operator confirms their own calls; sign in as the operator (the one-time link the daemon printed, or the token in STATE/operator.token), or ask another approver",
		"nohistory": "history unavailable: this daemon does not read the tools' git history", "err.noapproval": "no such approval request",
		"err.operator": "refused: only the operator may do this; sign in with the operator token (STATE/operator.token) or the one-time link the daemon printed",
		"all":          "all", "policy": "Policy", "timeout": "timeout", "max_output": "output up to", "require_confirm": "every call needs an approval",
		"requires": "Requires", "examples": "Examples", "why": "Why", "type": "Type", "default": "Default",
		"git_history": "History in git", "from": "From", "to": "To", "author": "Author", "message": "Message",
		"signed_unchecked": "signed (not checked: no trust policy)", "compare": "Compare the two chosen revisions",
		"log_more": "Older commits are not listed.", "recent_calls": "Recent calls", "nodiff": "No change in this folder between these revisions.",
		"newer": "newer", "older": "older", "page": "page", "dups": "the same call asked more than once", "age": "Asked",
		"expires": "Expires", "ago": "ago", "in": "in", "expired": "expired", "cannot_decide": "You cannot decide this call: it waits for an approver.",
		"details": "details", "note": "Note", "source": "Source", "last_sync": "Last sync", "next_sync": "Next sync",
		"sync_now": "Sync now", "command": "Will run", "diff_cut": "The diff is longer than this page shows; it is cut here", "sync_done": "Synced.", "sync_asked": "Sync asked; it is still running.", "host": "This host",
		"open_help": "Anonymous visitors can use this console on the loopback default; sign in as the operator with the one-time link the daemon printed at start, or with a token.",
	},
	"zh": {
		"title": "toolagent 控制台", "nav_catalog": "工具目录", "nav_approvals": "审批", "nav_status": "状态",
		"signout": "退出", "signedin": "当前身份", "search": "按意图搜索", "search_button": "搜索",
		"callable": "可调用的工具", "other": "已停用、失败或过期的工具", "candidates": "候选工具",
		"nofit": "没有合适的工具", "score": "得分", "matched": "命中", "name": "名称", "display": "显示名",
		"status": "状态", "executor": "执行器", "reason": "原因", "revision": "版本", "signed": "签名者", "commit": "提交",
		"definition": "定义", "schema": "JSON Schema", "try": "试调用", "dryrun": "预演", "run": "执行",
		"result": "结果", "output": "输出", "stderr": "标准错误", "exit_code": "退出码", "duration": "耗时",
		"truncated": "已截断", "error": "错误", "required": "必填",
		"pending": "等待审批", "decided": "已决定", "none": "暂无。",
		"tool": "工具", "params": "参数", "params_hash": "参数哈希", "rule": "拦截规则", "asked_by": "发起者",
		"time_left": "剩余时间", "grant": "运行权限", "approve": "批准", "deny": "拒绝",
		"edit": "按这些参数批准（可修改）", "decider": "决定者", "changes": "修改过的参数",
		"asked": "原参数", "approved": "批准的参数", "login": "登录", "token": "API 令牌", "login_button": "登录",
		"login_help": "粘贴本守护进程的一个 API 令牌（操作员令牌在 STATE/operator.token）。令牌只校验一次，不会保存在浏览器里。",
		"version":    "版本", "sandbox": "沙箱", "reload": "加载状态", "tools": "工具",
		"err.signin": "请先登录", "err.csrf": "已拒绝：表单的 CSRF 令牌缺失或错误，请刷新页面",
		"err.token": "这个令牌不属于本守护进程", "err.once": "这个登录链接已用过或已过期；重启守护进程可得到新的链接",
		"err.notool": "仓库里没有名为 %q 的工具", "err.role": "已拒绝：你的令牌角色不允许这个操作",
		"err.notloaded": "工具目录尚未加载", "err.noqueue": "本守护进程没有审批队列",
		"live":        "列表会自动更新。",
		"nav_history": "历史", "tags": "标签", "executors": "执行器", "on_server": "在 git 服务器上查看", "webhook": "最近一次推送 webhook", "err.norun": "没有保留这次调用的结果（控制台只保留最近 256 个结果）", "problems": "无法加载的文件", "time": "时间", "kind": "类别", "caller": "调用者", "filter": "筛选",
		"err.nohistory": "本守护进程没有审计文件",
		"confirm":       "确认并执行", "withdraw": "撤回", "approval": "审批",
		"own_help":  "这是你自己发起的调用。请核对将要执行的内容；确认后它将完全按原参数执行。",
		"err.own":   "已拒绝：这是你自己发起的调用，只有操作员可以确认自己的调用；请以操作员身份登录（守护进程打印的一次性链接，或 STATE/operator.token 中的令牌），或请其他审批人决定",
		"nohistory": "没有历史：本守护进程不读取工具的 git 历史", "err.noapproval": "没有这个审批请求",
		"err.operator": "已拒绝：只有操作员可以这样做；请用操作员令牌（STATE/operator.token）或守护进程打印的一次性链接登录",
		"all":          "全部", "policy": "策略", "timeout": "超时", "max_output": "输出上限", "require_confirm": "每次调用都需要审批",
		"requires": "依赖", "examples": "示例", "why": "缘由", "type": "类型", "default": "默认值",
		"git_history": "git 历史", "from": "从", "to": "到", "author": "作者", "message": "说明",
		"signed_unchecked": "已签名（未校验：没有信任策略）", "compare": "比较选中的两个版本",
		"log_more": "更早的提交没有列出。", "recent_calls": "最近的调用", "nodiff": "这两个版本之间此目录没有变化。",
		"newer": "较新", "older": "较早", "page": "第", "dups": "同一调用被请求了多次", "age": "发起于",
		"expires": "过期时间", "ago": "前", "in": "还有", "expired": "已过期", "cannot_decide": "你不能决定这个调用：它在等待审批人。",
		"details": "详情", "note": "备注", "source": "来源", "last_sync": "上次同步", "next_sync": "下次同步",
		"sync_now": "立即同步", "command": "将执行", "diff_cut": "差异太长，此处截断", "sync_done": "已同步。", "sync_asked": "已请求同步，仍在进行中。", "host": "本机",
		"open_help": "在默认的本机回环地址上，匿名访客可以使用控制台；用守护进程启动时打印的一次性链接或令牌以操作员身份登录。",
	},
}

// lang picks the interface language: the session's choice, else the
// browser's Accept-Language (zh or en), else English.
func (c *Console) lang(r *http.Request, s *session) string {
	if q := r.URL.Query().Get("lang"); q == "zh" || q == "en" {
		return q
	}
	if s != nil {
		c.mu.Lock()
		l := s.lang
		c.mu.Unlock()
		if l != "" {
			return l
		}
	}
	for _, part := range strings.Split(r.Header.Get("Accept-Language"), ",") {
		tag := strings.ToLower(strings.TrimSpace(strings.Split(part, ";")[0]))
		switch {
		case strings.HasPrefix(tag, "zh"):
			return "zh"
		case strings.HasPrefix(tag, "en"):
			return "en"
		}
	}
	return "en"
}

func (c *Console) t(r *http.Request, s *session, key string) string {
	return messages[c.lang(r, s)][key]
}

var pages = []string{"login", "catalog", "tool", "diff", "approvals", "approval", "status", "history", "run", "error"}

// templates are the pages, parsed at the first page a console renders,
// not at start (3 ms and 0.9 MB of a daemon's start, for a console that
// may never be opened); once for every console of the process, as
// html/template executes one template concurrently.
var templates = sync.OnceValue(parseTemplates)

func parseTemplates() map[string]*template.Template {
	funcs := template.FuncMap{"join": strings.Join, "when": localTime, "short": shortHash, "first": firstLine,
		"since":  func(t time.Time) string { s, _ := ago(time.Now(), t); return s },
		"future": func(t time.Time) bool { _, f := ago(time.Now(), t); return f },
		"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"anon":   func(u User) bool { return u.Name == dispatch.Anonymous && !u.Operator },
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			return m
		},
	}
	out := map[string]*template.Template{}
	for _, p := range pages {
		out[p] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/result.html", "templates/"+p+".html"))
	}
	// The pending list alone, for the live update.
	out["pending"] = out["approvals"]
	return out
}

// render writes page name with data and the common fields: the user, the
// CSRF token, the language and its texts.
func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, code int, name string, data map[string]any) {
	exec := "layout.html"
	if name == "pending" {
		exec = "pending"
	}
	html, err := c.fragment(r, s, name, exec, data)
	if err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, html)
}

// fragment renders the template def of page name (the whole page, or a
// part the page's script puts in place) with data and the common fields:
// the user, the CSRF token, the language and its texts.
func (c *Console) fragment(r *http.Request, s *session, name, def string, data map[string]any) (string, error) {
	if data == nil {
		data = map[string]any{}
	}
	lang := c.lang(r, s)
	data["L"], data["Lang"] = messages[lang], lang
	if s != nil {
		data["User"], data["CSRF"] = s.user, s.csrf
	}
	var buf bytes.Buffer
	if err := templates()[name].ExecuteTemplate(&buf, def, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func mapsKeys[K comparable, V any](m map[K]V) iter.Seq[K] { return maps.Keys(m) }
