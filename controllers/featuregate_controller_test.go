package controllers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/featuregate-operator/operator/internal/controlplane"
	"github.com/featuregate-operator/operator/internal/testharness"
	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// recordingStopper stands for featuregate.Stopper: it keeps every reason
// instead of ending the manager, so a test can see what was asked, and
// in which order.
type recordingStopper struct {
	mu      sync.Mutex
	reasons []string
}

func (s *recordingStopper) Stop(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reasons = append(s.reasons, reason)
}

func (s *recordingStopper) Reasons() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reasons...)
}

// readRecorder wraps the reconciler's cache reader and counts, per
// resourceVersion, the FeatureGates it handed out. Every Reconcile after the
// snapshot reads the FeatureGate once, before it compares, so "version V was
// read" proves a reconcile looked at V.
type readRecorder struct {
	client.Reader
	mu    sync.Mutex
	reads map[string]int
}

func (r *readRecorder) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if err == nil {
		r.mu.Lock()
		r.reads[obj.GetResourceVersion()]++
		r.mu.Unlock()
	}
	return err
}

func (r *readRecorder) Reads(resourceVersion string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads[resourceVersion]
}

// fgOperator is a manager wired as main.go wires the FeatureGate side of
// the operator, against testCP.
type fgOperator struct {
	startup *featuregate.Startup
	stopper *recordingStopper
	reads   *readRecorder
	// done receives mgr.Start's result.
	done <-chan error
}

// eventsOnly is a resync period longer than any test: only watch events
// cause reconciles, so a test proves the watch sees the update (a resync
// would hide a filter that drops it, just later).
const eventsOnly = time.Hour

var fgNames atomic.Int32

// newFeatureGateName keeps the tests on testCP apart: each watches its own
// FeatureGate, and the cache field selector sees only that one.
func newFeatureGateName() string { return fmt.Sprintf("cluster-%d", fgNames.Add(1)) }

func testClient(t *testing.T) client.Client {
	t.Helper()
	c, err := controlplane.NewClient(testCP.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fgContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
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

// apply makes the change and returns the new resourceVersion.
func (u fgUpdate) apply(ctx context.Context, t *testing.T, c client.Client, name string) string {
	t.Helper()
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
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return fg.ResourceVersion
}

func resourceVersion(ctx context.Context, t *testing.T, c client.Client, name string) string {
	t.Helper()
	fg := &configv1.FeatureGate{}
	NewWithT(t).Expect(c.Get(ctx, client.ObjectKey{Name: name}, fg)).To(Succeed())
	return fg.ResourceVersion
}

// startFGOperator builds a manager as main.go does (MapperProvider, the
// cache restricted to the one FeatureGate, SetupWithManager behind the
// startup snapshot) with a recording Stopper, starts it, and stops it when
// the test ends. A nil startup is made from mgr.GetAPIReader() and run by
// the manager, as in main.go; a given one must have taken its snapshot
// already (it can run only once).
func startFGOperator(t *testing.T, opts featuregate.Options, startup *featuregate.Startup, resync time.Duration) *fgOperator {
	t.Helper()
	g := NewWithT(t)
	mgr, err := ctrl.NewManager(testCP.Config, ctrl.Options{
		Scheme:                 controlplane.Scheme(),
		MapperProvider:         featuregate.MapperProvider,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every test builds a manager with a "featuregate" controller.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&configv1.FeatureGate{}: {Field: fields.OneTermEqualSelector("metadata.name", opts.ObjectName())},
		}},
	})
	g.Expect(err).NotTo(HaveOccurred())

	if startup == nil {
		startup = featuregate.NewStartup(mgr.GetAPIReader(), opts)
		startup.BackoffCap = 250 * time.Millisecond
		g.Expect(mgr.Add(startup)).To(Succeed())
	}
	op := &fgOperator{
		startup: startup,
		stopper: &recordingStopper{},
		reads:   &readRecorder{Reader: mgr.GetClient(), reads: map[string]int{}},
	}
	r := &FeatureGateReconciler{
		Client:       op.reads,
		Snapshots:    startup,
		Options:      opts,
		Stopper:      op.stopper,
		Recorder:     mgr.GetEventRecorder("featuregate-operator"),
		ResyncPeriod: resync,
	}
	g.Expect(r.SetupWithManager(mgr, startup, time.Minute)).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		done <- mgr.Start(ctx)
	}()
	op.done = done
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(time.Minute):
			t.Error("manager did not stop within a minute")
		}
	})
	return op
}

