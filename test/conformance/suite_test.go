package conformance_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The environment controller-runtime's pkg/manager suite gives its specs
// (an envtest control plane, cfg, clientset, a transport to close idle
// connections on, no default metrics listener), plus what the guarded
// manager needs to take its snapshot at once: the FeatureGate CRD, as
// github.com/openshift/api ships it, and a FeatureGate "cluster".

func TestConformance(t *testing.T) {
	RegisterFailHandler(Fail)
	if err := checkVersion(); err != nil {
		t.Fatal(err)
	}
	v, _ := crVersion()
	RunSpecs(t, "Manager conformance: stock and guarded, controller-runtime "+v)
}

var (
	testenv   *envtest.Environment
	cfg       *rest.Config
	clientset *kubernetes.Clientset

	// clientRoundTripper is the last transport built from cfg: the leak
	// specs close its idle keep-alive connections before looking for
	// leaked goroutines.
	clientRoundTripper http.RoundTripper
)

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))

	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS must name etcd, kube-apiserver and kubectl (`make envtest-assets` at the repository root builds them into bin/k8s)")
	crd, err := featureGateCRD()
	Expect(err).NotTo(HaveOccurred())
	testenv = &envtest.Environment{
		// envtest's 20 s default is too close on a loaded CI machine.
		ControlPlaneStartTimeout: 2 * time.Minute,
		CRDDirectoryPaths:        []string{crd},
		ErrorIfCRDPathMissing:    true,
	}
	cfg, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())

	// The FeatureGate the guarded manager reads: present from the start,
	// so that its snapshot is taken at once.
	Expect(createFeatureGate(rest.CopyConfig(cfg))).To(Succeed())

	// Every client built from cfg shares one transport, whose connections
	// the suite can close (conns_test.go).
	Expect(suiteConns.own(cfg)).To(Succeed())
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		clientRoundTripper = rt
		if floor() {
			// As controller-runtime v0.23's suite does: it closes idle
			// connections on the *http.Transport itself.
			if _, isTransport := rt.(*http.Transport); !isTransport {
				panic(fmt.Sprintf("wasn't able to grab underlying transport from REST client's RoundTripper, can't figure out how to close keep-alives: expected an *http.Transport, got %#v", rt))
			}
		}
		return rt
	}

	clientset, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())

	// Prevent the metrics listener being created.
	metricsserver.DefaultBindAddress = "0"
})

var _ = AfterSuite(func() {
	if testenv != nil {
		Expect(testenv.Stop()).To(Succeed())
	}
	metricsserver.DefaultBindAddress = ":8080"
})

// closeIdleConnections force-closes the keep-alive connections of the last
// transport built from cfg, as each version's suite does it, and then every
// connection dialed through cfg.
func closeIdleConnections() {
	defer suiteConns.closeAll() // conns_test.go says why
	if floor() {
		clientRoundTripper.(*http.Transport).CloseIdleConnections()
		return
	}
	utilnet.CloseIdleConnectionsFor(clientRoundTripper)
}

// featureGateCRD is the FeatureGate CRD of the github.com/openshift/api the
// module resolves (at the floor, the floor's), as the library's own
// control plane installs it (pkg/featuregate/internal/testenv).
func featureGateCRD() (string, error) {
	dir, err := goList("{{.Dir}}", "github.com/openshift/api")
	if err != nil {
		return "", err
	}
	crd := filepath.Join(dir, "config", "v1", "zz_generated.crd-manifests",
		"0000_10_config-operator_01_featuregates.crd.yaml")
	if _, err := os.Stat(crd); err != nil {
		return "", fmt.Errorf("openshift/api FeatureGate CRD: %w", err)
	}
	return crd, nil
}

// createFeatureGate creates the FeatureGate "cluster", spec {}.
func createFeatureGate(c *rest.Config) error {
	scheme := runtime.NewScheme()
	if err := configv1.Install(scheme); err != nil {
		return err
	}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	return cl.Create(context.Background(), &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: featureGateName}})
}

const featureGateName = "cluster"
