// Command benchstart measures the start of the real daemon: it runs a
// built `toolagent serve` as a child process on a generated catalog and
// times process start to the first 200 of GET /readyz, the process's CPU
// time and resident set at that moment. It is a development tool, not part
// of the product binary:
//
//	go build -o /var/tmp/toolagent ./cmd/toolagent
//	go run ./internal/cmd/benchstart --bin /var/tmp/toolagent --tools 10000 --rounds 5
//
// Several --bin values (comma-separated) are measured in interleaved
// rounds, so that the machine's load falls on each alike; each round
// starts with the next binary (roundOrder). Each round, for
// each binary: `toolagent version` (the floor: a process that starts and
// exits), the embedded default tools, a local directory's cold start (new
// state) and warm start (same state, nothing changed), and a git source's
// restart at the commit it synced (served over HTTP by git http-backend,
// as a forge would), and git-webhook: one-tool commits announced to a
// running daemon by signed push webhooks, each timed to served, with the
// git server's own share of it (the same fetch, made again afterwards by
// this program and timed alone); --commits N makes each push N commits,
// each changing another tool. With a Gitea or Forgejo named
// (TOOLAGENT_TEST_FORGEJO_URL and _TOKEN, as scripts/real-gitea.sh prints
// them), gitea-webhook makes the same change through the forge's contents
// API and its own push webhook (gitea.go); it runs after every round of
// the others. docs/operations.md ("Start time") quotes its figures.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	gitclient "github.com/go-git/go-git/v5/plumbing/transport/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchstart:", err)
		os.Exit(1)
	}
}

// sample is one start: wall time to ready, CPU time and resident set then.
type sample struct {
	wall, cpu time.Duration
	rss       uint64
	restRSS   uint64 // the resident set --rest after ready (0: not measured)
	// server is, for the webhook cases, how long the git server alone
	// took to answer the fetch the daemon made (see serverShare); 0: not
	// measured.
	server time.Duration
	// hook is, for gitea-webhook, the daemon's share of wall: from the
	// forge's webhook reaching it to serving the commit (0: not measured).
	hook time.Duration
	// anon and restAnon are the anonymous part of rss and restRSS (the
	// heap, stacks): the rest is the binary's file pages, which depend on
	// how its file came into the page cache (a binary just written by go
	// build or cp maps about 34 MiB of them, one read back from disk 28).
	anon, restAnon uint64
	// peak is the largest resident set up to --rest after ready
	// (VmHWM): the index build and the first sync after ready raise it.
	peak uint64
}

// cases are the starts measured, in the order printed.
var cases = []string{"version", "embedded", "local-cold", "local-warm", "git-restart", "git-webhook", "gitea-webhook"}

// defaultCases are the cases run without --cases: gitea-webhook only
// when a forge is named (giteaURLEnv).
func defaultCases() []string {
	if os.Getenv(giteaURLEnv) == "" {
		return cases[:len(cases)-1]
	}
	return cases
}