// reconciled waits until a reconcile has read resourceVersion rv.
func (op *fgOperator) reconciled(t *testing.T, rv string) {
	t.Helper()
	NewWithT(t).Eventually(func() int { return op.reads.Reads(rv) }).
		WithTimeout(time.Minute).Should(BeNumerically(">", 0), "no reconcile read resourceVersion %s", rv)
}

// firstReason waits for the first shutdown request and returns its reason.
func (op *fgOperator) firstReason(t *testing.T) string {
	t.Helper()
	var reasons []string
	NewWithT(t).Eventually(func() []string {
		reasons = op.stopper.Reasons()
		return reasons
	}).WithTimeout(time.Minute).ShouldNot(BeEmpty(), "the reconciler never asked for a shutdown")
	return reasons[0]
}

// fgEvent finds the events.k8s.io/v1 Event with reason about FeatureGate
// name; nil while there is none.
func fgEvent(ctx context.Context, c client.Client, name, reason string) func() (*eventsv1.Event, error) {
	return func() (*eventsv1.Event, error) {
		list := &eventsv1.EventList{}
		if err := c.List(ctx, list); err != nil {
			return nil, err
		}
		for i, e := range list.Items {
			if e.Regarding.Kind == "FeatureGate" && e.Regarding.Name == name && e.Reason == reason {
				return &list.Items[i], nil
			}
		}
		return nil, nil
	}
}

// The whole point: the snapshot says Default, the cluster is switched to
// TechPreviewNoUpgrade, and the operator asks to restart, saying why, in its
// log and in an Event on the FeatureGate.
func TestFeatureGateChangeRequestsShutdown(t *testing.T) {
	g := NewWithT(t)
	ctx := fgContext(t)
	c := testClient(t)
	name := newFeatureGateName()
	testharness.CreateSharedFeatureGate(t, c, controlplane.FeatureGate(configv1.Default, controlplane.Named(name)))

	op := startFGOperator(t, featuregate.Options{Name: name}, nil, eventsOnly)
	g.Eventually(op.startup.Taken()).WithTimeout(time.Minute).Should(BeClosed())
	snap, _ := op.startup.Snapshot()
	g.Expect(snap.FeatureSetName()).To(Equal("Default"))
	op.reconciled(t, resourceVersion(ctx, t, c, name))
	g.Expect(op.stopper.Reasons()).To(BeEmpty(), "the first reconcile found a difference in an unchanged FeatureGate")

	specUpdate(func(fg *configv1.FeatureGate) { fg.Spec.FeatureSet = configv1.TechPreviewNoUpgrade }).apply(ctx, t, c, name)
	g.Expect(op.firstReason(t)).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))

	var event *eventsv1.Event
	g.Eventually(func() (*eventsv1.Event, error) {
		var err error
		event, err = fgEvent(ctx, c, name, ReasonFeatureGateChanged)()
		return event, err
	}).WithTimeout(time.Minute).ShouldNot(BeNil())
	g.Expect(event.Type).To(Equal(corev1.EventTypeWarning))
	g.Expect(event.Note).To(Equal("feature set changed from Default to TechPreviewNoUpgrade; requesting shutdown"))
	g.Expect(event.Regarding.APIVersion).To(Equal(configv1.GroupVersion.String()))
	g.Expect(event.ReportingController).To(Equal("featuregate-operator"))
	g.Consistently(op.done).WithTimeout(time.Second).ShouldNot(Receive(), "the manager must end only through the Stopper")
}

