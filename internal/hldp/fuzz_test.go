package hldp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzParse feeds Parse every file under testdata and mutations of them.
// Parse must never panic; a tool it accepts must export valid JSON and
// survive CheckParams and RenderArgv with no params.
func FuzzParse(f *testing.F) {
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f.Add(data)
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(argvTool))
	f.Add([]byte(paramsTool))
	f.Fuzz(func(t *testing.T, data []byte) {
		tool, err := Parse("fuzz.hdlp", data)
		if err != nil {
			if len(Diagnostics(err)) == 0 {
				t.Fatalf("Parse error %v holds no *Diagnostic", err)
			}
			return
		}
		if s := tool.InputSchema(); !json.Valid(s) || !strings.HasPrefix(string(s), `{"type":"object"`) {
			t.Fatalf("InputSchema() = %s, not an object schema", s)
		}
		if _, err := json.Marshal(tool.OpenAIFunction()); err != nil {
			t.Fatalf("OpenAIFunction() does not marshal: %v", err)
		}
		_, _ = tool.CheckParams(nil)
		if len(tool.Argv) > 0 {
			_, _ = tool.RenderArgv(nil)
		}
	})
}

// BenchmarkParse10000 parses and validates 10,000 distinct tool files per
// iteration and reports the cost of one parse.
func BenchmarkParse10000(b *testing.B) {
	const n = 10000
	src, err := os.ReadFile("testdata/good/git-log/TOOL.hdlp")
	if err != nil {
		b.Fatal(err)
	}
	files := make([][]byte, n)
	names := make([]string, n)
	for i := range files {
		name := fmt.Sprintf("git-log-%05d", i)
		names[i] = "tools/" + name + "/" + FileName
		files[i] = []byte(strings.Replace(string(src), "name: git-log", "name: "+name, 1))
	}
	b.ReportAllocs()
	for b.Loop() {
		for i := range files {
			if _, err := Parse(names[i], files[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/parse")
}

// BenchmarkParseSynthetic parses a synthetic tool of the kind benchstart
// writes 10,000 of (about 430 bytes; a sample kept here, not benchstart's
// own template, which a main package cannot share with a test) and sets
// the cost of the whole parse beside
// the part of it that is go.yaml.in/yaml/v3's alone (reading the file into
// a yaml.Node, as Parse does first): the floor of a cold start's parsing
// while the YAML library is yaml.v3.
func BenchmarkParseSynthetic(b *testing.B) {
	data := []byte(`name: tool-01234
display: 查看 nginx 服务 1234 号
intent: 查看第 1234 号 nginx 服务在目标主机上的运行状态
method: run
executor: shell
argv: [echo, show, nginx-1234, "{host}"]
params_schema:
  host: { type: string, required: true, description: "目标主机名，如 web-01" }
keywords: [show, nginx, nginx1234]
author: bench
created: 2026-01-01
why: toolagent benchstart 生成的合成工具，用来测量启动。
`)
	b.Run("yaml.v3", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var doc yaml.Node
			if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Parse("tools/tool-01234/"+FileName, data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
