package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/faultproxy"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// Log lines of the applier and the reconciler.
const (
	logApplied         = `"msg":"Manifests applied"`
	logFeatureGateGone = "FeatureGate deleted; keeping the startup snapshot"
	// The FeatureGate controller logs it once its cache has synced.
	logWorkersStarted = `"msg":"Starting workers","controller":"featuregate"`
)

// noPanic fails when the log shows a panic or a Go runtime crash.
func noPanic(g Gomega, o *harness.Process) {
	for _, l := range o.Log.Lines() {
		g.Expect(l.Raw).NotTo(Or(ContainSubstring("panic"), ContainSubstring("goroutine "), HavePrefix("fatal error")), "%s crashed", o.Name)
	}
}

// openShiftCRDs returns the FeatureGate and ClusterOperator CRD files.
func openShiftCRDs(t *testing.T) (featureGates, clusterOperators string) {
	t.Helper()
	crds, err := controlplane.OpenShiftCRDs()
	if err != nil {
		t.Fatal(err)
	}
	return crds[0], crds[1]
}

// relaxedFeatureGateCRD writes a copy of the FeatureGate CRD without the
// featureSet enum and without its CEL rules: what an older or newer release's
// CRD might accept. It allows feature sets we have never seen, and changes
// the real CRD forbids (away from TechPreviewNoUpgrade), to flap.
func relaxedFeatureGateCRD(t *testing.T) []string {
	t.Helper()
	fgPath, coPath := openShiftCRDs(t)
	data, err := os.ReadFile(fgPath)
	if err != nil {
		t.Fatal(err)
	}
	crd := map[string]any{}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	versions, _, err := unstructured.NestedSlice(crd, "spec", "versions")
	if err != nil || len(versions) == 0 {
		t.Fatalf("FeatureGate CRD has no versions: %v", err)
	}
	spec := []string{"schema", "openAPIV3Schema", "properties", "spec"}
	featureSet := append(append([]string{}, spec...), "properties", "featureSet")
	for _, v := range versions {
		m := v.(map[string]any)
		if _, found, _ := unstructured.NestedFieldNoCopy(m, append(featureSet, "enum")...); !found {
			t.Fatalf("FeatureGate CRD: no featureSet enum to remove (has the schema changed?)")
		}
		unstructured.RemoveNestedField(m, append(featureSet, "enum")...)
		unstructured.RemoveNestedField(m, append(featureSet, "x-kubernetes-validations")...)
		unstructured.RemoveNestedField(m, append(spec, "x-kubernetes-validations")...)
	}
	if err := unstructured.SetNestedSlice(crd, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "featuregates-relaxed.crd.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{path, coPath}
}

// testdata reads a file of pkg/manifest/testdata.
func testdata(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "pkg", "manifest", "testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// exists reports whether obj (by key) exists; other errors fail g.
func exists(g Gomega, t *testing.T, c client.Client, obj client.Object, namespace, name string) bool {
	err := c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return true
}

// clusterOperatorCondition is the ClusterOperator condition of type ct, or nil.
func clusterOperatorCondition(t *testing.T, c client.Client, ct configv1.ClusterStatusConditionType) *configv1.ClusterOperatorStatusCondition {
	co := &configv1.ClusterOperator{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: "featuregate-operator"}, co); err != nil {
		return nil
	}
	for i := range co.Status.Conditions {
		if co.Status.Conditions[i].Type == ct {
			return &co.Status.Conditions[i]
		}
	}
	return nil
}

// Scenario 1: the API server is absent for 30 s at start. Never ready
// before, ready after with the right snapshot, no restart.
func TestFaultAPIAbsentAtStart(t *testing.T) {
	f := startFault(t, "APIAbsentAtStart")
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	harness.CreateFeatureGate(t, harness.Client(t, cp.Config), controlplane.FeatureGate(configv1.TechPreviewNoUpgrade))
	kc := harness.Kubeconfig(t, cp.Config)
	g.Expect(cp.StopAPIServer()).To(Succeed())

	o := startOperator(t, "operator", kc)
	g.Eventually(o.ReadyzReason).WithTimeout(readyTimeout).Should(ContainSubstring(connRefused))
	const outage = 30 * time.Second
	g.Consistently(func() bool { return o.Running() && !o.Ready() }).WithTimeout(outage).WithPolling(500*time.Millisecond).Should(BeTrue(), "alive and never ready while the API is absent")
	g.Expect(o.Log.IndexWhere(logSnapshot)).To(Equal(-1))
	retries, lines := attempts(o.Log), o.Log.CountWhere(logRetry)
	// A refused connection is retried often, and logged seldom: the first
	// failure, then one line every 5s.
	g.Expect(retries).To(BeNumerically(">=", 100), "reads during the outage")
	g.Expect(lines).To(BeNumerically("<=", 10), "retry lines during the outage")

	g.Expect(cp.StartAPIServer()).To(Succeed())
	back := time.Now()
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	took := time.Since(back)
	g.Expect(o.Logged(logSnapshot)).To(Succeed())
	g.Expect(o.Log.CountWhere(logSnapshot)).To(Equal(1))
	g.Expect(o.Logged(snapshotOf("TechPreviewNoUpgrade"))).To(Succeed())
	g.Consistently(o.Running).WithTimeout(stillRunning).Should(BeTrue(), "no restart")
	f.Detail("not ready during %s outage (%d reads, %d log lines), ready %.1fs after the API returned, snapshot TechPreviewNoUpgrade, no restart", outage, retries, lines, took.Seconds())
}

// Scenario 2: the API server restarts under a running operator. It keeps
// its snapshot and stays ready; its watch resumes, as a change made after
// the restart ends it (with a 3 m resync, only the watch can tell it).
func TestFaultAPIRestartMidRun(t *testing.T) {
	f := startFault(t, "APIRestartMidRun")
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default))
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config))
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())

	g.Expect(cp.StopAPIServer()).To(Succeed())
	g.Consistently(func() bool { return o.Running() && o.Ready() }).WithTimeout(notReadyWindow).Should(BeTrue(), "the snapshot stands while the API is down")
	g.Expect(cp.StartAPIServer()).To(Succeed())
	g.Consistently(func() bool { return o.Running() && o.Ready() }).WithTimeout(stillRunning).Should(BeTrue(), "the snapshot stands after the API returns")
	g.Expect(o.Log.IndexWhere(logChanged)).To(Equal(-1))

	harness.SetFeatureSet(t, c, "cluster", configv1.TechPreviewNoUpgrade)
	changed := time.Now()
	g.Expect(o.WaitExit(60 * time.Second)).To(Equal(0))
	g.Expect(o.Logged(shutdownFor(defaultToTech))).To(Succeed())
	f.Detail("kept snapshot Default and readiness across the restart; watch resumed: exit 0 %.1fs after a later change", time.Since(changed).Seconds())
}