// Updates that change nothing the snapshot holds must not restart the
// operator. Each case proves its update was reconciled, then makes a real
// change: the first reason the Stopper hears must be that change, so a
// wrong reaction to the no-op update (which was reconciled first, on the
// same queue) would be the first reason instead.
func TestNoOpUpdatesDoNotRequestShutdown(t *testing.T) {
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
			name: "label added",
			fg: func(name string) *configv1.FeatureGate {
				return controlplane.FeatureGate(configv1.Default, controlplane.Named(name))
			},
			noop: specUpdate(func(fg *configv1.FeatureGate) { fg.Labels = map[string]string{"team": "x"} }),
			change: specUpdate(func(fg *configv1.FeatureGate) {
				fg.Spec.FeatureSet = configv1.TechPreviewNoUpgrade
			}),
			want: "feature set changed from Default to TechPreviewNoUpgrade",
		},
		{
			name: "annotation added",
			fg: func(name string) *configv1.FeatureGate {
				return controlplane.FeatureGate(configv1.TechPreviewNoUpgrade, controlplane.Named(name))
			},
			noop: specUpdate(func(fg *configv1.FeatureGate) {
				fg.Annotations = map[string]string{"include.release.openshift.io/self-managed-high-availability": "true"}
			}),
			change: specUpdate(func(fg *configv1.FeatureGate) {
				fg.Spec.CustomNoUpgrade = &configv1.CustomFeatureGates{Enabled: controlplane.GateNames("X")}
			}),
			want: "customNoUpgrade.enabled added [X]",
		},
		{
			name: "customNoUpgrade lists reordered",
			fg: func(name string) *configv1.FeatureGate {
				fg := controlplane.FeatureGate(configv1.CustomNoUpgrade, controlplane.Named(name))
				fg.Spec.CustomNoUpgrade = &configv1.CustomFeatureGates{Enabled: controlplane.GateNames("A", "B", "C"), Disabled: controlplane.GateNames("D", "E")}
				return fg
			},
			noop: specUpdate(func(fg *configv1.FeatureGate) {
				fg.Spec.CustomNoUpgrade = &configv1.CustomFeatureGates{Enabled: controlplane.GateNames("C", "A", "B"), Disabled: controlplane.GateNames("E", "D")}
			}),
			change: specUpdate(func(fg *configv1.FeatureGate) {
				fg.Spec.CustomNoUpgrade.Disabled = append(fg.Spec.CustomNoUpgrade.Disabled, "F")
			}),
			want: "customNoUpgrade.disabled added [F]",
		},
		{
			name: "status entry for another version changed",
			opts: featuregate.Options{Version: version},
			fg: func(name string) *configv1.FeatureGate {
				fg := controlplane.FeatureGate(configv1.Default, controlplane.Named(name))
				fg.Status.FeatureGates = []configv1.FeatureGateDetails{
					{Version: "4.10.0", Enabled: controlplane.GateAttributes("GateA"), Disabled: controlplane.GateAttributes("GateB")},
					{Version: version, Enabled: controlplane.GateAttributes("GateA"), Disabled: controlplane.GateAttributes("GateB")},
				}
				return fg
			},
			noop: statusUpdate(func(fg *configv1.FeatureGate) {
				old := statusEntry(fg, "4.10.0")
				old.Enabled, old.Disabled = controlplane.GateAttributes("GateB"), controlplane.GateAttributes("GateA")
				*statusEntry(fg, "4.12.0") = configv1.FeatureGateDetails{Version: "4.12.0", Enabled: controlplane.GateAttributes("GateC")}
			}),
			change: statusUpdate(func(fg *configv1.FeatureGate) {
				ours := statusEntry(fg, version)
				ours.Enabled, ours.Disabled = nil, controlplane.GateAttributes("GateA", "GateB")
			}),
			want: "gate GateA enabled -> disabled in status for version 4.11.0",
		},
		{
			name: "unwatched gate changed for our version",
			opts: featuregate.Options{Version: version, WatchedGates: []string{"GateA"}},
			fg: func(name string) *configv1.FeatureGate {
				fg := controlplane.FeatureGate(configv1.Default, controlplane.Named(name))
				fg.Status.FeatureGates = []configv1.FeatureGateDetails{{Version: version, Enabled: controlplane.GateAttributes("GateA", "GateB")}}
				return fg
			},
			noop: statusUpdate(func(fg *configv1.FeatureGate) {
				ours := statusEntry(fg, version)
				ours.Enabled, ours.Disabled = controlplane.GateAttributes("GateA"), controlplane.GateAttributes("GateB")
			}),
			change: statusUpdate(func(fg *configv1.FeatureGate) {
				ours := statusEntry(fg, version)
				ours.Enabled, ours.Disabled = nil, controlplane.GateAttributes("GateA", "GateB")
			}),
			want: "gate GateA enabled -> disabled in status for version 4.11.0",
		},
		{
			name: "status condition added",
			fg: func(name string) *configv1.FeatureGate {
				return controlplane.FeatureGate(configv1.Default, controlplane.Named(name))
			},
			noop: statusUpdate(func(fg *configv1.FeatureGate) {
				fg.Status.Conditions = []metav1.Condition{{
					Type: "DeterminationDegraded", Status: metav1.ConditionFalse, Reason: "AsExpected",
					LastTransitionTime: metav1.Now(),
				}}
			}),
			change: specUpdate(func(fg *configv1.FeatureGate) {
				fg.Spec.FeatureSet = configv1.DevPreviewNoUpgrade
			}),
			want: "feature set changed from Default to DevPreviewNoUpgrade",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := fgContext(t)
			c := testClient(t)
			name := newFeatureGateName()
			opts := tt.opts
			opts.Name = name
			testharness.CreateSharedFeatureGate(t, c, tt.fg(name))

			op := startFGOperator(t, opts, nil, eventsOnly)
			g.Eventually(op.startup.Taken()).WithTimeout(time.Minute).Should(BeClosed())
			op.reconciled(t, resourceVersion(ctx, t, c, name))

			op.reconciled(t, tt.noop.apply(ctx, t, c, name))
			g.Expect(op.stopper.Reasons()).To(BeEmpty())

			tt.change.apply(ctx, t, c, name)
			g.Expect(op.firstReason(t)).To(Equal(tt.want))
		})
	}
}