// webhookChanges is how many one-tool commits the git-webhook case
// pushes to a running daemon, each announced by a signed push webhook.
const webhookChanges = 5

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bins := fs.String("bin", "", "`PATHS` of built toolagent binaries, comma-separated (required)")
	n := fs.Int("tools", 10000, "`N` synthetic tools")
	rounds := fs.Int("rounds", 5, "`N` interleaved rounds")
	parent := fs.String("dir", "", "`DIR` to work in, in a new folder removed at the end (default: the system's temporary directory)")
	rest := fs.Duration("rest", 3*time.Second, "how long after ready to read the resident set again (at rest: the first sync and the index built); 0: not")
	logDir := fs.String("logs", "", "`DIR` to keep each start's log in (round-binary-case.log)")
	keep := fs.Bool("keep", false, "keep the work folder (its tools/ tree, the git repository) instead of removing it")
	signed := fs.Bool("signed", false, "sign every commit of the git cases with a new SSH key and serve them with --trusted-signers naming it (the trusted-definitions path); not with gitea-webhook, whose commits the forge makes")
	commits := fs.Int("commits", 1, "`N` commits in each push of git-webhook, each changing another tool, pushed and announced at once")
	only := fs.String("cases", strings.Join(defaultCases(), ","), "`LIST` of cases to run, comma-separated (gitea-webhook needs "+giteaURLEnv+" and "+giteaTokenEnv+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bins == "" || *n < 1 || *rounds < 1 {
		return errors.New("--bin is required; --tools and --rounds must be at least 1")
	}
	binList := strings.Split(*bins, ",")
	want := map[string]bool{}
	for _, c := range strings.Split(*only, ",") {
		if !slices.Contains(cases, c) {
			return fmt.Errorf("--cases: unknown case %q (want some of %s)", c, strings.Join(cases, ","))
		}
		want[c] = true
	}
	if *signed && want["gitea-webhook"] {
		return errors.New("--signed: the forge's contents API makes gitea-webhook's commits, unsigned by benchstart's key; run it without --signed")
	}
	if *commits < 1 || (want["git-webhook"] && 42+*commits > *n) {
		return fmt.Errorf("--commits %d: want 1 to %d with --tools %d (each commit changes another tool, from tool-00042 on)", *commits, max(*n-42, 0), *n)
	}
	var forgeBase, forgeToken string
	if want["gitea-webhook"] {
		var err error
		if forgeBase, forgeToken, err = forgeEnv(); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp(*parent, "toolagent-benchstart-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return errors.New("git is needed for the git source case")
	}
	work := filepath.Join(dir, "work")
	if err := writeTools(filepath.Join(work, "tools"), *n); err != nil {
		return err
	}
	var signing gitSigning
	if *signed {
		if signing, err = newSigning(ctx, dir); err != nil {
			return err
		}
	}
	env := gitEnv(dir, signing.key)
	srv, url, err := serveRepo(ctx, git, dir, work, env)
	if err != nil {
		return err
	}
	defer srv.Close()
	repo := &benchRepo{git: git, work: work, bare: filepath.Join(dir, "git", "tools.git"), env: env}
	secret := []byte("benchstart-webhook-secret")
	secretFile := filepath.Join(dir, "webhook.secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "benchstart: %d tools in %s\n", *n, dir)
	fmt.Fprintln(stdout, machine())

	results := map[string]map[string][]sample{}
	for _, b := range binList {
		results[b] = map[string][]sample{}
	}
	// The forge's cases run after every round of the others: what a forge
	// does after a push (its queues, its indexers) would otherwise load the
	// machine during the next round's starts.
	var forge *giteaForge
	for phase := range 2 {
		if phase == 1 {
			if !want["gitea-webhook"] {
				break
			}
			if forge, err = newGiteaForge(ctx, forgeBase, forgeToken, repo); err != nil {
				return err
			}
			if !*keep {
				defer forge.close()
			}
		}
		for r := range *rounds {
			for _, bi := range roundOrder(r, len(binList)) {
				bin := binList[bi]
				st := filepath.Join(dir, fmt.Sprintf("state-%d-%d", r, bi))
				gst := st + "-git"
				fst := st + "-gitea"
				forgeURL := ""
				if forge != nil {
					forgeURL = forge.cloneURL
				}
				steps := []struct {
					name  string
					args  []string
					state string
				}{
					{"version", nil, ""},
					{"embedded", []string{"--tools", "embedded"}, st + "-embedded"},
					{"local-cold", []string{"--tools", filepath.Join(work, "tools")}, st},
					{"local-warm", []string{"--tools", filepath.Join(work, "tools")}, st},
					{"git-first", []string{"--repo", url, "--schedule", "off"}, gst},
					{"git-restart", []string{"--repo", url, "--schedule", "off"}, gst},
					{"git-webhook", []string{"--repo", url, "--schedule", "off", "--webhook-secret-file", secretFile}, gst},
					{"gitea-first", []string{"--repo", forgeURL, "--schedule", "off"}, fst},
					{"gitea-webhook", []string{"--repo", forgeURL, "--schedule", "off", "--webhook-secret-file", secretFile}, fst},
				}
				for _, s := range steps {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if signing.signers != "" && strings.HasPrefix(s.name, "git-") {
						s.args = append(s.args, "--trusted-signers", signing.signers)
					}
					if strings.HasPrefix(s.name, "gitea-") != (phase == 1) {
						continue
					}
					// A restart needs the start before it: run it unrecorded.
					needed := s.name == "git-first" && (want["git-restart"] || want["git-webhook"]) || s.name == "local-cold" && want["local-warm"] || s.name == "gitea-first" && want["gitea-webhook"]
					if !want[s.name] && !needed {
						continue
					}
					var sm sample
					var err error
					logFile := ""
					if *logDir != "" {
						logFile = filepath.Join(*logDir, fmt.Sprintf("%d-%d-%s.log", r+1, bi, s.name))
					}
					switch s.name {
					case "version":
						sm, err = runVersion(ctx, bin)
					case "git-webhook", "gitea-webhook":
						var during []sample
						_, err = startServeDuring(ctx, bin, s.state, s.args, 0, logFile, func(addr string, pid int) error {
							if s.name == "gitea-webhook" {
								during, err = pushGitea(ctx, forge, addr, pid, secret, webhookChanges)
							} else {
								during, err = pushChanges(ctx, repo, url, addr, pid, secret, webhookChanges, *commits, !*signed)
							}
							return err
						})
						if err == nil {
							results[bin][s.name] = append(results[bin][s.name], during...)
							fmt.Fprintf(stderr, "round %d %s %s: %d changes, the first %s\n", r+1, filepath.Base(bin), s.name, len(during), during[0])
						}
						if err != nil {
							return fmt.Errorf("%s round %d %s: %w", bin, r+1, s.name, err)
						}
						continue
					default:
						sm, err = startServe(ctx, bin, s.state, s.args, *rest, logFile)
					}
					if err != nil {
						return fmt.Errorf("%s round %d %s: %w", bin, r+1, s.name, err)
					}
					if !want[s.name] {
						continue
					}
					results[bin][s.name] = append(results[bin][s.name], sm)
					fmt.Fprintf(stderr, "round %d %s %s: %s\n", r+1, filepath.Base(bin), s.name, sm)
				}
				for _, p := range []string{st, gst, fst, st + "-embedded"} {
					os.RemoveAll(p)
				}
			}
		}
	}
	if *signed {
		fmt.Fprintln(stdout, "signed: every git commit signed with an SSH key the daemons trust (--trusted-signers); they keep the whole history")
	}
	fmt.Fprintf(stdout, "%d tools, %d rounds; median (min-max) of: wall ms to /readyz 200, CPU ms then, RSS MiB then, and %v later; the anonymous part of both (heap, stacks: the rest is the binary's file pages); the peak RSS until then\n", *n, *rounds, *rest)
	fmt.Fprintf(stdout, "(git-webhook: %d pushes a round of %d one-tool commits each to a running daemon; wall from the webhook's POST to /v1/status serving the pushed head, the daemon's CPU for it, RSS after; server: the git server alone answering the same fetch, timed after)\n", webhookChanges, *commits)
	if forge != nil {
		fmt.Fprintf(stdout, "(gitea-webhook: %d one-tool commits a round through the contents API of %s; wall from the API's answer to served; delivery: from the API's answer to the forge's webhook at the daemon (below 0: it came before the answer); daemon: from the forge's own signed webhook reaching the daemon to served; server: the forge alone answering the same fetch)\n", webhookChanges, forgeBase)
	}
	for _, bin := range binList {
		fmt.Fprintf(stdout, "%s\n", bin)
		for _, c := range cases {
			if s := results[bin][c]; len(s) > 0 {
				fmt.Fprintf(stdout, "  %-12s %s\n", c, summary(s))
			}
		}
	}
	return nil
}

func (s sample) String() string {
	out := fmt.Sprintf("wall %.0f ms, cpu %.0f ms, rss %.1f MiB (anon %.1f), at rest %.1f MiB (anon %.1f, peak %.1f)", ms(s.wall), ms(s.cpu), mib(s.rss), mib(s.anon), mib(s.restRSS), mib(s.restAnon), mib(s.peak))
	if s.hook > 0 {
		out += fmt.Sprintf(", the daemon's share %.0f ms", ms(s.hook))
	}
	if s.server > 0 {
		out += fmt.Sprintf(", the server alone %.0f ms", ms(s.server))
	}
	return out
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// summary is the median, min and max of each figure of samples.
func summary(samples []sample) string {
	stat := func(get func(sample) float64, f string) string {
		v := make([]float64, len(samples))
		for i, s := range samples {
			v[i] = get(s)
		}
		slices.Sort(v)
		return fmt.Sprintf(f+" ("+f+"-"+f+")", v[len(v)/2], v[0], v[len(v)-1])
	}
	out := fmt.Sprintf("wall %s  cpu %s  rss %s  rest %s  anon %s  rest anon %s  peak %s",
		stat(func(s sample) float64 { return ms(s.wall) }, "%.0f"),
		stat(func(s sample) float64 { return ms(s.cpu) }, "%.0f"),
		stat(func(s sample) float64 { return mib(s.rss) }, "%.1f"),
		stat(func(s sample) float64 { return mib(s.restRSS) }, "%.1f"),
		stat(func(s sample) float64 { return mib(s.anon) }, "%.1f"),
		stat(func(s sample) float64 { return mib(s.restAnon) }, "%.1f"),
		stat(func(s sample) float64 { return mib(s.peak) }, "%.1f"))
	if samples[0].hook > 0 {
		out += "  delivery " + stat(func(s sample) float64 { return ms(s.wall - s.hook) }, "%.0f")
		out += "  daemon " + stat(func(s sample) float64 { return ms(s.hook) }, "%.0f")
	}
	if samples[0].server > 0 {
		out += "  server " + stat(func(s sample) float64 { return ms(s.server) }, "%.0f")
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// runVersion times `toolagent version`: the floor of any start.
func runVersion(ctx context.Context, bin string) (sample, error) {
	cmd := exec.CommandContext(ctx, bin, "version")
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return sample{}, err
	}
	wall := time.Since(start)
	ps := cmd.ProcessState
	// No resident set: the child's peak (its rusage) counts the copy of
	// this process it was between fork and exec, not the binary.
	return sample{wall: wall, cpu: ps.UserTime() + ps.SystemTime()}, nil
}

// startServe runs `bin serve` on a free port with state and args, times it
// to the first 200 of /readyz, reads its CPU time and resident set, and
// stops it (SIGTERM, then waits for it to exit, so that its state is
// written for the next start).
func startServe(ctx context.Context, bin, state string, args []string, rest time.Duration, logFile string) (sample, error) {
	return startServeDuring(ctx, bin, state, args, rest, logFile, nil)
}

// startServeDuring is startServe that, once the daemon is ready (and
// rest has passed), calls during with its address and process id before
// stopping it.
func startServeDuring(ctx context.Context, bin, state string, args []string, rest time.Duration, logFile string, during func(addr string, pid int) error) (sample, error) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--state", state, "--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), "TOOLAGENT_TOKENS=")
	cmd.WaitDelay = 30 * time.Second
	logs, err := cmd.StderrPipe()
	if err != nil {
		return sample{}, err
	}
	addrs := make(chan string, 1)
	var tail strings.Builder
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	var kept io.Writer = io.Discard
	if logFile != "" {
		f, err := os.Create(logFile)
		if err != nil {
			return sample{}, err
		}
		defer f.Close()
		fmt.Fprintf(f, "started %s\n", start.UTC().Format(time.RFC3339Nano))
		kept = f
	}
	done := make(chan struct{})
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		<-done
	}()
	go func() {
		defer close(done)
		sc := bufio.NewScanner(logs)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(kept, line)
			if tail.Len() < 16<<10 {
				tail.WriteString(line + "\n")
			}
			if !sent && strings.Contains(line, `"msg":"listening"`) {
				if _, rest, ok := strings.Cut(line, `"addr":"`); ok {
					addr, _, _ := strings.Cut(rest, `"`)
					addrs <- addr
					sent = true
				}
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrs:
	case <-time.After(2 * time.Minute):
		return sample{}, fmt.Errorf("no listening line in the log:\n%s", tail.String())
	}
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				fmt.Fprintf(kept, "ready %s\n", time.Now().UTC().Format(time.RFC3339Nano))
				break
			}
		}
		if time.Now().After(deadline) {
			return sample{}, errors.New("/readyz never answered 200")
		}
		time.Sleep(time.Millisecond)
	}
	wall := time.Since(start)
	sm := sample{wall: wall, cpu: procCPU(cmd.Process.Pid)}
	sm.rss, sm.anon, _ = procRSS(cmd.Process.Pid)
	if rest > 0 {
		select {
		case <-ctx.Done():
			return sample{}, ctx.Err()
		case <-time.After(rest):
		}
		sm.restRSS, sm.restAnon, sm.peak = procRSS(cmd.Process.Pid)
	}
	if during != nil {
		if err := during(addr, cmd.Process.Pid); err != nil {
			return sm, fmt.Errorf("%w\n%s", err, tail.String())
		}
	}
	return sm, nil
}

