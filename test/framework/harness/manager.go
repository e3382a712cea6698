package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
)

// BuildManager builds the checkout's operator to path exactly as `make
// build` and the Dockerfile do (CGO_ENABLED=0, -trimpath, -ldflags=-s -w),
// so that every harness runs the binary that ships.
func BuildManager(ctx context.Context, path string) error {
	root, err := controlplane.Root()
	if err != nil {
		return err
	}
	return BuildManagerFrom(ctx, root, path)
}

// BuildManagerFrom builds the operator whose main package is src to path,
// as BuildManager does: the one build of the tests, also run on the
// Dockerfile's build context.
func BuildManagerFrom(ctx context.Context, src, path string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", path, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the operator in %s: %w\n%s", src, err, out)
	}
	return nil
}

// Built is the operator built from the checkout at Root into a temporary
// directory: what a TestMain that runs it sets up.
type Built struct {
	Root, Manager string
	dir           string
}

// BuildTemp builds the operator into a new temporary directory; Remove
// deletes it.
func BuildTemp() (*Built, error) {
	root, err := controlplane.Root()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "featuregate-manager-")
	if err != nil {
		return nil, err
	}
	b := &Built{Root: root, Manager: filepath.Join(dir, "manager"), dir: dir}
	if err := BuildManager(context.Background(), b.Manager); err != nil {
		b.Remove()
		return nil, err
	}
	return b, nil
}

// Remove deletes the build.
func (b *Built) Remove() { _ = os.RemoveAll(b.dir) }

// ManagerOptions starts bin (the operator) against kubeconfig with health
// probes on a free loopback port, metrics off and RFC 3339 log timestamps
// (zap's default has whole seconds only); args come last, and so win.
func ManagerOptions(bin, name, kubeconfig string, args ...string) (Options, error) {
	port, err := FreePort()
	if err != nil {
		return Options{}, err
	}
	probe := fmt.Sprintf("127.0.0.1:%d", port)
	return Options{
		Name:  name,
		Path:  bin,
		Probe: probe,
		Args: append([]string{
			"--kubeconfig=" + kubeconfig,
			"--health-probe-bind-address=" + probe,
			"--metrics-bind-address=0",
			"--zap-time-encoding=rfc3339nano",
		}, args...),
	}, nil
}

// StartManager is ManagerOptions and StartT.
func StartManager(tb TB, bin, name, kubeconfig string, args ...string) *Process {
	tb.Helper()
	opts, err := ManagerOptions(bin, name, kubeconfig, args...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return StartT(tb, opts)
}

// RunWithManager is the body of a TestMain whose tests run the operator: it
// builds it, hands the build to use, runs m and removes the build. A failed
// build is reported on stderr under name, as exit code 1.
func RunWithManager(m interface{ Run() int }, name string, use func(*Built)) int {
	built, err := BuildTemp()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	defer built.Remove()
	use(built)
	return m.Run()
}
