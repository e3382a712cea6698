package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// What config/default deploys, by the names kustomize gives it.
const (
	namespace      = "featuregate-operator-system"
	deploymentName = "featuregate-operator-controller-manager"
	serviceAccount = "featuregate-operator-controller-manager"
	metricsService = "featuregate-operator-controller-manager-metrics-service"
	metricsReader  = "featuregate-operator-metrics-reader"
	podSelector    = "control-plane=controller-manager"
	container      = "manager"
	// clusterOperator is the ClusterOperator the operator reports on.
	clusterOperator = "featuregate-operator"
	// techPreviewNamespace is what the seed's TechPreviewNoUpgrade payload
	// adds (config/payload/manifests).
	techPreviewNamespace = "openshift-cluster-api"
)

// Bounds of the waits; the node is one 2-core machine.
const (
	podTimeout    = 2 * time.Minute
	changeTimeout = time.Minute
	poll          = 250 * time.Millisecond
)

// admin is a client for the node as its administrator.
func admin(t *testing.T) client.Client {
	t.Helper()
	return harness.Client(t, cluster.Admin)
}

// kubectl runs kubectl as the admin, failing the test on error.
func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := cluster.Kubectl(ctx, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// installCRDs installs the FeatureGate, ClusterOperator, ClusterVersion and
// APIServer CRDs, as the pinned openshift/api ships them, and the
// APIServer "cluster"; it removes them when the test ends (after what the
// test registers later).
func installCRDs(t *testing.T) {
	t.Helper()
	crds, err := controlplane.OpenShiftCRDs()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range crds {
			if _, err := cluster.Kubectl(context.Background(), "", "delete", "--ignore-not-found", "--wait", "--timeout=2m", "-f", f); err != nil {
				t.Errorf("remove CRD: %v", err)
			}
		}
	})
	for _, f := range crds {
		kubectl(t, "", "apply", "--server-side", "-f", f)
	}
	kubectl(t, "", "wait", "--for=condition=Established", "--timeout=1m", "crd/featuregates.config.openshift.io", "crd/clusteroperators.config.openshift.io",
		"crd/apiservers.config.openshift.io")
	// The APIServer whose TLS profile the shipped configuration serves on
	// the metrics endpoint: without it the operator waits, not ready.
	c := admin(t)
	as := &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	if err := c.Create(context.Background(), as); err != nil {
		t.Fatalf("create APIServer cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), as); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete APIServer cluster: %v", err)
		}
	})
}

// createFeatureGate creates FeatureGate/cluster with set, deleted when the
// test ends.
func createFeatureGate(t *testing.T, set configv1.FeatureSet) {
	t.Helper()
	c := admin(t)
	t.Cleanup(func() {
		fg := controlplane.FeatureGate(set)
		if err := c.Delete(context.Background(), fg); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete FeatureGate cluster: %v", err)
		}
	})
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(set))
}

// deployOptions changes what deploy renders.
type deployOptions struct {
	replicas int
	// image replaces operatorImage: a release's own tag.
	image string
	// releaseVersion is passed as --release-version, as a payload sets it.
	releaseVersion string
}

