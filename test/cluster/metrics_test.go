package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// The secured metrics endpoint, reached as Prometheus reaches it: through
// the metrics Service's ClusterIP (kube-proxy's rules), over HTTPS. A
// token whose ServiceAccount is bound to the shipped metrics-reader role
// reads it (200); one without the role is refused (403), and so is a
// request without a token (401).
func TestMetricsThroughService(t *testing.T) {
	g := NewWithT(t)
	ctx, _ := running(t, configv1.TechPreviewNoUpgrade, 6*time.Minute)

	svc, err := cluster.Clientset.CoreV1().Services(namespace).Get(ctx, metricsService, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	url := fmt.Sprintf("https://%s/metrics", net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port))))

	scraper := scraperToken(ctx, t, "metrics-scraper", true)
	stranger := scraperToken(ctx, t, "metrics-stranger", false)
	var body string
	g.Eventually(func() (int, error) {
		code, b, err := harness.Scrape(ctx, url, scraper)
		body = b
		return code, err
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(Equal(http.StatusOK), "scrape %s with the metrics-reader token", url)
	g.Expect(body).To(ContainSubstring(`featuregate_guard_startup_feature_set{feature_set="TechPreviewNoUpgrade"} 1`))
	g.Expect(status(ctx, url, stranger)).To(Equal(http.StatusForbidden), "a token without the metrics-reader role")
	g.Expect(status(ctx, url, "")).To(Equal(http.StatusUnauthorized), "no token")
}

// scraperToken creates a ServiceAccount in its own namespace (removed when
// the test ends), bound to the shipped metrics-reader ClusterRole when
// reader, and returns a token for it.
func scraperToken(ctx context.Context, t *testing.T, name string, reader bool) string {
	t.Helper()
	g := NewWithT(t)
	cs := cluster.Clientset
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	_, err = cs.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	if reader {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: name}},
		}
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() {
			if err := cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete ClusterRoleBinding %s: %v", name, err)
			}
		})
	}
	tr, err := cs.CoreV1().ServiceAccounts(name).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// status is harness.Scrape's status code.
func status(ctx context.Context, url, token string) (int, error) {
	code, _, err := harness.Scrape(ctx, url, token)
	return code, err
}
