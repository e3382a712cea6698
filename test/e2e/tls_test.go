package e2e

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/faultproxy"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// The cluster's TLS security profile (issue 33), side by side: the guard
// (examples/consumer, Options.TLSProfile and Guard.TLSOpts on its metrics
// endpoint) and a model of controller-runtime-common's pattern
// (test/crcpattern: fetch before the manager, an empty profile when that
// fails, served as Intermediate, a watcher that cancels), each a real process with a real TLS
// client against its metrics endpoint. Each scenario asserts what each
// does; the differences are the point, and BENCHMARKS.md tabulates them.

// tlsSubject is one process serving metrics over TLS.
type tlsSubject struct {
	*harness.Process
	metrics string
}

// handshakeWith is one TLS handshake with addr, offering at most version.
func handshakeWith(addr string, version uint16) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true, MaxVersion: version}) //nolint:gosec // the endpoints' self-signed certificates
	if err != nil {
		return err
	}
	return conn.Close()
}

func (s tlsSubject) handshake(version uint16) error { return handshakeWith(s.metrics, version) }

// listening reports whether the metrics endpoint accepts connections.
func (s tlsSubject) listening() bool {
	c, err := net.DialTimeout("tcp", s.metrics, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// startGuardTLS runs examples/consumer serving metrics with the APIServer
// "cluster"'s profile; legacy is --tls-legacy-adhering.
func startGuardTLS(t *testing.T, name, kubeconfig string, legacy bool, args ...string) tlsSubject {
	t.Helper()
	metrics := harness.FreeAddr(t)
	args = append([]string{"--metrics-bind-address=" + metrics, "--tls-profile-from=cluster", fmt.Sprintf("--tls-legacy-adhering=%t", legacy)}, args...)
	return tlsSubject{Process: harness.StartT(t, consumerOptions(t, name, buildConsumer(t), kubeconfig, args...)), metrics: metrics}
}

// startPatternTLS runs the model of controller-runtime-common's pattern.
func startPatternTLS(t *testing.T, name, kubeconfig string) tlsSubject {
	t.Helper()
	metrics, probe := harness.FreeAddr(t), harness.FreeAddr(t)
	return tlsSubject{Process: harness.StartT(t, harness.Options{Name: name, Path: buildPattern(t), Probe: probe, Args: []string{
		"--kubeconfig=" + kubeconfig, "--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + probe,
		"--zap-time-encoding=rfc3339nano",
	}}), metrics: metrics}
}

// setAPIServer creates or updates the APIServer "cluster" to p and a.
func setAPIServer(t *testing.T, c client.Client, p *configv1.TLSSecurityProfile, a configv1.TLSAdherencePolicy) time.Time {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		as := &configv1.APIServer{}
		err := c.Get(t.Context(), client.ObjectKey{Name: "cluster"}, as)
		if apierrors.IsNotFound(err) {
			return c.Create(t.Context(), &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
				Spec: configv1.APIServerSpec{TLSSecurityProfile: p, TLSAdherence: a}})
		}
		if err != nil {
			return err
		}
		as.Spec.TLSSecurityProfile, as.Spec.TLSAdherence = p, a
		return c.Update(t.Context(), as)
	})
	if err != nil {
		t.Fatalf("set APIServer cluster: %v", err)
	}
	return time.Now()
}

var (
	modern       = &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}}
	intermediate = &configv1.TLSSecurityProfile{Type: configv1.TLSProfileIntermediateType, Intermediate: &configv1.IntermediateTLSProfile{}}
)

// customTLS12 is a Custom profile: TLS 1.2 and up, with ciphers (OpenSSL
// names, as the APIServer spells them).
func customTLS12(ciphers ...string) *configv1.TLSSecurityProfile {
	return &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{
		TLSProfileSpec: configv1.TLSProfileSpec{MinTLSVersion: configv1.VersionTLS12, Ciphers: ciphers}}}
}

// handshakeTLS12With is one TLS 1.2 handshake with addr offering only
// suite.
func handshakeTLS12With(addr string, suite uint16) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}}) //nolint:gosec // the endpoints' self-signed certificates
	if err != nil {
		return err
	}
	return conn.Close()
}

// exitWithin is how soon after the write of a change of what is served
// the guard's process has exited (issue 33).
const exitWithin = time.Second

