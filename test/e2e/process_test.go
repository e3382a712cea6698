package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The log lines the operator's story is told with: constant messages, the
// values in keys.
var (
	logRetry    = harness.Message(msgRetry)
	logSnapshot = harness.Message("Startup snapshot taken")
	logChanged  = harness.Message(msgChanged)
	logShutdown = harness.Message("Graceful shutdown complete")
)

// attempts is how many reads the last retry line says were made.
func attempts(b *harness.Log) int {
	n := 0
	for _, l := range b.Lines() {
		if logRetry.Matches(l) {
			n, _ = strconv.Atoi(l.Get("attempt"))
		}
	}
	return n
}

// snapshotOf is the startup snapshot line for a feature set.
func snapshotOf(set string) harness.Match {
	return harness.All(logSnapshot, harness.KeyEquals("featureSet", set))
}

// changedBy is the change line whose diff says diff.
func changedBy(diff string) harness.Match {
	return harness.All(logChanged, harness.KeyContains("diff", diff))
}

// shutdownFor is the last line, with its reason.
func shutdownFor(reason string) harness.Match {
	return harness.All(logShutdown, harness.KeyEquals("reason", reason))
}

const (
	msgRetry       = "FeatureGate not read; no feature set assumed, retrying"
	msgChanged     = "FeatureGate changed; requesting shutdown"
	logNotReadYet  = "initial FeatureGate not read yet"
	connRefused    = "connection refused"
	defaultToTech  = "feature set changed from Default to TechPreviewNoUpgrade"
	readyTimeout   = 90 * time.Second
	exitTimeout    = 30 * time.Second
	stillRunning   = 5 * time.Second
	notReadyWindow = 3 * time.Second
)

// errorLines are the operator's error-level log lines and panics, but for
// lines holding one of the excluded substrings.
func errorLines(b *harness.Log, excluded ...string) []string {
	var out []string
next:
	for _, l := range b.Lines() {
		if !strings.Contains(l.Raw, `"level":"error"`) && !strings.Contains(l.Raw, "panic") {
			continue
		}
		for _, e := range excluded {
			if strings.Contains(l.Raw, e) {
				continue next
			}
		}
		out = append(out, l.Raw)
	}
	return out
}

// The seed bug: started while the API server is down, the operator must not
// guess. It stays alive and unready, saying why, retries, and takes the real
// snapshot once the API answers — without restarting.
func TestProcessStartsBeforeAPIServer(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	harness.CreateFeatureGate(t, harness.Client(t, cp.Config), controlplane.FeatureGate(configv1.TechPreviewNoUpgrade))
	kc := harness.Kubeconfig(t, cp.Config)
	g.Expect(cp.StopAPIServer()).To(Succeed())

	o := startOperator(t, "operator", kc, "--initial-fetch-backoff-cap=500ms")
	g.Eventually(o.ReadyzStatus).WithTimeout(readyTimeout).Should(Equal(http.StatusInternalServerError))
	g.Eventually(o.ReadyzReason).WithTimeout(readyTimeout).Should(And(ContainSubstring(logNotReadYet), ContainSubstring(connRefused)))
	g.Eventually(func() int { return o.Log.CountWhere(harness.All(logRetry, harness.KeyAtLeast("attempt", 3))) }).WithTimeout(readyTimeout).Should(BeNumerically(">", 0))
	g.Expect(o.Log.First(msgRetry, connRefused)).NotTo(BeEmpty(), "retry lines carry the error")
	g.Consistently(o.Ready).WithTimeout(notReadyWindow).Should(BeFalse())
	g.Expect(o.Running()).To(BeTrue())
	g.Expect(o.Log.IndexWhere(logSnapshot)).To(Equal(-1), "no snapshot without the API")

	g.Expect(cp.StartAPIServer()).To(Succeed())
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(snapshotOf("TechPreviewNoUpgrade"))).To(Succeed())
	g.Consistently(o.Running).WithTimeout(stillRunning).Should(BeTrue(), "the snapshot matches the cluster: no restart")
	g.Expect(o.Log.IndexWhere(logChanged)).To(Equal(-1))
}

