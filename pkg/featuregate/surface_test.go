package featuregate_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
	"testing"
)

// The package's exported surface stays small: what adopters must learn is
// NewGuard, NewManager, the Gates they ask, and the Snapshot behind them.
// Counted as `go doc -all` lists it: every exported constant, variable,
// function, type, method, and method of an exported interface.
func TestExportedSurface(t *testing.T) {
	const limit = 25
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/featuregate-operator/operator/pkg/featuregate")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			names = append(names, v.Names...)
		}
	}
	values(p.Consts)
	values(p.Vars)
	for _, f := range p.Funcs {
		names = append(names, f.Name)
	}
	for _, typ := range p.Types {
		names = append(names, typ.Name)
		values(typ.Consts)
		values(typ.Vars)
		for _, f := range typ.Funcs {
			names = append(names, f.Name)
		}
		for _, m := range typ.Methods {
			names = append(names, typ.Name+"."+m.Name)
		}
		for _, spec := range typ.Decl.Specs {
			if it, ok := spec.(*ast.TypeSpec).Type.(*ast.InterfaceType); ok {
				for _, m := range it.Methods.List {
					for _, n := range m.Names {
						names = append(names, typ.Name+"."+n.Name)
					}
				}
			}
		}
	}
	sort.Strings(names)
	t.Logf("%d exported identifiers: %s", len(names), strings.Join(names, " "))
	if len(names) > limit {
		t.Errorf("%d exported identifiers, more than %d: %s", len(names), limit, strings.Join(names, " "))
	}
	if len(names) < 10 {
		t.Errorf("only %d exported identifiers found: the count is broken", len(names))
	}
}
