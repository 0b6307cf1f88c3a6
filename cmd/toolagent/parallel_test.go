package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryTestParallel keeps this package's tests running at once (see
// TestMain): each Test function's first statement is t.Parallel(), or its
// doc comment says why not ("Not parallel: ..."). A test added without
// either fails here, naming its file and line.
func TestEveryTestParallel(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	tests := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" || fn.Body == nil {
				continue
			}
			tests++
			if strings.Contains(fn.Doc.Text(), "Not parallel: ") || firstIsParallel(fn.Body) {
				continue
			}
			t.Errorf("%s: %s neither calls t.Parallel() first nor says in its doc comment why not (\"Not parallel: ...\")", fset.Position(fn.Pos()), fn.Name.Name)
		}
	}
	if tests < 100 {
		t.Errorf("found %d tests in %d files; want this package's (over 100)", tests, len(files))
	}
}

// firstIsParallel reports whether body starts with t.Parallel().
func firstIsParallel(body *ast.BlockStmt) bool {
	if len(body.List) == 0 {
		return false
	}
	es, ok := body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Parallel" && len(call.Args) == 0
}