// procCPU is the CPU time, user and system, process pid used so far.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// procRSS is the resident set of process pid, its anonymous part, and
// the largest resident set it had.
func procRSS(pid int) (rss, anon, peak uint64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0
	}
	for line := range strings.Lines(string(data)) {
		key, v, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch key {
		case "VmRSS":
			rss = kb << 10
		case "RssAnon":
			anon = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return rss, anon, peak
}

// writeTools writes n tool folders under dir.
func writeTools(dir string, n int) error {
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("tool-%05d", i))
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(p, "TOOL.hdlp"), benchTool(i), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// benchTool is the TOOL.hdlp of tool i (benchcatalog's kind: about 450 bytes).
func benchTool(i int) []byte {
	return fmt.Appendf(nil, `name: tool-%05[1]d
display: 查看 nginx 服务 %[1]d 号
intent: 查看第 %[1]d 号 nginx 服务在目标主机上的运行状态
method: run
executor: shell
argv: [echo, show, nginx-%[1]d, "{host}"]
params_schema:
  host: { type: string, required: true, description: "目标主机名，如 web-01" }
keywords: [show, nginx, nginx%[1]d]
author: bench
created: 2026-01-01
why: toolagent benchstart 生成的合成工具，用来测量启动。
`, i)
}

// gitEnv is the environment of the git commands run in dir; with a
// signing key (a private SSH key's file) every commit is signed with it.
func gitEnv(dir, key string) []string {
	env := []string{
		"HOME=" + dir, "PATH=" + os.Getenv("PATH"),
		"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Bench", "GIT_AUTHOR_EMAIL=" + benchEmail,
		"GIT_COMMITTER_NAME=Bench", "GIT_COMMITTER_EMAIL=" + benchEmail,
	}
	// No detached gc writing into the repositories while they are used.
	config := [][2]string{{"gc.auto", "0"}}
	if key != "" {
		config = append(config, [2]string{"commit.gpgsign", "true"}, [2]string{"gpg.format", "ssh"}, [2]string{"user.signingkey", key})
	}
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(config)))
	for i, kv := range config {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	return env
}