// Scenario 3: the FeatureGate changes while the operator's API server is
// down. With a 3 m resync, the exit shortly after the API returns comes from
// the re-list when the watch reconnects.
func TestFaultChangeWhileAPIDown(t *testing.T) {
	f := startFault(t, "ChangeWhileAPIDown")
	_, took := changeWhileAPIServerDown(t, "--resync-period=3m")
	f.Detail("changed through a second API server; exit 0 %.1fs after the API returned (re-list, resync 3m)", took.Seconds())
}

// Scenario 4: the watch connection is cut while the server keeps running
// (a TCP proxy drops every connection, and refuses new ones for a while). A
// change made meanwhile is seen once connections work again.
func TestFaultWatchCut(t *testing.T) {
	f := startFault(t, "WatchCut")
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default))
	api, err := url.Parse(cp.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	p := faultproxy.Start(t, api.Host)
	viaProxy := rest.CopyConfig(cp.Config)
	viaProxy.Host = "https://" + p.Addr()
	o := startOperator(t, "operator", harness.Kubeconfig(t, viaProxy), "--resync-period=2s")
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(snapshotOf("Default"))).To(Succeed())

	p.Cut()
	harness.SetFeatureSet(t, c, "cluster", configv1.TechPreviewNoUpgrade)
	g.Consistently(o.Running).WithTimeout(notReadyWindow).Should(BeTrue(), "the change cannot be seen while cut")
	refused := p.Refused()
	p.Restore()
	restored := time.Now()
	g.Expect(o.WaitExit(60 * time.Second)).To(Equal(0))
	took := time.Since(restored)
	g.Expect(o.Logged(changedBy(defaultToTech))).To(Succeed())
	g.Expect(refused).To(BeNumerically(">", 0), "the operator tried to reconnect while cut")
	f.Detail("connections cut, %d reconnects refused; exit 0 %.1fs after restore", refused, took.Seconds())
}

