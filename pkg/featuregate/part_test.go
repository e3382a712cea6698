package featuregate_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

var logPartChanged = testenv.Message("Snapshot part changed; requesting shutdown")

// topology is what an operator consumes of the Infrastructure: the part's
// value in these tests, as in ExampleNewPart.
type topology struct {
	controlPlane, infrastructure configv1.TopologyMode
}

func topologyPart(t *testing.T, name string) *featuregate.ObjectPart[topology] {
	t.Helper()
	p, err := featuregate.NewPart(name, func(i *configv1.Infrastructure) topology {
		return topology{i.Status.ControlPlaneTopology, i.Status.InfrastructureTopology}
	}, featuregate.PartOptions[topology]{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// createInfrastructure creates the Infrastructure name with topology tp
// (its status), deleted when the test ends.
func createInfrastructure(t *testing.T, c client.Client, name string, tp topology) {
	t.Helper()
	create(t, c, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: name}})
	updateInfrastructure(t, c, name, func(s *configv1.InfrastructureStatus) {
		s.ControlPlaneTopology, s.InfrastructureTopology = tp.controlPlane, tp.infrastructure
	})
}

// create creates infra as given (its spec; the status is a second write),
// deleted when the test ends.
func create(t *testing.T, c client.Client, infra *configv1.Infrastructure) {
	t.Helper()
	if err := c.Create(testContext(t), infra); err != nil {
		t.Fatalf("create Infrastructure %s: %v", infra.Name, err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), infra); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Infrastructure %s: %v", infra.Name, err)
		}
	})
}

func updateInfrastructure(t *testing.T, c client.Client, name string, change func(*configv1.InfrastructureStatus)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		infra := &configv1.Infrastructure{}
		if err := c.Get(testContext(t), client.ObjectKey{Name: name}, infra); err != nil {
			return err
		}
		change(&infra.Status)
		return c.Status().Update(testContext(t), infra)
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

var highlyAvailable = topology{configv1.HighlyAvailableTopologyMode, configv1.HighlyAvailableTopologyMode}

// An adopter's own part is read before the guard is ready: with no
// Infrastructure the guard waits, and readiness names it; once it exists
// the snapshot holds its projection. The projection is of the spec, which
// the create writes with the object: a status is a second write, and a
// guard retrying every 250 ms may read the object between the two (it
// did, with the library's three cells run side by side).
func TestPartIsReadBeforeReady(t *testing.T) {
	g := NewWithT(t)
	c, name := testClient(t), uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	part, err := featuregate.NewPart(name, func(i *configv1.Infrastructure) configv1.PlatformType {
		return i.Spec.PlatformSpec.Type
	}, featuregate.PartOptions[configv1.PlatformType]{})
	g.Expect(err).NotTo(HaveOccurred())
	gd := newGuard(t, featuregate.Options{Name: name, Parts: []featuregate.Part{part}})
	gd.start(t, gd.newManager(t, ctrl.Options{}))

	g.Eventually(func() error { return gd.guard.Check(nil) }).WithTimeout(time.Minute).
		Should(MatchError(ContainSubstring("initial Infrastructure " + name + " not read yet: Infrastructure " + name + " not found")))
	g.Consistently(gd.guard.SnapshotTaken()).WithTimeout(time.Second).ShouldNot(BeClosed(), "a snapshot without the Infrastructure")

	create(t, c, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{Type: configv1.NonePlatformType}}})
	s := gd.taken(t)
	g.Expect(gd.guard.Check(nil)).To(Succeed())
	v, ok := part.Value(s)
	g.Expect(ok).To(BeTrue())
	g.Expect(v).To(Equal(configv1.NonePlatformType))
	g.Expect(s.String()).To(ContainSubstring("; Infrastructure " + name + " None"))
	gd.current(t)
}