// The gate lists live in status, whose updates leave metadata.generation
// alone: a GenerationChangedPredicate would never see this change.
func TestStatusOnlyChangeRequestsShutdown(t *testing.T) {
	g := NewWithT(t)
	ctx := fgContext(t)
	c := testClient(t)
	name := newFeatureGateName()
	const version = "4.11.0"
	fg := controlplane.FeatureGate(configv1.TechPreviewNoUpgrade, controlplane.Named(name))
	fg.Status.FeatureGates = []configv1.FeatureGateDetails{{Version: version, Enabled: controlplane.GateAttributes("GateA"), Disabled: controlplane.GateAttributes("GateB")}}
	testharness.CreateSharedFeatureGate(t, c, fg)
	generation := fg.Generation

	op := startFGOperator(t, featuregate.Options{Name: name, Version: version, WatchedGates: []string{"GateA"}}, nil, eventsOnly)
	g.Eventually(op.startup.Taken()).WithTimeout(time.Minute).Should(BeClosed())
	snap, _ := op.startup.Snapshot()
	g.Expect(snap.EnabledGates()).To(Equal([]string{"GateA"}))
	op.reconciled(t, resourceVersion(ctx, t, c, name))

	statusUpdate(func(fg *configv1.FeatureGate) {
		ours := statusEntry(fg, version)
		ours.Enabled, ours.Disabled = nil, controlplane.GateAttributes("GateA", "GateB")
	}).apply(ctx, t, c, name)
	g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, fg)).To(Succeed())
	g.Expect(fg.Generation).To(Equal(generation), "a status update changed the generation: this test proves nothing")

	g.Expect(op.firstReason(t)).To(Equal("gate GateA enabled -> disabled in status for version 4.11.0"))
}

// The bug in the seed: the startup read saw Default, the cluster became
// TechPreviewNoUpgrade before the watch started, and an edge-triggered
// controller never noticed. Here the first reconcile is a comparison, so it
// does.
func TestChangeBetweenReadAndWatchIsCaught(t *testing.T) {
	g := NewWithT(t)
	ctx := fgContext(t)
	c := testClient(t)
	name := newFeatureGateName()
	testharness.CreateSharedFeatureGate(t, c, controlplane.FeatureGate(configv1.Default, controlplane.Named(name)))
	opts := featuregate.Options{Name: name}

	// The startup read, before the manager (and so the watch) exists.
	startup := featuregate.NewStartup(c, opts)
	g.Expect(startup.Start(ctx)).To(Succeed())
	snap, ok := startup.Snapshot()
	g.Expect(ok).To(BeTrue())
	g.Expect(snap.FeatureSetName()).To(Equal("Default"))

	specUpdate(func(fg *configv1.FeatureGate) { fg.Spec.FeatureSet = configv1.TechPreviewNoUpgrade }).apply(ctx, t, c, name)

	op := startFGOperator(t, opts, startup, eventsOnly)
	g.Expect(op.firstReason(t)).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))
}

