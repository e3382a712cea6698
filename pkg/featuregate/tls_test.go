package featuregate_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

var (
	logTLSChanged  = testenv.Message("TLS security profile changed; requesting shutdown")
	logTLSUnserved = testenv.Message("APIServer's TLS profile cannot be served; keeping the startup profile")
)

func profile(typ configv1.TLSProfileType, custom *configv1.TLSProfileSpec) *configv1.TLSSecurityProfile {
	p := &configv1.TLSSecurityProfile{Type: typ}
	switch typ {
	case configv1.TLSProfileOldType:
		p.Old = &configv1.OldTLSProfile{}
	case configv1.TLSProfileIntermediateType:
		p.Intermediate = &configv1.IntermediateTLSProfile{}
	case configv1.TLSProfileModernType:
		p.Modern = &configv1.ModernTLSProfile{}
	case configv1.TLSProfileCustomType:
		p.Custom = &configv1.CustomTLSProfile{TLSProfileSpec: *custom}
	}
	return p
}

// tlsCluster makes, under a name of its own on the shared control plane, a
// FeatureGate (Default) and an APIServer with profile p and adherence a.
func tlsCluster(t *testing.T, p *configv1.TLSSecurityProfile, a configv1.TLSAdherencePolicy) (*testenv.ControlPlane, client.Client, string) {
	t.Helper()
	cp, c, name := sharedControlPlane(t), testClient(t), uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	createAPIServer(t, c, name, p, a)
	return cp, c, name
}

// createAPIServer creates the APIServer name, deleted when the test ends.
func createAPIServer(t *testing.T, c client.Client, name string, p *configv1.TLSSecurityProfile, adherence configv1.TLSAdherencePolicy) {
	t.Helper()
	as := &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: configv1.APIServerSpec{TLSSecurityProfile: p, TLSAdherence: adherence}}
	if err := c.Create(testContext(t), as); err != nil {
		t.Fatalf("create APIServer %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), as); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete APIServer %s: %v", name, err)
		}
	})
}

func updateAPIServer(t *testing.T, c client.Client, name string, change func(*configv1.APIServerSpec)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		as := &configv1.APIServer{}
		if err := c.Get(testContext(t), client.ObjectKey{Name: name}, as); err != nil {
			return err
		}
		change(&as.Spec)
		return c.Update(testContext(t), as)
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// startTLSGuarded starts a guard reading the APIServer name, and its
// manager serving metrics over TLS with Guard.TLSOpts, on cfg; it returns
// the metrics server's address.
func startTLSGuarded(t *testing.T, cfg *rest.Config, opts featuregate.Options, probe string) (*guarded, string) {
	t.Helper()
	gd := newGuardOn(t, cfg, opts)
	metrics := testenv.FreeAddr(t)
	if probe == "" {
		probe = "0"
	}
	mgr, err := gd.guard.NewManager(ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: metrics, SecureServing: true,
			TLSOpts: []func(*tls.Config){gd.guard.TLSOpts}},
		HealthProbeBindAddress: probe,
		Controller:             ctrlConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	gd.start(t, mgr)
	return gd, metrics
}

// handshake is one TLS handshake with addr, offering at most version.
func handshake(addr string, version uint16) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true, MaxVersion: version}) //nolint:gosec // the metrics server's self-signed certificate
	if err != nil {
		return err
	}
	return conn.Close()
}

