package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/controlplane"
)

// testVersion is the release version the tests publish FeatureGate status
// for and run the operator with.
const testVersion = "4.18.0"

// startControlPlane starts etcd and kube-apiserver with the OpenShift CRDs,
// stopped when the test ends.
func startControlPlane(t *testing.T) (*controlplane.ControlPlane, client.Client) {
	t.Helper()
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	c, err := controlplane.NewClient(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cp, c
}

// createFeatureGate creates FeatureGate/cluster with set, and publishes its
// status for testVersion with the given gates, as the cluster-config-operator
// would.
func createFeatureGate(ctx context.Context, t *testing.T, c client.Client, set configv1.FeatureSet, enabled, disabled []string) *configv1.FeatureGate {
	t.Helper()
	fg := &configv1.FeatureGate{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec:       configv1.FeatureGateSpec{FeatureGateSelection: configv1.FeatureGateSelection{FeatureSet: set}},
	}
	if err := c.Create(ctx, fg); err != nil {
		t.Fatalf("create FeatureGate: %v", err)
	}
	fg.Status.FeatureGates = []configv1.FeatureGateDetails{{Version: testVersion, Enabled: attributes(enabled), Disabled: attributes(disabled)}}
	if err := c.Status().Update(ctx, fg); err != nil {
		t.Fatalf("publish FeatureGate status: %v", err)
	}
	return fg
}

func attributes(names []string) []configv1.FeatureGateAttributes {
	out := []configv1.FeatureGateAttributes{}
	for _, n := range names {
		out = append(out, configv1.FeatureGateAttributes{Name: configv1.FeatureGateName(n)})
	}
	return out
}

// applyForReal server-side applies objs as the admin.
func applyForReal(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("deploy-test"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// serviceAccount is a ServiceAccount by namespace and name.
type serviceAccount struct{ namespace, name string }

func (sa serviceAccount) String() string {
	return "system:serviceaccount:" + sa.namespace + ":" + sa.name
}

// installOperatorRBAC applies, for real, the rendered Namespace,
// ServiceAccount, roles and bindings (nothing else: no Deployment runs here),
// and returns the operator's ServiceAccount.
func installOperatorRBAC(ctx context.Context, t *testing.T, c client.Client) serviceAccount {
	t.Helper()
	objs := rendered(t)
	applyForReal(ctx, t, c, ofKinds(objs, "Namespace"))
	applyForReal(ctx, t, c, ofKinds(objs, "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"))
	sa := find(t, objs, "ServiceAccount", "controller-manager")
	return serviceAccount{namespace: sa.GetNamespace(), name: sa.GetName()}
}

// tokenConfig mints a token for sa with the TokenRequest API, as the kubelet
// does for a pod, and returns a client configuration that authenticates with
// it alone: the API server's CA and the bearer token, no client certificate.
func tokenConfig(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, sa serviceAccount) *rest.Config {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(sa.namespace).CreateToken(ctx, sa.name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", sa, err)
	}
	return &rest.Config{
		Host:            cp.Host(),
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.Config.CAData},
	}
}

// createServiceAccount creates a ServiceAccount as the admin.
func createServiceAccount(ctx context.Context, t *testing.T, c client.Client, sa serviceAccount) {
	t.Helper()
	obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.namespace, Name: sa.name}}
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("create ServiceAccount %s: %v", sa, err)
	}
}

// writeTokenKubeconfig writes a kubeconfig for a token configuration.
func writeTokenKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["operator"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "operator"}
	kc.CurrentContext = "operator"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// freeAddr is a loopback address with a port nobody listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for a writing process and a reading test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// operator is a running operator process.
type operator struct {
	cmd    *exec.Cmd
	output *syncBuffer // stderr and stdout: the JSON log lines
	done   chan struct{}
	err    error // from Wait, once done is closed
}

// operatorCmd is the binary with args, without the caller's KUBECONFIG
// (every test says which API server it means), killed if the test process
// dies first.
func operatorCmd(ctx context.Context, args ...string) (*exec.Cmd, *syncBuffer) {
	cmd := exec.CommandContext(ctx, managerBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, out
}

// startOperator starts the operator; the test's cleanup stops it (SIGTERM,
// then SIGKILL) if it is still running, and logs its output on failure.
func startOperator(t *testing.T, args ...string) *operator {
	t.Helper()
	cmd, out := operatorCmd(context.Background(), args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	op := &operator{cmd: cmd, output: out, done: make(chan struct{})}
	go func() {
		op.err = cmd.Wait()
		close(op.done)
	}()
	t.Cleanup(func() {
		select {
		case <-op.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-op.done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-op.done
			}
		}
		if t.Failed() {
			t.Logf("operator output:\n%s", out.String())
		}
	})
	return op
}

// exited reports whether the process has exited, and its exit code.
func (op *operator) exited() (code int, ok bool) {
	select {
	case <-op.done:
	default:
		return 0, false
	}
	var exit *exec.ExitError
	if errors.As(op.err, &exit) {
		return exit.ExitCode(), true
	}
	if op.err != nil {
		return -1, true
	}
	return 0, true
}

// waitExit waits for the process to exit and returns its exit code.
func (op *operator) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-op.done:
	case <-time.After(timeout):
		t.Fatalf("operator still running after %s", timeout)
	}
	code, _ := op.exited()
	return code
}

// runToExit runs the operator to completion (bounded) and returns its exit
// code and output.
func runToExit(t *testing.T, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd, out := operatorCmd(ctx, args...)
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("operator %v still running after %s:\n%s", args, timeout, out.String())
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String()
}

// waitReady polls the operator's /readyz until it answers 200, failing early
// if the process exits.
func waitReady(t *testing.T, op *operator, healthAddr string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		code, exited := op.exited()
		g.Expect(exited).To(BeFalse(), "operator exited %d before it became ready", code)
		resp, err := http.Get("http://" + healthAddr + "/readyz")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// port is the numeric port of a host:port address.
func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(fmt.Errorf("port of %q: %w", addr, err))
	}
	return n
}
