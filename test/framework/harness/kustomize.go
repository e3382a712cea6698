package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// Kustomize is the kustomize the Makefile pins (KUSTOMIZE_VERSION) for the
// checkout at root: bin/kustomize-<version> when `make kustomize` installed
// it, else installed now, through the module proxy, into a new temporary
// directory that cleanup removes, so that `go test ./...` in a clean clone
// works too.
func Kustomize(root string) (path string, cleanup func(), err error) {
	cleanup = func() {}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return "", cleanup, err
	}
	m := regexp.MustCompile(`(?m)^KUSTOMIZE_VERSION \?= (\S+)$`).FindSubmatch(makefile)
	if m == nil {
		return "", cleanup, errors.New("no KUSTOMIZE_VERSION in the Makefile")
	}
	version := string(m[1])
	pinned := filepath.Join(root, "bin", "kustomize-"+version)
	if _, err := os.Stat(pinned); err == nil {
		return pinned, cleanup, nil
	}
	dir, err := os.MkdirTemp("", "featuregate-kustomize-")
	if err != nil {
		return "", cleanup, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	cmd := exec.Command("go", "install", "sigs.k8s.io/kustomize/kustomize/v5@"+version)
	cmd.Dir = dir // outside the module: `go install pkg@version` ignores go.mod
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", cleanup, fmt.Errorf("go install kustomize %s: %w\n%s", version, err, out)
	}
	return filepath.Join(dir, "kustomize"), cleanup, nil
}

// KustomizeBuild runs `kustomize build dir` and returns the YAML stream.
func KustomizeBuild(kustomize, dir string) ([]byte, error) {
	cmd := exec.Command(kustomize, "build", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w\n%s", dir, err, stderr.String())
	}
	return out, nil
}