// benchEmail is the author, committer and signer of benchstart's commits.
const benchEmail = "bench@example.invalid"

// gitSigning is --signed's key: the private key's file, and the
// allowed_signers file that trusts its public half.
type gitSigning struct {
	key, signers string
}

// newSigning makes a new ed25519 key in dir with ssh-keygen and an
// allowed_signers file naming it for benchEmail.
func newSigning(ctx context.Context, dir string) (gitSigning, error) {
	key := filepath.Join(dir, "signing")
	cmd := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", benchEmail, "-f", key)
	if out, err := cmd.CombinedOutput(); err != nil {
		return gitSigning{}, fmt.Errorf("--signed needs ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		return gitSigning{}, err
	}
	signers := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signers, fmt.Appendf(nil, "%s %s", benchEmail, pub), 0o644); err != nil {
		return gitSigning{}, err
	}
	return gitSigning{key: key, signers: signers}, nil
}

// serveRepo commits the work tree to a bare repository under dir (git
// run with env) and serves it over HTTP with git http-backend; it returns the server and the
// repository's URL.
func serveRepo(ctx context.Context, git, dir, work string, env []string) (*http.Server, string, error) {
	root := filepath.Join(dir, "git")
	bare := filepath.Join(root, "tools.git")
	for _, a := range [][]string{
		{"init", "--quiet", "--bare", "-b", "main", bare},
		{"-C", work, "init", "--quiet", "-b", "main"},
		{"-C", work, "add", "-A"},
		{"-C", work, "commit", "--quiet", "-m", "tools"},
		{"-C", work, "push", "--quiet", bare, "HEAD:refs/heads/main"},
	} {
		cmd := exec.CommandContext(ctx, git, a...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("git %s: %v\n%s", strings.Join(a, " "), err, out)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{
		Handler:           &cgi.Handler{Path: git, Args: []string{"http-backend"}, Env: append(env, "GIT_PROJECT_ROOT="+root, "GIT_HTTP_EXPORT_ALL=1")},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String() + "/tools.git", nil
}

// machine describes what of this machine decides a start's CPU beside
// the daemon's own work: the kernel's transparent huge pages setting and
// what a fresh 4 KiB page of anonymous memory costs (64 MiB touched, the
// best of three). The daemon's heap gets 4 KiB pages unless the setting
// is "always" (Go does not ask for huge pages), so on a VM where a page
// fault costs tens of microseconds the pages a start touches are most of
// its CPU (docs/operations.md, "Start time").
func machine() string {
	thp := "none"
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil {
		thp = strings.TrimSpace(string(b))
	}
	const size = 64 << 20
	var best time.Duration
	for range 3 {
		m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			return "machine: transparent huge pages " + thp + "; page fault cost not measured: " + err.Error()
		}
		start := time.Now()
		for i := 0; i < size; i += 4096 {
			m[i] = 1
		}
		if d := time.Since(start); best == 0 || d < best {
			best = d
		}
		syscall.Munmap(m)
	}
	return fmt.Sprintf("machine: transparent huge pages %s; a fresh 4 KiB page costs %.1f µs (64 MiB touched in %d ms)",
		thp, float64(best.Nanoseconds())/1e3/(size/4096), best.Milliseconds())
}

// benchRepo is the work tree and the bare repository the daemon's git
// source serves (serveRepo).
type benchRepo struct {
	git, work, bare string
	env             []string
	changes         int
}

func (b *benchRepo) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.git, args...)
	cmd.Env = b.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// changedTool is the definition the webhook cases change, by its path in
// the repository.
const changedTool = "tools/tool-00042/TOOL.hdlp"

// withIntent returns the definition data with its intent line's text
// replaced by intent.
func withIntent(data []byte, intent string) ([]byte, error) {
	head, rest, ok := strings.Cut(string(data), "\nintent: ")
	if !ok {
		return nil, fmt.Errorf("%s: no intent line", changedTool)
	}
	_, rest, _ = strings.Cut(rest, "\n")
	return fmt.Appendf(nil, "%s\nintent: %s\n%s", head, intent, rest), nil
}

// commitPush makes k commits, the first changing changedTool's intent,
// each next one the next tool's (tool-00043, ...), pushes them at once,
// and returns the new head.
func (b *benchRepo) commitPush(ctx context.Context, k int) (string, error) {
	b.changes++
	for i := range k {
		file := changedTool
		if i > 0 {
			file = fmt.Sprintf("tools/tool-%05d/TOOL.hdlp", 42+i)
		}
		p := filepath.Join(b.work, filepath.FromSlash(file))
		data, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		if data, err = withIntent(data, fmt.Sprintf("查看第 %d 号 nginx 服务的运行状态（第 %d 次修改）", 42+i, b.changes)); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return "", err
		}
		if _, err := b.run(ctx, "-C", b.work, "commit", "--quiet", "-am", fmt.Sprintf("change %d of %s", b.changes, file)); err != nil {
			return "", err
		}
	}
	if _, err := b.run(ctx, "-C", b.work, "push", "--quiet", b.bare, "HEAD:refs/heads/main"); err != nil {
		return "", err
	}
	return b.run(ctx, "-C", b.work, "rev-parse", "HEAD")
}

