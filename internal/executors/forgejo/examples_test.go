package forgejo_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolagent/toolagent/internal/executors/forgejo"
	"github.com/toolagent/toolagent/internal/hldp"
)

// TestExamplesParse checks that every examples/<executor>/tools/<name>/
// TOOL.hdlp parses with hldp.Parse, sits under the folder of its executor,
// and — for git-forgejo — names a method this executor has.
func TestExamplesParse(t *testing.T) {
	root := filepath.Join("..", "..", "..", "examples")
	ex := forgejo.New(forgejo.Options{URL: "http://forgejo.invalid"})
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != hldp.FileName {
			return err
		}
		n++
		rel, _ := filepath.Rel(root, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		tool, err := hldp.Parse(path, data)
		if err != nil {
			t.Errorf("Parse(%s) = %v", rel, err)
			return nil
		}
		executor := filepath.Dir(filepath.Dir(filepath.Dir(rel)))
		if executor != string(tool.Executor) || filepath.Base(filepath.Dir(filepath.Dir(rel))) != "tools" {
			t.Errorf("%s: executor %s; want the file at examples/%s/tools/%s/%s", rel, tool.Executor, tool.Executor, tool.Name, hldp.FileName)
		}
		if tool.Executor == hldp.GitForgejo {
			if err := ex.Check(tool); err != nil {
				t.Errorf("Check(%s) = %v", rel, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 4 {
		t.Errorf("found %d example definitions under %s, want at least one per executor", n, root)
	}
}
