package e2e

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// The seed, replayed: the operator starts while the Kube API refuses
// connections, the API comes up on a TechPreviewNoUpgrade cluster, and the
// tech-preview namespace the CVO never applied appears, with the
// ClusterOperator saying which feature set it runs.
func TestSeedReplay(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	root, err := controlplane.Root()
	g.Expect(err).NotTo(HaveOccurred())
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.TechPreviewNoUpgrade))
	kc := harness.Kubeconfig(t, cp.Config)
	g.Expect(cp.StopAPIServer()).To(Succeed())

	o := startOperator(t, "operator", kc, "--manifests-dir="+filepath.Join(root, "pkg", "manifest", "testdata", "seed"))
	g.Expect(o.WaitForLog(connRefused, readyTimeout)).To(Succeed())
	g.Expect(o.Log.First(msgRetry, connRefused)).NotTo(BeEmpty(), "the seed's line, without the guess")
	g.Expect(o.Ready()).To(BeFalse())
	g.Expect(o.Log.IndexWhere(logSnapshot)).To(Equal(-1))

	g.Expect(cp.StartAPIServer()).To(Succeed())
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(snapshotOf("TechPreviewNoUpgrade"))).To(Succeed())
	g.Eventually(func() bool { return exists(g, t, c, &corev1.Namespace{}, "", "openshift-cluster-api") }).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(exists(g, t, c, &corev1.ConfigMap{}, "default", "default-only")).To(BeFalse(), "Default-only manifest excluded")

	co := &configv1.ClusterOperator{}
	g.Eventually(func() configv1.ConditionStatus {
		if err := c.Get(t.Context(), client.ObjectKey{Name: "featuregate-operator"}, co); err != nil {
			return ""
		}
		for _, cond := range co.Status.Conditions {
			if cond.Type == configv1.OperatorAvailable {
				return cond.Status
			}
		}
		return ""
	}).WithTimeout(readyTimeout).Should(Equal(configv1.ConditionTrue))
	for _, cond := range co.Status.Conditions {
		switch cond.Type {
		case configv1.OperatorAvailable:
			g.Expect(cond.Message).To(ContainSubstring("startup feature set TechPreviewNoUpgrade"))
		case configv1.OperatorDegraded, configv1.OperatorProgressing:
			g.Expect(cond.Status).To(Equal(configv1.ConditionFalse), string(cond.Type))
		case configv1.OperatorUpgradeable:
			g.Expect(cond.Status).To(Equal(configv1.ConditionFalse))
		}
	}
	g.Expect(o.Running()).To(BeTrue())
}
