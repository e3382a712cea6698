package featuregate_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/eventnote"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// readRecorder counts, per resourceVersion, the FeatureGates the manager's
// client handed out. The FeatureGate controller reads through that client
// (from the cache), once per Reconcile after the snapshot, before it
// compares: "version V was read" proves a reconcile looked at V.
type readRecorder struct {
	mu    sync.Mutex
	reads map[string]int
}

func (r *readRecorder) Reads(resourceVersion string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads[resourceVersion]
}

// recordingClient is the manager's client, recording its FeatureGate reads.
type recordingClient struct {
	client.Client
	rec *readRecorder
}

func (c recordingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*configv1.FeatureGate); ok && err == nil {
		c.rec.mu.Lock()
		c.rec.reads[obj.GetResourceVersion()]++
		c.rec.mu.Unlock()
	}
	return err
}

// guarded is a Guard and the manager built around it, as an operator's main
// builds them, on the shared control plane.
type guarded struct {
	guard *featuregate.Guard
	reg   *prometheus.Registry
	log   *testenv.Log
	reads *readRecorder
	// done receives mgr.Start's result.
	done chan error
}

// eventsOnly is a resync period longer than any test: only watch events
// cause reconciles, so a test proves the watch sees the update (a resync
// would hide a filter that drops it, just later).
const eventsOnly = time.Hour

// newGuard builds the guard on cfg with the test's defaults (its own
// metrics registry and log); opts may set more.
func newGuardOn(t *testing.T, cfg *rest.Config, opts featuregate.Options) *guarded {
	t.Helper()
	// The detection tests change the feature set, without a release
	// version: what they watch. The restart rule has tests of its own.
	opts.WatchFeatureSet = true
	return newGuardConsuming(t, cfg, opts)
}

// newGuardConsuming is newGuardOn consuming exactly what opts says.
func newGuardConsuming(t *testing.T, cfg *rest.Config, opts featuregate.Options) *guarded {
	t.Helper()
	gd := &guarded{reg: prometheus.NewRegistry(), reads: &readRecorder{reads: map[string]int{}}, done: make(chan error, 1)}
	opts.EventSource = "guard-test"
	opts.Registry = gd.reg
	if opts.BackoffCap == 0 {
		opts.BackoffCap = 250 * time.Millisecond
	}
	if opts.ResyncPeriod == 0 {
		opts.ResyncPeriod = eventsOnly
	}
	opts.Logger, gd.log = testenv.NewLogger(t)
	g, err := featuregate.NewGuard(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	gd.guard = g
	return gd
}

func newGuard(t *testing.T, opts featuregate.Options) *guarded {
	t.Helper()
	return newGuardOn(t, sharedControlPlane(t).Config, opts)
}

// newManager is guard.NewManager with the test's options: no metrics
// server, no probe server unless opts names one, and every test's
// controllers allowed the same names. Its client records FeatureGate reads.
func (gd *guarded) newManager(t *testing.T, opts ctrl.Options) ctrl.Manager {
	t.Helper()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	if opts.HealthProbeBindAddress == "" {
		opts.HealthProbeBindAddress = "0"
	}
	opts.Controller.SkipNameValidation = ptr.To(true)
	opts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
		c, err := client.New(cfg, o)
		if err != nil {
			return nil, err
		}
		return recordingClient{Client: c, rec: gd.reads}, nil
	}
	mgr, err := gd.guard.NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// start starts mgr; it is stopped when the test ends.
func (gd *guarded) start(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		gd.done <- mgr.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(time.Minute):
			t.Error("manager did not stop within a minute")
		}
	})
}

// startGuarded builds the guard, lets before change it (test hooks), and
// builds and starts its manager.
func startGuarded(t *testing.T, opts featuregate.Options, before ...func(*featuregate.Guard)) *guarded {
	t.Helper()
	gd := newGuard(t, opts)
	for _, b := range before {
		b(gd.guard)
	}
	gd.start(t, gd.newManager(t, ctrl.Options{}))
	return gd
}

// reconciled waits until a reconcile has read resourceVersion rv.
func (gd *guarded) reconciled(t *testing.T, rv string) {
	t.Helper()
	NewWithT(t).Eventually(func() int { return gd.reads.Reads(rv) }).
		WithTimeout(time.Minute).Should(BeNumerically(">", 0), "no reconcile read resourceVersion %s", rv)
}

// stopRequested waits for the stop request and returns its reason.
func (gd *guarded) stopRequested(t *testing.T) string {
	t.Helper()
	NewWithT(t).Eventually(gd.guard.StopRequested()).WithTimeout(time.Minute).Should(BeClosed(), "the guard never asked for a shutdown")
	reason, ok := gd.guard.StopReason()
	NewWithT(t).Expect(ok).To(BeTrue())
	return reason
}

// firstReason waits for the stop request and for the manager's Start to
// return nil because of it, and returns the reason.
func (gd *guarded) firstReason(t *testing.T) string {
	t.Helper()
	reason := gd.stopRequested(t)
	NewWithT(t).Eventually(gd.done).WithTimeout(time.Minute).Should(Receive(BeNil()),
		"a requested stop must end the manager's Start, with nil")
	return reason
}

