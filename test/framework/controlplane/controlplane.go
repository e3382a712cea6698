// Package controlplane runs a real etcd and kube-apiserver, built from source
// into bin/k8s by `make envtest-assets`, with the OpenShift CRDs the operator
// reads. Tests, the end-to-end suite and `make run-local` all stand on it; it
// is controller-runtime's envtest with the few extra moves a fault test
// needs: stopping and restarting the API server on the same port and
// certificates, and a second API server on the same etcd.
package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Module is the operator's module path; Root finds the checkout by it.
const Module = "github.com/featuregate-operator/operator"

// Options configures Start.
type Options struct {
	// AssetsDir holds etcd, kube-apiserver and kubectl. Default: the
	// KUBEBUILDER_ASSETS environment variable, else <repo>/bin/k8s.
	AssetsDir string
	// CRDs are CRD files or directories installed at start; nil means
	// OpenShiftCRDs(). Use an empty, non-nil slice for none.
	CRDs []string
	// Dir is the working directory for certificates and data; a new
	// temporary directory, removed by Stop, when empty.
	Dir string
	// Out receives the control plane's output; discarded when nil.
	Out io.Writer
	// EtcdMembers, when 3 or more, runs etcd as a cluster of that many
	// members, the API server attached to the first: a member can then be
	// partitioned from the others (PartitionEtcdMember). One member when
	// zero.
	EtcdMembers int
}

// ControlPlane is a running etcd and kube-apiserver.
type ControlPlane struct {
	Env *envtest.Environment
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config

	dir, ownDir string
	assets      string
	mu          sync.Mutex
	extra       []*envtest.APIServer
	// etcd is the cluster of Options.EtcdMembers; nil for one member.
	etcd *etcdCluster
}

// StartTimeout bounds how long etcd or a kube-apiserver may take to serve.
// envtest's 20 s default is too close: a campaign's second kube-apiserver
// on a loaded CI machine once took longer, and a slow start says nothing
// about the code under test.
const StartTimeout = 2 * time.Minute

// Start brings up etcd and kube-apiserver on free loopback ports and installs
// the CRDs.
func Start(opts Options) (*ControlPlane, error) {
	assets, err := AssetsDir(opts.AssetsDir)
	if err != nil {
		return nil, err
	}
	crds := opts.CRDs
	if crds == nil {
		if crds, err = OpenShiftCRDs(); err != nil {
			return nil, err
		}
	}
	cp := &ControlPlane{dir: opts.Dir, assets: assets}
	if cp.dir == "" {
		if cp.dir, err = os.MkdirTemp("", "featuregate-controlplane-"); err != nil {
			return nil, err
		}
		cp.ownDir = cp.dir
	}
	// A fixed certificate directory lets the API server restart with the
	// same serving certificate and client CA, so clients keep working.
	apiServer := &envtest.APIServer{CertDir: filepath.Join(cp.dir, "apiserver"), Out: opts.Out, Err: opts.Out}
	quickShutdown(apiServer)
	if err := os.MkdirAll(apiServer.CertDir, 0o700); err != nil {
		return nil, err
	}
	// Its data under dir too: envtest removes a temporary data directory
	// of its own only if etcd is still running at Stop (not after a
	// terminal's Ctrl-C reached it first).
	etcd := &envtest.Etcd{Out: opts.Out, Err: opts.Out, DataDir: filepath.Join(cp.dir, "etcd")}
	cp.Env = &envtest.Environment{
		ControlPlaneStartTimeout: StartTimeout,
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        crds,
		ErrorIfCRDPathMissing:    true,
		ControlPlane:             envtest.ControlPlane{APIServer: apiServer, Etcd: etcd},
	}
	if opts.EtcdMembers > 1 {
		if opts.EtcdMembers < 3 {
			return nil, fmt.Errorf("EtcdMembers %d: a partition needs 3 or more to leave a quorum", opts.EtcdMembers)
		}
		cp.etcd, err = newEtcdCluster(opts.EtcdMembers, etcd, assets, cp.dir, opts.Out)
		if err == nil {
			err = cp.etcd.startOthers()
		}
		if err != nil {
			_ = cp.Stop()
			return nil, fmt.Errorf("etcd cluster: %w", err)
		}
	}
	if cp.Config, err = cp.Env.Start(); err != nil {
		_ = cp.Stop()
		return nil, fmt.Errorf("start control plane from %s: %w", assets, err)
	}
	return cp, nil
}

