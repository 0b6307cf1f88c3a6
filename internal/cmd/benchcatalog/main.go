// Command benchcatalog measures the daemon's catalog on a synthetic
// tools tree: start-up (cold and warm), a reload after one changed file
// (polled and watched), memory, the MCP lists and intent matching. It
// builds the daemon as serve does (internal/daemon), in this process.
// It is a development tool, not part of the product binary:
//
//	go run ./internal/cmd/benchcatalog --tools 10000 --dir /var/tmp
//
// docs/operations.md ("Large catalogs") explains the figures.
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/daemon"
	"github.com/toolagent/toolagent/internal/mcpserver"
	"github.com/toolagent/toolagent/internal/repo"
	"github.com/toolagent/toolagent/internal/scan"
	"github.com/toolagent/toolagent/internal/settings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcatalog:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// errUsage marks bad flags or arguments (exit status 2).
var errUsage = errors.New("usage")

// run parses args, runs the benchmark and prints its figures on stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchcatalog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("tools", 10000, "number `N` of synthetic tools (each TOOL.hdlp about 450 bytes: one param, an argv, a Chinese display)")
	queries := fs.Int("queries", 2000, "intent queries `N` timed through the match index")
	parent := fs.String("dir", "", "`DIR` to write the catalog and its state in, in a new folder (default: the system's temporary directory; choose one on the disk the daemon will use)")
	keep := fs.Bool("keep", false, "keep the generated tools tree and state directory (printed) instead of removing them")
	asJSON := fs.Bool("json", false, "print the figures as one JSON object")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: benchcatalog takes no arguments; got %q", errUsage, fs.Args())
	}
	if *n < 2 || *queries < 1 {
		return fmt.Errorf("%w: --tools must be at least 2 and --queries at least 1", errUsage)
	}
	dir, err := os.MkdirTemp(*parent, "toolagent-bench-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	r, err := benchCatalog(ctx, stderr, dir, *n, *queries)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	writeBench(stdout, r, *keep)
	return nil
}

// benchSettle is how long bench waits after writing the catalog before the
// cold start: a local directory trusts a file's stat only once its change
// time is older than the file system's clock granularity (repo.LocalDir),
// and the warm start is meant to find every file settled, as a restart
// does.
const benchSettle = 250 * time.Millisecond

// benchWatched is how many watched reloads bench times (see benchCatalog).
const benchWatched = 5

// benchReport is what benchcatalog prints.
type benchReport struct {
	Tools      int    `json:"tools"`
	Dir        string `json:"dir"`
	FileBytes  int    `json:"file_bytes_avg"` // mean size of a TOOL.hdlp
	GOMAXPROCS int    `json:"gomaxprocs"`

	Cold       benchStart `json:"cold_start"`         // no state: every file parsed
	Warm       benchStart `json:"warm_start"`         // same state, nothing changed
	Changed    benchStart `json:"one_changed"`        // one file rewritten, one reload that stats every file
	Watched    benchStart `json:"one_watched"`        // the same, with the watcher's report of the folder (repo.LocalDir.Track): the median of benchWatched
	WatchedMax float64    `json:"one_watched_max_ms"` // the slowest of them, ready + index
	// The MCP lists of the warm catalog, as serve makes them (mcpserver,
	// every tool; their pages are made per tools/list): how many, and how
	// long making them took.
	MCPListed int     `json:"mcp_listed"`
	MCPListMS float64 `json:"mcp_list_ms"`
	Heap      uint64  `json:"live_heap"`     // bytes live after the warm start, the reloads and the MCP lists
	PerTool   uint64  `json:"heap_per_tool"` // Heap / Tools
	RSS       uint64  `json:"rss"`           // resident set after returning free memory
	PeakRSS   uint64  `json:"rss_peak"`
	// Where the resident set goes besides live objects: the heap's spans
	// in use (live objects and the free room in their spans), and the
	// runtime's own (collector, span and other metadata, stacks).
	HeapInuse  uint64 `json:"heap_inuse"`
	RuntimeSys uint64 `json:"runtime_sys"`

	Queries int     `json:"queries"`
	P50     float64 `json:"match_p50_ms"`
	P99     float64 `json:"match_p99_ms"`
	Max     float64 `json:"match_max_ms"`
	Found   int     `json:"match_found"` // queries answered with candidates
}

