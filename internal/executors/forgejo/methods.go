package forgejo

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"code.gitea.io/sdk/gitea"
)

// call is the API request of one method call.
type call struct {
	owner, repo string
	verb        string
	path        string // below /api/v1, escaped
	query       string // encoded, without "?"
	body        any    // sent as JSON; nil: no body
	// lookup, when set, names the file whose current blob sha the body
	// needs (update and delete without the param "sha"); run fetches it
	// first and hands it to setSHA.
	lookup *fileRef
	setSHA func(string)
}

// target is the path and query of c below /api/v1.
func (c call) target() string {
	if c.query == "" {
		return c.path
	}
	return c.path + "?" + c.query
}

// encode returns the JSON body of c, nil when it has none.
func (c call) encode() ([]byte, error) {
	if c.body == nil {
		return nil, nil
	}
	b, err := json.Marshal(c.body)
	if err != nil {
		return nil, fmt.Errorf("encode the request body: %w", err)
	}
	return b, nil
}

// fileRef is a file at a ref ("" for the default branch).
type fileRef struct{ owner, repo, ref, path string }

// target is the contents request of f below /api/v1.
func (f fileRef) target() string {
	t := repoPath(f.owner, f.repo) + "/contents/" + escapeFilePath(f.path)
	if f.ref != "" {
		t += "?ref=" + url.QueryEscape(f.ref)
	}
	return t
}

// repoPath is /repos/{owner}/{repo}, escaped.
func repoPath(owner, repo string) string {
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo)
}

// escapeFilePath escapes each segment of a path in the repository, keeping
// the slashes (as the SDK does).
func escapeFilePath(p string) string {
	seg := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range seg {
		seg[i] = url.PathEscape(seg[i])
	}
	return strings.Join(seg, "/")
}

// args reads params; the first problem is kept in err and later reads
// return zero values, so a handler reads all it needs and the caller
// checks err once.
type args struct {
	p   map[string]any
	e   *Executor
	err error
}

func (a *args) fail(format string, v ...any) {
	if a.err == nil {
		a.err = fmt.Errorf(format, v...)
	}
}

func (a *args) str(name string, required bool) string {
	v, ok := a.p[name]
	if !ok || v == nil {
		if required {
			a.fail("param %q is missing", name)
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		a.fail("param %q must be a string, got %T", name, v)
		return ""
	}
	if required && s == "" {
		a.fail("param %q must not be empty", name)
	}
	return s
}

func (a *args) int(name string, required bool) int64 {
	switch x := a.p[name].(type) {
	case nil:
		if required {
			a.fail("param %q is missing", name)
		}
		return 0
	case int64:
		return x
	case int:
		return int64(x)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			a.fail("param %q must be an integer, got %v", name, x)
			return 0
		}
		return int64(x)
	default:
		a.fail("param %q must be an integer, got %T", name, x)
		return 0
	}
}

func (a *args) owner() string {
	if s := a.str("owner", false); s != "" {
		return s
	}
	if a.e.owner == "" {
		a.fail(`no repository owner: pass the param "owner" or configure a default owner`)
	}
	return a.e.owner
}

func (a *args) repo() string {
	if s := a.str("repo", false); s != "" {
		return s
	}
	if a.e.repo == "" {
		a.fail(`no repository: pass the param "repo" or configure a default repository`)
	}
	return a.e.repo
}

// list returns page and limit; 0 means the param was not given.
func (a *args) list() gitea.ListOptions {
	return gitea.ListOptions{Page: int(a.int("page", false)), PageSize: int(a.int("limit", false))}
}

func (a *args) state() gitea.StateType {
	switch s := a.str("state", false); s {
	case "":
		return gitea.StateOpen
	case "open", "closed", "all":
		return gitea.StateType(s)
	default:
		a.fail(`param "state" must be open, closed or all, got %q`, s)
		return ""
	}
}

func (a *args) fileOptions() gitea.FileOptions {
	return gitea.FileOptions{
		Message:       a.str("message", false),
		BranchName:    a.str("branch", false),
		NewBranchName: a.str("new_branch", false),
	}
}

// valid records the problem an SDK option's Validate reports.
func (a *args) valid(err error) {
	if err != nil {
		a.fail("params: %v", err)
	}
}

// pageQuery is the page and limit of o, each only when given.
func pageQuery(o gitea.ListOptions) url.Values {
	q := url.Values{}
	if o.Page > 0 {
		q.Set("page", strconv.Itoa(o.Page))
	}
	if o.PageSize > 0 {
		q.Set("limit", strconv.Itoa(o.PageSize))
	}
	return q
}

// sdkPage is o as the SDK's list requests send it: page 1 when not given.
func sdkPage(o gitea.ListOptions) gitea.ListOptions {
	if o.Page <= 0 {
		o.Page = 1
	}
	return o
}

// handler turns the params of one method into its call; a wrong param is
// recorded in args.err.
type handler func(a *args) call

// in returns the call of verb on the repository's path below
// /repos/{owner}/{repo}.
func in(owner, repo, verb, rest string) call {
	return call{owner: owner, repo: repo, verb: verb, path: repoPath(owner, repo) + rest}
}

