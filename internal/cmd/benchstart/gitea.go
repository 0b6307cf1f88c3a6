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
	base, token, owner, repo string
	client                   *http.Client
	changes                  int
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
	g := &giteaForge{base: strings.TrimRight(base, "/"), token: token, client: &http.Client{Timeout: time.Minute}}
	var user struct {
		Login string `json:"login"`
	}
	if err := g.api(ctx, http.MethodGet, "/user", nil, &user); err != nil {
		return nil, err
	}
	g.owner = user.Login
	g.repo = fmt.Sprintf("benchstart-%d-%d", os.Getpid(), time.Now().UnixNano())
	if err := g.api(ctx, http.MethodPost, "/user/repos", map[string]any{"name": g.repo, "private": false}, nil); err != nil {
		return nil, err
	}
	if _, err := repo.run(ctx, "-C", repo.work, "-c", "http.extraHeader=Authorization: token "+token, "push", "--quiet", g.cloneURL(), "HEAD:refs/heads/main"); err != nil {
		g.close(ctx)
		return nil, errors.New(strings.ReplaceAll(err.Error(), token, "<token>"))
	}
	return g, nil
}

// cloneURL is the repository's URL, which the daemon's git source pulls.
func (g *giteaForge) cloneURL() string { return g.base + "/" + g.owner + "/" + g.repo + ".git" }

// close deletes the repository.
func (g *giteaForge) close(ctx context.Context) {
	_ = g.api(ctx, http.MethodDelete, "/repos/"+g.owner+"/"+g.repo, nil, nil)
}

// api makes one call of the forge's API with in as its JSON body and
// decodes the answer into out (nil: read and dropped).
func (g *giteaForge) api(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.base+"/api/v1"+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "token "+g.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// commitOne changes tool-00042's intent through the contents API and
// returns the new commit and the commit before it.
func (g *giteaForge) commitOne(ctx context.Context) (commit, prev string, err error) {
	g.changes++
	const path = "tools/tool-00042/TOOL.hdlp"
	var file struct {
		SHA     string `json:"sha"`
		Content string `json:"content"`
	}
	if err := g.api(ctx, http.MethodGet, "/repos/"+g.owner+"/"+g.repo+"/contents/"+path+"?ref=main", nil, &file); err != nil {
		return "", "", err
	}
	var branch struct {
		Commit struct {
			ID string `json:"id"`
		} `json:"commit"`
	}
	if err := g.api(ctx, http.MethodGet, "/repos/"+g.owner+"/"+g.repo+"/branches/main", nil, &branch); err != nil {
		return "", "", err
	}
	data, err := base64.StdEncoding.DecodeString(file.Content)
	if err != nil {
		return "", "", fmt.Errorf("%s: content: %v", path, err)
	}
	head, rest, ok := strings.Cut(string(data), "intent: ")
	if !ok {
		return "", "", fmt.Errorf("%s: no intent line", path)
	}
	_, rest, _ = strings.Cut(rest, "\n")
	data = fmt.Appendf(nil, "%sintent: 查看第 42 号 nginx 服务的运行状态（Gitea 上第 %d 次修改）\n%s", head, g.changes, rest)
	var done struct {
		Commit struct {
			SHA string `json:"sha"`
		} `json:"commit"`
	}
	err = g.api(ctx, http.MethodPut, "/repos/"+g.owner+"/"+g.repo+"/contents/"+path, map[string]any{
		"content": base64.StdEncoding.EncodeToString(data), "sha": file.SHA, "branch": "main",
		"message": fmt.Sprintf("change %d", g.changes),
	}, &done)
	return done.Commit.SHA, branch.Commit.ID, err
}

// relay forwards the forge's webhook deliveries to the daemon and notes
// when each commit's arrived.
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
		r.at[push.After] = now
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
	var hook struct {
		ID int64 `json:"id"`
	}
	err = g.api(ctx, http.MethodPost, "/repos/"+g.owner+"/"+g.repo+"/hooks", map[string]any{
		"type": "gitea", "active": true, "events": []string{"push"}, "branch_filter": "main",
		"config": map[string]string{"url": "http://" + ln.Addr().String() + "/", "content_type": "json", "secret": string(secret)},
	}, &hook)
	if err != nil {
		return nil, err
	}
	defer g.api(context.WithoutCancel(ctx), http.MethodDelete, fmt.Sprintf("/repos/%s/%s/hooks/%d", g.owner, g.repo, hook.ID), nil, nil)
	client := &http.Client{Timeout: 10 * time.Second}
	var out []sample
	for range n {
		cpu0 := procCPU(pid)
		commit, prev, err := g.commitOne(ctx)
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
		if sm.server, err = serverShare(ctx, g.cloneURL(), prev, commit); err != nil {
			return nil, err
		}
		out = append(out, sm)
	}
	return out, nil
}