// Scenario 5: the FeatureGate CRD is installed only after the operator
// started, then the FeatureGate is created. Each state is told apart in
// readiness, and the snapshot comes when the object exists.
func TestFaultLateFeatureGateAndCRD(t *testing.T) {
	f := startFault(t, "LateFeatureGateAndCRD")
	g := NewWithT(t)
	fgCRD, coCRD := openShiftCRDs(t)
	cp := startControlPlane(t, []string{coCRD})
	c := harness.Client(t, cp.Config)
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config), "--initial-fetch-backoff-cap=500ms")
	g.Eventually(o.ReadyzReason).WithTimeout(readyTimeout).Should(ContainSubstring("FeatureGate API not served"))
	g.Consistently(o.Ready).WithTimeout(notReadyWindow).Should(BeFalse())

	_, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{fgCRD}, ErrorIfPathMissing: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(o.ReadyzReason).WithTimeout(readyTimeout).Should(ContainSubstring("FeatureGate cluster not found"))
	g.Consistently(o.Ready).WithTimeout(notReadyWindow).Should(BeFalse())

	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.TechPreviewNoUpgrade))
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(snapshotOf("TechPreviewNoUpgrade"))).To(Succeed())
	g.Consistently(o.Running).WithTimeout(stillRunning).Should(BeTrue())
	noPanic(g, o)
	f.Detail("not ready: CRD missing, then object missing; ready with TechPreviewNoUpgrade once created; %d reads", attempts(o.Log))
}

// Scenario 6: the FeatureGate is deleted under a running operator: a
// warning (log and Event), and it runs on, ready, with its snapshot. It
// keeps watching: a FeatureGate created again with another set ends it.
func TestFaultFeatureGateDeleted(t *testing.T) {
	f := startFault(t, "FeatureGateDeleted")
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default))
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config))
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	// Mid-run: the reconciler's cache holds the object. (Deleted between
	// the snapshot and the cache sync, it would never be warned about.)
	g.Expect(o.WaitForLog(logWorkersStarted, 60*time.Second)).To(Succeed())

	g.Expect(c.Delete(t.Context(), controlplane.FeatureGate(""))).To(Succeed())
	g.Expect(o.WaitForLog(logFeatureGateGone, 60*time.Second)).To(Succeed())
	g.Eventually(func() []string { return eventReasons(t, c) }).WithTimeout(30 * time.Second).Should(ContainElement("FeatureGateDeleted"))
	g.Consistently(func() bool { return o.Running() && o.Ready() }).WithTimeout(stillRunning).Should(BeTrue())
	g.Expect(o.Log.IndexWhere(logChanged)).To(Equal(-1))

	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.TechPreviewNoUpgrade))
	g.Expect(o.WaitExit(60 * time.Second)).To(Equal(0))
	g.Expect(o.Logged(shutdownFor(defaultToTech))).To(Succeed())
	noPanic(g, o)
	f.Detail("warning log and FeatureGateDeleted Event, still ready; re-created as TechPreviewNoUpgrade: exit 0")
}

// seedManifests are the bug report's manifests: one for every set, the
// Cluster API namespace for TechPreviewNoUpgrade only, one for Default only.
func seedManifests(t *testing.T) string {
	return harness.WriteFiles(t, map[string]string{
		"0000_10_always_configmap.yaml":                       testdata(t, "seed/0000_10_always_configmap.yaml"),
		"0000_30_cluster-api_capi-operator_00_namespace.yaml": testdata(t, "seed/0000_30_cluster-api_capi-operator_00_namespace.yaml"),
		"0000_50_default-only_configmap.yaml":                 testdata(t, "seed/0000_50_default-only_configmap.yaml"),
	})
}