var handlers = map[string]handler{
	MethodGetFile: func(a *args) call {
		owner, repo, path, ref := a.owner(), a.repo(), a.str("path", true), a.str("ref", false)
		f := fileRef{owner, repo, ref, path}
		c := in(owner, repo, http.MethodGet, "")
		c.path, c.query, _ = strings.Cut(f.target(), "?")
		return c
	},
	MethodListDir: func(a *args) call {
		owner, repo, path, ref := a.owner(), a.repo(), a.str("path", false), a.str("ref", false)
		c := in(owner, repo, http.MethodGet, "/contents")
		if p := strings.Trim(path, "/"); p != "" {
			c.path += "/" + escapeFilePath(p)
		}
		if ref != "" {
			c.query = url.Values{"ref": {ref}}.Encode()
		}
		return c
	},
	MethodListCommits: func(a *args) call {
		// Only what the call asks for: no stat/files/verification=false
		// (the SDK's encoder adds them), so the server sends its default
		// commit objects, stats and files included.
		owner, repo := a.owner(), a.repo()
		q := pageQuery(a.list())
		if s := a.str("ref", false); s != "" {
			q.Set("sha", s)
		}
		if s := a.str("path", false); s != "" {
			q.Set("path", s)
		}
		c := in(owner, repo, http.MethodGet, "/commits")
		c.query = q.Encode()
		return c
	},
	MethodGetCommit: func(a *args) call {
		owner, repo, sha := a.owner(), a.repo(), a.str("sha", true)
		return in(owner, repo, http.MethodGet, "/git/commits/"+url.PathEscape(sha))
	},
	MethodCreateFile: func(a *args) call {
		owner, repo, path := a.owner(), a.repo(), a.str("path", true)
		opt := &gitea.CreateFileOptions{FileOptions: a.fileOptions(), Content: base64.StdEncoding.EncodeToString([]byte(a.str("content", true)))}
		c := in(owner, repo, http.MethodPost, "/contents/"+escapeFilePath(path))
		c.body = opt
		return c
	},
	MethodUpdateFile: func(a *args) call {
		owner, repo, path := a.owner(), a.repo(), a.str("path", true)
		opt := &gitea.UpdateFileOptions{FileOptions: a.fileOptions(), SHA: a.str("sha", false),
			Content: base64.StdEncoding.EncodeToString([]byte(a.str("content", true)))}
		c := in(owner, repo, http.MethodPut, "/contents/"+escapeFilePath(path))
		c.body = opt
		if opt.SHA == "" {
			c.lookup = &fileRef{owner, repo, opt.BranchName, path}
			c.setSHA = func(sha string) { opt.SHA = sha }
		}
		return c
	},
	MethodDeleteFile: func(a *args) call {
		owner, repo, path := a.owner(), a.repo(), a.str("path", true)
		opt := &gitea.DeleteFileOptions{FileOptions: a.fileOptions(), SHA: a.str("sha", false)}
		c := in(owner, repo, http.MethodDelete, "/contents/"+escapeFilePath(path))
		c.body = opt
		if opt.SHA == "" {
			c.lookup = &fileRef{owner, repo, opt.BranchName, path}
			c.setSHA = func(sha string) { opt.SHA = sha }
		}
		return c
	},
	MethodListBranches: func(a *args) call {
		owner, repo, list := a.owner(), a.repo(), a.list()
		c := in(owner, repo, http.MethodGet, "/branches")
		c.query = pageQuery(list).Encode()
		return c
	},
	MethodCreateBranch: func(a *args) call {
		owner, repo := a.owner(), a.repo()
		opt := gitea.CreateBranchOption{BranchName: a.str("name", true), OldBranchName: a.str("from", false)}
		if a.err == nil {
			a.valid(opt.Validate())
		}
		c := in(owner, repo, http.MethodPost, "/branches")
		c.body = opt
		return c
	},
	MethodListIssues: func(a *args) call {
		owner, repo := a.owner(), a.repo()
		opt := gitea.ListIssueOption{ListOptions: sdkPage(a.list()), State: a.state(), Type: gitea.IssueTypeIssue, KeyWord: a.str("q", false)}
		c := in(owner, repo, http.MethodGet, "/issues")
		c.query = opt.QueryEncode()
		return c
	},
	MethodCreateIssue: func(a *args) call {
		owner, repo := a.owner(), a.repo()
		opt := gitea.CreateIssueOption{Title: a.str("title", true), Body: a.str("body", false)}
		if a.err == nil {
			a.valid(opt.Validate())
		}
		c := in(owner, repo, http.MethodPost, "/issues")
		c.body = opt
		return c
	},
	MethodCommentIssue: func(a *args) call {
		owner, repo, n := a.owner(), a.repo(), a.int("number", true)
		opt := gitea.CreateIssueCommentOption{Body: a.str("body", true)}
		if a.err == nil && n <= 0 {
			a.fail(`param "number" must be a positive issue number, got %d`, n)
		}
		if a.err == nil {
			a.valid(opt.Validate())
		}
		c := in(owner, repo, http.MethodPost, "/issues/"+strconv.FormatInt(n, 10)+"/comments")
		c.body = opt
		return c
	},
	MethodListPulls: func(a *args) call {
		owner, repo := a.owner(), a.repo()
		opt := gitea.ListPullRequestsOptions{ListOptions: sdkPage(a.list()), State: a.state()}
		c := in(owner, repo, http.MethodGet, "/pulls")
		c.query = opt.QueryEncode()
		return c
	},
	MethodCreatePull: func(a *args) call {
		owner, repo := a.owner(), a.repo()
		opt := gitea.CreatePullRequestOption{Head: a.str("head", true), Base: a.str("base", true), Title: a.str("title", true), Body: a.str("body", false)}
		c := in(owner, repo, http.MethodPost, "/pulls")
		c.body = opt
		return c
	},
}