// Started while the API server is down, the guard serves no handshake: not
// before the profile is read, whatever the client offers. Once the API
// returns, the snapshot carries the profile and the metrics server serves
// it: Modern refuses a TLS 1.2 client and takes a TLS 1.3 one; Intermediate
// takes both.
func TestGuardTLSNoHandshakeBeforeTheProfileIsRead(t *testing.T) {
	for _, tc := range []struct {
		typ   configv1.TLSProfileType
		tls12 bool
	}{{configv1.TLSProfileModernType, false}, {configv1.TLSProfileIntermediateType, true}} {
		t.Run(string(tc.typ), func(t *testing.T) {
			g := NewWithT(t)
			cp, _, name := tlsCluster(t, profile(tc.typ, nil), configv1.TLSAdherencePolicyStrictAllComponents)

			start := stopAPIServer(t, cp)
			probe := testenv.FreeAddr(t)
			gd, metrics := startTLSGuarded(t, cp.Config, featuregate.Options{Name: name,
				TLSProfile: &featuregate.TLSProfileOptions{APIServer: name}}, probe)
			g.Eventually(func() error { _, err := net.DialTimeout("tcp", metrics, time.Second); return err }).
				WithTimeout(30*time.Second).Should(Succeed(), "the metrics server listens before the snapshot")
			for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
				g.Consistently(func() error { return handshake(metrics, v) }).WithTimeout(time.Second).
					Should(MatchError(ContainSubstring("internal error")), "a handshake before the profile was read")
			}
			g.Expect(readyz(probe, featuregate.CheckName)()).To(HavePrefix("500 "))

			start()
			snap := gd.taken(t)
			p, ok := snap.TLSProfile()
			g.Expect(ok).To(BeTrue())
			g.Expect(p.Type).To(Equal(tc.typ))
			g.Expect(p.Honored).To(BeTrue())
			g.Expect(p.From).To(Equal("APIServer " + name))
			if tc.tls12 {
				g.Expect(handshake(metrics, tls.VersionTLS12)).To(Succeed(), "Intermediate serves TLS 1.2")
			} else {
				g.Expect(handshake(metrics, tls.VersionTLS12)).To(MatchError(ContainSubstring("protocol version")), "Modern serves no TLS 1.2")
			}
			g.Expect(handshake(metrics, tls.VersionTLS13)).To(Succeed())
			g.Eventually(readyz(probe, featuregate.CheckName)).Should(HavePrefix("200 "))
			gd.current(t)
		})
	}
}

// Intermediate takes a TLS 1.2 client; a component that does not honour
// the profile (no strict policy) keeps its server's own settings.
func TestGuardTLSIntermediateAndAdherence(t *testing.T) {
	g := NewWithT(t)
	cp, _, name := tlsCluster(t, profile(configv1.TLSProfileIntermediateType, nil), configv1.TLSAdherencePolicyLegacyAdheringComponentsOnly)

	legacy, metrics := startTLSGuarded(t, cp.Config, featuregate.Options{Name: name,
		TLSProfile: &featuregate.TLSProfileOptions{APIServer: name, LegacyAdhering: true}}, "")
	legacy.taken(t)
	g.Eventually(func() error { return handshake(metrics, tls.VersionTLS12) }).WithTimeout(30*time.Second).Should(Succeed(),
		"Intermediate takes TLS 1.2")

	p, _ := legacy.taken(t).TLSProfile()
	g.Expect(p.Honored).To(BeTrue(), "a legacy-adhering component honours the profile under LegacyAdheringComponentsOnly")
	other, _ := startTLSGuarded(t, cp.Config, featuregate.Options{Name: name,
		TLSProfile: &featuregate.TLSProfileOptions{APIServer: name}}, "")
	p, _ = other.taken(t).TLSProfile()
	g.Expect(p.Honored).To(BeFalse(), "any other component does not")
}