// Scenario 7: the feature set flaps (the CRD's CEL rules removed, so that it
// can): exactly one shutdown, exit 0, and the manifest the snapshot
// excludes is never applied meanwhile. The next process applies it.
func TestFaultFlapping(t *testing.T) {
	f := startFault(t, "Flapping")
	g := NewWithT(t)
	cp := startControlPlane(t, relaxedFeatureGateCRD(t))
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default))
	dir := seedManifests(t)
	args := []string{"--manifests-dir=" + dir, "--resync-period=1s"}
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config), args...)
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Eventually(func() bool { return exists(g, t, c, &corev1.ConfigMap{}, "default", "default-only") }).WithTimeout(60 * time.Second).Should(BeTrue())

	const flips = 9 // ends on TechPreviewNoUpgrade
	for i := range flips {
		set := configv1.TechPreviewNoUpgrade
		if i%2 == 1 {
			set = configv1.Default
		}
		harness.SetFeatureSet(t, c, "cluster", set)
	}
	g.Expect(o.WaitExit(exitTimeout)).To(Equal(0))
	g.Expect(o.Log.CountWhere(logShutdown)).To(Equal(1))
	g.Expect(o.Logged(shutdownFor(defaultToTech))).To(Succeed())
	g.Expect(exists(g, t, c, &corev1.Namespace{}, "", "openshift-cluster-api")).To(BeFalse(), "excluded by the Default snapshot, never applied")
	requests := o.Log.CountWhere(logChanged)
	noPanic(g, o)

	// The kubelet starts a fresh process: it takes the new snapshot and
	// applies what it includes.
	next := startOperator(t, "operator-restarted", harness.Kubeconfig(t, cp.Config), args...)
	g.Eventually(next.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(next.Logged(snapshotOf("TechPreviewNoUpgrade"))).To(Succeed())
	g.Eventually(func() bool { return exists(g, t, c, &corev1.Namespace{}, "", "openshift-cluster-api") }).WithTimeout(60 * time.Second).Should(BeTrue())
	f.Detail("%d changes: 1 shutdown (%d stop requests logged), exit 0, TechPreview namespace not applied until the next process", flips, requests)
}

// bulkManifests writes n ConfigMaps labelled e2e=bulk, one run level each,
// so that a pass takes a while and stops between levels.
func bulkManifests(t *testing.T, n int) string {
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("0000_%02d_bulk.yaml", i)] = fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: bulk-%02d
  namespace: default
  labels:
    e2e: bulk
