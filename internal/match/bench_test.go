package match

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// synthDocs makes n tools from a fixed seed, mixing English and Chinese
// fields the way real tool definitions do, each with five examples (the
// 4-6 requests, in both languages, a shipped tool gives), and, for one tool
// in three, requests learned from use (catalog.LearnedField: a Learned
// field of weight 1; one to eight of them, where the daemon keeps at most
// 32). The examples and learned requests come from generators of their
// own, so the other fields are those the benchmarks had before examples
// existed.
func synthDocs(n int) []Doc {
	r := rand.New(rand.NewPCG(1, 2))
	er := rand.New(rand.NewPCG(3, 4))
	lr := rand.New(rand.NewPCG(5, 6))
	verbs := []string{"restart", "list", "show", "delete", "create", "renew", "export", "restore", "search", "tail", "deploy", "merge", "probe", "kill", "read"}
	objs := []string{"service", "file", "certificate", "database", "table", "issue", "pull request", "log", "port", "process", "disk", "memory", "container", "cron job", "alert", "metric", "backup", "branch", "commit", "domain"}
	zh := []string{"重启服务", "查看日志", "删除文件", "续签证书", "导出表数据", "恢复数据库", "搜索问题单", "合并分支", "检查端口", "结束进程", "磁盘占用", "内存使用", "定时任务", "当前告警", "监控指标", "发布应用", "提交记录"}
	docs := make([]Doc, n)
	for i := range docs {
		v, o := verbs[r.IntN(len(verbs))], objs[r.IntN(len(objs))]
		docs[i] = Doc{ID: fmt.Sprintf("%s-%s-%d", v, o, i), Fields: []Field{
			{Name: "name", Text: fmt.Sprintf("%s %s %d", v, o, i), Weight: 2.5},
			{Name: "display", Text: zh[r.IntN(len(zh))], Weight: 2.5},
			{Name: "intent", Text: fmt.Sprintf("%s the %s on a host, then %s its %s and report the result for team%d.", v, o, verbs[r.IntN(len(verbs))], objs[r.IntN(len(objs))], r.IntN(500)), Weight: 2},
			{Name: "why", Text: zh[r.IntN(len(zh))] + "时需要一个有记录的入口。", Weight: 0.7},
			{Name: "params", Text: "host: target server. name: " + o + " name.", Weight: 0.5},
		}}
		for _, ex := range []string{
			fmt.Sprintf("please %s the %s on web-%02d", v, o, er.IntN(100)),
			fmt.Sprintf("can you %s %s %d for team%d", verbs[er.IntN(len(verbs))], o, er.IntN(1000), er.IntN(500)),
			fmt.Sprintf("帮我%s，team%d 那边在等", zh[er.IntN(len(zh))], er.IntN(500)),
			fmt.Sprintf("%s %s 的情况怎么样", o, zh[er.IntN(len(zh))]),
			fmt.Sprintf("why can't I %s the %s since the last %s", v, objs[er.IntN(len(objs))], objs[er.IntN(len(objs))]),
		} {
			docs[i].Fields = append(docs[i].Fields, Field{Name: "examples", Text: ex, Weight: 3, Example: true})
		}
		if i%3 != 0 {
			continue
		}
		for range 1 + lr.IntN(8) {
			var q string
			if lr.IntN(2) == 0 {
				q = fmt.Sprintf("%s %s on app-%02d again, it is stuck", v, o, lr.IntN(100))
			} else {
				q = fmt.Sprintf("%s一下 %s，db-%02d 上的", zh[lr.IntN(len(zh))], o, lr.IntN(100))
			}
			docs[i].Fields = append(docs[i].Fields, Field{Name: "learned", Text: q, Weight: 1, Learned: true})
		}
	}
	return docs
}

var benchQueries = []string{
	"restart the nginx service on web-02",
	"看下 nginx 的 error log 最后那些报错",
	"证书快到期了，帮我续一下",
	"export the users table as csv",
	"把 api-gateway 服务重起一下",
	"how much free memmory does worker-2 have",
	"明天北京会下雨吗",
	"deploy order-service 1.12.0 to production and tell me when the health check passes",
}

func BenchmarkBuild10k(b *testing.B) {
	docs := synthDocs(10000)
	DefaultVocab()
	b.ReportAllocs()
	for b.Loop() {
		New(docs, nil)
	}
}

func BenchmarkMatch10k(b *testing.B) {
	ix := New(synthDocs(10000), nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ix.Match(benchQueries[i%len(benchQueries)], 3)
		i++
	}
}

// BenchmarkMatch10kP99 reports the 99th percentile of single-query latency
// (p99-ns) besides the mean.
func BenchmarkMatch10kP99(b *testing.B) { benchP99(b, 10000) }

// benchP99 times single queries over n synthetic tools and reports their
// 99th percentile.
func benchP99(b *testing.B, n int) {
	ix := New(synthDocs(n), nil)
	b.ReportAllocs()
	var durs []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		ix.Match(benchQueries[i%len(benchQueries)], 3)
		durs = append(durs, time.Since(start))
		i++
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkUpdate10k replaces one document of 10,000, as a reload after
// one edited file does.
func BenchmarkUpdate10k(b *testing.B) { benchUpdate(b, 10000) }

// BenchmarkUpdate100k is BenchmarkUpdate10k at 100,000 tools.
func BenchmarkUpdate100k(b *testing.B) { benchUpdate(b, 100000) }

func benchUpdate(b *testing.B, n int) {
	docs := synthDocs(n)
	slices.SortFunc(docs, func(a, b Doc) int { return cmp.Compare(a.ID, b.ID) })
	ix := New(docs, nil)
	old := docs[n/2]
	edited := Doc{ID: old.ID, Fields: slices.Clone(old.Fields)}
	edited.Fields[2] = Field{Name: "intent", Text: old.Fields[2].Text + " 并检查最近的日志", Weight: 2}
	b.ReportAllocs()
	for b.Loop() {
		ix.Update([]Doc{old}, []Doc{edited})
	}
}

// BenchmarkMatch100kP99 is BenchmarkMatch10kP99 at 100,000 tools.
func BenchmarkMatch100kP99(b *testing.B) { benchP99(b, 100000) }

// benchCatalogDocs are the documents of bench catalog's tools (the
// synthetic TOOL.hdlp of internal/cmd/benchstart, fields as
// catalog.ToolDoc makes them): mostly Chinese, each with its own number.
func benchCatalogDocs(n int) []Doc {
	docs := make([]Doc, n)
	for i := range docs {
		docs[i] = Doc{ID: fmt.Sprintf("tool-%05d", i), Fields: []Field{
			{Name: "name", Text: fmt.Sprintf("tool %05d", i), Weight: 2.5},
			{Name: "display", Text: fmt.Sprintf("查看 nginx 服务 %d 号", i), Weight: 2.5},
			{Name: "intent", Text: fmt.Sprintf("查看第 %d 号 nginx 服务在目标主机上的运行状态", i), Weight: 2},
			{Name: "keywords", Text: fmt.Sprintf("show, nginx, nginx%d", i), Weight: 2.5},
			{Name: "why", Text: "toolagent benchstart 生成的合成工具，用来测量启动。", Weight: 0.7, Context: true},
			{Name: "params", Text: "host: 目标主机名，如 web-01.", Weight: 0.5, Context: true},
		}}
	}
	return docs
}

func BenchmarkBuildBench10k(b *testing.B) {
	docs := benchCatalogDocs(10000)
	DefaultVocab()
	b.ReportAllocs()
	for b.Loop() {
		New(docs, nil)
	}
}