// A change of what the component serves with stops it, as a FeatureGate
// change does: one line with the diff and what detected it, a Warning Event
// on the APIServer, and the manager's Start returning nil. A new name for
// the same settings does not.
func TestGuardTLSProfileChangeStops(t *testing.T) {
	custom := func(ciphers ...string) *configv1.TLSSecurityProfile {
		return profile(configv1.TLSProfileCustomType, &configv1.TLSProfileSpec{MinTLSVersion: configv1.VersionTLS12, Ciphers: ciphers})
	}
	for _, tc := range []struct {
		name      string
		from      *configv1.TLSSecurityProfile
		adherence configv1.TLSAdherencePolicy
		legacy    bool
		change    func(*configv1.APIServerSpec)
		diff      string
	}{
		{name: "Intermediate to Modern", from: profile(configv1.TLSProfileIntermediateType, nil), legacy: true,
			change: func(s *configv1.APIServerSpec) { s.TLSSecurityProfile = profile(configv1.TLSProfileModernType, nil) },
			diff:   "minTLSVersion VersionTLS12 → VersionTLS13"},
		{name: "a Custom cipher", from: custom("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384"), legacy: true,
			change: func(s *configv1.APIServerSpec) { s.TLSSecurityProfile = custom("ECDHE-RSA-AES128-GCM-SHA256") },
			diff:   "ciphers [ECDHE-RSA-AES128-GCM-SHA256 ECDHE-RSA-AES256-GCM-SHA384] → [ECDHE-RSA-AES128-GCM-SHA256]"},
		{name: "the adherence policy", from: profile(configv1.TLSProfileModernType, nil), adherence: configv1.TLSAdherencePolicyLegacyAdheringComponentsOnly,
			change: func(s *configv1.APIServerSpec) { s.TLSAdherence = configv1.TLSAdherencePolicyStrictAllComponents },
			diff:   "TLS profile honored false → true"},
		{name: "the same settings under another name", from: profile(configv1.TLSProfileIntermediateType, nil), legacy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cp, c, name := tlsCluster(t, tc.from, tc.adherence)
			gd, _ := startTLSGuarded(t, cp.Config, featuregate.Options{Name: name, ResyncPeriod: eventsOnly,
				TLSProfile: &featuregate.TLSProfileOptions{APIServer: name, LegacyAdhering: tc.legacy}}, "")
			gd.taken(t)
			gd.current(t)
			changed := time.Now()
			if tc.change != nil {
				updateAPIServer(t, c, name, tc.change)
			} else {
				sameAsIntermediate(t, c, name)
			}
			if tc.diff == "" {
				g.Consistently(gd.guard.StopRequested()).WithTimeout(3*time.Second).ShouldNot(BeClosed(), "no change in what is served")
				gd.noStop(t)
				return
			}
			reason := gd.firstReason(t)
			stopped := time.Since(changed)
			t.Logf("stopped %s after the write", stopped.Round(time.Millisecond))
			g.Expect(stopped).To(BeNumerically("<", time.Second), "the manager's Start returns within a second of the write")
			g.Expect(reason).To(ContainSubstring(tc.diff))
			line, _, err := gd.log.Wait(testContext(t), 0, logTLSChanged)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gd.log.CountWhere(logTLSChanged)).To(Equal(1), "one line for the change")
			g.Expect(line.Get("detectedBy")).To(Equal("reconcile"))
			g.Expect(line.Get("apiServer")).To(Equal(name))
			g.Expect(line.Get("diff")).To(ContainSubstring(tc.diff))
			g.Eventually(func() ([]eventsv1.Event, error) { return apiServerEvents(c, name) }).WithTimeout(time.Minute).
				Should(ContainElement(HaveField("Note", ContainSubstring(tc.diff))))
		})
	}
}

// sameAsIntermediate makes the APIServer's profile a Custom one with
// Intermediate's settings: its ciphers and version and, where the
// openshift/api this test is built with gives Intermediate groups, those
// (written as JSON: the library's floor has no such field).
func sameAsIntermediate(t *testing.T, c client.Client, name string) {
	t.Helper()
	intermediate := configv1.TLSProfiles[configv1.TLSProfileIntermediateType]
	spec := map[string]any{"ciphers": intermediate.Ciphers, "minTLSVersion": intermediate.MinTLSVersion}
	if f := reflect.ValueOf(intermediate).Elem().FieldByName("Groups"); f.IsValid() && f.Len() > 0 {
		spec["groups"] = f.Interface()
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"tlsSecurityProfile": map[string]any{
		"type": "Custom", "intermediate": nil, "custom": spec}}})
	if err != nil {
		t.Fatal(err)
	}
	as := &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Patch(testContext(t), as, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("patch APIServer %s: %v", name, err)
	}
}

func apiServerEvents(c client.Client, name string) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := c.List(context.Background(), list); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "APIServer" && e.Regarding.Name == name && e.Reason == "TLSProfileChanged" {
			out = append(out, e)
		}
	}
	return out, nil
}

