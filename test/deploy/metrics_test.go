package deploy

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// The metrics endpoint is served over HTTPS behind the API server's
// authentication (TokenReview) and authorization (SubjectAccessReview), with
// the operator running under its rendered RBAC (the metrics-auth role): no
// token gets 401, a token of an identity bound to the rendered metrics-reader
// ClusterRole gets the metrics, any other identity's token gets 403.
func TestSecureMetrics(t *testing.T) {
	g := NewWithT(t)
	cp, admin := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	sa := installOperatorRBAC(ctx, t, admin)
	createFeatureGate(t, admin, configv1.TechPreviewNoUpgrade, nil, nil)
	health, metrics := harness.FreeAddr(t), harness.FreeAddr(t)
	op := startOperator(t, health,
		"--kubeconfig="+harness.Kubeconfig(t, tokenConfig(ctx, t, cp, sa)),
		"--release-version="+testVersion,
		"--leader-elect",
		"--leader-election-namespace="+sa.namespace,
		"--metrics-bind-address="+metrics,
		"--health-probe-bind-address="+health,
		"--graceful-shutdown-timeout=10s",
	)

	// A scraper bound to the rendered metrics-reader role, and a stranger.
	reader := find(t, rendered(t), "ClusterRole", "metrics-reader")
	scraper := serviceAccount{namespace: sa.namespace, name: "scraper"}
	stranger := serviceAccount{namespace: sa.namespace, name: "stranger"}
	createServiceAccount(ctx, t, admin, scraper)
	createServiceAccount(ctx, t, admin, stranger)
	g.Expect(admin.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.GetName()},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: scraper.namespace, Name: scraper.name}},
	})).To(Succeed())
	scraperToken := tokenConfig(ctx, t, cp, scraper).BearerToken
	strangerToken := tokenConfig(ctx, t, cp, stranger).BearerToken

	g.Expect(op.ReadyWithin(90 * time.Second)).To(Succeed())

	scrape := func(token string) (int, string, error) {
		return harness.Scrape(ctx, "https://"+metrics+"/metrics", token)
	}

	// The metrics server starts beside the probes, not before them: /readyz
	// answering says nothing of its listener.
	g.Eventually(func() error { _, _, err := scrape(""); return err }).WithTimeout(30 * time.Second).Should(Succeed())

	// Plain HTTP is not served.
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + metrics + "/metrics"); err == nil {
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "plain HTTP on the metrics port")
	}

	code, _, err := scrape("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusUnauthorized), "no token")
	// A token the API server does not know is refused too; controller-runtime
	// v0.25's filter answers it 500 ("Authentication failed"), as its token
	// authenticator reports an error rather than "not authenticated".
	code, _, err = scrape("not-a-token")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusInternalServerError), "a token the API server does not know")

	// RBAC caches settle quickly but not at once: poll for the grant.
	g.Eventually(func(g Gomega) {
		code, body, err := scrape(scraperToken)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusOK), "metrics-reader token: %s", body)
		g.Expect(body).To(ContainSubstring(`featuregate_guard_startup_feature_set{feature_set="TechPreviewNoUpgrade"} 1`))
	}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

	code, body, err := scrape(strangerToken)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusForbidden), "token without metrics-reader: %s", body)
}