`, i)
	}
	return harness.WriteFiles(t, files)
}

func countBulk(g Gomega, t *testing.T, c client.Client) int {
	var list corev1.ConfigMapList
	g.Expect(c.List(t.Context(), &list, client.InNamespace("default"), client.MatchingLabels{"e2e": "bulk"})).To(Succeed())
	return len(list.Items)
}

// Scenario 8: SIGTERM during the initial fetch, during an apply pass, and
// right after a stop request: exit 0 within the graceful timeout, no panic.
func TestFaultSIGTERM(t *testing.T) {
	f := startFault(t, "SIGTERM")
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default))
	kc := harness.Kubeconfig(t, cp.Config)
	const graceful = 5 * time.Second
	const margin = 10 * time.Second // process teardown on a loaded machine
	var details []string

	t.Run("during apply", func(t *testing.T) {
		g := NewWithT(t)
		const total = 100
		o := startOperator(t, "operator", kc, "--graceful-shutdown-timeout="+graceful.String(), "--manifests-dir="+bulkManifests(t, total))
		g.Eventually(func() int { return countBulk(g, t, c) }).WithTimeout(readyTimeout).WithPolling(20 * time.Millisecond).Should(BeNumerically(">", 0))
		g.Expect(o.Signal(syscall.SIGTERM)).To(Succeed())
		g.Expect(o.WaitExit(graceful + margin)).To(Equal(0))
		applied := countBulk(g, t, c)
		g.Expect(applied).To(BeNumerically("<", total), "SIGTERM came after the pass ended: not a test of an interrupted apply")
		g.Expect(o.Logged(shutdownFor("signal"))).To(Succeed())
		noPanic(g, o)
		details = append(details, fmt.Sprintf("apply: stopped at %d/%d", applied, total))
	})

	t.Run("after a stop request", func(t *testing.T) {
		g := NewWithT(t)
		o := startOperator(t, "operator", kc, "--graceful-shutdown-timeout="+graceful.String())
		g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
		// The shutdown after a stop request takes about a millisecond:
		// signal from the log copier the moment the request is logged.
		// It counts as "during the shutdown" when the signal was delivered
		// before the operator's last log line was even read.
		during := make(chan bool, 1)
		o.Log.OnFirst(logChanged, func(harness.Line) {
			late := o.Log.IndexWhere(logShutdown) >= 0
			during <- o.Signal(syscall.SIGTERM) == nil && !late
		})
		harness.SetFeatureSet(t, c, "cluster", configv1.TechPreviewNoUpgrade)
		g.Expect(o.WaitForLog(msgChanged, 60*time.Second)).To(Succeed())
		g.Expect(o.WaitExit(graceful + margin)).To(Equal(0))
		before := <-during
		g.Expect(o.Logged(shutdownFor(defaultToTech))).To(Succeed(), "the first reason wins")
		noPanic(g, o)
		details = append(details, fmt.Sprintf("after stop: signal during shutdown %v", before))
	})

	t.Run("during the initial fetch", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(cp.StopAPIServer()).To(Succeed())
		o := startOperator(t, "operator", kc, "--graceful-shutdown-timeout="+graceful.String())
		g.Expect(o.WaitForLog(msgRetry, 60*time.Second)).To(Succeed())
		g.Expect(o.Signal(syscall.SIGTERM)).To(Succeed())
		sent := time.Now()
		g.Expect(o.WaitExit(graceful + margin)).To(Equal(0))
		g.Expect(o.Logged(shutdownFor("signal"))).To(Succeed())
		g.Expect(o.Log.IndexWhere(logSnapshot)).To(Equal(-1))
		noPanic(g, o)
		details = append(details, fmt.Sprintf("initial fetch: exit 0 in %.1fs", time.Since(sent).Seconds()))
	})
	f.Detail("%s", strings.Join(details, "; "))
}

// leaseHolder is the holder of the operator's leader election Lease.
func leaseHolder(t *testing.T, c client.Client) string {
	lease := &coordinationv1.Lease{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "featuregate-operator.featuregate-operator.io"}, lease); err != nil {
		return ""
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// Scenario 9: two replicas with leader election. Both take snapshots, only
// the leader applies; the leader's SIGTERM hands the lease over at once
// (released, not left to expire); a restarted replica waits as standby; a
// change ends both.
func TestFaultLeaderElection(t *testing.T) {
	f := startFault(t, "LeaderElection")
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default))
	kc := harness.Kubeconfig(t, cp.Config)
	// controller-runtime's timings, not OpenShift's defaults: a standby
	// notices a released lease at its next retry.
	args := []string{"--leader-elect", "--leader-election-namespace=default", "--manifests-dir=" + seedManifests(t), "--resync-period=2s",
		"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"}
	a := startOperator(t, "replica-a", kc, args...)
	b := startOperator(t, "replica-b", kc, args...)
	for _, o := range []*harness.Process{a, b} {
		g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue(), "%s takes its snapshot, leader or not", o.Name)
		g.Expect(o.Logged(snapshotOf("Default"))).To(Succeed())
	}
	g.Eventually(func() int { return a.Log.Count(logApplied) + b.Log.Count(logApplied) }).WithTimeout(60 * time.Second).Should(BeNumerically(">", 0))
	leader, standby := a, b
	if b.Log.Count(logApplied) > 0 {
		leader, standby = b, a
	}
	holder := leaseHolder(t, c)
	g.Expect(holder).NotTo(BeEmpty())
	g.Consistently(func() int { return standby.Log.Count(logApplied) }).WithTimeout(stillRunning).Should(Equal(0), "only the leader applies")

	g.Expect(leader.Signal(syscall.SIGTERM)).To(Succeed())
	g.Expect(leader.WaitExit(exitTimeout)).To(Equal(0))
	released := time.Now()
	g.Expect(leaseHolder(t, c)).NotTo(Equal(holder), "the lease is released on exit, not left to expire")
	g.Eventually(func() int { return standby.Log.Count(logApplied) }).WithTimeout(60 * time.Second).Should(BeNumerically(">", 0))
	takeover := time.Since(released)
	g.Expect(leaseHolder(t, c)).NotTo(Or(BeEmpty(), Equal(holder)))

	restarted := startOperator(t, leader.Name+"-restarted", kc, args...)
	g.Eventually(restarted.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Consistently(func() int { return restarted.Log.Count(logApplied) }).WithTimeout(notReadyWindow).Should(Equal(0), "the restarted replica is a standby")

	harness.SetFeatureSet(t, c, "cluster", configv1.TechPreviewNoUpgrade)
	for _, o := range []*harness.Process{standby, restarted} {
		g.Expect(o.WaitExit(exitTimeout)).To(Equal(0), o.Name)
		g.Expect(o.Logged(shutdownFor(defaultToTech))).To(Succeed(), o.Name)
		noPanic(g, o)
	}
	f.Detail("both snapshot, one applies; lease released on SIGTERM, standby applied %.1fs later (lease 15s); standby and restarted replica exit 0 on change", takeover.Seconds())
}

// Scenario 10: bad input. Manifests that cannot be parsed or name a kind the
// server does not know, next to good ones; a FeatureGate with a feature set
// we have never seen (the CRD without its enum); a config file with an
// unknown field. Each is named, nothing else is lost, nothing crashes.
func TestFaultBadInput(t *testing.T) {
	f := startFault(t, "BadInput")
	g := NewWithT(t)
	cp := startControlPlane(t, relaxedFeatureGateCRD(t))
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate("SuperPreview"))
	dir := harness.WriteFiles(t, map[string]string{
		"0000_40_malformed.yaml":      testdata(t, "bad/0000_40_malformed.yaml"),
		"0000_50_bad.yaml":            testdata(t, "bad/0000_50_bad.yaml"),
		"0000_60_good_configmap.yaml": testdata(t, "bad/0000_60_good_configmap.yaml"),
		"0000_70_unknown_kind.yaml":   "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: widget\n",
		"0000_80_techpreview.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: techpreview-only
  namespace: default
  annotations:
    release.openshift.io/feature-set: TechPreviewNoUpgrade
`,
	})
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config), "--manifests-dir="+dir, "--resync-period=2s")
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(snapshotOf("SuperPreview"))).To(Succeed(), "the unknown set is named")

	for _, name := range []string{"good", "good-before", "good-after"} {
		g.Eventually(func() bool { return exists(g, t, c, &corev1.ConfigMap{}, "default", name) }).WithTimeout(60*time.Second).Should(BeTrue(), "good manifest %s is not lost", name)
	}
	g.Expect(exists(g, t, c, &corev1.ConfigMap{}, "default", "techpreview-only")).To(BeFalse(), "gated on a known set the snapshot is not")
	g.Eventually(func() string {
		if cond := clusterOperatorCondition(t, c, configv1.OperatorDegraded); cond != nil && cond.Status == configv1.ConditionTrue {
			return cond.Message
		}
		return ""
	}).WithTimeout(60 * time.Second).Should(And(
		ContainSubstring("0000_40_malformed.yaml"),
		ContainSubstring("0000_50_bad.yaml[1]"),
		ContainSubstring("0000_70_unknown_kind.yaml"),
		ContainSubstring("Widget"),
	))
	g.Consistently(o.Running).WithTimeout(notReadyWindow).Should(BeTrue())
	noPanic(g, o)

	t.Run("config file with an unknown field", func(t *testing.T) {
		g := NewWithT(t)
		file := filepath.Join(t.TempDir(), "config.yaml")
		g.Expect(os.WriteFile(file, []byte("apiVersion: operator.featuregate-operator.io/v1alpha1\nkind: OperatorConfig\nleaderElection:\n  leaderElection: true\n"), 0o600)).To(Succeed())
		bad := startOperator(t, "operator-bad-config", harness.Kubeconfig(t, cp.Config), "--config="+file)
		g.Expect(bad.WaitExit(exitTimeout)).To(Equal(2))
		g.Expect(bad.Log.String()).To(ContainSubstring(`unknown field "leaderElection.leaderElection"`))
		noPanic(g, bad)
	})
	f.Detail("snapshot SuperPreview taken and named; malformed, nameless and unknown-kind manifests named in Degraded, 3 good applied, TechPreview-gated excluded; bad config file exit 2")
}