// No APIServer: without a fallback the guard waits, not ready, saying what
// it waits for; with one it serves the fallback, named as such, and an
// APIServer that appears with other settings stops it.
func TestGuardTLSProfileAbsent(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	c := testClient(t)

	waiting := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(waiting, configv1.Default))
	probe := testenv.FreeAddr(t)
	gd, _ := startTLSGuarded(t, cp.Config, featuregate.Options{Name: waiting,
		TLSProfile: &featuregate.TLSProfileOptions{APIServer: waiting}}, probe)
	g.Eventually(readyz(probe, featuregate.CheckName)).WithTimeout(30 * time.Second).Should(And(HavePrefix("500 "),
		ContainSubstring("initial TLS security profile not read yet: APIServer "+waiting+" not found, and featuregate.Options.TLSProfile.Absent names no fallback profile")))
	_, ok := gd.guard.Snapshot()
	g.Expect(ok).To(BeFalse())
	createAPIServer(t, c, waiting, nil, "")
	gd.taken(t)
	g.Eventually(readyz(probe, featuregate.CheckName)).Should(HavePrefix("200 "))

	fallback := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(fallback, configv1.Default))
	fb, _ := startTLSGuarded(t, cp.Config, featuregate.Options{Name: fallback, ResyncPeriod: eventsOnly,
		TLSProfile: &featuregate.TLSProfileOptions{APIServer: fallback, LegacyAdhering: true,
			Absent: profile(configv1.TLSProfileIntermediateType, nil)}}, "")
	p, ok := fb.taken(t).TLSProfile()
	g.Expect(ok).To(BeTrue())
	g.Expect(p.From).To(HavePrefix("featuregate.Options.TLSProfile.Absent (APIServer " + fallback + " not found"))
	g.Expect(p.Type).To(Equal(configv1.TLSProfileIntermediateType))
	fb.current(t)
	createAPIServer(t, c, fallback, profile(configv1.TLSProfileModernType, nil), "")
	g.Expect(fb.firstReason(t)).To(ContainSubstring("minTLSVersion VersionTLS12 → VersionTLS13"))
}

// A cluster that serves no APIServer API (MicroShift, plain Kubernetes):
// with a fallback the guard is ready on it, vouches for it (a consistent
// read that says the API is absent is an answer), and starts no informer
// that could never sync; without one it waits, naming the API.
func TestGuardTLSProfileAPINotServed(t *testing.T) {
	g := NewWithT(t)
	crds, err := testenv.FeatureGateCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	cp := testenv.StartT(t, crds)
	c := testenv.Client(t, cp.Config)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))

	probe := testenv.FreeAddr(t)
	waiting, _ := startTLSGuarded(t, cp.Config, featuregate.Options{Name: name,
		TLSProfile: &featuregate.TLSProfileOptions{APIServer: name}}, probe)
	g.Eventually(readyz(probe, featuregate.CheckName)).WithTimeout(30 * time.Second).Should(And(HavePrefix("500 "),
		ContainSubstring("initial TLS security profile not read yet: APIServer API not served")))
	_, ok := waiting.guard.Snapshot()
	g.Expect(ok).To(BeFalse())

	gd, metrics := startTLSGuarded(t, cp.Config, featuregate.Options{Name: name, CacheSyncTimeout: 2 * time.Second,
		TLSProfile: &featuregate.TLSProfileOptions{APIServer: name, Absent: profile(configv1.TLSProfileModernType, nil)}}, "")
	p, _ := gd.taken(t).TLSProfile()
	g.Expect(p.From).To(ContainSubstring("APIServer API not served"))
	g.Expect(p.Honored).To(BeTrue(), "a fallback the adopter chose is served")
	gd.current(t)
	g.Eventually(func() error { return handshake(metrics, tls.VersionTLS12) }).WithTimeout(30*time.Second).
		Should(MatchError(ContainSubstring("protocol version")), "the Modern fallback serves no TLS 1.2")
	g.Consistently(gd.done).WithTimeout(4*time.Second).ShouldNot(Receive(), "the manager ended: past the cache-sync timeout with no API")
	g.Expect(gd.guard.Current()).To(BeTrue())
}

// The proof covers the profile: APIServer reads that go unanswered, while
// the FeatureGate's are answered, turn Current false within the bound, and
// the lapse names the APIServer.
func TestGuardTLSProfileNeedsFreshProof(t *testing.T) {
	g := NewWithT(t)
	cp, _, name := tlsCluster(t, nil, "")
	const bound = 600 * time.Millisecond
	var hold atomic.Bool
	gd, _ := startTLSGuarded(t, holding(cp.Config, "/apiservers/"+name, &hold), featuregate.Options{Name: name, FreshnessBound: bound,
		TLSProfile: &featuregate.TLSProfileOptions{APIServer: name}}, "")
	gd.current(t)
	line, _, _ := lapsesWithin(t, gd, &hold, bound)
	g.Expect(line.Get("reason")).To(ContainSubstring("no answer to a consistent read of APIServer " + name))
	hold.Store(false)
	g.Eventually(gd.guard.Current).WithTimeout(10 * time.Second).Should(BeTrue())
	gd.noStop(t)
	g.Expect(gd.log.CountWhere(logTLSUnserved)).To(BeZero())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func ctrlConfig() config.Controller { return config.Controller{SkipNameValidation: ptr.To(true)} }