// At start the API is down and the cluster says Modern. The guard serves
// no handshake until it has read the profile, then refuses TLS 1.2 and
// never restarts; the pattern serves TLS 1.2 on the empty profile it
// assumed (Intermediate), and restarts once its watcher reads Modern.
func TestTLSProfileSideBySideAPIDownAtStart(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp, c := startConsumerCluster(t, true)
	setAPIServer(t, c, modern, configv1.TLSAdherencePolicyStrictAllComponents)
	kc := harness.Kubeconfig(t, cp.Config)
	g.Expect(cp.StopAPIServer()).To(Succeed())

	guard := startGuardTLS(t, "guard", kc, false)
	pattern := startPatternTLS(t, "pattern", kc)
	g.Eventually(func() bool { return guard.listening() && pattern.listening() }).WithTimeout(readyTimeout).Should(BeTrue())
	g.Consistently(func() error { return guard.handshake(tls.VersionTLS13) }).WithTimeout(2*time.Second).
		Should(MatchError(ContainSubstring("internal error")), "guard: a handshake before the profile was read")
	g.Expect(pattern.handshake(tls.VersionTLS12)).To(Succeed(), "pattern: TLS 1.2 served on an assumed profile while the cluster says Modern")

	returned := time.Now()
	g.Expect(cp.StartAPIServer()).To(Succeed())
	g.Eventually(guard.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(guard.handshake(tls.VersionTLS12)).To(MatchError(ContainSubstring("protocol version")), "guard: Modern, as read")
	g.Expect(guard.handshake(tls.VersionTLS13)).To(Succeed())
	g.Expect(pattern.WaitExit(exitTimeout)).To(Equal(0), "pattern: restarts once it reads what it should have served")
	t.Logf("pattern: served TLS 1.2 under Modern until it exited %dms after the API returned", pattern.ExitedAt().Sub(returned).Milliseconds())
	g.Consistently(guard.Running).WithTimeout(2 * time.Second).Should(BeTrue())
}

// A change of what is served stops both, exit 0. A change of the adherence
// policy that changes nothing a component serves (unset to
// LegacyAdheringComponentsOnly, for a component that honours only a strict
// policy) restarts the pattern, which compares the raw policy, and not the
// guard.
func TestTLSProfileSideBySideChanges(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp, c := startConsumerCluster(t, true)
	setAPIServer(t, c, intermediate, "")
	kc := harness.Kubeconfig(t, cp.Config)
	start := func() (tlsSubject, tlsSubject) {
		guard, pattern := startGuardTLS(t, "guard", kc, false), startPatternTLS(t, "pattern", kc)
		g.Eventually(guard.Ready).WithTimeout(readyTimeout).Should(BeTrue())
		g.Eventually(pattern.Ready).WithTimeout(readyTimeout).Should(BeTrue())
		// Each has listed the APIServer and watches it: controller-runtime
		// starts a controller's workers once its informers synced.
		for _, w := range []struct {
			p          tlsSubject
			controller string
		}{{guard, "tlsprofile"}, {pattern, "tlssecurityprofilewatcher"}} {
			g.Eventually(func() bool {
				_, ok := w.p.Log.Find(harness.All(harness.Message("Starting workers"), harness.KeyEquals("controller", w.controller)))
				return ok
			}).WithTimeout(readyTimeout).Should(BeTrue(), "%s: no %s workers", w.p.Name, w.controller)
		}
		return guard, pattern
	}

	guard, pattern := start()
	changed := setAPIServer(t, c, intermediate, configv1.TLSAdherencePolicyLegacyAdheringComponentsOnly)
	g.Expect(pattern.WaitExit(exitTimeout)).To(Equal(0), "pattern: the raw policy changed")
	g.Consistently(guard.Running).WithTimeout(3*time.Second).Should(BeTrue(), "guard: nothing it serves changed")
	t.Logf("adherence unset -> LegacyAdheringComponentsOnly: pattern exited %dms after the write; guard kept running",
		pattern.ExitedAt().Sub(changed).Milliseconds())
	g.Expect(guard.Signal(os.Interrupt)).To(Succeed())
	g.Expect(guard.WaitExit(exitTimeout)).To(Equal(0))

	const (
		aes128 = tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
		aes256 = tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
	)
	logChanged := harness.Message("TLS security profile changed; requesting shutdown")
	for _, tc := range []struct {
		what string
		p    *configv1.TLSSecurityProfile
		a    configv1.TLSAdherencePolicy
	}{
		{"adherence LegacyAdheringComponentsOnly -> StrictAllComponents", intermediate, configv1.TLSAdherencePolicyStrictAllComponents},
		{"profile Intermediate -> Modern", modern, configv1.TLSAdherencePolicyStrictAllComponents},
		{"profile Modern -> Custom", customTLS12("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384"), configv1.TLSAdherencePolicyStrictAllComponents},
		{"Custom ciphers: two -> one", customTLS12("ECDHE-RSA-AES128-GCM-SHA256"), configv1.TLSAdherencePolicyStrictAllComponents},
	} {
		guard, pattern := start()
		if tc.what == "Custom ciphers: two -> one" {
			// Ready says the snapshot is taken; the metrics server may
			// still be coming up (CI saw it refuse the first dial).
			g.Eventually(func() error { return handshakeTLS12With(guard.metrics, aes256) }).WithTimeout(readyTimeout).
				Should(Succeed(), "guard: the Custom profile's second cipher is served")
		}
		changed := setAPIServer(t, c, tc.p, tc.a)
		g.Expect(guard.WaitExit(exitTimeout)).To(Equal(0), "guard: %s", tc.what)
		g.Expect(pattern.WaitExit(exitTimeout)).To(Equal(0), "pattern: %s", tc.what)
		line, ok := guard.Log.Find(harness.All(logChanged, harness.HasKey("diff")))
		g.Expect(ok).To(BeTrue(), "guard: the change logged with its diff")
		g.Expect(guard.Log.CountWhere(logChanged)).To(Equal(1), "guard: one line for the change")
		exited := guard.ExitedAt().Sub(changed)
		t.Logf("%s: guard exited %dms after the write (detected by %s), pattern %dms", tc.what,
			exited.Milliseconds(), line.Get("detectedBy"), pattern.ExitedAt().Sub(changed).Milliseconds())
		g.Expect(exited).To(BeNumerically("<", exitWithin), "guard: exit 0 within %s of the write", exitWithin)
	}

	// The replacement serves the one cipher left, and refuses the other.
	guard = startGuardTLS(t, "guard", kc, false)
	g.Eventually(guard.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	// Ready says the snapshot is taken; the metrics server may still be
	// coming up.
	g.Eventually(func() error { return handshakeTLS12With(guard.metrics, aes128) }).WithTimeout(readyTimeout).Should(Succeed())
	g.Expect(handshakeTLS12With(guard.metrics, aes256)).To(MatchError(ContainSubstring("handshake failure")), "guard: a cipher the profile dropped")
}

// A fault that leaves the processes' connections open but silent while
// the profile changes: a silent link between them and the API server, or
// the API server they use cut off from etcd (the change is made through one
// that still reaches it). The guard's Current turns false within the bound
// (its /decide says no), the pattern has no such notion and keeps serving
// the superseded profile; both exit 0 once the fault heals.
func TestTLSProfileSideBySideSilentLink(t *testing.T) {
	for _, tc := range []struct {
		fault string
		// via returns the configuration the processes use and the proxy
		// the fault holds.
		via func(t *testing.T, cp *controlplane.ControlPlane) (*rest.Config, *faultproxy.Proxy)
	}{
		{"silent link", func(t *testing.T, cp *controlplane.ControlPlane) (*rest.Config, *faultproxy.Proxy) {
			link := faultproxy.Start(t, hostOf(t, cp.Config))
			return viaProxy(cp.Config, link.Addr()), link
		}},
		{"API server cut from etcd", func(t *testing.T, cp *controlplane.ControlPlane) (*rest.Config, *faultproxy.Proxy) {
			cutOff, etcdLink := twinBehindLink(t, cp)
			t.Cleanup(etcdLink.Release) // before the API server behind it stops
			return cutOff, etcdLink
		}},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			lane(t)
			g := NewWithT(t)
			cp, c := startConsumerCluster(t, true)
			setAPIServer(t, c, intermediate, configv1.TLSAdherencePolicyStrictAllComponents)
			cfg, link := tc.via(t, cp)
			kc := harness.Kubeconfig(t, cfg)
			decide := harness.FreeAddr(t)
			guard := startGuardTLS(t, "guard", kc, false, "--decide-bind-address="+decide)
			pattern := startPatternTLS(t, "pattern", kc)
			g.Eventually(guard.Ready).WithTimeout(readyTimeout).Should(BeTrue())
			g.Eventually(pattern.Ready).WithTimeout(readyTimeout).Should(BeTrue())
			ds := pollDecisions(t, decide)
			g.Eventually(ds.goNow).WithTimeout(readyTimeout).Should(BeTrue())

			link.Hold()
			held := time.Now()
			changed := setAPIServer(t, c, modern, configv1.TLSAdherencePolicyStrictAllComponents)
			g.Consistently(func() bool { return guard.Running() && pattern.Running() }).WithTimeout(faultFor).Should(BeTrue(), "nothing reaches them")
			for _, d := range ds.goes(held.Add(goAfterFault)) {
				g.Expect(d.at.After(time.Now())).To(BeTrue(), "guard: said go %s after the fault began", d.at.Sub(held))
			}
			g.Expect(pattern.handshake(tls.VersionTLS12)).To(Succeed(), "pattern: still serving the superseded profile")
			released := time.Now()
			link.Release()
			g.Expect(guard.WaitExit(exitTimeout)).To(Equal(0))
			g.Expect(pattern.WaitExit(exitTimeout)).To(Equal(0))
			t.Logf("%s for %s, profile changed %dms into it: guard stopped vouching within %s and exited %dms after the heal; "+
				"pattern served the old profile without knowing and exited %dms after the heal", tc.fault,
				faultFor, changed.Sub(held).Milliseconds(), goAfterFault, guard.ExitedAt().Sub(released).Milliseconds(), pattern.ExitedAt().Sub(released).Milliseconds())
		})
	}
}

// buildPattern builds test/crcpattern into a test directory, once.
func buildPattern(t *testing.T) string {
	t.Helper()
	return pattern.build(t, "crcpattern", repoRoot, "./test/crcpattern")
}

// pattern is the model's binary; runMain removes it.
var pattern binary
