package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/clusterinputs"
	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// examples/consumer is an operator written the kubebuilder way on top of the
// guard: it writes the feature set and the state of its --gate into every
// ConfigMap labelled app=consumer, and only while the guard vouches for its
// snapshot.
const (
	consumerVersion = "4.99.0"
	consumerGate    = "GateA"
	msgActed        = "Acted on the feature set"
	// The preview controller is registered, or not, from the snapshot.
	msgPreviewRegistered = "Preview controller registered"
	msgPreviewSkipped    = "Preview controller not registered; its gate is disabled"
	consumerConfigCM     = "consumer-settings"
	// watchDelivery is how long after a change's write returned a process
	// may still act on the old state: the time the API server takes to
	// deliver the change on the guard's watch (see staleAfter).
	watchDelivery = 100 * time.Millisecond
	// detectWithin bounds how long after the change's write returned the
	// guard logs it (issue 18: over 2 s fails).
	detectWithin = 2 * time.Second
)

// logStopped is the consumer's last line, whose reason is the guard's
// StopReason or "signal".
var logStopped = harness.All(harness.Message("Stopped"), harness.HasKey("reason"))

// actedWith selects the consumer's "Acted" lines for one gate state.
func actedWith(enabled bool) harness.Match {
	return harness.All(harness.Message(msgActed), harness.KeyEquals("enabled", strconv.FormatBool(enabled)))
}

// buildConsumer builds examples/consumer, its own module, into a test
// directory.
func buildConsumer(t *testing.T) string {
	t.Helper()
	return consumer.build(t, "consumer", filepath.Join(repoRoot, "examples", "consumer"), ".")
}

// consumer is the example's binary, built once for the tests that run it
// (a build beside another lane's timed rounds would load the machine
// three times over); runMain removes it.
var consumer binary

// binary is a command built once, into a directory of its own, for the
// tests that run it.
type binary struct {
	once     sync.Once
	dir, bin string
	err      error
}

// build builds pkg of the module in dir as name, once.
func (b *binary) build(t *testing.T, name, dir, pkg string) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "e2e-"+name+"-"); b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, name)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		build := exec.CommandContext(ctx, "go", "build", "-o", b.bin, pkg)
		build.Dir = dir
		if out, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s: %w\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// consumerOptions runs the consumer against kubeconfig for consumerVersion,
// with nanosecond log timestamps (the zap flags' default has whole seconds).
func consumerOptions(t *testing.T, name, bin, kubeconfig string, args ...string) harness.Options {
	probe := harness.FreeAddr(t)
	return harness.Options{Name: name, Path: bin, Probe: probe, Args: append([]string{
		"--kubeconfig=" + kubeconfig,
		"--health-probe-bind-address=" + probe,
		"--release-version=" + consumerVersion,
		"--gate=" + consumerGate,
		"--zap-time-encoding=rfc3339nano",
	}, args...)}
}

// startConsumerCluster starts a control plane for the consumer, stopped
// when t ends, with the FeatureGate (consumerGate enabled or not, for
// consumerVersion) and a ConfigMap labelled app=consumer in "default"; it
// returns the control plane and an admin client.
func startConsumerCluster(t *testing.T, gateEnabled bool) (*controlplane.ControlPlane, client.Client) {
	t.Helper()
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default, func(fg *configv1.FeatureGate) {
		fg.Status.FeatureGates = []configv1.FeatureGateDetails{consumerGates(gateEnabled)}
	}))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: consumerConfigCM, Labels: map[string]string{"app": "consumer"}}}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatalf("create ConfigMap: %v", err)
	}
	return cp, c
}

// consumerGates is the status entry for consumerVersion: consumerGate
// enabled or disabled, GateB the other way.
func consumerGates(gateEnabled bool) configv1.FeatureGateDetails {
	on, off := []string{consumerGate}, []string{"GateB"}
	if !gateEnabled {
		on, off = off, on
	}
	return controlplane.GateDetails(consumerVersion, on, off)
}

// setConsumerGate flips consumerGate in status.featureGates with one merge
// patch of the status subresource, as the cluster-config-operator would
// publish it.
func setConsumerGate(ctx context.Context, c client.Client, enabled bool) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"featureGates": []configv1.FeatureGateDetails{consumerGates(enabled)}}})
	if err != nil {
		return err
	}
	fg := controlplane.FeatureGate("")
	return c.Status().Patch(ctx, fg, client.RawPatch(types.MergePatchType, patch))
}

