package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
)

// ControlPlane is a running etcd and kube-apiserver.
type ControlPlane struct {
	// Config is an admin client configuration.
	Config *rest.Config
	env    *envtest.Environment
	dir    string
}

// Start runs etcd and kube-apiserver from KUBEBUILDER_ASSETS and installs
// crds; nil means OpenShiftCRDs().
func Start(crds []string) (*ControlPlane, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: point it at etcd, kube-apiserver and kubectl (`make envtest-assets` at the repository root builds them)")
	}
	if crds == nil {
		var err error
		if crds, err = OpenShiftCRDs(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "featuregate-testenv-")
	if err != nil {
		return nil, err
	}
	// A fixed certificate directory lets the API server restart with the
	// same serving certificate and client CA: clients keep working.
	api := &envtest.APIServer{CertDir: filepath.Join(dir, "apiserver")}
	// Stop promptly under open watches: outage tests stop it at will.
	api.Configure().Set("shutdown-watch-termination-grace-period", "1s")
	if err := os.MkdirAll(api.CertDir, 0o700); err != nil {
		return nil, err
	}
	cp := &ControlPlane{dir: dir, env: &envtest.Environment{
		// envtest's 20 s default is too close on a loaded CI machine,
		// and a slow start says nothing about the guard.
		ControlPlaneStartTimeout: 2 * time.Minute,
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        crds,
		ErrorIfCRDPathMissing:    true,
		ControlPlane: envtest.ControlPlane{
			APIServer: api,
			Etcd:      &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")},
		},
	}}
	if cp.Config, err = cp.env.Start(); err != nil {
		_ = cp.Stop()
		return nil, fmt.Errorf("start control plane from %s: %w", assets, err)
	}
	return cp, nil
}

// Shared is one control plane for the tests of a package that need the
// OpenShift CRDs: started on first use, so that the pure tests do not pay
// for it, and stopped by the package's TestMain.
type Shared struct {
	once sync.Once
	cp   *ControlPlane
	err  error
}

// Get starts the control plane the first time it is asked for.
func (s *Shared) Get(t testing.TB) *ControlPlane {
	t.Helper()
	s.once.Do(func() { s.cp, s.err = Start(nil) })
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.cp
}

// Stop stops the control plane if a test started it.
func (s *Shared) Stop() error {
	if s.cp == nil {
		return nil
	}
	return s.cp.Stop()
}

// StartT is Start for one test, stopped when it ends.
func StartT(t testing.TB, crds []string) *ControlPlane {
	t.Helper()
	cp, err := Start(crds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return cp
}

// Stop stops both processes and removes their data.
func (cp *ControlPlane) Stop() error {
	return errors.Join(cp.env.Stop(), os.RemoveAll(cp.dir))
}

// StopAPIServer stops the API server and leaves etcd running.
func (cp *ControlPlane) StopAPIServer() error { return cp.env.ControlPlane.APIServer.Stop() }

// StartAPIServer starts it again, on the same address and certificates.
func (cp *ControlPlane) StartAPIServer() error { return cp.env.ControlPlane.APIServer.Start() }

// OpenShiftCRDs are the FeatureGate, ClusterVersion, APIServer and
// Infrastructure CRDs exactly as the resolved github.com/openshift/api
// ships them; the APIServer's is TechPreviewNoUpgrade's, which has
// spec.tlsAdherence.
func OpenShiftCRDs() ([]string, error) {
	return crds("0000_10_config-operator_01_featuregates.crd.yaml",
		"0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
		"0000_10_config-operator_01_apiservers-TechPreviewNoUpgrade.crd.yaml",
		"0000_10_config-operator_01_infrastructures-Default.crd.yaml")
}

// FeatureGateCRDs are OpenShiftCRDs without the APIServer's: a cluster
// that serves no APIServer API.
func FeatureGateCRDs() ([]string, error) {
	return crds("0000_10_config-operator_01_featuregates.crd.yaml",
		"0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml")
}

func crds(names ...string) ([]string, error) {
	api, err := OpenShiftAPIDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(api, "config", "v1", "zz_generated.crd-manifests")
	var files []string
	for _, n := range names {
		files = append(files, filepath.Join(dir, n))
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("openshift/api CRD: %w", err)
		}
	}
	return files, nil
}

// OpenShiftAPIDir is the directory of the github.com/openshift/api the
// module resolves (at whichever controller-runtime minor it is tested).
func OpenShiftAPIDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		return "", fmt.Errorf("locate github.com/openshift/api: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Client is a client for the built-in kinds and config.openshift.io, its
// REST mapper asking discovery.
func Client(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), configv1.Install(scheme)); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CreateFeatureGate creates fg, status included; fg is deleted when the
// test ends, so that tests sharing a control plane keep apart.
func CreateFeatureGate(t testing.TB, c client.Client, fg *configv1.FeatureGate) *configv1.FeatureGate {
	t.Helper()
	// Registered first, so that a failed status write leaves nothing behind.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Delete(ctx, fg); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete FeatureGate %s: %v", fg.Name, err)
		}
	})
	if err := featuregatetest.CreateFeatureGate(t.Context(), c, fg); err != nil {
		t.Fatal(err)
	}
	return fg
}

// ClosedAddr is a loopback address nothing listens on: an API server that
// is down. No free port below 1024 is ever handed out.
const ClosedAddr = "127.0.0.1:1"

// FreeAddr is a loopback address free when asked.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// User is a client configuration for a user bound, cluster-wide, to a
// ClusterRole holding rules and nothing else; both are deleted when the
// test ends.
func (cp *ControlPlane) User(t testing.TB, name string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	u, err := cp.env.ControlPlane.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := Client(t, cp.Config)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", o.GetName(), err)
			}
		})
	}
	return u.Config()
}