// A changed feature set ends the process cleanly, and the log says what
// changed; the Event says it too.
func TestProcessExitsOnFeatureSetChange(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default))
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config))
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(snapshotOf("Default"))).To(Succeed())

	harness.SetFeatureSet(t, c, "cluster", configv1.TechPreviewNoUpgrade)
	changed := time.Now()
	g.Expect(o.WaitExit(exitTimeout)).To(Equal(0))
	t.Logf("exited %.1fs after the change", time.Since(changed).Seconds())
	g.Expect(o.Logged(changedBy(defaultToTech))).To(Succeed())
	g.Expect(o.Logged(shutdownFor(defaultToTech))).To(Succeed())
	// The guard's monitor can see the change before the FeatureGate
	// controller's informer has synced; controller-runtime then logs the
	// sync cut short by the shutdown as an error. Nothing else may be one.
	g.Expect(errorLines(o.Log, `"logger":"events"`, `Informer to sync`)).To(BeEmpty())
	// The Warning Event is written while the manager drains, and Start
	// returns once it is: it is there when the process has exited.
	t.Run("FeatureGateChanged Event is written before exit", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(eventReasons(t, c)).To(ContainElement("FeatureGateChanged"))
		g.Expect(o.Log.First("Unable to write event")).To(BeEmpty())
	})
}

// eventReasons lists the reasons of events.k8s.io Events about
// FeatureGate/cluster.
func eventReasons(t *testing.T, c client.Client) []string {
	var list eventsv1.EventList
	if err := c.List(t.Context(), &list); err != nil {
		t.Logf("list events: %v", err)
		return nil
	}
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "FeatureGate" && e.Regarding.Name == "cluster" {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// changeWhileAPIServerDown is the edge-triggered bug's other half: the
// change happens while the operator cannot watch. The operator's API server
// stops, the FeatureGate is changed through a second API server on the same
// etcd, the first comes back: the operator must notice and exit 0. It
// returns how long after the API server's return the process exited.
func changeWhileAPIServerDown(t *testing.T, args ...string) (*harness.Process, time.Duration) {
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	harness.CreateFeatureGate(t, harness.Client(t, cp.Config), controlplane.FeatureGate(configv1.Default))
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config), args...)
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(snapshotOf("Default"))).To(Succeed())

	g.Expect(cp.StopAPIServer()).To(Succeed())
	second, err := cp.SecondAPIServer()
	g.Expect(err).NotTo(HaveOccurred())
	harness.SetFeatureSet(t, harness.Client(t, second), "cluster", configv1.TechPreviewNoUpgrade)
	g.Consistently(o.Running).WithTimeout(notReadyWindow).Should(BeTrue(), "nothing to see while the API server is down")

	g.Expect(cp.StartAPIServer()).To(Succeed())
	back := time.Now()
	g.Expect(o.WaitExit(60 * time.Second)).To(Equal(0))
	took := time.Since(back)
	g.Expect(o.Logged(changedBy(defaultToTech))).To(Succeed())
	g.Expect(o.Logged(shutdownFor(defaultToTech))).To(Succeed())
	return o, took
}

// With a short resync, the change made while the API server was down is
// caught once it returns (by the re-list after the watch reconnects, or by
// the resync, whichever comes first: the log does not tell them apart; the
// fault suite runs the same scenario with a long resync to isolate the
// re-list).
func TestProcessChangeWhileAPIServerDown(t *testing.T) {
	lane(t)
	_, took := changeWhileAPIServerDown(t, "--resync-period=2s")
	t.Logf("exited %.1fs after the API server returned", took.Seconds())
}

// NotFound is not Default: without the object there is no snapshot and the
// operator is not ready; once it exists, it is.
func TestProcessFeatureGateAbsentAtStart(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config), "--initial-fetch-backoff-cap=500ms")
	g.Eventually(o.ReadyzReason).WithTimeout(readyTimeout).Should(ContainSubstring("FeatureGate cluster not found"))
	g.Consistently(o.Ready).WithTimeout(notReadyWindow).Should(BeFalse())
	g.Expect(o.Logged(harness.Contains(msgRetry, "FeatureGate cluster not found"))).To(Succeed())

	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.TechPreviewNoUpgrade))
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(snapshotOf("TechPreviewNoUpgrade"))).To(Succeed())
	g.Consistently(o.Running).WithTimeout(stillRunning).Should(BeTrue())
}

