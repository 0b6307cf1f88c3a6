package main

// The gitea-webhook case: the same one-tool change as git-webhook, made
// on a real Gitea or Forgejo the way a person makes it there (the
// contents API, which commits and fires the repository's push webhook),
// timed from the API's answer to the daemon serving the commit. The
// webhook goes through a recording relay in this program, so the time
// splits into the forge's delivery (commit to webhook at the daemon) and
// the daemon's share (webhook to served), which holds the forge answering
// the daemon's fetch; that fetch is timed alone afterwards (server).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"
)

// Where the gitea-webhook case finds its forge: the variables
// scripts/real-gitea.sh prints, which the real-server tests read too.
const (
	giteaURLEnv   = "TOOLAGENT_TEST_FORGEJO_URL"
	giteaTokenEnv = "TOOLAGENT_TEST_FORGEJO_TOKEN"
)

// giteaForge is a throw-away repository on a real Gitea or Forgejo that
// holds the benchmark's tools.
type giteaForge struct {
	client                *gitea.Client
	owner, repo, cloneURL string // cloneURL: what the daemon's git source pulls
	changes               int
}

// forgeEnv reads the forge's URL and token from the environment.
func forgeEnv() (base, token string, err error) {
	base, token = os.Getenv(giteaURLEnv), os.Getenv(giteaTokenEnv)
	if base == "" || token == "" {
		return "", "", fmt.Errorf("the gitea-webhook case needs a Gitea or Forgejo: set %s and %s (scripts/real-gitea.sh starts one and prints them)", giteaURLEnv, giteaTokenEnv)
	}
	return base, token, nil
}

// newGiteaForge creates a public repository on the forge at base and
// pushes the work tree's commit to its main branch.
func newGiteaForge(ctx context.Context, base, token string, repo *benchRepo) (*giteaForge, error) {
	// Not ended with ctx: the repository is deleted when the run is
	// interrupted too; each call is bounded by the HTTP client instead.
	client, err := gitea.NewClient(base, gitea.SetToken(token), gitea.SetContext(context.WithoutCancel(ctx)),
		gitea.SetHTTPClient(&http.Client{Timeout: time.Minute}))
	if err != nil {
		return nil, fmt.Errorf("forge %s: %w", base, err)
	}
	me, _, err := client.GetMyUserInfo()
	if err != nil {
		return nil, fmt.Errorf("forge: who am I: %w", err)
	}
	name := fmt.Sprintf("benchstart-%d-%d", os.Getpid(), time.Now().UnixNano())
	info, _, err := client.CreateRepo(gitea.CreateRepoOption{Name: name})
	if err != nil {
		return nil, fmt.Errorf("forge: create repository: %w", err)
	}
	g := &giteaForge{client: client, owner: me.UserName, repo: name, cloneURL: info.CloneURL}
	if _, err := repo.run(ctx, "-C", repo.work, "-c", "http.extraHeader=Authorization: token "+token, "push", "--quiet", g.cloneURL, "HEAD:refs/heads/main"); err != nil {
		g.close()
		return nil, errors.New(strings.ReplaceAll(err.Error(), token, "<token>"))
	}
	return g, nil
}

// close deletes the repository.
func (g *giteaForge) close() { _, _ = g.client.DeleteRepo(g.owner, g.repo) }