// stopLine waits for the guard's log line announcing the stop: the one
// naming what detected the change.
func (gd *guarded) stopLine(t *testing.T) testenv.Line {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, _, err := gd.log.Wait(ctx, 0, testenv.HasKey("detectedBy"))
	if err != nil {
		t.Fatalf("no log line with detectedBy: %v", err)
	}
	return l
}

// noStop asserts nothing asked for a stop.
func (gd *guarded) noStop(t *testing.T) {
	t.Helper()
	_, ok := gd.guard.StopReason()
	NewWithT(t).Expect(ok).To(BeFalse(), "a stop was requested")
}

func (gd *guarded) taken(t *testing.T) featuregate.Snapshot {
	t.Helper()
	var s featuregate.Snapshot
	NewWithT(t).Eventually(func() bool {
		var ok bool
		s, ok = gd.guard.Snapshot()
		return ok
	}).WithTimeout(time.Minute).Should(BeTrue(), "no snapshot")
	return s
}

// current waits until the guard vouches for its snapshot: the monitor
// follows the FeatureGate.
func (gd *guarded) current(t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(gd.guard.Current).WithTimeout(time.Minute).Should(BeTrue(), "the guard never became current")
}

func newFG(name string, set configv1.FeatureSet) *configv1.FeatureGate {
	return featureGate(set, featuregatetest.Named(name))
}

// statusEntry returns the status.featureGates entry for version, adding it
// when missing.
func statusEntry(fg *configv1.FeatureGate, version string) *configv1.FeatureGateDetails {
	for i := range fg.Status.FeatureGates {
		if fg.Status.FeatureGates[i].Version == version {
			return &fg.Status.FeatureGates[i]
		}
	}
	fg.Status.FeatureGates = append(fg.Status.FeatureGates, configv1.FeatureGateDetails{Version: version})
	return &fg.Status.FeatureGates[len(fg.Status.FeatureGates)-1]
}

// fgUpdate is a change to a FeatureGate, to its spec and metadata or, when
// status is true, through the status subresource.
type fgUpdate struct {
	status bool
	change func(*configv1.FeatureGate)
}

func specUpdate(change func(*configv1.FeatureGate)) fgUpdate { return fgUpdate{change: change} }
func statusUpdate(change func(*configv1.FeatureGate)) fgUpdate {
	return fgUpdate{status: true, change: change}
}

// try makes the change and returns the new resourceVersion.
func (u fgUpdate) try(ctx context.Context, c client.Client, name string) (string, error) {
	fg := &configv1.FeatureGate{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, fg); err != nil {
			return err
		}
		before := fg.ResourceVersion
		u.change(fg)
		var err error
		if u.status {
			err = c.Status().Update(ctx, fg)
		} else {
			err = c.Update(ctx, fg)
		}
		if err == nil && fg.ResourceVersion == before {
			return fmt.Errorf("update of FeatureGate %s changed nothing: not a test of anything", name)
		}
		return err
	})
	return fg.ResourceVersion, err
}

// apply is try for the test goroutine.
func (u fgUpdate) apply(ctx context.Context, t *testing.T, c client.Client, name string) string {
	t.Helper()
	rv, err := u.try(ctx, c, name)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return rv
}

func toTechPreview(fg *configv1.FeatureGate) { fg.Spec.FeatureSet = configv1.TechPreviewNoUpgrade }

func resourceVersion(ctx context.Context, t *testing.T, c client.Client, name string) string {
	t.Helper()
	fg := &configv1.FeatureGate{}
	NewWithT(t).Expect(c.Get(ctx, client.ObjectKey{Name: name}, fg)).To(Succeed())
	return fg.ResourceVersion
}

// fgEvents lists the events.k8s.io/v1 Events with reason about FeatureGate
// name.
func fgEvents(ctx context.Context, c client.Client, name, reason string) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "FeatureGate" && e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}

func waitEvent(ctx context.Context, t *testing.T, c client.Client, name, reason string) eventsv1.Event {
	t.Helper()
	var events []eventsv1.Event
	NewWithT(t).Eventually(func() ([]eventsv1.Event, error) {
		var err error
		events, err = fgEvents(ctx, c, name, reason)
		return events, err
	}).WithTimeout(time.Minute).ShouldNot(BeEmpty(), "no %s Event on FeatureGate %s", reason, name)
	return events[0]
}

func testClient(t *testing.T) client.Client {
	t.Helper()
	return testenv.Client(t, sharedControlPlane(t).Config)
}

// metric is the value of the gauge or counter name (with the one label
// value, when label is not empty) among what reg gathers.
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label == "" && len(m.GetLabel()) == 0 {
				return m.GetCounter().GetValue()
			}
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{%s} among what was gathered", name, label)
	return 0
}