// A change of the projection stops the guard, with or without a manager,
// and says so (log line, Event); a change of another field of the object
// does not, and the guard keeps vouching.
func TestPartChangeStopsAndAnUnrelatedOneDoesNot(t *testing.T) {
	for _, withManager := range []bool{true, false} {
		t.Run(map[bool]string{true: "NewManager", false: "Run"}[withManager], func(t *testing.T) {
			g := NewWithT(t)
			c, name := testClient(t), uniqueName()
			testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
			createInfrastructure(t, c, name, highlyAvailable)
			part := topologyPart(t, name)
			gd := newGuard(t, featuregate.Options{Name: name, Parts: []featuregate.Part{part}})
			if withManager {
				gd.start(t, gd.newManager(t, ctrl.Options{}))
			} else {
				runGuard(t, gd)
			}
			gd.taken(t)
			gd.current(t)

			updateInfrastructure(t, c, name, func(s *configv1.InfrastructureStatus) { s.EtcdDiscoveryDomain = "unrelated.example.com" })
			g.Consistently(gd.guard.StopRequested()).WithTimeout(2*time.Second).ShouldNot(BeClosed(), "a field the projection leaves out")
			// Still vouched for: Eventually, as one proof may be in flight
			// on a loaded machine.
			g.Eventually(gd.guard.Current).WithTimeout(10 * time.Second).Should(BeTrue())

			updateInfrastructure(t, c, name, func(s *configv1.InfrastructureStatus) {
				s.ControlPlaneTopology = configv1.SingleReplicaTopologyMode
			})
			reason := gd.stopRequested(t)
			g.Expect(reason).To(Equal("Infrastructure " + name + " changed from {HighlyAvailable HighlyAvailable} to {SingleReplica HighlyAvailable}"))
			g.Eventually(gd.done).WithTimeout(time.Minute).Should(Receive(BeNil()), "the stop ends Start (or Run) with nil")
			line, _, err := gd.log.Wait(testContext(t), 0, logPartChanged)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(line.Get("part")).To(Equal("Infrastructure " + name))
			g.Expect(line.Get("liveValue")).To(Equal("{SingleReplica HighlyAvailable}"))
			g.Expect(gd.log.CountWhere(logPartChanged)).To(Equal(1))
			g.Eventually(func() ([]eventsv1.Event, error) { return objectEvents(c, "Infrastructure", name) }).WithTimeout(time.Minute).
				Should(ContainElement(And(HaveField("Reason", "SnapshotPartChanged"), HaveField("Note", ContainSubstring(reason)))))
		})
	}
}

// A part whose reads go unanswered (a silent link to the API) turns
// Current false within the freshness bound, as the FeatureGate's would,
// naming the object; answered again, Current is true again.
func TestPartNeedsFreshProof(t *testing.T) {
	g := NewWithT(t)
	c, name := testClient(t), uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	createInfrastructure(t, c, name, highlyAvailable)
	const bound = 600 * time.Millisecond
	var hold atomic.Bool
	cfg := holding(sharedControlPlane(t).Config, "/infrastructures", &hold)
	gd := newGuardOn(t, cfg, featuregate.Options{Name: name, FreshnessBound: bound, Parts: []featuregate.Part{topologyPart(t, name)}})
	gd.start(t, gd.newManager(t, ctrl.Options{}))
	gd.current(t)
	line, _, _ := lapsesWithin(t, gd, &hold, bound)
	g.Expect(line.Get("reason")).To(ContainSubstring("no answer to a consistent read of Infrastructure " + name))
	hold.Store(false)
	g.Eventually(gd.guard.Current).WithTimeout(10 * time.Second).Should(BeTrue())
	gd.noStop(t)
}

// runGuard runs the guard without a manager until the test ends; its
// result goes to gd.done.
func runGuard(t *testing.T, gd *guarded) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		gd.done <- gd.guard.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(time.Minute):
			t.Error("Run did not return within a minute")
		}
	})
}

// objectEvents are the Events about the cluster-scoped object kind/name.
func objectEvents(c client.Client, kind, name string) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out, nil
}
