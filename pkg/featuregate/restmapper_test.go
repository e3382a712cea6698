package featuregate_test

import (
	"fmt"
	"net"
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// closedPortConfig points at a loopback port nothing listens on: an API
// server that is down.
func closedPortConfig(t *testing.T) *rest.Config {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: fmt.Sprintf("https://%s", addr), TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

// The manager builds its cache (which asks whether FeatureGate is
// namespaced) before anything can wait for the API; these mappings must not
// need the API.
func TestMapperProviderWorksWhileAPIIsDown(t *testing.T) {
	g := NewWithT(t)
	cfg := closedPortConfig(t)
	httpClient, err := rest.HTTPClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	mapper, err := featuregate.MapperProvider(cfg, httpClient)
	g.Expect(err).NotTo(HaveOccurred())

	for kind, resource := range map[string]string{"FeatureGate": "featuregates", "ClusterOperator": "clusteroperators"} {
		gk := schema.GroupKind{Group: configv1.GroupName, Kind: kind}
		for _, versions := range [][]string{nil, {"v1"}} {
			mapping, err := mapper.RESTMapping(gk, versions...)
			g.Expect(err).NotTo(HaveOccurred(), kind)
			g.Expect(mapping.Scope.Name()).To(Equal(meta.RESTScopeNameRoot), kind)
			g.Expect(mapping.Resource).To(Equal(configv1.GroupVersion.WithResource(resource)), kind)
			g.Expect(mapping.GroupVersionKind).To(Equal(configv1.GroupVersion.WithKind(kind)))
		}
	}

	// What controller-runtime's cache asks when ByObject restricts a type.
	scheme := runtime.NewScheme()
	g.Expect(configv1.Install(scheme)).To(Succeed())
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	namespaced, err := apiutil.IsObjectNamespaced(&configv1.FeatureGate{}, scheme, mapper)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(namespaced).To(BeFalse())

	// Everything else still goes to discovery, which cannot answer now.
	_, err = mapper.RESTMapping(corev1.SchemeGroupVersion.WithKind("ConfigMap").GroupKind())
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("connection refused"))
}