// The whole point: the snapshot says Default, the cluster is switched to
// TechPreviewNoUpgrade, and the guard stops the manager, saying why in its
// log, an Event on the FeatureGate and its metric; Start returns nil.
func TestGuardFeatureGateChangeRequestsShutdown(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))

	gd := startGuarded(t, featuregate.Options{Name: name})
	g.Expect(gd.taken(t).FeatureSetName()).To(Equal("Default"))
	gd.reconciled(t, resourceVersion(ctx, t, c, name))
	gd.noStop(t)

	specUpdate(toTechPreview).apply(ctx, t, c, name)
	g.Expect(gd.firstReason(t)).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))
	g.Expect(gd.guard.StopRequested()).To(BeClosed())
	g.Expect(gd.guard.Current()).To(BeFalse())

	event := waitEvent(ctx, t, c, name, "FeatureGateChanged")
	g.Expect(event.Type).To(Equal(corev1.EventTypeWarning))
	g.Expect(event.Note).To(Equal("feature set changed from Default to TechPreviewNoUpgrade; requesting shutdown"))
	g.Expect(event.Regarding.APIVersion).To(Equal(configv1.GroupVersion.String()))
	g.Expect(event.ReportingController).To(Equal("guard-test"), "the caller names the Event source")

	line := gd.stopLine(t)
	g.Expect(line.Get("featureGate")).To(Equal(name))
	g.Expect(line.Get("diff")).To(Equal(`["feature set changed from Default to TechPreviewNoUpgrade"]`))
	g.Expect(line.Get("startupFeatureSet")).To(Equal("Default"))
	g.Expect(line.Get("liveFeatureSet")).To(Equal("TechPreviewNoUpgrade"))
	g.Expect([]string{"reconcile", "verify"}).To(ContainElement(line.Get("detectedBy")))

	// The FeatureGate controller and the monitor both compare; once Start
	// has returned, every comparison is over, and only the first detection
	// was reported.
	g.Expect(gd.log.CountWhere(testenv.HasKey("detectedBy"))).To(Equal(1))
	g.Expect(metric(t, gd.reg, "featuregate_guard_shutdown_requests_total", "")).To(Equal(1.0))
	events, err := fgEvents(ctx, c, name, "FeatureGateChanged")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(events).To(HaveLen(1))
	g.Expect(metric(t, gd.reg, "featuregate_guard_startup_feature_set", "Default")).To(Equal(1.0))
}

// Updates that change nothing the snapshot holds must not restart the
// operator. Each case proves its update was reconciled, then makes a real
// change: the first reason must be that change, so a wrong reaction to the
// no-op update (which was reconciled first, on the same queue, and seen
// first by the monitor's watch) would be the first reason instead.
func TestGuardNoOpUpdatesDoNotRequestShutdown(t *testing.T) {
	const version = "4.11.0"
	tests := []struct {
		name string
		opts featuregate.Options
		fg   func(name string) *configv1.FeatureGate
		noop fgUpdate
		// change is the real change that follows; want is its reason.
		change fgUpdate
		want   string
	}{
		{
			name:   "label added",
			fg:     func(name string) *configv1.FeatureGate { return newFG(name, configv1.Default) },
			noop:   specUpdate(func(fg *configv1.FeatureGate) { fg.Labels = map[string]string{"team": "x"} }),
			change: specUpdate(toTechPreview),
			want:   "feature set changed from Default to TechPreviewNoUpgrade",
		},
		{
			name: "customNoUpgrade lists reordered",
			fg: func(name string) *configv1.FeatureGate {
				return featureGate(configv1.CustomNoUpgrade, custom([]string{"A", "B"}, []string{"C"}), featuregatetest.Named(name))
			},
			noop: specUpdate(func(fg *configv1.FeatureGate) {
				fg.Spec.CustomNoUpgrade.Enabled = []configv1.FeatureGateName{"B", "A"}
			}),
			change: specUpdate(func(fg *configv1.FeatureGate) {
				fg.Spec.CustomNoUpgrade.Enabled = []configv1.FeatureGateName{"B"}
			}),
			want: "gate A enabled -> absent in spec.customNoUpgrade",
		},
		{
			name: "status entry for another version",
			opts: featuregate.Options{Version: version},
			fg: func(name string) *configv1.FeatureGate {
				return featureGate("", status(version, []string{"GateA"}, nil), featuregatetest.Named(name))
			},
			noop: statusUpdate(func(fg *configv1.FeatureGate) {
				*statusEntry(fg, "4.12.0") = details("4.12.0", nil, []string{"GateA"})
			}),
			change: statusUpdate(func(fg *configv1.FeatureGate) {
				*statusEntry(fg, version) = details(version, nil, []string{"GateA"})
			}),
			want: "gate GateA enabled -> disabled in status for version 4.11.0",
		},
		{
			name: "unwatched gate changed",
			opts: featuregate.Options{Version: version, WatchedGates: []configv1.FeatureGateName{"GateA"}},
			fg: func(name string) *configv1.FeatureGate {
				return featureGate("", status(version, []string{"GateA", "GateB"}, nil), featuregatetest.Named(name))
			},
			noop: statusUpdate(func(fg *configv1.FeatureGate) {
				*statusEntry(fg, version) = details(version, []string{"GateA"}, []string{"GateB"})
			}),
			change: statusUpdate(func(fg *configv1.FeatureGate) {
				*statusEntry(fg, version) = details(version, nil, []string{"GateA", "GateB"})
			}),
			want: "gate GateA enabled -> disabled in status for version 4.11.0",
		},
		{
			name: "status condition added",
			fg:   func(name string) *configv1.FeatureGate { return newFG(name, configv1.Default) },
			noop: statusUpdate(func(fg *configv1.FeatureGate) {
				fg.Status.Conditions = []metav1.Condition{{
					Type: "DeterminationDegraded", Status: metav1.ConditionFalse, Reason: "AsExpected",
					LastTransitionTime: metav1.Now(),
				}}
			}),
			change: specUpdate(func(fg *configv1.FeatureGate) { fg.Spec.FeatureSet = configv1.DevPreviewNoUpgrade }),
			want:   "feature set changed from Default to DevPreviewNoUpgrade",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := testContext(t)
			c := testClient(t)
			name := uniqueName()
			opts := tt.opts
			opts.Name = name
			testenv.CreateFeatureGate(t, c, tt.fg(name))

			gd := startGuarded(t, opts)
			gd.taken(t)
			gd.reconciled(t, resourceVersion(ctx, t, c, name))

			gd.reconciled(t, tt.noop.apply(ctx, t, c, name))
			gd.noStop(t)

			tt.change.apply(ctx, t, c, name)
			g.Expect(gd.firstReason(t)).To(Equal(tt.want))
		})
	}
}

