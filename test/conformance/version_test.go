package conformance_test

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// The suite runs each controller-runtime version's own specs. Which
// version it is built against is told at compile time by the build tag
// conformance_floor (floor_test.go), which the floor run sets with its
// go.mod (run.sh); a test binary holds no module versions to read. The
// suite checks the tag against the version the module resolves, so that a
// floor go.mod without the tag (or the tag without it) fails at once.

// crVersion is the controller-runtime the module resolves, as go list
// reports it with the GOFLAGS the test runs with (-modfile at the floor).
var crVersion = sync.OnceValues(func() (string, error) {
	return goList("{{.Version}}", "sigs.k8s.io/controller-runtime")
})

// checkVersion is an error when the build tag and the resolved
// controller-runtime disagree.
func checkVersion() error {
	v, err := crVersion()
	if err != nil {
		return err
	}
	if got := strings.HasPrefix(v, "v0.23."); got != floor() {
		return fmt.Errorf("controller-runtime %s resolved, but the suite was built for the %s (build tag conformance_floor %v): run the floor with -tags conformance_floor and GOFLAGS=-modfile=<floor go.mod> (run.sh does)",
			v, map[bool]string{true: "floor, v0.23", false: "newest, v0.25"}[floor()], floor())
	}
	return nil
}

// goList is `go list -m -f format module` in the test's module.
func goList(format, module string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", format, module).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("go list -m %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}
