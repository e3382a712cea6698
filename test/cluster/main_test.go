// Package cluster tests the operator on a real single-node cluster
// (test/framework/node), as users run it: the image built from the checkout,
// deployed by `kustomize build config/default | kubectl apply
// --server-side`, started, probed and restarted by a real kubelet, talking
// to the API server with the ServiceAccount token the kubelet mounts.
//
// It needs root and takes minutes, so it runs under `make test-cluster`
// only (FEATUREGATE_TEST_CLUSTER=1); `go test ./...` skips every test here,
// saying so. TestMain starts one node for all the tests, and after they
// ran, tears it down and fails the run if the host is not as it was.
package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
	"github.com/featuregate-operator/operator/test/framework/image"
	"github.com/featuregate-operator/operator/test/framework/node"
)

// guard is the environment variable `make test-cluster` sets.
const guard = "FEATUREGATE_TEST_CLUSTER"

// The images, by the local names the overlay and containerd use
// (docker.io/library/ is implied).
const (
	operatorImage = "featuregate-operator:cluster-test"
	pauseImage    = "featuregate-pause:cluster-test"
)

// releases are the operator's image as two releases tag it, for the
// upgrade from the first to the second: the same build, as a release that
// changes only its version would ship it.
var releases = []release{
	{version: "4.21.0", image: "featuregate-operator:4.21.0"},
	{version: "4.22.0", image: "featuregate-operator:4.22.0"},
}

type release struct{ version, image string }

var (
	// cluster is the node every test runs on; nil when skipped.
	cluster *node.Node
	// root is the checkout.
	root string
	// kustomize is the pinned kustomize binary.
	kustomize string
	// manager is the operator binary the images hold, for its commands.
	manager string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	if os.Getenv(guard) == "" {
		fmt.Printf("test/cluster: skipped: these tests run a node of their own as root; `make test-cluster` runs them (%s=1)\n", guard)
		return m.Run()
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "test/cluster: needs root (containerd, the kubelet, a network bridge, iptables): run `sudo make test-cluster`")
		return 1
	}
	start := time.Now()
	var err error
	if root, err = controlplane.Root(); err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster:", err)
		return 1
	}
	bin, cleanup, err := harness.Kustomize(root)
	defer cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster:", err)
		return 1
	}
	kustomize = bin
	images, err := os.MkdirTemp("", "featuregate-cluster-images-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster:", err)
		return 1
	}
	defer os.RemoveAll(images)
	archives, err := buildImages(images)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster:", err)
		return 1
	}
	assets, err := controlplane.AssetsDir("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster:", err)
		return 1
	}
	logDir := filepath.Join(root, "bin", "test-cluster")
	_ = os.RemoveAll(logDir)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Options{
		Assets:     assets,
		LogDir:     logDir,
		Images:     archives,
		PauseImage: pauseImage,
		Logf:       func(format string, args ...any) { fmt.Printf(format+"\n", args...) },
	})
	code := 0
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster: start the node:", err)
		code = 1
	} else {
		fmt.Printf("test/cluster: node up in %s\n", time.Since(start).Round(time.Second))
		cluster = n
		code = m.Run()
		fmt.Println("test/cluster: tearing the node down")
		if err := n.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "test/cluster: stop the node:", err)
			code = 1
		}
	}
	if n != nil {
		if left := n.Leftovers(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "test/cluster: leftover check FAILED: the node left behind:\n  %s\n", strings.Join(left, "\n  "))
			code = 1
		} else {
			fmt.Println("test/cluster: leftover check passed: no process, mount, network interface, iptables rule, kernel setting, cgroup or directory left behind")
		}
	}
	fmt.Printf("test/cluster: finished in %s (component logs in %s)\n", time.Since(start).Round(time.Second), logDir)
	return code
}

// buildImages builds the manager as `make build` does and the pause
// program, statically, and writes their images into dir.
func buildImages(dir string) ([]string, error) {
	manager = filepath.Join(dir, "manager")
	if err := harness.BuildManager(context.Background(), manager); err != nil {
		return nil, err
	}
	pause := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-o", pause, "./hack/pause")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build hack/pause: %w\n%s", err, out)
	}
	archives := []string{filepath.Join(dir, "manager.tar"), filepath.Join(dir, "pause.tar")}
	if err := image.Write(archives[0], operatorImage, manager, image.Operator); err != nil {
		return nil, err
	}
	if err := image.Write(archives[1], pauseImage, pause, image.Pause); err != nil {
		return nil, err
	}
	for _, r := range releases {
		archive := filepath.Join(dir, "manager-"+r.version+".tar")
		if err := image.Write(archive, r.image, manager, image.Operator); err != nil {
			return nil, err
		}
		archives = append(archives, archive)
	}
	return archives, nil
}

// needNode skips the test unless `make test-cluster` runs it.
func needNode(t *testing.T) {
	t.Helper()
	if cluster == nil {
		t.Skipf("needs the node of `make test-cluster` (root; %s=1)", guard)
	}
}