// The gate lists live in status, whose updates leave metadata.generation
// alone: a GenerationChangedPredicate would never see this change. The
// monitor is deafened, so that the FeatureGate controller is what sees it.
func TestGuardStatusOnlyChangeRequestsShutdown(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	const version = "4.11.0"
	fg := featureGate(configv1.TechPreviewNoUpgrade, status(version, []string{"GateA"}, []string{"GateB"}), featuregatetest.Named(name))
	testenv.CreateFeatureGate(t, c, fg)
	generation := fg.Generation

	gd := startGuarded(t, featuregate.Options{Name: name, Version: version, WatchedGates: []configv1.FeatureGateName{"GateA"}},
		featuregate.DeafenMonitor)
	s := gd.taken(t)
	g.Expect(s.Enabled("GateA")).To(BeTrue())
	g.Expect(s.Enabled("GateB")).To(BeFalse())
	g.Expect(s.KnownFeatures()).To(Equal([]configv1.FeatureGateName{"GateA", "GateB"}))
	gd.reconciled(t, resourceVersion(ctx, t, c, name))

	statusUpdate(func(fg *configv1.FeatureGate) {
		*statusEntry(fg, version) = details(version, nil, []string{"GateA", "GateB"})
	}).apply(ctx, t, c, name)
	g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, fg)).To(Succeed())
	g.Expect(fg.Generation).To(Equal(generation), "a status update changed the generation: this test proves nothing")

	line := gd.stopLine(t)
	g.Expect(line.Get("diff")).To(Equal(`["gate GateA enabled -> disabled in status for version 4.11.0"]`))
	g.Expect(line.Get("detectedBy")).To(Equal("reconcile"))
	g.Expect(gd.firstReason(t)).To(Equal("gate GateA enabled -> disabled in status for version 4.11.0"))
}

// The bug in the seed: the startup read saw Default, the cluster became
// TechPreviewNoUpgrade before the watch started, and an edge-triggered
// controller never noticed. Here the change is made inside the startup
// read, after the API server answered it and before the snapshot is
// published, so before anything waiting for the snapshot (the FeatureGate
// controller's watch, the monitor) starts; both compare first, so it is
// caught.
func TestGuardChangeBetweenReadAndWatchIsCaught(t *testing.T) {
	g := NewWithT(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))

	var mu sync.Mutex
	changed := false
	changeErr := make(chan error, 1)
	gd := startGuarded(t, featuregate.Options{Name: name}, func(guard *featuregate.Guard) {
		featuregate.WrapStartupRead(guard, func(read featuregate.ReadFunc) featuregate.ReadFunc {
			return func(ctx context.Context) (*configv1.FeatureGate, error) {
				mu.Lock()
				defer mu.Unlock()
				if changed {
					// The read that changed it is the startup read: any
					// other, hedged beside it, is never answered.
					<-ctx.Done()
					return nil, ctx.Err()
				}
				fg, err := read(ctx)
				if err == nil && fg.Spec.FeatureSet == configv1.Default {
					changed = true
					updateCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					_, uerr := specUpdate(toTechPreview).try(updateCtx, c, name)
					changeErr <- uerr
				}
				return fg, err
			}
		})
	})
	g.Eventually(changeErr).WithTimeout(time.Minute).Should(Receive(BeNil()))
	g.Expect(gd.firstReason(t)).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))
	s, _ := gd.guard.Snapshot()
	g.Expect(s.FeatureSetName()).To(Equal("Default"), "the snapshot is what was read, not what is live")
}

// Before the snapshot there is nothing to compare with: requeue, never stop.
// (The controller starts only after the snapshot; this is the guard behind
// that.)
func TestGuardReconcileBeforeSnapshotRequeues(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.TechPreviewNoUpgrade))
	gd := newGuard(t, featuregate.Options{Name: name})
	gd.newManager(t, ctrl.Options{}) // never started: no snapshot

	res, err := featuregate.ReconcilerOf(gd.guard).Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	gd.noStop(t)
	g.Expect(gd.guard.Current()).To(BeFalse(), "no snapshot: nothing may act")
	g.Expect(gd.guard.Enabled("Anything")).To(BeFalse())
}

