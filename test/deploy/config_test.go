package deploy

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/featuregate-operator/operator/test/framework/harness"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// An invalid configuration stops the real binary before it does anything,
// with exit code 2 and a message naming the field (and the flag, when a flag
// set it). No API server is needed: none is contacted.
func TestInvalidConfigurationExits2(t *testing.T) {
	const header = "apiVersion: operator.featuregate-operator.io/v1alpha1\nkind: OperatorConfig\n"
	for _, tc := range []struct {
		name string
		file string // config file content; none when empty
		args []string
		want []string // in stderr
	}{{
		name: "unknown field in the file",
		file: header + "leaderElection:\n  leaderElection: true\n",
		want: []string{`unknown field "leaderElection.leaderElection"`},
	}, {
		name: "bad duration in the file",
		file: header + "resyncPeriod: 3 minutes\n",
		want: []string{"resyncPeriod", `"3 minutes"`},
	}, {
		name: "resync period below the minimum by flag",
		args: []string{"--resync-period=0s"},
		want: []string{"resyncPeriod", "--resync-period"},
	}, {
		name: "flag overrides a valid file with an invalid value",
		file: header + "resyncPeriod: 5m\n",
		args: []string{"--graceful-shutdown-timeout=-1s"},
		want: []string{"gracefulShutdownTimeout", "--graceful-shutdown-timeout"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			args := tc.args
			if tc.file != "" {
				path := filepath.Join(t.TempDir(), "config.yaml")
				g.Expect(os.WriteFile(path, []byte(tc.file), 0o600)).To(Succeed())
				args = append([]string{"--config=" + path}, args...)
			}
			// Were the configuration accepted, the operator would run with
			// no cluster: nothing to connect to, so it could not succeed.
			args = append(args, "--kubeconfig=/nonexistent", "--metrics-bind-address=0", "--health-probe-bind-address=0")
			op := startOperator(t, "", args...)
			code, err := op.WaitExit(time.Minute)
			g.Expect(err).NotTo(HaveOccurred())
			out := op.Log.String()
			g.Expect(code).To(Equal(2), out)
			for _, w := range tc.want {
				g.Expect(out).To(ContainSubstring(w))
			}
		})
	}
}

// The commented sample, config/samples/operatorconfig.yaml, is a working
// configuration: the real binary started with it against a real API server
// reads the FeatureGate for the sample's release version (the watched gates
// narrow what restarts it, never the snapshot), becomes ready, and stops cleanly on SIGTERM. Only
// what cannot hold outside a pod is overridden by flags: the listen
// addresses, the lease namespace (the sample leaves it to the pod's own),
// and the manifests directory (an empty one instead of /manifests).
func TestSampleConfigRuns(t *testing.T) {
	g := NewWithT(t)
	cp, admin := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The sample's releaseVersion is testVersion; its watchedGates are
	// ExampleGateA and ExampleGateB.
	createFeatureGate(t, admin, configv1.TechPreviewNoUpgrade, []string{"ExampleGateA", "UnwatchedGate"}, []string{"ExampleGateB"})
	// Its metrics.tlsProfileFrom is "cluster": served as read, under the
	// strict adherence policy.
	g.Expect(admin.Create(ctx, &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec: configv1.APIServerSpec{TLSSecurityProfile: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}},
			TLSAdherence: configv1.TLSAdherencePolicyStrictAllComponents}})).To(Succeed())
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(cp.WriteKubeconfig(kubeconfig)).To(Succeed())
	health := harness.FreeAddr(t)
	metrics := harness.FreeAddr(t)
	op := startOperator(t, health,
		"--config="+filepath.Join(root, "config", "samples", "operatorconfig.yaml"),
		"--kubeconfig="+kubeconfig,
		"--metrics-bind-address="+metrics,
		"--health-probe-bind-address="+health,
		"--leader-election-namespace=default",
		"--manifests-dir="+t.TempDir(),
	)
	g.Expect(op.ReadyWithin(90 * time.Second)).To(Succeed())
	g.Expect(op.Logged(harness.All(harness.Message("Startup snapshot taken"),
		harness.HasKey("snapshot")))).To(Succeed())
	line, ok := op.Log.Find(harness.Message("Startup snapshot taken"))
	g.Expect(ok).To(BeTrue())
	g.Expect(line.Get("snapshot")).To(HavePrefix("TechPreviewNoUpgrade (version " + testVersion + ": enabled [ExampleGateA UnwatchedGate], disabled [ExampleGateB]); TLS profile Modern"))
	// The metrics endpoint serves the profile read: Modern takes no TLS 1.2.
	g.Eventually(func() error { return tlsHandshake(metrics, tls.VersionTLS12) }).WithTimeout(30 * time.Second).
		Should(MatchError(ContainSubstring("protocol version")))
	g.Expect(tlsHandshake(metrics, tls.VersionTLS13)).To(Succeed())
	// The sample's clusterOperatorName and leader election are in effect.
	g.Eventually(func() error {
		return admin.Get(ctx, client.ObjectKey{Name: "featuregate-operator"}, &configv1.ClusterOperator{})
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())

	g.Expect(op.Signal(os.Interrupt)).To(Succeed())
	g.Expect(op.WaitExit(time.Minute)).To(Equal(0))
	g.Expect(op.Logged(harness.All(harness.Message("Graceful shutdown complete"), harness.KeyEquals("reason", "signal")))).To(Succeed())
}

// tlsHandshake is one TLS handshake with addr, offering at most version.
func tlsHandshake(addr string, version uint16) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true, MaxVersion: version}) //nolint:gosec // the endpoint's self-signed certificate
	if err != nil {
		return err
	}
	return conn.Close()
}