// pushChanges makes n pushes of k one-tool commits, each push announced
// to the daemon at addr by a signed push webhook as Forgejo sends it, and
// times each from
// the POST to /v1/status serving the commit; cpu is the daemon's CPU
// time over that span, rss its resident set after. shallow says the
// daemon's clone is one commit deep (not with trusted signers).
func pushChanges(ctx context.Context, repo *benchRepo, url, addr string, pid int, secret []byte, n, k int, shallow bool) ([]sample, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	var out []sample
	for range n {
		prev, err := repo.run(ctx, "-C", repo.work, "rev-parse", "HEAD")
		if err != nil {
			return nil, err
		}
		commit, err := repo.commitPush(ctx, k)
		if err != nil {
			return nil, err
		}
		body := fmt.Appendf(nil, `{"ref":"refs/heads/main","before":"","after":%q}`, commit)
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/hooks/forgejo", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forgejo-Event", "push")
		req.Header.Set("X-Forgejo-Signature", hex.EncodeToString(mac.Sum(nil)))
		cpu0 := procCPU(pid)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return nil, fmt.Errorf("webhook: %s %s", resp.Status, msg)
		}
		if err := waitServed(ctx, client, addr, commit); err != nil {
			return nil, err
		}
		sm := sample{wall: time.Since(start), cpu: procCPU(pid) - cpu0}
		sm.rss, sm.anon, _ = procRSS(pid)
		if sm.server, err = serverShare(ctx, url, strings.TrimSpace(prev), strings.TrimSpace(commit), shallow); err != nil {
			return nil, err
		}
		out = append(out, sm)
	}
	return out, nil
}