// deploy installs the operator as `make deploy` does: `kustomize build` of
// config/default through an overlay that only names the image built for
// the run (pulled never: IfNotPresent with a local name) and, when asked,
// sets the replicas; applied with `kubectl apply --server-side`. The
// namespace is created first with the restricted Pod Security level
// enforced, as an administrator would. When the test ends, the operator
// is removed as `make undeploy` removes it, with what it applied.
func deploy(t *testing.T, opts deployOptions) {
	t.Helper()
	rendered := render(t, opts)
	t.Cleanup(func() { undeploy(t, rendered) })
	kubectl(t, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
`, namespace), "apply", "--server-side", "--field-manager=cluster-admin", "-f", "-")
	kubectl(t, rendered, "apply", "--server-side", "-f", "-")
}

// render is `kustomize build` of the test overlay.
func render(t *testing.T, opts deployOptions) string {
	t.Helper()
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(root, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	ref := operatorImage
	if opts.image != "" {
		ref = opts.image
	}
	name, tag, _ := strings.Cut(ref, ":")
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: controller
  newName: %s
  newTag: %s
patches:
- target:
    kind: Deployment
    name: %s
  patch: |
    - op: add
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: IfNotPresent
`, base, name, tag, deploymentName)
	if opts.releaseVersion != "" {
		k += fmt.Sprintf(`    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --release-version=%s
`, opts.releaseVersion)
	}
	if opts.replicas > 0 {
		k += fmt.Sprintf("replicas:\n- name: %s\n  count: %d\n", deploymentName, opts.replicas)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := harness.KustomizeBuild(kustomize, dir)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// undeploy is `make undeploy`, waiting for the namespace to go, and then
// removes what the operator created: the payload's objects and its
// ClusterOperator.
func undeploy(t *testing.T, rendered string) {
	ctx := context.Background()
	if _, err := cluster.Kubectl(ctx, rendered, "delete", "--ignore-not-found", "--wait", "--timeout=3m", "-f", "-"); err != nil {
		t.Errorf("undeploy: %v", err)
	}
	for _, args := range [][]string{
		{"namespace", techPreviewNamespace},
		{"-n", "default", "configmap", "always", "default-only"},
		{"clusteroperator.config.openshift.io", clusterOperator},
	} {
		if _, err := cluster.Kubectl(ctx, "", append([]string{"delete", "--ignore-not-found", "--wait", "--timeout=3m"}, args...)...); err != nil &&
			!strings.Contains(err.Error(), "the server doesn't have a resource type") {
			t.Errorf("remove what the operator applied: %v", err)
		}
	}
}

// running is most tests' start: the CRDs, FeatureGate/cluster with set,
// the operator deployed and its pod Ready; the context is bounded by
// timeout.
func running(t *testing.T, set configv1.FeatureSet, timeout time.Duration) (context.Context, corev1.Pod) {
	t.Helper()
	needNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	installCRDs(t)
	createFeatureGate(t, set)
	deploy(t, deployOptions{})
	return ctx, readyPod(ctx, t)
}

// pods lists the operator's pods.
func pods(ctx context.Context, t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := cluster.Clientset.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
	if err != nil {
		t.Logf("list pods: %v", err)
		return nil
	}
	return list.Items
}

// onePod waits for the operator's single pod to have its container
// running, and returns it.
func onePod(ctx context.Context, t *testing.T) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	NewWithT(t).Eventually(func(g Gomega) {
		ps := pods(ctx, t)
		g.Expect(ps).To(HaveLen(1))
		pod = ps[0]
		g.Expect(managerStatus(pod).State.Running).NotTo(BeNil(), "container running")
	}).WithContext(ctx).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	return pod
}

// getPod reads a pod again.
func getPod(ctx context.Context, name string) (corev1.Pod, error) {
	p, err := cluster.Clientset.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return corev1.Pod{}, err
	}
	return *p, nil
}

// managerStatus is the manager container's status (empty when the kubelet
// has reported none yet).
func managerStatus(pod corev1.Pod) corev1.ContainerStatus {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

// ready reports the pod's Ready condition.
func ready(pod corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podLog is the manager container's log, as the API serves it (from the
// kubelet), parsed into lines; previous asks for the container before the
// last restart.
func podLog(ctx context.Context, pod string, previous bool) ([]harness.Line, error) {
	raw, err := cluster.Clientset.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("log of pod %s (previous: %v): %w", pod, previous, err)
	}
	var lines []harness.Line
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		lines = append(lines, harness.ParseLine(l, time.Now()))
	}
	return lines, nil
}

// logHas reports whether a line of lines matches m.
func logHas(lines []harness.Line, m harness.Match) bool {
	for _, l := range lines {
		if m.Matches(l) {
			return true
		}
	}
	return false
}
