package e2e

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/gomega"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// Set by TestMain.
var (
	// managerBin is the operator, built from this checkout.
	managerBin string
	// repoRoot is the checkout, for test data.
	repoRoot string
	// assetsDir holds etcd, kube-apiserver and kubectl.
	assetsDir string
)

// maxControlPlanes bounds how many control planes run at once: each is an
// etcd and a kube-apiserver, and the machine has two cores.
const maxControlPlanes = 2

var controlPlaneSlots = make(chan struct{}, maxControlPlanes)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	// The test's own clients log nothing worth reading; the operator's log
	// is what the tests read.
	ctrllog.SetLogger(logr.Discard())
	// Gomega polls every 10 ms by default; each failed /readyz poll is an
	// operator log line, and the machine is shared.
	gomega.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	gomega.SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		return 0
	}
	var err error
	if assetsDir, err = controlplane.AssetsDir(""); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	code := harness.RunWithManager(m, "e2e", func(b *harness.Built) { repoRoot, managerBin = b.Root, b.Manager })
	if pattern.dir != "" {
		_ = os.RemoveAll(pattern.dir)
	}
	if consumer.dir != "" {
		_ = os.RemoveAll(consumer.dir)
	}
	faults.summary(os.Stdout)
	return code
}

// lane marks t parallel and waits for a control plane slot, released when t
// ends. Tests that start a control plane call it first.
func lane(t *testing.T) {
	t.Helper()
	t.Parallel()
	controlPlaneSlots <- struct{}{}
	t.Cleanup(func() { <-controlPlaneSlots })
}

// startControlPlane starts etcd and kube-apiserver with the given CRD files
// (nil: the OpenShift FeatureGate and ClusterOperator CRDs), stopped when t
// ends.
func startControlPlane(t *testing.T, crds []string) *controlplane.ControlPlane {
	t.Helper()
	return harness.StartControlPlane(t, controlplane.Options{AssetsDir: assetsDir, CRDs: crds})
}

// startOperator starts the manager built for this run; see
// harness.StartManager.
func startOperator(t *testing.T, name, kubeconfig string, args ...string) *harness.Process {
	t.Helper()
	return harness.StartManager(t, managerBin, name, kubeconfig, args...)
}

// faultResults counts the fault scenarios for the summary line.
type faultResults struct {
	mu             sync.Mutex
	passed, failed int
}

var faults faultResults

func (r *faultResults) record(pass bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pass {
		r.passed++
	} else {
		r.failed++
	}
}

// summary prints "<N> passed, <M> failed" when any fault scenario ran.
func (r *faultResults) summary(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.passed+r.failed > 0 {
		fmt.Fprintf(w, "%d passed, %d failed\n", r.passed, r.failed)
	}
}

// fault is one fault scenario's result line.
type fault struct {
	mu     sync.Mutex
	detail string
}

// Detail sets what the result line says besides PASS/FAIL.
func (f *fault) Detail(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.detail = fmt.Sprintf(format, args...)
}

// startFault begins a fault scenario: it takes a control plane lane, and
// when t ends (after every other cleanup) prints
// "FAULT PASS|FAIL <name>  <detail>  <seconds>s" for `make test-faults`.
func startFault(t *testing.T, name string) *fault {
	t.Helper()
	lane(t)
	f := &fault{}
	start := time.Now()
	t.Cleanup(func() {
		f.mu.Lock()
		detail := f.detail
		f.mu.Unlock()
		result := "PASS"
		if t.Failed() {
			result = "FAIL"
			if detail == "" {
				detail = "see the test log"
			}
		}
		faults.record(!t.Failed())
		fmt.Printf("FAULT %s %s  %s  %.1fs\n", result, name, detail, time.Since(start).Seconds())
	})
	return f
}
