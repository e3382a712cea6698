package surface_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// module is the operator module's path; its internal/ is the operator's.
const module = "github.com/featuregate-operator/operator"

// A library package (under pkg/) is for others to import: it may not
// reach up into the operator's internal/, or an adopter's build would
// depend on what the operator keeps to itself (tests included: they ship
// with the package).
func TestLibraryImportsNoOperatorInternals(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if p == module+"/internal" || strings.HasPrefix(p, module+"/internal/") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s: a library package imports nothing of the operator's internal/", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