// A deleted FeatureGate cannot be read by a new process either: warn and
// keep the snapshot, and go on vouching for it.
func TestGuardFeatureGateDeletedKeepsRunning(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	fg := newFG(name, configv1.TechPreviewNoUpgrade)
	testenv.CreateFeatureGate(t, c, fg)

	gd := startGuarded(t, featuregate.Options{Name: name})
	gd.taken(t)
	gd.reconciled(t, resourceVersion(ctx, t, c, name))
	gd.current(t)

	g.Expect(c.Delete(ctx, fg)).To(Succeed())
	event := waitEvent(ctx, t, c, name, "FeatureGateDeleted")
	g.Expect(event.Type).To(Equal(corev1.EventTypeWarning))
	g.Expect(event.Note).To(Equal(fmt.Sprintf("FeatureGate %s was deleted; keeping startup feature set TechPreviewNoUpgrade", name)))
	gd.noStop(t)
	g.Expect(gd.done).NotTo(Receive(), "the manager stopped")
	// Longer than the freshness bound: a consistent read's NotFound is
	// proof too, of the state the snapshot is kept through.
	g.Consistently(gd.guard.Current).WithTimeout(3*time.Second).Should(BeTrue(), "the snapshot is all there is")
}

// Equality requeues after the resync period, so a change a broken watch
// missed is still found; in a running manager the comparison repeats
// without any event.
func TestGuardResyncRequeuesOnEquality(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))

	gd := startGuarded(t, featuregate.Options{Name: name, ResyncPeriod: time.Second})
	gd.taken(t)
	rv := resourceVersion(ctx, t, c, name)
	gd.reconciled(t, rv) // the controller's first reconcile: its cache is running
	res, err := featuregate.ReconcilerOf(gd.guard).Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(ctrl.Result{RequeueAfter: time.Second}))

	g.Eventually(func() int { return gd.reads.Reads(rv) }).WithTimeout(time.Minute).Should(BeNumerically(">=", 3),
		"the unchanged FeatureGate was not compared again every second")
	gd.noStop(t)
}

// Current is the last look before acting: false before the snapshot, true
// once the monitor follows the FeatureGate, false for good once a change
// asked for the stop.
func TestGuardCurrent(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()

	// No FeatureGate yet: no snapshot.
	gd := startGuarded(t, featuregate.Options{Name: name})
	g.Consistently(gd.guard.Current).WithTimeout(time.Second).Should(BeFalse(), "no snapshot: nothing may act")
	_, ok := gd.guard.Snapshot()
	g.Expect(ok).To(BeFalse())

	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	gd.current(t)
	_, ok = gd.guard.Snapshot()
	g.Expect(ok).To(BeTrue())

	specUpdate(toTechPreview).apply(ctx, t, c, name)
	gd.firstReason(t)
	// Once a stop is asked for, nothing is current any more.
	g.Expect(gd.guard.Current()).To(BeFalse())
	g.Consistently(gd.guard.Current).WithTimeout(500 * time.Millisecond).Should(BeFalse())
}

// stopAPIServer stops the shared control plane's API server (etcd keeps
// running) and returns what starts it again; the test's end starts it if
// the test did not.
func stopAPIServer(t *testing.T, cp *testenv.ControlPlane) (start func()) {
	t.Helper()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatalf("stop API server: %v", err)
	}
	var once sync.Once
	var err error
	t.Cleanup(func() {
		once.Do(func() { err = cp.StartAPIServer() })
		if err != nil {
			t.Errorf("restart API server: %v", err)
		}
	})
	return func() {
		t.Helper()
		once.Do(func() { err = cp.StartAPIServer() })
		if err != nil {
			t.Fatalf("restart API server: %v", err)
		}
	}
}

// apiReady waits until the API server's /readyz answers 200, polling
// closely, and returns when it did.
func apiReady(t *testing.T, cfg *rest.Config) time.Time {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc.Timeout = time.Second
	readyz, err := url.JoinPath(cfg.Host, "readyz")
	if err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func() int {
		resp, err := hc.Get(readyz)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}).WithPolling(10*time.Millisecond).WithTimeout(time.Minute).Should(Equal(http.StatusOK), "the API server never became ready")
	return time.Now()
}

// While the API server is down the guard cannot vouch for its snapshot:
// Current turns false within a couple of seconds, stays false while it is
// down, and turns true again once it is back.
func TestGuardCurrentFollowsAPIOutage(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	gd := startGuarded(t, featuregate.Options{Name: name})
	gd.current(t)

	stopping := time.Now()
	start := stopAPIServer(t, cp)
	stopped := time.Now()
	var lost time.Time
	g.Eventually(func() bool {
		if gd.guard.Current() {
			return false
		}
		lost = time.Now()
		return true
	}).WithPolling(10*time.Millisecond).WithTimeout(2*time.Second).Should(BeTrue(),
		"Current still true 2s after the API server stopped")
	t.Logf("API server stop took %s; Current false %s after it returned", stopped.Sub(stopping), max(lost.Sub(stopped), 0))
	g.Consistently(gd.guard.Current).WithTimeout(3*time.Second).Should(BeFalse(), "Current while the API server is down")

	start()
	apiReady(t, cp.Config)
	gd.current(t)
	// And it stays so: the FeatureGate was last written before this API
	// server started, as in any cluster whose API server restarted since.
	g.Consistently(gd.guard.Current).WithTimeout(2*time.Second).Should(BeTrue(),
		"Current flaps after the API server returned (see the guard log: the monitor cannot follow)")
	gd.noStop(t)
	g.Expect(gd.done).NotTo(Receive(), "the manager stopped")
}