// Stop stops every process and removes what Start created.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	extra := cp.extra
	cp.extra = nil
	cp.mu.Unlock()
	var errs []error
	for _, s := range extra {
		errs = append(errs, s.Stop())
	}
	if cp.Env != nil {
		errs = append(errs, cp.Env.Stop())
	}
	if cp.etcd != nil {
		errs = append(errs, cp.etcd.close())
	}
	if cp.ownDir != "" {
		errs = append(errs, os.RemoveAll(cp.ownDir))
	}
	return errors.Join(errs...)
}

// StopAPIServer stops the API server and leaves etcd running.
func (cp *ControlPlane) StopAPIServer() error {
	return cp.Env.ControlPlane.APIServer.Stop()
}

// StartAPIServer starts the API server again, on the same address and with
// the same certificates.
func (cp *ControlPlane) StartAPIServer() error {
	return cp.Env.ControlPlane.APIServer.Start()
}

// Host is the API server's URL.
func (cp *ControlPlane) Host() string { return cp.Config.Host }

// SecondAPIServer starts another kube-apiserver on the same etcd and returns
// an admin configuration for it: a way to change the cluster while the first
// API server, the one the operator talks to, is down. Stop stops it.
func (cp *ControlPlane) SecondAPIServer() (*rest.Config, error) {
	twin, err := cp.SecondAPIServerOn(cp.Env.ControlPlane.Etcd.URL)
	if err != nil {
		return nil, err
	}
	return twin.Config, nil
}

// EtcdURL is etcd's client URL.
func (cp *ControlPlane) EtcdURL() *url.URL { return cp.Env.ControlPlane.Etcd.URL }

// StopEtcd stops etcd, every member, keeping its data; StartEtcd starts it
// again on the same addresses.
func (cp *ControlPlane) StopEtcd() error {
	if cp.etcd == nil {
		return cp.Env.ControlPlane.Etcd.Stop()
	}
	// Ours crash first: a leader shut down gracefully while its peers
	// run hands its leadership over for up to 7 s.
	return errors.Join(cp.etcd.stopOthers(), cp.Env.ControlPlane.Etcd.Stop())
}

// StartEtcd starts etcd again after StopEtcd.
func (cp *ControlPlane) StartEtcd() error {
	if cp.etcd != nil {
		if err := cp.etcd.startOthers(); err != nil {
			return err
		}
	}
	return cp.Env.ControlPlane.Etcd.Start()
}

// EtcdMemberURL is the client URL of etcd member i (Options.EtcdMembers),
// for an API server attached only to it; member 0 is EtcdURL.
func (cp *ControlPlane) EtcdMemberURL(i int) (*url.URL, error) {
	if cp.etcd == nil || i < 0 || i >= len(cp.etcd.members) {
		return nil, fmt.Errorf("no etcd member %d (Options.EtcdMembers)", i)
	}
	return cp.etcd.members[i].client, nil
}

// PartitionEtcdMember cuts etcd member i off from the others, both ways,
// until HealEtcdMember: it runs and answers its clients, but can neither
// commit nor serve a linearizable read, and its watches go quiet.
func (cp *ControlPlane) PartitionEtcdMember(i int) error {
	if cp.etcd == nil {
		return errors.New("one etcd member: nothing to partition (Options.EtcdMembers)")
	}
	return cp.etcd.partition(i, true)
}

// HealEtcdMember ends PartitionEtcdMember.
func (cp *ControlPlane) HealEtcdMember(i int) error {
	if cp.etcd == nil {
		return errors.New("one etcd member: nothing to heal (Options.EtcdMembers)")
	}
	return cp.etcd.partition(i, false)
}

// Twin is a second kube-apiserver (see SecondAPIServerOn).
type Twin struct {
	// Config is an admin configuration for it.
	Config *rest.Config
	s      *envtest.APIServer
}

// Stop stops it; Stop of the control plane does too.
func (t *Twin) Stop() error { return t.s.Stop() }

// Start starts it again after Stop, on the same address and certificates.
func (t *Twin) Start() error { return t.s.Start() }