// consumerData is the consumer's ConfigMap's data, nil when it cannot be
// read.
func consumerData(t *testing.T, c client.Client) map[string]string {
	cm := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: consumerConfigCM}, cm); err != nil {
		return nil
	}
	return cm.Data
}

// staleAfter is when acting on the old state becomes wrong: watchDelivery
// after the change's write returned, or, when the watch was slower than
// that on a loaded machine, once the guard logged the change (it stops
// before it logs), but never later than detectWithin after the write: a
// guard that learns late does not excuse the acts.
func staleAfter(changed time.Time, detected harness.Line) time.Time {
	at := detected.At()
	if bound := changed.Add(detectWithin); at.After(bound) {
		at = bound
	}
	if floor := changed.Add(watchDelivery); at.Before(floor) {
		at = floor
	}
	return at
}

// staleActs are the "Acted" lines for the state enabled logged later than
// after.
func staleActs(o *harness.Process, enabled bool, after time.Time) []string {
	var out []string
	for _, l := range o.Log.Lines() {
		if actedWith(enabled).Matches(l) && l.At().After(after) {
			out = append(out, l.Raw)
		}
	}
	return out
}

// examples/consumer, a separate module written the kubebuilder way (its own
// cached type with a Cache.ByObject entry, a controller built with
// ctrl.NewControllerManagedBy), gets the whole guard: started with the API
// down it waits, not ready, longer than its controller's cache-sync
// timeout, without exiting; once the API returns it is ready and acts on the
// feature set; a gate change ends it with exit 0, and it does not act on the
// old state once the change is readable; its restart reads the new value;
// SIGTERM is exit 0 too.
func TestConsumerExampleGetsTheWholeGuard(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	bin := buildConsumer(t)
	cp, c := startConsumerCluster(t, true)
	bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bystander"}}
	g.Expect(c.Create(t.Context(), bystander)).To(Succeed())
	kc := harness.Kubeconfig(t, cp.Config)
	g.Expect(cp.StopAPIServer()).To(Succeed())

	const cacheSyncTimeout = time.Second
	o := harness.StartT(t, consumerOptions(t, "consumer", bin, kc, "--resync=200ms", "--cache-sync-timeout="+cacheSyncTimeout.String()))
	g.Eventually(o.ReadyzStatus).WithTimeout(readyTimeout).Should(Equal(http.StatusInternalServerError))
	g.Eventually(o.ReadyzReason).WithTimeout(readyTimeout).Should(And(ContainSubstring(logNotReadYet), ContainSubstring(connRefused)))
	g.Expect(notReadyWindow).To(BeNumerically(">", 2*cacheSyncTimeout))
	g.Consistently(func() bool { return o.Running() && !o.Ready() }).WithTimeout(notReadyWindow).Should(BeTrue(),
		"API down at start: alive and not ready for longer than the controller's cache-sync timeout")
	g.Expect(o.Log.IndexWhere(harness.Message(msgActed))).To(Equal(-1), "nothing acted on without a snapshot")

	g.Expect(cp.StartAPIServer()).To(Succeed())
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(harness.All(logSnapshot, harness.KeyEquals("snapshot", "Default (version "+consumerVersion+": enabled [GateA], disabled [GateB])")))).To(Succeed())
	g.Eventually(func() map[string]string { return consumerData(t, c) }).WithTimeout(readyTimeout).Should(Equal(map[string]string{"featureSet": "Default", consumerGate: "enabled"}))
	g.Expect(o.WaitForLog(msgActed, readyTimeout)).To(Succeed())
	g.Expect(o.Logged(harness.All(actedWith(true), harness.KeyEquals("configMap", "default/"+consumerConfigCM),
		harness.KeyEquals("featureSet", "Default"), harness.KeyEquals("gate", consumerGate)))).To(Succeed())
	g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(bystander), bystander)).To(Succeed())
	g.Expect(bystander.Data).To(BeEmpty(), "a ConfigMap without the label is not the consumer's")
	// GateB is disabled: the controller behind it was never registered.
	g.Expect(o.Logged(harness.All(harness.Message(msgPreviewSkipped), harness.KeyEquals("gate", "GateB")))).To(Succeed())
	g.Expect(o.Log.IndexWhere(harness.Message(msgPreviewRegistered))).To(Equal(-1))
	g.Expect(consumerPreview(t, c)).To(BeEmpty(), "no preview controller, no preview annotation")

	g.Expect(setConsumerGate(t.Context(), c, false)).To(Succeed())
	changed := time.Now()
	g.Expect(o.WaitExit(exitTimeout)).To(Equal(0))
	t.Logf("consumer exited %dms after the gate change", o.ExitedAt().Sub(changed).Milliseconds())
	const diff = "gate GateA enabled -> disabled in status for version " + consumerVersion
	line, ok := o.Log.Find(harness.All(changedBy(diff), harness.HasKey("detectedBy")))
	g.Expect(ok).To(BeTrue(), "the change is logged, with detectedBy")
	t.Logf("detected by %s %dms after the gate change", line.Get("detectedBy"), line.At().Sub(changed).Milliseconds())
	g.Expect(line.At().Sub(changed)).To(BeNumerically("<=", detectWithin), "detected in time")
	g.Expect(o.Logged(harness.All(logStopped, harness.KeyContains("reason", diff)))).To(Succeed())
	g.Expect(staleActs(o, true, staleAfter(changed, line))).To(BeEmpty(), "acted on the old state once the change was readable")
	g.Expect(errorLines(o.Log)).To(BeEmpty())

	// The restart reads the new value and acts on it; SIGTERM is exit 0.
	next := harness.StartT(t, consumerOptions(t, "consumer-restarted", bin, kc))
	g.Eventually(next.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Eventually(func() map[string]string { return consumerData(t, c) }).WithTimeout(readyTimeout).Should(HaveKeyWithValue(consumerGate, "disabled"))
	// GateB is now enabled: Options.Setup registered its controller.
	g.Expect(next.Logged(harness.All(harness.Message(msgPreviewRegistered), harness.KeyEquals("gate", "GateB")))).To(Succeed())
	g.Eventually(func() string { return consumerPreview(t, c) }).WithTimeout(readyTimeout).Should(Equal("GateB"))
	g.Expect(next.Signal(syscall.SIGTERM)).To(Succeed())
	g.Expect(next.WaitExit(exitTimeout)).To(Equal(0))
	g.Expect(next.Logged(harness.All(logStopped, harness.KeyEquals("reason", "signal")))).To(Succeed())
	g.Expect(next.Log.IndexWhere(logChanged)).To(Equal(-1))
}