// waitServed waits, up to a minute, for the daemon at addr to serve
// commit (its /v1/status revision) with every tool enabled.
func waitServed(ctx context.Context, client *http.Client, addr, commit string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var st struct {
			Revision string         `json:"revision"`
			Tools    map[string]int `json:"tools"`
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/status", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
		}
		if st.Revision == commit {
			// A tool not callable would make the change not what was
			// timed (a signature refused, a definition broken).
			if n := st.Tools["total"] - st.Tools["enabled"]; n != 0 {
				return fmt.Errorf("commit %s is served, but %d of its %d tools are not enabled: %v", commit, n, st.Tools["total"], st.Tools)
			}
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("commit %s not served within a minute (serving %q)", commit, st.Revision)
		}
		time.Sleep(time.Millisecond)
	}
}

// serverShare times the git server answering the fetch a daemon at
// commit prev (a clone one commit deep when shallow, else the whole
// history) makes for commit: the ref
// advertisement, then the thin pack, read to its end. It runs after the
// daemon served commit, so the two do not share the machine: it is the
// floor of any client of this server, the daemon's share is the rest.
func serverShare(ctx context.Context, url, prev, commit string, shallow bool) (time.Duration, error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return 0, err
	}
	cl, err := gitclient.NewClient(ep)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	sess, err := cl.NewUploadPackSession(ep, nil)
	if err != nil {
		return 0, err
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return 0, err
	}
	req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
	caps := []capability.Capability{capability.ThinPack, capability.NoProgress}
	if shallow {
		caps = append(caps, capability.Shallow)
	}
	for _, c := range caps {
		if err := req.Capabilities.Set(c); err != nil {
			return 0, err
		}
	}
	req.Wants = []plumbing.Hash{plumbing.NewHash(commit)}
	req.Haves = []plumbing.Hash{plumbing.NewHash(prev)}
	if shallow {
		req.Depth = packp.DepthCommits(1)
		req.Shallows = []plumbing.Hash{plumbing.NewHash(prev)}
	}
	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return 0, err
	}
	defer resp.Close()
	if _, err := io.Copy(io.Discard, resp); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// roundOrder is the order of n binaries in round r: each round starts with
// the next one, so no binary is always first. The first of a round was
// measured faster (its git-webhook pushes were answered 10-20 ms sooner
// by the git server, docs/operations.md), which a fixed order gave to one
// binary every time.
func roundOrder(r, n int) []int {
	order := make([]int, n)
	for k := range order {
		order[k] = (r + k) % n
	}
	return order
}
