// Package deploy tests the operator as it is deployed: the kustomize tree
// renders objects a real API server accepts, the generated RBAC is enough for
// the real binary (run under a real ServiceAccount token) and no more, the
// metrics endpoint is authenticated and authorized by the API server, the
// config file is checked by the binary, and the binary is static, as the
// distroless image needs.
package deploy

import (
	"os"
	"testing"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

var (
	// root is the repository checkout.
	root string
	// managerBin is the operator binary, built once for every test the way
	// `make build` builds it (CGO_ENABLED=0, -trimpath, -ldflags=-s -w).
	managerBin string
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	code := harness.RunWithManager(m, "deploy tests", func(b *harness.Built) { root, managerBin = b.Root, b.Manager })
	kustomizeCleanup()
	return code
}
