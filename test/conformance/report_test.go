package conformance_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
)

// After the suite: the counts per mode, and two checks that keep the port
// honest as controller-runtime moves: every spec of upstream's
// manager_test.go (in the module cache, at the version the suite is built
// against) is either ported or listed as not portable, and every skip
// entry names a spec that exists in its mode.
var _ = ReportAfterSuite("conformance counts", func(r Report) {
	var problems []string
	perMode := map[string][]SpecReport{}
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt || len(s.ContainerHierarchyTexts) == 0 {
			continue
		}
		perMode[s.ContainerHierarchyTexts[0]] = append(perMode[s.ContainerHierarchyTexts[0]], s)
	}
	v, _ := crVersion()
	for _, md := range modes {
		var passed, design, gap, failed, filtered int
		names := map[string]bool{}
		for _, s := range perMode[md.name] {
			name := specName(s)
			names[name] = true
			reason, listed := md.skip[name]
			switch {
			case s.State == types.SpecStatePassed:
				passed++
				if listed {
					problems = append(problems, fmt.Sprintf("mode %s lists %q as skipped (%s), but it passed: remove the entry", md.name, name, reason))
				}
			case s.State == types.SpecStateSkipped && listed && s.Failure.Message == reason:
				if strings.HasPrefix(reason, gapPrefix) {
					gap++
				} else {
					design++
				}
			case s.State == types.SpecStateSkipped:
				filtered++
			default:
				failed++
			}
		}
		for name := range md.skip {
			if !names[name] {
				problems = append(problems, fmt.Sprintf("mode %s skips %q, which is no spec of this suite", md.name, name))
			}
		}
		line := fmt.Sprintf("conformance: controller-runtime %s, %s: %d passed, %d skipped by design, %d skipped as gap, %d failed; %d not portable",
			v, md.name, passed, design, gap, failed, len(notPortable))
		if filtered > 0 {
			line += fmt.Sprintf(" (%d not run: filtered)", filtered)
		}
		fmt.Fprintln(os.Stdout, line)
	}

	// Upstream's specs, each ported (in every mode) or not portable.
	upstream, err := upstreamSpecs()
	if err != nil {
		problems = append(problems, err.Error())
	}
	ported := map[string]bool{}
	for _, s := range perMode[modes[0].name] {
		ported[specName(s)] = true
	}
	seen := map[string]bool{}
	for _, name := range upstream {
		seen[name] = true
		_, np := notPortable[name]
		switch {
		case ported[name] && np:
			problems = append(problems, fmt.Sprintf("%q is both ported and listed as not portable", name))
		case !ported[name] && !np:
			problems = append(problems, fmt.Sprintf("upstream spec %q is neither ported nor listed as not portable", name))
		}
	}
	if err == nil {
		for name := range ported {
			if !seen[name] {
				problems = append(problems, fmt.Sprintf("ported spec %q is not in upstream's manager_test.go at %s", name, v))
			}
		}
		for name := range notPortable {
			if !seen[name] {
				problems = append(problems, fmt.Sprintf("not-portable entry %q is not in upstream's manager_test.go at %s", name, v))
			}
		}
		fmt.Fprintf(os.Stdout, "conformance: upstream manager_test.go at %s: %d specs, %d ported, %d not portable\n",
			v, len(upstream), len(ported), len(notPortable))
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		Fail("the port is out of step with its lists:\n" + strings.Join(problems, "\n"))
	}
})

// upstreamSpecs are the names of the specs of controller-runtime's
// pkg/manager/manager_test.go at the resolved version, as specName gives
// them: container texts, then the spec's. The specs of the startSuite
// closure are named once per Context that calls it.
func upstreamSpecs() ([]string, error) {
	dir, err := goList("{{.Dir}}", "sigs.k8s.io/controller-runtime")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "pkg", "manager", "manager_test.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("upstream specs: %w", err)
	}
	var names []string
	var suite []string // the leaf texts of startSuite
	var walk func(n ast.Node, path []string, inSuite bool)
	walk = func(n ast.Node, path []string, inSuite bool) {
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				// startSuite := func(options Options, callbacks ...func(Manager)) {...}
				if id, ok := n.Lhs[0].(*ast.Ident); ok && id.Name == "startSuite" {
					walk(n.Rhs[0], nil, true)
					return false
				}
			case *ast.CallExpr:
				id, ok := n.Fun.(*ast.Ident)
				if !ok {
					return true
				}
				switch id.Name {
				case "startSuite":
					for _, leaf := range suite {
						names = append(names, strings.Join(append(slices.Clone(path), leaf), " "))
					}
					return false
				case "Describe", "Context", "When", "It":
					text, ok := stringArg(n)
					if !ok {
						return true
					}
					if id.Name == "It" {
						if inSuite {
							suite = append(suite, text)
						} else {
							names = append(names, strings.Join(append(slices.Clone(path), text), " "))
						}
						return false
					}
					if id.Name == "When" {
						text = "when " + text
					}
					for _, a := range n.Args[1:] {
						if fl, ok := a.(*ast.FuncLit); ok {
							walk(fl.Body, append(slices.Clone(path), text), inSuite)
						}
					}
					return false
				}
			}
			return true
		})
	}
	walk(f, nil, false)
	if len(names) == 0 {
		return nil, fmt.Errorf("upstream specs: none found in %s", path)
	}
	return names, nil
}

func stringArg(c *ast.CallExpr) (string, bool) {
	if len(c.Args) == 0 {
		return "", false
	}
	lit, ok := c.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
