package featuregate_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

const logEventsForbidden = "Events forbidden; the guard records none"

// readFeatureGates is all the guard needs besides Events.
var readFeatureGates = rbacv1.PolicyRule{APIGroups: []string{configv1.GroupName}, Resources: []string{"featuregates"}, Verbs: []string{"get", "list", "watch"}}

// RBAC that grants no Events is a choice: the guard takes its snapshot,
// detects the change and stops as ever, saying once that it records none
// (no error per Event, no retries).
func TestGuardWithoutEventsRBACLogsOnceAndGuards(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	cfg := sharedControlPlane(t).User(t, "guard-"+name, []rbacv1.PolicyRule{readFeatureGates})

	gd := newGuardOn(t, cfg, featuregate.Options{Name: name})
	gd.start(t, gd.newManager(t, ctrl.Options{}))
	gd.taken(t)
	_, _, err := gd.log.Wait(ctx, 0, testenv.Message(logEventsForbidden))
	g.Expect(err).NotTo(HaveOccurred(), "the StartupSnapshot Event was forbidden: say so")

	specUpdate(toTechPreview).apply(ctx, t, c, name)
	g.Expect(gd.firstReason(t)).To(ContainSubstring("TechPreviewNoUpgrade"))
	g.Expect(gd.log.CountWhere(testenv.Message(logEventsForbidden))).To(Equal(1), "said once, not per Event")
	g.Expect(gd.log.CountWhere(testenv.Message("Event not recorded"))).To(BeZero())
}

// Given a recorder, the guard records through it, and writes none itself.
func TestGuardRecordsThroughTheAdoptersRecorder(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	rec := events.NewFakeRecorder(8)

	gd := newGuard(t, featuregate.Options{Name: name, EventRecorder: rec})
	gd.start(t, gd.newManager(t, ctrl.Options{}))
	var ev string
	g.Eventually(rec.Events).WithTimeout(time.Minute).Should(Receive(&ev))
	g.Expect(strings.Fields(ev)[:2]).To(Equal([]string{"Normal", "StartupSnapshot"}), ev)

	specUpdate(toTechPreview).apply(ctx, t, c, name)
	gd.firstReason(t)
	g.Eventually(rec.Events).WithTimeout(time.Minute).Should(Receive(HavePrefix("Warning FeatureGateChanged")))
	for _, reason := range []string{"StartupSnapshot", "FeatureGateChanged"} {
		evs, err := fgEvents(ctx, c, name, reason)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(evs).To(BeEmpty(), "the guard wrote a %s Event of its own beside the adopter's recorder", reason)
	}
}

// The ClusterRole this module ships (config/rbac/role.yaml, for operators
// that write RBAC by hand) is all the guard needs: Events included.
func TestGuardUnderTheShippedRole(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	data, err := os.ReadFile(filepath.Join("config", "rbac", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	g.Expect(yaml.UnmarshalStrict(data, role)).To(Succeed())
	cfg := sharedControlPlane(t).User(t, "guard-"+name, role.Rules)

	gd := newGuardOn(t, cfg, featuregate.Options{Name: name})
	gd.start(t, gd.newManager(t, ctrl.Options{}))
	gd.taken(t)
	waitEvent(ctx, t, c, name, "StartupSnapshot")
	specUpdate(toTechPreview).apply(ctx, t, c, name)
	gd.firstReason(t)
	waitEvent(ctx, t, c, name, "FeatureGateChanged")
	g.Expect(gd.log.CountWhere(testenv.Message(logEventsForbidden))).To(BeZero())
}

// A real recorder, as an adopter builds it, on client-go's global scheme,
// which knows no FeatureGate: the guard's Events still reach the API.
func TestGuardEventsReachTheAPIThroughAnAdoptersBroadcaster(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	cfg := sharedControlPlane(t).Config
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kubernetes.NewForConfigOrDie(cfg).EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	t.Cleanup(broadcaster.Shutdown)
	g.Expect(clientgoscheme.Scheme.Recognizes(configv1.GroupVersion.WithKind("FeatureGate"))).To(BeFalse(),
		"the test needs a scheme that does not know FeatureGates")

	gd := newGuard(t, featuregate.Options{Name: name, EventRecorder: broadcaster.NewRecorder(clientgoscheme.Scheme, "adopter")})
	gd.start(t, gd.newManager(t, ctrl.Options{}))
	ev := waitEvent(ctx, t, c, name, "StartupSnapshot")
	g.Expect(ev.ReportingController).To(Equal("adopter"))
}

// The stop's Event is written while the manager drains, and Start waits
// at most a little longer for it: with every Event POST held (an API
// server busy with a restart stampede), Start still returns nil within a
// second of the stop, and a line says what was left unwritten.
func TestStartDoesNotWaitOutAHeldEvent(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cfg := rest.CopyConfig(sharedControlPlane(t).Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/events") {
				select {
				case <-release:
				case <-r.Context().Done():
					return nil, r.Context().Err()
				}
			}
			return rt.RoundTrip(r)
		})
	})
	gd := newGuardOn(t, cfg, featuregate.Options{Name: name})
	gd.start(t, gd.newManager(t, ctrl.Options{}))
	gd.taken(t)

	specUpdate(toTechPreview).apply(ctx, t, c, name)
	gd.stopRequested(t)
	stopped := time.Now()
	g.Eventually(gd.done).WithTimeout(time.Minute).Should(Receive(BeNil()))
	g.Expect(time.Since(stopped)).To(BeNumerically("<", time.Second), "Start waited out the held Event")
	line, ok := gd.log.Find(testenv.Message("Events not written in time; exiting without them"))
	g.Expect(ok).To(BeTrue())
	g.Expect(line.Get("pending")).NotTo(Equal("0"))
}