// benchStart is one load of the catalog: until the snapshot is published
// (ready: calls and listings are served) and until its match index is
// built, what the source read and what the build parsed.
type benchStart struct {
	ReadyMS  float64 `json:"ready_ms"`
	CPUMS    float64 `json:"ready_cpu_ms"` // the process's CPU time until ready, all threads
	IndexMS  float64 `json:"index_ms"`     // after ready
	Parsed   int     `json:"parsed"`
	Reused   int     `json:"reused"`
	Scanned  int     `json:"scanned"`   // tool folders the build looked at (scan.Report.Scanned)
	Hashed   int     `json:"hashed"`    // files the source read to hash them
	ReadDirs int     `json:"read_dirs"` // folders whose entries the source read
	Dirs     int     `json:"dirs"`
}

// benchCatalog writes n tools under dir/tools and loads them as the daemon
// does (daemon.New and one reload, with the state in dir/state): a cold start,
// a warm start of a new daemon on the same state, one changed file, then
// memory and matching with that core's catalog.
func benchCatalog(ctx context.Context, stderr io.Writer, dir string, n, queries int) (benchReport, error) {
	tools, state := filepath.Join(dir, "tools"), filepath.Join(dir, "state")
	r := benchReport{Tools: n, Dir: dir, GOMAXPROCS: runtime.GOMAXPROCS(0), Queries: queries}
	size, err := writeBenchTools(tools, n)
	if err != nil {
		return r, err
	}
	r.FileBytes = size / n
	time.Sleep(benchSettle)
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cold, err := benchLoad(ctx, tools, state, log)
	if err != nil {
		return r, err
	}
	r.Cold = cold.start
	cold.close()

	warm, err := benchLoad(ctx, tools, state, log)
	if err != nil {
		return r, err
	}
	defer warm.close()
	r.Warm = warm.start
	// What serve keeps to list the catalog over MCP is held as long as
	// the catalog (the surfaces sync after each publish, off the
	// reload's path).
	t0 := time.Now()
	lists := mcpserver.New(warm.d.Store(), warm.d.Dispatcher(), mcpserver.Options{})
	r.MCPListMS, r.MCPListed = ms(time.Since(t0)), lists.Listed()

	// One definition changes, as an editor would save it: once as a
	// reload with no watcher sees it (every file statted; it is also the
	// reload the watcher's Track(true) asks for), then benchWatched times
	// as the daemon's watcher reports it, each another tool; the median
	// of those is reported, as one reload of a big heap may meet the
	// collector and the next not.
	warm.dir.Track(true)
	edit := func(i int) error {
		f := filepath.Join(tools, benchToolName(i), "TOOL.hdlp")
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		return os.WriteFile(f, []byte(strings.Replace(string(data), "运行状态", "运行状态和最近的日志", 1)), 0o644)
	}
	watched := make([]benchStart, benchWatched)
	for i := range 1 + benchWatched {
		st := &r.Changed
		if i > 0 {
			st = &watched[i-1]
		}
		// An edit after a quiet spell: the last saves are done (the parse
		// cache's, the listing's), and the last edit settled (a Sync reads
		// again a file changed just before it, and the next one too when
		// that was still too fresh).
		warm.d.WaitSaved()
		warm.dir.Flush()
		if i > 0 {
			time.Sleep(benchSettle)
		}
		tool := (n/2 + i) % n
		if err := edit(tool); err != nil {
			return r, err
		}
		if i > 0 {
			warm.dir.Changed(benchToolName(tool))
		}
		if *st, err = warm.reload(ctx); err != nil {
			return r, err
		}
		if st.Parsed != 1 {
			return r, fmt.Errorf("bench: the reload after one change parsed %d files, want 1", st.Parsed)
		}
	}
	total := func(s benchStart) float64 { return s.ReadyMS + s.IndexMS }
	slices.SortFunc(watched, func(a, b benchStart) int { return cmp.Compare(total(a), total(b)) })
	r.Watched, r.WatchedMax = watched[len(watched)/2], total(watched[len(watched)-1])

	// Memory as the daemon holds it after a quiet minute: the parse
	// cache's save done, the updated index built anew (Loop.CompactAfter).
	warm.d.Store().Compact()
	snap := warm.d.Store().Load()
	snap.BuildIndex()
	lists.Sync()       // the edits' tools, as serve's surfaces would
	warm.d.WaitSaved() // the parse cache's save is transient memory
	runtime.GC()
	runtime.GC()
	var live runtime.MemStats
	runtime.ReadMemStats(&live)
	if live.HeapAlloc > base.HeapAlloc {
		r.Heap = live.HeapAlloc - base.HeapAlloc
	}
	r.PerTool = r.Heap / uint64(n)
	debug.FreeOSMemory()
	r.RSS, r.PeakRSS = procStatus("VmRSS"), procStatus("VmHWM")
	runtime.ReadMemStats(&live)
	r.HeapInuse = live.HeapInuse
	r.RuntimeSys = live.GCSys + live.MSpanSys + live.MCacheSys + live.BuckHashSys + live.OtherSys + live.StackSys
	runtime.KeepAlive(snap)
	runtime.KeepAlive(lists)

	times := make([]time.Duration, queries)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range times {
		q := benchQuery(rnd, n)
		t0 := time.Now()
		resp := snap.MatchIntent(q, catalog.MaxCandidates)
		times[i] = time.Since(t0)
		if resp.Found {
			r.Found++
		}
	}
	slices.Sort(times)
	r.P50 = ms(times[len(times)/2])
	r.P99 = ms(times[min(len(times)-1, len(times)*99/100)])
	r.Max = ms(times[len(times)-1])
	return r, nil
}

