package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// SIGHUP (a closed terminal, a careless `kill -HUP`) is a graceful stop, not
// a death by signal (exit 129).
func TestProcessSIGHUPStopsGracefully(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	harness.CreateFeatureGate(t, harness.Client(t, cp.Config), controlplane.FeatureGate(configv1.Default))
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config))
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Signal(syscall.SIGHUP)).To(Succeed())
	g.Expect(o.WaitExit(exitTimeout)).To(Equal(0))
	g.Expect(o.Logged(shutdownFor("signal"))).To(Succeed())
}

// Memory is bounded by the limits, not by the input: an 800-manifest
// payload with a 5 MB and a 50 MB file beside it is applied within a stated
// peak RSS, and the oversized files are named in Degraded with their size.
func TestProcessMemoryBoundedByInput(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default))
	dir := t.TempDir()
	for i := range 800 {
		cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: load-%03d\n  namespace: default\ndata:\n  key: %q\n", i, strings.Repeat("v", 512))
		g.Expect(os.WriteFile(filepath.Join(dir, fmt.Sprintf("0000_%02d_load-%03d.yaml", 10+i%80, i)), []byte(cm), 0o600)).To(Succeed())
	}
	for name, size := range map[string]int{"0000_95_big-5mb.yaml": 5 << 20, "0000_96_big-50mb.yaml": 50 << 20} {
		f, err := os.Create(filepath.Join(dir, name))
		g.Expect(err).NotTo(HaveOccurred())
		_, err = fmt.Fprintf(f, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  namespace: default\ndata:\n  key: %q\n", strings.Repeat("x", size))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(f.Close()).To(Succeed())
	}
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config), "--manifests-dir="+dir)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	_, _, err := o.Log.Wait(ctx, 0, harness.Message("Manifests applied"))
	g.Expect(err).NotTo(HaveOccurred())
	hwm := statusKiB(t, o.Pid(), "VmHWM")
	t.Logf("peak RSS %.1f MiB applying 800 manifests beside a 5 MB and a 50 MB file", float64(hwm)/1024)
	g.Expect(hwm).To(BeNumerically("<=", 96*1024), "VmHWM in KiB")
	degraded := clusterOperatorCondition(t, c, configv1.OperatorDegraded)
	g.Expect(degraded).NotTo(BeNil())
	g.Expect(degraded.Message).To(And(ContainSubstring("0000_95_big-5mb.yaml: file is"), ContainSubstring("0000_96_big-50mb.yaml: file is"), ContainSubstring("-byte limit")))
	g.Expect(exists(g, t, c, &corev1.ConfigMap{}, "default", "load-799")).To(BeTrue())
}

// statusKiB reads a "<field>: N kB" line of /proc/<pid>/status.
func statusKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// A closed stdout and stderr (a log pipe whose reader went away) do not kill
// the operator with SIGPIPE (exit 141): it runs on, and a FeatureGate change
// still ends it with exit 0. Nothing can be read of its log once the pipe is
// closed, so its state is read from its probe and its exit.
func TestProcessSurvivesClosedStdout(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default))
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config), "--resync-period=1s")

	// Read until the snapshot is taken, then close the only reader.
	g.Expect(o.WaitForLog("Startup snapshot taken", readyTimeout)).To(Succeed())
	g.Expect(o.CloseOutput()).To(Succeed())

	// Each resync logs, into the closed pipe; the process stays up and ready.
	g.Consistently(o.Running).WithTimeout(3*time.Second).Should(BeTrue(), "alive after writing to a closed pipe")
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())

	harness.SetFeatureSet(t, c, "cluster", configv1.TechPreviewNoUpgrade)
	g.Expect(o.WaitExit(exitTimeout)).To(Equal(0))
}

// Nothing is created after the stop is requested. A change lands while 720
// Default-only ConfigMaps in 72 run levels are being applied; the moment the
// "requesting shutdown" line is read, a marker object is written. Every
// ConfigMap the operator created must be older (lower resourceVersion, that
// is, earlier in etcd) than the marker, but for the requests in flight.
func TestProcessNothingCreatedAfterStop(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default))
	dir := t.TempDir()
	for i := range 720 {
		cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: run-%03d\n  namespace: default\n  labels: {payload: stop-test}\n"+
			"  annotations:\n    release.openshift.io/feature-set: Default\n", i)
		g.Expect(os.WriteFile(filepath.Join(dir, fmt.Sprintf("0000_%02d_run-%03d.yaml", 10+i/10, i)), []byte(cm), 0o600)).To(Succeed())
	}
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config), "--manifests-dir="+dir)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	created := func() int {
		l := &corev1.ConfigMapList{}
		g.Expect(c.List(ctx, l, client.InNamespace("default"), client.MatchingLabels{"payload": "stop-test"})).To(Succeed())
		return len(l.Items)
	}
	g.Eventually(created).WithTimeout(readyTimeout).WithPolling(10 * time.Millisecond).Should(BeNumerically(">=", 40))

	harness.SetFeatureSet(t, c, "cluster", configv1.TechPreviewNoUpgrade)
	_, _, err := o.WaitLine(ctx, 0, harness.Message(msgChanged))
	g.Expect(err).NotTo(HaveOccurred())
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "stop-marker"}}
	g.Expect(c.Create(ctx, marker)).To(Succeed())
	g.Expect(o.WaitExit(exitTimeout)).To(Equal(0))

	markerRV, err := strconv.ParseUint(marker.ResourceVersion, 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	l := &corev1.ConfigMapList{}
	g.Expect(c.List(ctx, l, client.InNamespace("default"), client.MatchingLabels{"payload": "stop-test"})).To(Succeed())
	g.Expect(len(l.Items)).To(BeNumerically("<", 720), "the change landed mid-run")
	// A request sent just before the stop is cancelled on the client, but
	// the server may already be committing it, after the marker: at most
	// the requests in flight, one run level's parallelism (8). None may
	// start after the stop (TestApplyNothingAfterStop proves that on the
	// requests themselves); a run that went on would create dozens.
	var late []string
	for _, cm := range l.Items {
		rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		g.Expect(err).NotTo(HaveOccurred())
		if rv > markerRV {
			late = append(late, cm.Name)
		}
	}
	g.Expect(len(late)).To(BeNumerically("<=", 8), "created after the stop was requested: %v", late)
	t.Logf("%d of 720 created before the stop; %d in flight committed after it %v", len(l.Items)-len(late), len(late), late)
}
