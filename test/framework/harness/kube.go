package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
)

// StartControlPlane starts etcd and kube-apiserver, stopped when the test
// ends.
func StartControlPlane(tb TB, opts controlplane.Options) *controlplane.ControlPlane {
	tb.Helper()
	cp, err := controlplane.Start(opts)
	if err != nil {
		tb.Fatalf("start control plane: %v", err)
	}
	tb.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			tb.Errorf("stop control plane: %v", err)
		}
	})
	return cp
}

// WriteKubeconfig writes a kubeconfig for cfg to path: its server, CA and
// whichever credentials it has (an admin's client certificate, a
// ServiceAccount's token). Point cfg.Host elsewhere to go through a proxy.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["harness"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos["harness"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["harness"] = &clientcmdapi.Context{Cluster: "harness", AuthInfo: "harness"}
	kc.CurrentContext = "harness"
	return clientcmd.WriteToFile(*kc, path)
}

// Kubeconfig writes a kubeconfig for cfg into a test directory and returns
// its path.
func Kubeconfig(tb TB, cfg *rest.Config) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := WriteKubeconfig(path, cfg); err != nil {
		tb.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

// NewClient is controlplane.NewClient with every request bounded by
// timeout, so that a poll never hangs on a dead server.
func NewClient(cfg *rest.Config, timeout time.Duration) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	return controlplane.NewClient(cfg)
}

// Client is NewClient for a test, bounded at 30 s.
func Client(tb TB, cfg *rest.Config) client.Client {
	tb.Helper()
	c, err := NewClient(cfg, 30*time.Second)
	if err != nil {
		tb.Fatalf("client for %s: %v", cfg.Host, err)
	}
	return c
}

// CreateFeatureGate is controlplane.CreateFeatureGate for a test; it
// returns fg.
func CreateFeatureGate(tb TB, c client.Client, fg *configv1.FeatureGate) *configv1.FeatureGate {
	tb.Helper()
	if err := controlplane.CreateFeatureGate(tb.Context(), c, fg); err != nil {
		tb.Fatalf("%v", err)
	}
	return fg
}

// CreateSharedFeatureGate is CreateFeatureGate on a control plane shared by
// tests: the FeatureGate is deleted when the test ends.
func CreateSharedFeatureGate(tb TB, c client.Client, fg *configv1.FeatureGate) *configv1.FeatureGate {
	tb.Helper()
	// Registered first, so that a failed status write leaves nothing behind.
	tb.Cleanup(func() {
		if err := c.Delete(context.Background(), fg); err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("delete FeatureGate %s: %v", fg.Name, err)
		}
	})
	return CreateFeatureGate(tb, c, fg)
}

// SetFeatureSet changes a FeatureGate's feature set with a merge patch, as
// `kubectl patch` would.
func SetFeatureSet(tb TB, c client.Client, name string, set configv1.FeatureSet) {
	tb.Helper()
	fg := controlplane.FeatureGate("", controlplane.Named(name))
	patch := fmt.Appendf(nil, `{"spec":{"featureSet":%q}}`, set)
	if err := c.Patch(tb.Context(), fg, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		tb.Fatalf("set feature set %q on FeatureGate %s: %v", set, name, err)
	}
}

// WriteFiles writes files (name -> content) into a new temporary directory
// and returns it: a manifests directory, a config file's home.
func WriteFiles(tb TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			tb.Fatalf("%v", err)
		}
	}
	return dir
}