// In a cluster the FeatureGate was written long ago, before the API server
// the operator talks to last started: the guard must follow it all the
// same, and vouch for its snapshot for good.
func TestGuardFollowsAFeatureGateOlderThanTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	stopAPIServer(t, cp)()
	apiReady(t, cp.Config)

	gd := startGuarded(t, featuregate.Options{Name: name})
	gd.current(t)
	g.Consistently(gd.guard.Current).WithTimeout(3*time.Second).Should(BeTrue(),
		"Current flaps: the monitor cannot follow a FeatureGate older than the API server (see the guard log)")
	gd.noStop(t)
}

// A change made right after the API server returns from an outage is seen
// by the monitor within about its retry interval, whatever client-go's
// reflectors' backoff would do: five rounds, the change made 0 to 1.5 s
// after /readyz answers, each with a fresh guard whose monitor runs alone
// (no FeatureGate controller to see it first).
func TestGuardMonitorSeesChangeRightAfterAPIReturns(t *testing.T) {
	const version = "4.11.0"
	cp := sharedControlPlane(t)
	for i, delay := range []time.Duration{0, 300 * time.Millisecond, 700 * time.Millisecond, 1100 * time.Millisecond, 1500 * time.Millisecond} {
		t.Run(fmt.Sprintf("round %d, change %s after readyz", i+1, delay), func(t *testing.T) {
			g := NewWithT(t)
			ctx := testContext(t)
			c := testClient(t)
			name := uniqueName()
			testenv.CreateFeatureGate(t, c, featureGate("", status(version, []string{"GateA"}, nil), featuregatetest.Named(name)))
			gd := newGuard(t, featuregate.Options{Name: name, Version: version})
			g.Expect(featuregate.StartStartup(ctx, gd.guard)).To(Succeed())
			done := startMonitor(t, gd.guard)
			gd.current(t)
			before := &configv1.FeatureGate{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, before)).To(Succeed())

			start := stopAPIServer(t, cp)
			g.Eventually(gd.guard.Current).WithTimeout(5 * time.Second).Should(BeFalse())
			start()
			ready := apiReady(t, cp.Config)
			time.Sleep(delay) // the round's variable: when, after readiness, the change is made

			after := before.DeepCopy()
			*statusEntry(after, version) = details(version, nil, []string{"GateA"})
			var patched time.Time
			g.Eventually(func() error {
				attempt := time.Now()
				ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				if err := c.Status().Patch(ctx, after.DeepCopy(), client.MergeFrom(before)); err != nil {
					return err
				}
				patched = attempt
				return nil
			}).WithPolling(10*time.Millisecond).WithTimeout(30*time.Second).Should(Succeed(), "the change could not be made")

			select {
			case <-gd.guard.StopRequested():
			case <-time.After(30 * time.Second):
				t.Fatal("the change was not seen within 30s")
			}
			seen := time.Since(patched)
			line := gd.stopLine(t)
			t.Logf("patched %s after readyz; stop requested %s after the patch",
				patched.Sub(ready).Round(time.Millisecond), seen.Round(time.Millisecond))
			g.Expect(seen).To(BeNumerically("<=", 2*time.Second), "the change was seen %s after it was made", seen)
			g.Expect(line.Get("detectedBy")).To(Equal("verify"))
			g.Expect(line.Get("diff")).To(Equal(`["gate GateA enabled -> disabled in status for version 4.11.0"]`))
			g.Eventually(done).WithTimeout(10*time.Second).Should(Receive(BeNil()), "the monitor ends once it found a change")
		})
	}
}

// startMonitor runs the guard's monitor alone until the test ends; the
// returned channel receives its Start's result.
func startMonitor(t *testing.T, guard *featuregate.Guard) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		done <- featuregate.StartMonitor(ctx, guard)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(time.Minute):
			t.Error("the monitor did not stop within a minute")
		}
	})
	return done
}

// The monitor alone: it reads, compares, then follows a watch, and a change
// the watch delivers asks for the stop, detected by "verify".
func TestGuardMonitorFollowsTheFeatureGate(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	gd := newGuard(t, featuregate.Options{Name: name})
	g.Expect(featuregate.StartStartup(ctx, gd.guard)).To(Succeed())
	g.Expect(gd.guard.Current()).To(BeFalse(), "the monitor does not follow yet")

	done := startMonitor(t, gd.guard)
	gd.current(t)

	specUpdate(toTechPreview).apply(ctx, t, c, name)
	g.Expect(gd.stopRequested(t)).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))
	line := gd.stopLine(t)
	g.Expect(line.Get("detectedBy")).To(Equal("verify"))
	g.Expect(line.Get("diff")).To(Equal(`["feature set changed from Default to TechPreviewNoUpgrade"]`))
	g.Expect(line.Get("liveFeatureSet")).To(Equal("TechPreviewNoUpgrade"))
	g.Expect(gd.guard.Current()).To(BeFalse())
	g.Eventually(done).WithTimeout(10*time.Second).Should(Receive(BeNil()), "the monitor ends once it found a change")
	waitEvent(ctx, t, c, name, "FeatureGateChanged")
}

