package hldp

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
