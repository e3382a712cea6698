package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// The operator talks to the API server with the ServiceAccount token the
// kubelet mounted (no kubeconfig is given to it), and the RBAC config/
// default ships is enough for all it does: snapshot, Events, ClusterOperator,
// the payload. The same token may not write the FeatureGate.
func TestShippedRBACWithMountedToken(t *testing.T) {
	g := NewWithT(t)
	ctx, pod := running(t, configv1.TechPreviewNoUpgrade, 6*time.Minute)

	ctr := pod.Spec.Containers[0]
	g.Expect(strings.Join(ctr.Args, " ")).NotTo(ContainSubstring("kubeconfig"))
	var tokenVolume string
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access-") {
			tokenVolume = v.Name
		}
	}
	g.Expect(tokenVolume).NotTo(BeEmpty(), "the ServiceAccount admission plugin adds the token volume")

	// The very token the kubelet mounted for the container.
	token, err := os.ReadFile(filepath.Join(cluster.PodVolume(pod.UID, "kubernetes.io~projected", tokenVolume), "token"))
	g.Expect(err).NotTo(HaveOccurred())
	cfg := &rest.Config{Host: cluster.Admin.Host, BearerToken: string(token), TLSClientConfig: rest.TLSClientConfig{CAData: cluster.Admin.CAData}}
	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(review.Status.UserInfo.Username).To(Equal("system:serviceaccount:" + namespace + ":" + serviceAccount))

	// Everything the operator does went through: the payload applied, the
	// ClusterOperator written, the snapshot Event recorded, no refusal
	// logged.
	c := admin(t)
	g.Eventually(func() error {
		return c.Get(ctx, client.ObjectKey{Name: techPreviewNamespace}, &corev1.Namespace{})
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
	g.Eventually(func() (string, error) {
		co := &configv1.ClusterOperator{}
		err := c.Get(ctx, client.ObjectKey{Name: clusterOperator}, co)
		for _, cond := range co.Status.Conditions {
			if cond.Type == configv1.OperatorDegraded {
				return string(cond.Status), err
			}
		}
		return "", err
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(Equal("False"))
	g.Eventually(func() (bool, error) {
		events, err := cluster.Clientset.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == "StartupSnapshot" && e.ReportingController != "" {
				return true, nil
			}
		}
		return false, nil
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(BeTrue(), "the StartupSnapshot Event")
	lines, err := podLog(ctx, pod.Name, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logHas(lines, harness.Contains("forbidden"))).To(BeFalse(), "a request was refused:\n%s", rawLines(lines))

	// Reading the FeatureGate is allowed; writing it is not.
	own, err := harness.NewClient(cfg, 30*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	fg := &configv1.FeatureGate{}
	g.Expect(own.Get(ctx, client.ObjectKey{Name: "cluster"}, fg)).To(Succeed())
	fg.Spec.FeatureSet = configv1.Default
	err = own.Update(ctx, fg)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a FeatureGate write with the operator's token: %v", err)
}

func rawLines(lines []harness.Line) string {
	raw := make([]string, len(lines))
	for i, l := range lines {
		raw[i] = l.Raw
	}
	return strings.Join(raw, "\n")
}