// A start costs the API server one read of the FeatureGate and one watch:
// the monitor watches from the startup read's list instead of listing
// again (in a stampede every adopter starts at once), and the read is a
// list, which proves as much as a GET for a third less of the servers' CPU.
func TestGuardStartReadsOnceThenWatches(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	var mu sync.Mutex
	requests := map[string]int{}
	count := func(verb string) func() int {
		return func() int {
			mu.Lock()
			defer mu.Unlock()
			return requests[verb]
		}
	}
	cfg := rest.CopyConfig(sharedControlPlane(t).Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.Contains(req.URL.Path, "/featuregates") {
				verb := "LIST"
				switch {
				case strings.HasSuffix(req.URL.Path, "/featuregates/"+name):
					verb = "GET"
				case req.URL.Query().Get("watch") == "true":
					verb = "WATCH"
				}
				mu.Lock()
				requests[verb]++
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	// A bound longer than the test: no proof is asked for, so the prover
	// reads nothing, and what is counted is the start alone.
	gd := newGuardOn(t, cfg, featuregate.Options{Name: name, FreshnessBound: time.Hour})
	g.Expect(featuregate.StartStartup(ctx, gd.guard)).To(Succeed())
	// One list, unless a slow first attempt was hedged.
	reads := count("LIST")()
	g.Expect(reads).To(BeNumerically(">=", 1))
	g.Expect(count("GET")()).To(BeZero())

	// Changed between the startup read and the monitor's watch: a watch
	// from the read's list sees it; one from the newest revision would not.
	specUpdate(toTechPreview).apply(ctx, t, c, name)
	done := startMonitor(t, gd.guard)
	g.Expect(gd.stopRequested(t)).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))
	g.Expect(gd.stopLine(t).Get("detectedBy")).To(Equal("verify"))
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	g.Expect(count("LIST")()).To(Equal(reads), "a list between the startup read and the watch")
	g.Expect(count("WATCH")()).To(Equal(1))
	g.Expect(count("GET")()).To(BeZero())
}

// Once the alarm is raised (a failed request or watch of the manager) the
// monitor reads live and compares, whatever its watch says: here the watch
// is deaf, so the change waits for the alarm.
func TestGuardMonitorReadsLiveAfterAlarm(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	// A bound longer than the test: the freshness reads (every half bound)
	// would otherwise see the change without the alarm.
	gd := newGuard(t, featuregate.Options{Name: name, FreshnessBound: time.Hour})
	featuregate.DeafenMonitor(gd.guard)
	var mu sync.Mutex
	reads := 0
	featuregate.WrapMonitorRead(gd.guard, func(read featuregate.ReadFunc) featuregate.ReadFunc {
		return func(ctx context.Context) (*configv1.FeatureGate, error) {
			fg, err := read(ctx)
			if err == nil {
				mu.Lock()
				reads++
				mu.Unlock()
			}
			return fg, err
		}
	})
	readCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return reads
	}
	g.Expect(featuregate.StartStartup(ctx, gd.guard)).To(Succeed())

	done := startMonitor(t, gd.guard)
	gd.current(t)
	g.Expect(readCount()).To(Equal(0), "the monitor starts from the startup read")

	// An alarm with nothing changed: read again, current again, no stop.
	featuregate.RaiseAlarm(gd.guard)
	g.Eventually(readCount).WithTimeout(10 * time.Second).Should(Equal(1))
	gd.current(t)
	gd.noStop(t)

	// Without an alarm the deaf monitor reads nothing: the change waits.
	specUpdate(toTechPreview).apply(ctx, t, c, name)
	g.Consistently(gd.guard.StopRequested()).WithTimeout(500 * time.Millisecond).ShouldNot(BeClosed())

	featuregate.RaiseAlarm(gd.guard)
	g.Expect(gd.stopRequested(t)).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))
	g.Expect(gd.stopLine(t).Get("detectedBy")).To(Equal("verify"))
	g.Expect(readCount()).To(Equal(2))
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
}

// However many detectors see the change, only the first is reported: one
// log line, one Event, one count. Each later one still says "changed".
func TestGuardOnlyTheFirstDetectionIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	gd := newGuard(t, featuregate.Options{Name: name})
	g.Expect(featuregate.StartStartup(ctx, gd.guard)).To(Succeed())

	same := &configv1.FeatureGate{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, same)).To(Succeed())
	g.Expect(featuregate.Compare(ctx, gd.guard, same, "verify")).To(BeFalse())
	specUpdate(toTechPreview).apply(ctx, t, c, name)
	live := &configv1.FeatureGate{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, live)).To(Succeed())

	g.Expect(featuregate.Compare(ctx, gd.guard, live, "verify")).To(BeTrue())
	g.Expect(featuregate.Compare(ctx, gd.guard, live, "reconcile")).To(BeTrue())
	g.Expect(featuregate.Compare(ctx, gd.guard, live, "verify")).To(BeTrue())

	g.Expect(gd.log.CountWhere(testenv.HasKey("detectedBy"))).To(Equal(1))
	g.Expect(gd.stopLine(t).Get("detectedBy")).To(Equal("verify"))
	g.Expect(metric(t, gd.reg, "featuregate_guard_shutdown_requests_total", "")).To(Equal(1.0))
	featuregate.FlushEvents(gd.guard) // no manager here to wait for them
	events, err := fgEvents(ctx, c, name, "FeatureGateChanged")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(events).To(HaveLen(1))
	reason, _ := gd.guard.StopReason()
	g.Expect(reason).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))
}