// SecondAPIServerOn is SecondAPIServer reaching etcd at etcd: through a
// fault proxy, an API server that can be cut off from etcd while it keeps
// answering. It is the first one's twin, as a cluster's API servers are:
// the same serving certificate and client CA, so that one kubeconfig
// reaches either (through a balancer). A test whose fault proxy closes
// before the control plane stops stops the twin first.
func (cp *ControlPlane) SecondAPIServerOn(etcd *url.URL) (*Twin, error) {
	first := cp.Env.ControlPlane.APIServer
	dir, err := os.MkdirTemp(cp.dir, "apiserver-")
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"apiserver.crt", "apiserver.key", "sa-signer.crt", "sa-signer.key"} {
		data, err := os.ReadFile(filepath.Join(first.CertDir, f))
		if err != nil {
			return nil, fmt.Errorf("second kube-apiserver: the first one's %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			return nil, err
		}
	}
	s := &envtest.APIServer{
		EtcdURL: etcd,
		Path:    first.Path,
		CertDir: dir,
		Out:     first.Out,
		Err:     first.Err,
	}
	s.Authn = first.Authn
	s.StartTimeout = StartTimeout
	quickShutdown(s)
	if err := s.Start(); err != nil {
		return nil, fmt.Errorf("start second kube-apiserver: %w", err)
	}
	// The shared authenticator last wrote its CA file for s: the first
	// one's own copy, written at its start, is unchanged, and so is the CA.
	cp.mu.Lock()
	cp.extra = append(cp.extra, s)
	cp.mu.Unlock()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Host = strings.TrimSuffix(s.SecureServing.URL("https", "/").String(), "/")
	return &Twin{Config: cfg, s: s}, nil
}

// APIServerPID is the pid of the kube-apiserver serving cfg.Host (the
// first or a second one), for tests that freeze it with SIGSTOP.
func APIServerPID(cfg *rest.Config) (int, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return 0, err
	}
	want := []byte("--secure-port=" + u.Port() + "\x00")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte("kube-apiserver")) && bytes.Contains(cmdline, want) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no kube-apiserver with --secure-port=%s", u.Port())
}

// AddUser provisions a client certificate for an identity with no groups
// beyond system:authenticated, for RBAC tests.
func (cp *ControlPlane) AddUser(name string, groups ...string) (*rest.Config, error) {
	user, err := cp.Env.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}

// WriteKubeconfig writes an admin kubeconfig to path.
func (cp *ControlPlane) WriteKubeconfig(path string) error {
	return os.WriteFile(path, cp.Env.KubeConfig, 0o600)
}

// Kubectl is the path of the kubectl built beside the API server.
func (cp *ControlPlane) Kubectl() string { return filepath.Join(cp.assets, "kubectl") }

// quickShutdown stops the API server promptly under open watches (by
// default it waits for them), so that outage tests can stop it at will.
func quickShutdown(s *envtest.APIServer) {
	s.Configure().Set("shutdown-watch-termination-grace-period", "1s")
}

// AssetsDir resolves where etcd, kube-apiserver and kubectl are.
func AssetsDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if dir == "" {
		root, err := Root()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin", "k8s")
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("control plane binary %s missing in %s (run `make envtest-assets`): %w", name, dir, err)
		}
	}
	return filepath.Abs(dir)
}

// Root is the operator's checkout: the nearest directory above the working
// directory whose go.mod declares Module.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(data), "module "+Module+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", Module)
		}
		dir = parent
	}
}

// OpenShiftCRDs are the FeatureGate, ClusterOperator, ClusterVersion (its
// Default variant) and APIServer (its TechPreviewNoUpgrade variant, which
// has spec.tlsAdherence and the TLS groups) CRDs exactly as the pinned
// github.com/openshift/api module ships them, CEL rules included.
func OpenShiftCRDs() ([]string, error) {
	api, err := OpenShiftAPIDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(api, "config", "v1", "zz_generated.crd-manifests")
	files := []string{
		filepath.Join(dir, "0000_10_config-operator_01_featuregates.crd.yaml"),
		filepath.Join(dir, "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml"),
		filepath.Join(dir, ClusterVersionCRD),
		filepath.Join(dir, "0000_10_config-operator_01_apiservers-TechPreviewNoUpgrade.crd.yaml"),
	}
	// A renamed file in a newer openshift/api should fail here, by name,
	// rather than as a kind the test API server does not serve.
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("openshift/api CRD: %w", err)
		}
	}
	return files, nil
}

// ClusterVersionCRD is the file name of the ClusterVersion CRD among
// OpenShiftCRDs, for tests of a cluster that does not serve it.
const ClusterVersionCRD = "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml"

// OpenShiftAPIDir is the module directory of the pinned
// github.com/openshift/api: its CRDs and payload manifests are test data.
func OpenShiftAPIDir() (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locate github.com/openshift/api: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
