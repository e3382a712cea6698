package featuregate_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/testharness"
	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// The live getter reads what the API server holds, and says NotFound the
// way the controller-runtime client does.
func TestLiveGetterReadsFeatureGate(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	ctx := testContext(t)
	fg := featureGate(configv1.TechPreviewNoUpgrade)
	testharness.CreateSharedFeatureGate(t, apiReader(t, cp.Config), fg)

	lg, err := featuregate.NewLiveGetter(cp.Config)
	g.Expect(err).NotTo(HaveOccurred())
	got := &configv1.FeatureGate{}
	g.Expect(lg.Get(ctx, client.ObjectKey{Name: fg.Name}, got)).To(Succeed())
	g.Expect(got.Spec.FeatureSet).To(Equal(configv1.TechPreviewNoUpgrade))
	g.Expect(got.UID).To(Equal(fg.UID))

	err = lg.Get(ctx, client.ObjectKey{Name: "absent"}, &configv1.FeatureGate{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
}

// A stopping kube-apiserver answers 429 with Retry-After: 5. client-go
// would sleep and retry inside the one call; the live getter returns at once
// so that the caller's own backoff decides.
func TestLiveGetterDoesNotHonourRetryAfter(t *testing.T) {
	g := NewWithT(t)
	var calls atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "5")
		http.Error(w, "The apiserver is shutting down, please try again later.", http.StatusTooManyRequests)
	}))
	t.Cleanup(server.Close)
	lg, err := featuregate.NewLiveGetter(&rest.Config{Host: server.URL})
	g.Expect(err).NotTo(HaveOccurred())

	started := time.Now()
	err = lg.Get(testContext(t), client.ObjectKey{Name: "cluster"}, &configv1.FeatureGate{})
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "%v", err)
	g.Expect(calls.Load()).To(Equal(int32(1)))
	g.Expect(time.Since(started)).To(BeNumerically("<", 4*time.Second), "no Retry-After sleep")
}
