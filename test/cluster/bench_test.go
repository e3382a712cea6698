package cluster

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// benchGuard names the file `make bench-cluster` has the kubelet
// measurement written to, for `make bench` (test/bench) to report.
const benchGuard = "FEATUREGATE_BENCH_KUBELET"

// The real-kubelet row of BENCHMARKS.md: a FeatureGate change until the
// replacement pod is Ready, probes as shipped, one fresh Deployment per run
// (the kubelet restarts a container that exits 0 at once the first time,
// then on the CrashLoopBackOff schedule). Only `make bench-cluster` runs
// it.
func TestBenchKubeletRestart(t *testing.T) {
	needNode(t)
	out := os.Getenv(benchGuard)
	if out == "" {
		t.Skipf("a measurement for BENCHMARKS.md: `make bench-cluster` runs it (%s=<file>)", benchGuard)
	}
	runs := 5
	installCRDs(t)
	var res harness.KubeletRestart
	for i := range runs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			change, snapshot, probe := kubeletRestartRun(t)
			res.Probe = probe
			t.Logf("change → Ready %s, snapshot → Ready %s", change.Round(time.Millisecond), snapshot.Round(time.Millisecond))
			res.ChangeToReady = append(res.ChangeToReady, change)
			res.SnapshotToReady = append(res.SnapshotToReady, snapshot)
		})
	}
	res.Measured = time.Now()
	NewWithT(t).Expect(harness.WriteKubeletRestart(out, res)).To(Succeed())
}

// kubeletRestartRun deploys the operator, changes the FeatureGate and
// times the replacement; it returns the readiness probe too, described.
func kubeletRestartRun(t *testing.T) (change, snapshot time.Duration, probe string) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	createFeatureGate(t, configv1.Default)
	deploy(t, deployOptions{})
	pod := readyPod(ctx, t)
	rp := pod.Spec.Containers[0].ReadinessProbe
	probe = fmt.Sprintf("GET %s, initialDelaySeconds %d, periodSeconds %d, timeoutSeconds %d, failureThreshold %d",
		rp.HTTPGet.Path, rp.InitialDelaySeconds, rp.PeriodSeconds, rp.TimeoutSeconds, rp.FailureThreshold)
	harness.SetFeatureSet(t, admin(t), "cluster", configv1.TechPreviewNoUpgrade)
	changed := time.Now()
	var readyAt time.Time
	g.Eventually(func(g Gomega) {
		p, err := getPod(ctx, pod.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(managerStatus(p).RestartCount).To(Equal(int32(1)))
		g.Expect(ready(p)).To(BeTrue())
		readyAt = time.Now()
	}).WithTimeout(changeTimeout).WithPolling(25 * time.Millisecond).Should(Succeed())
	lines, err := podLog(ctx, pod.Name, false)
	g.Expect(err).NotTo(HaveOccurred())
	for _, l := range lines {
		if harness.All(harness.Message("Startup snapshot taken"), harness.KeyEquals("featureSet", "TechPreviewNoUpgrade")).Matches(l) {
			g.Expect(l.TS.IsZero()).To(BeFalse(), "timestamp of %s", l.Raw)
			return readyAt.Sub(changed), readyAt.Sub(l.TS), probe
		}
	}
	t.Fatalf("the replacement logged no snapshot of TechPreviewNoUpgrade:\n%s", rawLines(lines))
	return 0, 0, ""
}