// SIGTERM, the kubelet's stop, drains and exits 0 within the graceful
// shutdown timeout.
func TestProcessSIGTERM(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	harness.CreateFeatureGate(t, harness.Client(t, cp.Config), controlplane.FeatureGate(configv1.Default))
	const graceful = 5 * time.Second
	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config), "--graceful-shutdown-timeout="+graceful.String())
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	// Fully started. (A SIGTERM while the FeatureGate informer still syncs
	// makes controller-runtime log a misleading error-level "Timeout:
	// failed waiting for *v1.FeatureGate Informer to sync".)
	g.Expect(o.WaitForLog(logWorkersStarted, 60*time.Second)).To(Succeed())

	g.Expect(o.Signal(syscall.SIGTERM)).To(Succeed())
	sent := time.Now()
	// The margin covers process teardown on a loaded machine.
	g.Expect(o.WaitExit(graceful + 10*time.Second)).To(Equal(0))
	t.Logf("exited %.1fs after SIGTERM", time.Since(sent).Seconds())
	g.Expect(o.Logged(shutdownFor("signal"))).To(Succeed())
	g.Expect(errorLines(o.Log)).To(BeEmpty())
}

// unreachableKubeconfig points at a loopback port nobody listens on: an API
// server that is down, without starting one.
func unreachableKubeconfig(t *testing.T) string {
	return harness.Kubeconfig(t, &rest.Config{Host: "https://" + harness.ClosedAddr, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
}

// For those who prefer a crash loop: --initial-fetch-timeout makes the
// process exit 1 without a snapshot, saying so.
func TestProcessInitialFetchTimeout(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	o := startOperator(t, "operator", unreachableKubeconfig(t), "--initial-fetch-timeout=3s", "--initial-fetch-backoff-cap=500ms")
	g.Expect(o.WaitExit(exitTimeout)).To(Equal(1))
	g.Expect(o.Log.First("no FeatureGate snapshot after 3s (initial fetch timeout)", connRefused)).NotTo(BeEmpty())
	g.Expect(o.Log.IndexWhere(logSnapshot)).To(Equal(-1))
}

// Issue 3 item 7: an outage at start longer than the controllers'
// cache-sync timeout must not end the manager with an error.
func TestProcessLongOutageShortCacheSyncTimeout(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp := startControlPlane(t, nil)
	harness.CreateFeatureGate(t, harness.Client(t, cp.Config), controlplane.FeatureGate(configv1.TechPreviewNoUpgrade))
	kc := harness.Kubeconfig(t, cp.Config)
	g.Expect(cp.StopAPIServer()).To(Succeed())

	o := startOperator(t, "operator", kc, "--cache-sync-timeout=2s", "--initial-fetch-backoff-cap=1s")
	g.Eventually(o.ReadyzStatus).WithTimeout(readyTimeout).Should(Equal(http.StatusInternalServerError))
	// The outage: four times the cache-sync timeout.
	g.Consistently(func() bool { return o.Running() && !o.Ready() }).WithTimeout(8 * time.Second).Should(BeTrue())

	g.Expect(cp.StartAPIServer()).To(Succeed())
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Consistently(o.Running).WithTimeout(stillRunning).Should(BeTrue())
	g.Expect(o.Logged(snapshotOf("TechPreviewNoUpgrade"))).To(Succeed())
	g.Expect(errorLines(o.Log)).To(BeEmpty())
}

// Invalid configuration exits 2 naming the field, before touching the API.
func TestProcessInvalidConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown-field.yaml")
	if err := os.WriteFile(unknown, []byte("apiVersion: operator.featuregate-operator.io/v1alpha1\nkind: OperatorConfig\nresyncPeriod: 1m\nresyncPeriods: 2m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"zero resync period", []string{"--resync-period=0s"}, []string{"resyncPeriod", "--resync-period"}},
		{"unknown field in the config file", []string{"--config=" + unknown}, []string{unknown, `unknown field "resyncPeriods"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o := startOperator(t, "operator", unreachableKubeconfig(t), tc.args...)
			g.Expect(o.WaitExit(exitTimeout)).To(Equal(2))
			for _, w := range tc.want {
				g.Expect(o.Log.String()).To(ContainSubstring(w))
			}
			g.Expect(o.Log.IndexWhere(logRetry)).To(Equal(-1), "no API access on invalid configuration")
		})
	}
}