// examples/consumer built the way OpenShift builds operators, with the
// placeholder version the payload substitutes (--release-version
// 0.0.1-snapshot): it reads the version from the ClusterVersion as
// library-go does, is not ready while there is none (and says so), and then
// reads the gates of the cluster's version and acts on them.
func TestConsumerPlaceholderVersion(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	bin := buildConsumer(t)
	cp, c := startConsumerCluster(t, true)

	o := harness.StartT(t, consumerOptions(t, "consumer", bin, harness.Kubeconfig(t, cp.Config), "--release-version=0.0.1-snapshot"))
	g.Eventually(o.ReadyzReason).WithTimeout(readyTimeout).Should(And(ContainSubstring(logNotReadYet), ContainSubstring("get ClusterVersion version")))
	g.Consistently(o.Ready).WithTimeout(time.Second).Should(BeFalse(), "no ClusterVersion: no version, no snapshot")
	g.Expect(o.Log.IndexWhere(harness.Message(msgActed))).To(Equal(-1), "nothing acted on without a version")

	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: clusterinputs.ClusterVersionName}, Spec: configv1.ClusterVersionSpec{ClusterID: "6f0b2a8e-3c1d-4e5f-8a9b-0c1d2e3f4a5b"}}
	g.Expect(c.Create(t.Context(), cv)).To(Succeed())
	cv.Status.Desired.Version = consumerVersion
	g.Expect(c.Status().Update(t.Context(), cv)).To(Succeed())

	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(harness.All(logSnapshot, harness.KeyEquals("version", consumerVersion),
		harness.KeyEquals("versionFrom", "ClusterVersion version status.desired.version")))).To(Succeed())
	g.Eventually(func() map[string]string { return consumerData(t, c) }).WithTimeout(readyTimeout).Should(Equal(map[string]string{"featureSet": "Default", consumerGate: "enabled"}))
}

// consumerPreview is the preview controller's annotation on the consumer's
// ConfigMap: the gate that registered it, or "".
func consumerPreview(t *testing.T, c client.Client) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: consumerConfigCM}, cm); err != nil {
		t.Fatalf("get ConfigMap: %v", err)
	}
	return cm.Annotations["consumer.example.com/preview"]
}