// Before the snapshot there is nothing to compare with: requeue, never stop.
// (The controller starts only after the snapshot; this is the guard behind
// that.)
func TestReconcileBeforeSnapshotRequeues(t *testing.T) {
	g := NewWithT(t)
	ctx := fgContext(t)
	c := testClient(t)
	name := newFeatureGateName()
	testharness.CreateSharedFeatureGate(t, c, controlplane.FeatureGate(configv1.TechPreviewNoUpgrade, controlplane.Named(name)))
	opts := featuregate.Options{Name: name}
	stopper := &recordingStopper{}
	r := &FeatureGateReconciler{
		Client:       c,
		Snapshots:    featuregate.NewStartup(c, opts), // never started: no snapshot
		Options:      opts,
		Stopper:      stopper,
		ResyncPeriod: time.Minute,
	}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	g.Expect(stopper.Reasons()).To(BeEmpty())
}

// A deleted FeatureGate cannot be read by a new process either: warn and
// keep the snapshot.
func TestFeatureGateDeletedKeepsRunning(t *testing.T) {
	g := NewWithT(t)
	ctx := fgContext(t)
	c := testClient(t)
	name := newFeatureGateName()
	fg := controlplane.FeatureGate(configv1.TechPreviewNoUpgrade, controlplane.Named(name))
	testharness.CreateSharedFeatureGate(t, c, fg)

	op := startFGOperator(t, featuregate.Options{Name: name}, nil, eventsOnly)
	g.Eventually(op.startup.Taken()).WithTimeout(time.Minute).Should(BeClosed())
	op.reconciled(t, resourceVersion(ctx, t, c, name))

	g.Expect(c.Delete(ctx, fg)).To(Succeed())
	var event *eventsv1.Event
	g.Eventually(func() (*eventsv1.Event, error) {
		var err error
		event, err = fgEvent(ctx, c, name, ReasonFeatureGateDeleted)()
		return event, err
	}).WithTimeout(time.Minute).ShouldNot(BeNil())
	g.Expect(event.Type).To(Equal(corev1.EventTypeWarning))
	g.Expect(event.Note).To(Equal(fmt.Sprintf("FeatureGate %s was deleted; keeping startup feature set TechPreviewNoUpgrade", name)))
	// The Event is recorded in the reconcile that saw the deletion, which
	// asked nothing of the Stopper.
	g.Expect(op.stopper.Reasons()).To(BeEmpty())
	g.Expect(op.done).NotTo(Receive(), "the manager stopped")
}

// Equality requeues after the resync period, so a change a broken watch
// missed is still found; in a running manager that means the comparison
// repeats without any event.
func TestResyncRequeuesOnEquality(t *testing.T) {
	g := NewWithT(t)
	ctx := fgContext(t)
	c := testClient(t)
	name := newFeatureGateName()
	testharness.CreateSharedFeatureGate(t, c, controlplane.FeatureGate(configv1.Default, controlplane.Named(name)))
	opts := featuregate.Options{Name: name}

	startup := featuregate.NewStartup(c, opts)
	g.Expect(startup.Start(ctx)).To(Succeed())
	stopper := &recordingStopper{}
	r := &FeatureGateReconciler{Client: c, Snapshots: startup, Options: opts, Stopper: stopper, ResyncPeriod: time.Second}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(ctrl.Result{RequeueAfter: time.Second}))
	g.Expect(stopper.Reasons()).To(BeEmpty())

	op := startFGOperator(t, opts, nil, time.Second)
	rv := resourceVersion(ctx, t, c, name)
	g.Eventually(func() int { return op.reads.Reads(rv) }).WithTimeout(time.Minute).Should(BeNumerically(">=", 3),
		"the unchanged FeatureGate was not compared again every second")
	g.Expect(op.stopper.Reasons()).To(BeEmpty())
}
