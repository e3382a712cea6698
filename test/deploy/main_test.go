// Package deploy tests the operator as it is deployed: the kustomize tree
// renders objects a real API server accepts, the generated RBAC is enough for
// the real binary (run under a real ServiceAccount token) and no more, the
// metrics endpoint is authenticated and authorized by the API server, the
// config file is checked by the binary, and the binary is static, as the
// distroless image needs.
package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/featuregate-operator/operator/internal/controlplane"
)

var (
	// root is the repository checkout.
	root string
	// managerBin is the operator binary, built once for every test the way
	// `make build` builds it (CGO_ENABLED=0, -trimpath).
	managerBin string
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	var err error
	if root, err = controlplane.Root(); err != nil {
		fmt.Fprintln(os.Stderr, "deploy tests:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "featuregate-deploy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	managerBin = filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-trimpath", "-o", managerBin, ".")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "deploy tests: build the manager: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	kustomizeCleanup()
	return code
}