// commitOne changes changedTool's intent through the contents API and
// returns the new commit and its parent.
func (g *giteaForge) commitOne() (commit, prev string, err error) {
	g.changes++
	file, _, err := g.client.GetContents(g.owner, g.repo, "main", changedTool)
	if err != nil {
		return "", "", fmt.Errorf("forge: %s: %w", changedTool, err)
	}
	if file.Content == nil {
		return "", "", fmt.Errorf("forge: %s: no content", changedTool)
	}
	data, err := base64.StdEncoding.DecodeString(*file.Content)
	if err != nil {
		return "", "", fmt.Errorf("forge: %s: content: %v", changedTool, err)
	}
	if data, err = withIntent(data, fmt.Sprintf("查看第 42 号 nginx 服务的运行状态（Gitea 上第 %d 次修改）", g.changes)); err != nil {
		return "", "", err
	}
	done, _, err := g.client.UpdateFile(g.owner, g.repo, changedTool, gitea.UpdateFileOptions{
		FileOptions: gitea.FileOptions{Message: fmt.Sprintf("change %d", g.changes), BranchName: "main"},
		SHA:         file.SHA, Content: base64.StdEncoding.EncodeToString(data)})
	if err != nil {
		return "", "", fmt.Errorf("forge: update %s: %w", changedTool, err)
	}
	if done.Commit == nil || len(done.Commit.Parents) == 0 {
		return "", "", fmt.Errorf("forge: update %s: the answer names no commit and parent", changedTool)
	}
	return done.Commit.SHA, done.Commit.Parents[0].SHA, nil
}

// relay forwards the forge's webhook deliveries to the daemon and notes
// when each commit's first arrived.
type relay struct {
	target string
	client *http.Client
	mu     sync.Mutex
	at     map[string]time.Time // by the push's "after" commit
}

func (r *relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var push struct {
		After string `json:"after"`
	}
	if json.Unmarshal(body, &push) == nil && push.After != "" {
		r.mu.Lock()
		if _, seen := r.at[push.After]; !seen { // a redelivery is not the arrival
			r.at[push.After] = now
		}
		r.mu.Unlock()
	}
	out, err := http.NewRequestWithContext(req.Context(), req.Method, r.target, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for k, v := range req.Header {
		if strings.HasPrefix(k, "X-") || k == "Content-Type" {
			out.Header[k] = v
		}
	}
	resp, err := r.client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// arrived is when the webhook of commit reached the relay.
func (r *relay) arrived(commit string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[commit]
	return t, ok
}

// pushGitea makes n one-tool commits on the forge, each announced by the
// forge's own signed push webhook to the daemon at addr, and times each
// from the API's answer to /v1/status serving the commit (wall), and from
// the webhook's arrival to served (hook, the daemon's share).
func pushGitea(ctx context.Context, g *giteaForge, addr string, pid int, secret []byte, n int) ([]sample, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rl := &relay{target: "http://" + addr + "/v1/hooks/forgejo", client: &http.Client{Timeout: 30 * time.Second}, at: map[string]time.Time{}}
	srv := &http.Server{Handler: rl, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	hook, _, err := g.client.CreateRepoHook(g.owner, g.repo, gitea.CreateHookOption{
		Type: gitea.HookTypeGitea, Active: true, Events: []string{"push"}, BranchFilter: "main",
		Config: map[string]string{"url": "http://" + ln.Addr().String() + "/", "content_type": "json", "secret": string(secret)},
	})
	if err != nil {
		return nil, fmt.Errorf("forge: add the webhook: %w", err)
	}
	defer g.client.DeleteRepoHook(g.owner, g.repo, hook.ID)
	client := &http.Client{Timeout: 10 * time.Second}
	var out []sample
	for range n {
		cpu0 := procCPU(pid)
		commit, prev, err := g.commitOne()
		if err != nil {
			return nil, err
		}
		answered := time.Now()
		if err := waitServed(ctx, client, addr, commit); err != nil {
			if _, ok := rl.arrived(commit); !ok {
				err = fmt.Errorf("%w; the forge never delivered its webhook (is its webhook delivery working, and may it reach loopback: [webhook] ALLOWED_HOST_LIST?)", err)
			}
			return nil, err
		}
		served := time.Now()
		at, ok := rl.arrived(commit)
		if !ok {
			return nil, fmt.Errorf("commit %s served, but its webhook never reached the relay", commit)
		}
		sm := sample{wall: served.Sub(answered), hook: served.Sub(at), cpu: procCPU(pid) - cpu0}
		sm.rss, sm.anon, _ = procRSS(pid)
		if sm.server, err = serverShare(ctx, g.cloneURL, prev, commit, true); err != nil {
			return nil, err
		}
		out = append(out, sm)
	}
	return out, nil
}