// Without a Version only customNoUpgrade names gates: Enabled says so in
// the log, once.
func TestGuardEnabledWithoutVersionLogsOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.TechPreviewNoUpgrade))
	gd := newGuard(t, featuregate.Options{Name: name})
	g.Expect(featuregate.StartStartup(ctx, gd.guard)).To(Succeed())

	g.Expect(gd.guard.Enabled("GateA")).To(BeFalse())
	g.Expect(gd.guard.Enabled("GateB")).To(BeFalse())
	lines := gd.log.Lines()
	n := 0
	for _, l := range lines {
		if l.Has("gate") {
			n++
			g.Expect(l.Get("gate")).To(Equal("GateA"))
			g.Expect(l.Get("featureSet")).To(Equal("TechPreviewNoUpgrade"))
		}
	}
	g.Expect(n).To(Equal(1))
}

// A real payload's gate list: the StartupSnapshot Event is bounded to what
// the API server accepts, the log and the metric keep the whole snapshot,
// and Enabled answers from it.
func TestGuardStartupSnapshotOfARealPayload(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	api, err := testenv.OpenShiftAPIDir()
	g.Expect(err).NotTo(HaveOccurred())
	files, err := filepath.Glob(filepath.Join(api, "payload-manifests", "featuregates", "featureGate-*SelfManagedHA-TechPreviewNoUpgrade.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).NotTo(BeEmpty())
	data, err := os.ReadFile(files[len(files)-1])
	g.Expect(err).NotTo(HaveOccurred())
	fg := &configv1.FeatureGate{}
	g.Expect(yaml.Unmarshal(data, fg)).To(Succeed())
	g.Expect(fg.Status.FeatureGates).NotTo(BeEmpty())
	const version = "4.99.0"
	fg.Status.FeatureGates[0].Version = version
	enabled := fg.Status.FeatureGates[0].Enabled
	g.Expect(len(enabled)).To(BeNumerically(">", 50), "a real payload enables many gates")
	name := uniqueName()
	fg.Name = name
	testenv.CreateFeatureGate(t, c, fg)

	gd := newGuard(t, featuregate.Options{Name: name, Version: version, WatchedGates: []configv1.FeatureGateName{enabled[0].Name}})
	g.Expect(featuregate.StartStartup(ctx, gd.guard)).To(Succeed())
	s, ok := gd.guard.Snapshot()
	g.Expect(ok).To(BeTrue())
	g.Expect(len(s.String())).To(BeNumerically(">", eventnote.Limit), "the snapshot must not fit a note, or this proves nothing")

	event := waitEvent(ctx, t, c, name, "StartupSnapshot")
	g.Expect(event.Type).To(Equal(corev1.EventTypeNormal))
	g.Expect(len(event.Note)).To(BeNumerically("<=", eventnote.Limit))
	g.Expect(event.Note).To(HavePrefix("Startup feature set TechPreviewNoUpgrade (version " + version + ": enabled ["))
	g.Expect(event.ReportingController).To(Equal("guard-test"))

	line, found := gd.log.Find(testenv.HasKey("snapshot"))
	g.Expect(found).To(BeTrue(), "no log line with the snapshot")
	g.Expect(line.Get("snapshot")).To(Equal(s.String()), "the log keeps the whole snapshot")
	g.Expect(line.Get("featureSet")).To(Equal("TechPreviewNoUpgrade"))
	g.Expect(metric(t, gd.reg, "featuregate_guard_startup_feature_set", "TechPreviewNoUpgrade")).To(Equal(1.0))
	// Watching one gate narrows restarts, never what is enabled.
	for _, a := range enabled {
		g.Expect(gd.guard.Enabled(a.Name)).To(BeTrue(), string(a.Name))
	}
	g.Expect(s.KnownFeatures()).To(HaveLen(len(enabled) + len(fg.Status.FeatureGates[0].Disabled)))
	gd.noStop(t)
}

// The required option is named when missing.
func TestNewGuardRequiresEventSource(t *testing.T) {
	g := NewWithT(t)
	_, err := featuregate.NewGuard(sharedControlPlane(t).Config, featuregate.Options{})
	g.Expect(err).To(MatchError(ContainSubstring("Options.EventSource")))
}

// One guard protects one manager.
func TestNewManagerOncePerGuard(t *testing.T) {
	g := NewWithT(t)
	gd := newGuard(t, featuregate.Options{Name: uniqueName()})
	gd.newManager(t, ctrl.Options{})
	_, err := gd.guard.NewManager(ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).To(HaveOccurred())
}