// benchDaemon is a daemon loaded by benchLoad.
type benchDaemon struct {
	d     *daemon.Daemon
	dir   *repo.LocalDir
	start benchStart
	// ready is when the last build returned, and the CPU time used then:
	// Once publishes its snapshot right after, then builds the match
	// index before it returns.
	ready    time.Time
	readyCPU time.Duration
	last     scan.Report
}

// benchLoad builds a daemon over the tools tree as serve does (the role
// of sync: no tool runs) and loads it once, timing from before
// daemon.New (which opens the parse cache).
func benchLoad(ctx context.Context, tools, state string, log *slog.Logger) (*benchDaemon, error) {
	start, cpu := time.Now(), cpuTime()
	var cfg daemon.Config
	settings.New(&cfg, settings.Options{}) // the defaults
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &benchDaemon{}
	cfg.Tools, cfg.State, cfg.Role, cfg.Logger = tools, state, daemon.Sync, log
	cfg.OnBuild = func(rep scan.Report) { b.ready, b.readyCPU, b.last = time.Now(), cpuTime(), rep }
	d, err := daemon.New(cfg)
	if err != nil {
		return nil, err
	}
	b.d, b.dir = d, d.LocalDir()
	if b.dir == nil {
		d.Close()
		return nil, fmt.Errorf("bench: the source of %s is not a local directory", tools)
	}
	if b.start, err = b.once(ctx, start, cpu); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// reload rereads the tools tree once, as a file event makes the daemon do.
func (b *benchDaemon) reload(ctx context.Context) (benchStart, error) {
	return b.once(ctx, time.Now(), cpuTime())
}

func (b *benchDaemon) once(ctx context.Context, start time.Time, cpu time.Duration) (benchStart, error) {
	changed, err := b.d.Once(ctx)
	if err != nil {
		return benchStart{}, err
	}
	if !changed {
		return benchStart{}, errors.New("bench: the reload published no new snapshot")
	}
	done := time.Now()
	st := b.dir.LastSync()
	return benchStart{
		ReadyMS: ms(b.ready.Sub(start)), CPUMS: ms(b.readyCPU - cpu), IndexMS: ms(done.Sub(b.ready)),
		Parsed: b.last.Parsed, Reused: b.last.Reused, Scanned: b.last.Scanned,
		Hashed: st.Hashed, ReadDirs: st.ReadDirs, Dirs: st.Dirs,
	}, nil
}

func (b *benchDaemon) close() { b.d.Close() }

// writeBenchTools writes n tool folders under dir and returns the bytes
// written. Tools differ in an action, a service and a number, so intent
// matching has words to tell them apart.
func writeBenchTools(dir string, n int) (int, error) {
	size := 0
	for i := range n {
		p := filepath.Join(dir, benchToolName(i))
		if err := os.MkdirAll(p, 0o755); err != nil {
			return 0, err
		}
		data := benchTool(i)
		if err := os.WriteFile(filepath.Join(p, "TOOL.hdlp"), data, 0o644); err != nil {
			return 0, err
		}
		size += len(data)
	}
	return size, nil
}

// Words of the synthetic tools and queries.
var (
	benchActions  = [][2]string{{"查看", "show"}, {"重启", "restart"}, {"备份", "backup"}, {"清理", "clean"}, {"统计", "count"}, {"检查", "check"}, {"扩容", "scale"}, {"回滚", "rollback"}}
	benchServices = []string{"nginx", "redis", "mysql", "kafka", "etcd", "minio", "grafana", "postgres", "rabbitmq", "consul", "vault", "jenkins", "gitea", "haproxy", "memcached", "clickhouse"}
)

func benchToolName(i int) string { return fmt.Sprintf("tool-%05d", i) }

// benchTool is the TOOL.hdlp of tool i.
func benchTool(i int) []byte {
	act, svc := benchActions[i%len(benchActions)], benchServices[(i/len(benchActions))%len(benchServices)]
	return fmt.Appendf(nil, `name: %[1]s
display: %[2]s%[3]s 服务 %[5]d 号
intent: %[2]s第 %[5]d 号 %[3]s 服务在目标主机上的运行状态
method: run
executor: shell
argv: [echo, %[4]s, %[3]s-%[5]d, "{host}"]
params_schema:
  host: { type: string, required: true, description: "目标主机名，如 web-01" }
keywords: [%[4]s, %[3]s, %[3]s%[5]d]
author: bench
created: 2026-01-01
why: toolagent benchcatalog 生成的合成工具，用来测量启动、内存和匹配。
`, benchToolName(i), act[0], svc, act[1], i)
}

// benchQuery is a query about one of the n tools, in Chinese or English,
// or, one time in ten, about nothing the catalog holds.
func benchQuery(rnd *rand.Rand, n int) string {
	i := rnd.IntN(n)
	act, svc := benchActions[i%len(benchActions)], benchServices[(i/len(benchActions))%len(benchServices)]
	switch rnd.IntN(10) {
	case 0:
		return "帮我订一张明天去上海的机票"
	case 1, 2, 3, 4:
		return fmt.Sprintf("%s一下 %d 号 %s 服务", act[0], i, svc)
	default:
		return fmt.Sprintf("%s %s %d on web-01", act[1], svc, i)
	}
}

// procStatus returns a size field of /proc/self/status in bytes (0 where
// there is none).
func procStatus(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// cpuTime is the CPU time the process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// writeBench prints r as a few aligned lines.
func writeBench(w io.Writer, r benchReport, kept bool) {
	fmt.Fprintf(w, "catalog: %d synthetic tools, %d bytes per TOOL.hdlp on average; GOMAXPROCS %d\n", r.Tools, r.FileBytes, r.GOMAXPROCS)
	if kept {
		fmt.Fprintf(w, "kept: %s (tools/ and state/)\n", r.Dir)
	}
	line := func(what string, s benchStart) {
		fmt.Fprintf(w, "%-40s ready %7.1f ms (cpu %7.1f ms)   index +%6.1f ms   parsed %6d   hashed %6d   folders read %6d of %d   scanned %6d\n",
			what, s.ReadyMS, s.CPUMS, s.IndexMS, s.Parsed, s.Hashed, s.ReadDirs, s.Dirs, s.Scanned)
	}
	line("cold start (no state)", r.Cold)
	line("warm start (nothing changed)", r.Warm)
	line("one file changed (reload)", r.Changed)
	line(fmt.Sprintf("one file changed (watched, median of %d)", benchWatched), r.Watched)
	fmt.Fprintf(w, "%-40s slowest of those: ready + index %.1f ms\n", "", r.WatchedMax)
	fmt.Fprintf(w, "%-40s %d tools listed in %.1f ms (serve makes them after ready)\n", "mcp lists", r.MCPListed, r.MCPListMS)
	fmt.Fprintf(w, "%-40s live heap %.1f MiB = %d bytes per tool; RSS %.1f MiB (peak %.1f MiB)\n",
		"memory", mib(r.Heap), r.PerTool, mib(r.RSS), mib(r.PeakRSS))
	fmt.Fprintf(w, "%-40s heap spans in use %.1f MiB; runtime metadata and stacks %.1f MiB\n", "", mib(r.HeapInuse), mib(r.RuntimeSys))
	fmt.Fprintf(w, "%-40s p50 %.3f ms   p99 %.3f ms   max %.3f ms   (%d of %d found)\n",
		fmt.Sprintf("match (%d queries)", r.Queries), r.P50, r.P99, r.Max, r.Found, r.Queries)
}
