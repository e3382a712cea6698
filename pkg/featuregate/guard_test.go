package featuregate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/featuregate-operator/operator/internal/controlplane"
	"github.com/featuregate-operator/operator/internal/testharness"
	"github.com/featuregate-operator/operator/pkg/featuregate"
)

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

// guarded is a manager built around a Guard, as an operator's main builds
// it, on the shared control plane. Its Cancel only counts: the manager
// keeps running, so a test sees what happens after a stop is asked for.
type guarded struct {
	guard   *featuregate.Guard
	reads   *readRecorder
	cancels atomic.Int32
	changes chan featuregate.Change
	// done receives mgr.Start's result.
	done chan error
}

// eventsOnly is a resync period longer than any test: only watch events
// cause reconciles, so a test proves the watch sees the update (a resync
// would hide a filter that drops it, just later).
const eventsOnly = time.Hour

// newGuard builds the guard with the test's defaults; opts may set more.
func newGuard(t *testing.T, opts featuregate.Options) (*guarded, *featuregate.Guard) {
	t.Helper()
	gd := &guarded{changes: make(chan featuregate.Change, 10), done: make(chan error, 1)}
	opts.EventSource = "guard-test"
	opts.Cancel = func() { gd.cancels.Add(1) }
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	opts.BackoffCap = 250 * time.Millisecond
	opts.OnChange = func(c featuregate.Change) { gd.changes <- c }
	if opts.ResyncPeriod == 0 {
		opts.ResyncPeriod = eventsOnly
	}
	g, err := featuregate.NewGuard(sharedControlPlane(t).Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	gd.guard = g
	return gd, g
}

// startGuarded builds and starts the manager, stopped when the test ends.
func startGuarded(t *testing.T, opts featuregate.Options) *guarded {
	t.Helper()
	gd, g := newGuard(t, opts)
	mgr := guardedManager(t, g)
	gd.reads = &readRecorder{reads: map[string]int{}}
	NewWithT(t).Expect(featuregate.SetupWithReader(g, mgr, func(r client.Reader) client.Reader {
		gd.reads.Reader = r
		return gd.reads
	})).To(Succeed())
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
	return gd
}

func guardedManager(t *testing.T, g *featuregate.Guard) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(g.RESTConfig(), g.ManagerOptions(ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every test builds a manager with a "featuregate" controller.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}))
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// reconciled waits until a reconcile has read resourceVersion rv.
func (gd *guarded) reconciled(t *testing.T, rv string) {
	t.Helper()
	NewWithT(t).Eventually(func() int { return gd.reads.Reads(rv) }).
		WithTimeout(time.Minute).Should(BeNumerically(">", 0), "no reconcile read resourceVersion %s", rv)
}

// firstChange waits for the stop request and returns the change behind it.
func (gd *guarded) firstChange(t *testing.T) featuregate.Change {
	t.Helper()
	var c featuregate.Change
	NewWithT(t).Eventually(gd.changes).WithTimeout(time.Minute).Should(Receive(&c), "the guard never asked for a shutdown")
	return c
}

// firstReason waits for the stop request and returns its reason.
func (gd *guarded) firstReason(t *testing.T) string {
	t.Helper()
	gd.firstChange(t)
	reason, ok := gd.guard.StopReason()
	NewWithT(t).Expect(ok).To(BeTrue())
	NewWithT(t).Eventually(gd.cancels.Load).Should(BeNumerically("==", 1), "the Stopper did not cancel the manager's context")
	return reason
}

// noStop asserts nothing asked for a stop.
func (gd *guarded) noStop(t *testing.T) {
	t.Helper()
	_, ok := gd.guard.StopReason()
	NewWithT(t).Expect(ok).To(BeFalse(), "a stop was requested")
}

func (gd *guarded) taken(t *testing.T) featuregate.Snapshot {
	t.Helper()
	NewWithT(t).Eventually(gd.guard.Taken()).WithTimeout(time.Minute).Should(BeClosed())
	s, _ := gd.guard.Snapshot()
	return s
}

func newFG(name string, set configv1.FeatureSet) *configv1.FeatureGate {
	return featureGate(set, controlplane.Named(name))
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

func toTechPreview(fg *configv1.FeatureGate) { fg.Spec.FeatureSet = configv1.TechPreviewNoUpgrade }

func resourceVersion(ctx context.Context, t *testing.T, c client.Client, name string) string {
	t.Helper()
	fg := &configv1.FeatureGate{}
	NewWithT(t).Expect(c.Get(ctx, client.ObjectKey{Name: name}, fg)).To(Succeed())
	return fg.ResourceVersion
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

func waitEvent(ctx context.Context, t *testing.T, c client.Client, name, reason string) *eventsv1.Event {
	t.Helper()
	var event *eventsv1.Event
	NewWithT(t).Eventually(func() (*eventsv1.Event, error) {
		var err error
		event, err = fgEvent(ctx, c, name, reason)()
		return event, err
	}).WithTimeout(time.Minute).ShouldNot(BeNil(), "no %s Event on FeatureGate %s", reason, name)
	return event
}

func testClient(t *testing.T) client.Client {
	t.Helper()
	c, err := controlplane.NewClient(sharedControlPlane(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The whole point: the snapshot says Default, the cluster is switched to
// TechPreviewNoUpgrade, and the guard asks to restart, saying why, in an
// Event on the FeatureGate, its metric and the caller's hook.
func TestGuardFeatureGateChangeRequestsShutdown(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testharness.CreateSharedFeatureGate(t, c, newFG(name, configv1.Default))

	gd := startGuarded(t, featuregate.Options{Name: name})
	g.Expect(gd.taken(t).FeatureSetName()).To(Equal("Default"))
	gd.reconciled(t, resourceVersion(ctx, t, c, name))
	gd.noStop(t)

	specUpdate(toTechPreview).apply(ctx, t, c, name)
	g.Expect(gd.firstReason(t)).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))

	event := waitEvent(ctx, t, c, name, featuregate.ReasonFeatureGateChanged)
	g.Expect(event.Type).To(Equal(corev1.EventTypeWarning))
	g.Expect(event.Note).To(Equal("feature set changed from Default to TechPreviewNoUpgrade; requesting shutdown"))
	g.Expect(event.Regarding.APIVersion).To(Equal(configv1.GroupVersion.String()))
	g.Expect(event.ReportingController).To(Equal("guard-test"), "the caller names the Event source")
	g.Consistently(gd.done).WithTimeout(time.Second).ShouldNot(Receive(), "the manager must end only through Cancel")
	g.Expect(gd.guard.StopRequested()).To(BeClosed())
}

// Updates that change nothing the snapshot holds must not restart the
// operator. Each case proves its update was reconciled, then makes a real
// change: the first reason must be that change, so a wrong reaction to the
// no-op update (which was reconciled first, on the same queue) would be the
// first reason instead.
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
			name: "annotation added",
			fg:   func(name string) *configv1.FeatureGate { return newFG(name, configv1.TechPreviewNoUpgrade) },
			noop: specUpdate(func(fg *configv1.FeatureGate) {
				fg.Annotations = map[string]string{"include.release.openshift.io/self-managed-high-availability": "true"}
			}),
			change: specUpdate(func(fg *configv1.FeatureGate) {
				fg.Spec.CustomNoUpgrade = &configv1.CustomFeatureGates{Enabled: []configv1.FeatureGateName{"X"}}
			}),
			want: "customNoUpgrade.enabled added [X]",
		},
		{
			name: "customNoUpgrade lists reordered",
			fg: func(name string) *configv1.FeatureGate {
				return featureGate(configv1.CustomNoUpgrade, custom([]string{"A", "B", "C"}, []string{"D", "E"}), controlplane.Named(name))
			},
			noop: specUpdate(custom([]string{"C", "A", "B"}, []string{"E", "D"})),
			change: specUpdate(func(fg *configv1.FeatureGate) {
				fg.Spec.CustomNoUpgrade.Disabled = append(fg.Spec.CustomNoUpgrade.Disabled, "F")
			}),
			want: "customNoUpgrade.disabled added [F]",
		},
		{
			name: "status entry for another version changed",
			opts: featuregate.Options{Version: version},
			fg: func(name string) *configv1.FeatureGate {
				return featureGate("", status("4.10.0", []string{"GateA"}, []string{"GateB"}), status(version, []string{"GateA"}, []string{"GateB"}),
					controlplane.Named(name))
			},
			noop: statusUpdate(func(fg *configv1.FeatureGate) {
				*statusEntry(fg, "4.10.0") = details("4.10.0", []string{"GateB"}, []string{"GateA"})
				*statusEntry(fg, "4.12.0") = details("4.12.0", []string{"GateC"}, nil)
			}),
			change: statusUpdate(func(fg *configv1.FeatureGate) {
				*statusEntry(fg, version) = details(version, nil, []string{"GateA", "GateB"})
			}),
			want: "gate GateA enabled -> disabled in status for version 4.11.0",
		},
		{
			name: "unwatched gate changed for our version",
			opts: featuregate.Options{Version: version, WatchedGates: []configv1.FeatureGateName{"GateA"}},
			fg: func(name string) *configv1.FeatureGate {
				return featureGate("", status(version, []string{"GateA", "GateB"}, nil), controlplane.Named(name))
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
			testharness.CreateSharedFeatureGate(t, c, tt.fg(name))

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
// alone: a GenerationChangedPredicate would never see this change.
func TestGuardStatusOnlyChangeRequestsShutdown(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	const version = "4.11.0"
	fg := featureGate(configv1.TechPreviewNoUpgrade, status(version, []string{"GateA"}, []string{"GateB"}), controlplane.Named(name))
	testharness.CreateSharedFeatureGate(t, c, fg)
	generation := fg.Generation

	gd := startGuarded(t, featuregate.Options{Name: name, Version: version, WatchedGates: []configv1.FeatureGateName{"GateA"}})
	g.Expect(gd.taken(t).EnabledGates()).To(Equal([]configv1.FeatureGateName{"GateA"}))
	gd.reconciled(t, resourceVersion(ctx, t, c, name))

	statusUpdate(func(fg *configv1.FeatureGate) {
		*statusEntry(fg, version) = details(version, nil, []string{"GateA", "GateB"})
	}).apply(ctx, t, c, name)
	g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, fg)).To(Succeed())
	g.Expect(fg.Generation).To(Equal(generation), "a status update changed the generation: this test proves nothing")

	change := gd.firstChange(t)
	g.Expect(change.Diff).To(Equal([]string{"gate GateA enabled -> disabled in status for version 4.11.0"}))
	g.Expect(change.DetectedBy).To(Equal("reconcile"))
}

// The bug in the seed: the startup read saw Default, the cluster became
// TechPreviewNoUpgrade before the watch started, and an edge-triggered
// controller never noticed. Here the change is made by OnSnapshot, after the
// read and before anything waiting for the snapshot (the watch) starts; the
// first reconcile is a comparison, so it is caught.
func TestGuardChangeBetweenReadAndWatchIsCaught(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testharness.CreateSharedFeatureGate(t, c, newFG(name, configv1.Default))

	gd := startGuarded(t, featuregate.Options{Name: name, OnSnapshot: func(s featuregate.Snapshot) {
		if s.FeatureSetName() == "Default" {
			specUpdate(toTechPreview).apply(ctx, t, c, name)
		}
	}})
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
	testharness.CreateSharedFeatureGate(t, c, newFG(name, configv1.TechPreviewNoUpgrade))
	gd, guard := newGuard(t, featuregate.Options{Name: name})
	g.Expect(guard.SetupWithManager(guardedManager(t, guard))).To(Succeed()) // never started: no snapshot

	res, err := featuregate.ReconcilerOf(guard).Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	gd.noStop(t)
	current, err := guard.Current(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(current).To(BeFalse(), "no snapshot: nothing may act")
}

// A deleted FeatureGate cannot be read by a new process either: warn and
// keep the snapshot.
func TestGuardFeatureGateDeletedKeepsRunning(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	fg := newFG(name, configv1.TechPreviewNoUpgrade)
	testharness.CreateSharedFeatureGate(t, c, fg)

	gd := startGuarded(t, featuregate.Options{Name: name})
	gd.taken(t)
	gd.reconciled(t, resourceVersion(ctx, t, c, name))

	g.Expect(c.Delete(ctx, fg)).To(Succeed())
	event := waitEvent(ctx, t, c, name, featuregate.ReasonFeatureGateDeleted)
	g.Expect(event.Type).To(Equal(corev1.EventTypeWarning))
	g.Expect(event.Note).To(Equal(fmt.Sprintf("FeatureGate %s was deleted; keeping startup feature set TechPreviewNoUpgrade", name)))
	gd.noStop(t)
	g.Expect(gd.done).NotTo(Receive(), "the manager stopped")
	current, err := gd.guard.Current(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(current).To(BeTrue(), "the snapshot is all there is")
}

// Equality requeues after the resync period, so a change a broken watch
// missed is still found; in a running manager the comparison repeats
// without any event.
func TestGuardResyncRequeuesOnEquality(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testharness.CreateSharedFeatureGate(t, c, newFG(name, configv1.Default))

	gd := startGuarded(t, featuregate.Options{Name: name, ResyncPeriod: time.Second})
	gd.taken(t)
	res, err := featuregate.ReconcilerOf(gd.guard).Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(ctrl.Result{RequeueAfter: time.Second}))

	rv := resourceVersion(ctx, t, c, name)
	g.Eventually(func() int { return gd.reads.Reads(rv) }).WithTimeout(time.Minute).Should(BeNumerically(">=", 3),
		"the unchanged FeatureGate was not compared again every second")
	gd.noStop(t)
}

// Current is the last look before acting: it sees a change the watch may
// not have delivered yet, and asks for the stop itself.
func TestGuardCurrent(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testharness.CreateSharedFeatureGate(t, c, newFG(name, configv1.Default))

	gd := startGuarded(t, featuregate.Options{Name: name})
	gd.taken(t)
	current, err := gd.guard.Current(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(current).To(BeTrue())

	specUpdate(toTechPreview).apply(ctx, t, c, name)
	g.Eventually(func() (bool, error) { return gd.guard.Current(ctx) }).WithTimeout(time.Minute).Should(BeFalse())
	g.Expect(gd.guard.StopRequested()).To(BeClosed())
	// Once a stop is asked for, nothing is current any more.
	current, err = gd.guard.Current(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(current).To(BeFalse())
}

// The verifier, alone: once the alarm is raised (a failed request or watch)
// it reads live and compares, without waiting for the watch to resume.
func TestGuardVerifierReadsLiveAfterAlarm(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testharness.CreateSharedFeatureGate(t, c, newFG(name, configv1.Default))
	gd, guard := newGuard(t, featuregate.Options{Name: name, VerifyInterval: 50 * time.Millisecond})
	g.Expect(featuregate.StartStartup(ctx, guard)).To(Succeed())
	g.Expect(guard.Taken()).To(BeClosed())

	vctx, stop := context.WithCancel(ctx)
	done := runAsync(vctx, func(ctx context.Context) error { return featuregate.StartVerifier(ctx, guard) })
	t.Cleanup(func() { stop(); <-done })

	// Without an alarm the verifier reads nothing: the change waits.
	specUpdate(toTechPreview).apply(ctx, t, c, name)
	g.Consistently(gd.changes).WithTimeout(500 * time.Millisecond).ShouldNot(Receive())

	featuregate.RaiseAlarm(guard)
	change := gd.firstChange(t)
	g.Expect(change.DetectedBy).To(Equal("verify"))
	g.Expect(change.Diff).To(Equal([]string{"feature set changed from Default to TechPreviewNoUpgrade"}))
	g.Expect(change.Live.FeatureSetName()).To(Equal("TechPreviewNoUpgrade"))
	g.Expect(guard.StopRequested()).To(BeClosed())
}

// A real payload's gate list: the StartupSnapshot Event is bounded to what
// the API server accepts, the log and the metric keep the whole snapshot,
// and Enabled answers from it.
func TestGuardStartupSnapshotOfARealPayload(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	api, err := controlplane.OpenShiftAPIDir()
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
	testharness.CreateSharedFeatureGate(t, c, fg)

	reg := prometheus.NewRegistry()
	gd, guard := newGuard(t, featuregate.Options{Name: name, Version: version, Registry: reg, MetricsNamespace: "consumer",
		WatchedGates: []configv1.FeatureGateName{enabled[0].Name}})
	g.Expect(featuregate.StartStartup(ctx, guard)).To(Succeed())
	s, ok := guard.Snapshot()
	g.Expect(ok).To(BeTrue())
	g.Expect(len(s.String())).To(BeNumerically(">", featuregate.NoteLimit), "the snapshot must not fit a note, or this proves nothing")

	event := waitEvent(ctx, t, c, name, featuregate.ReasonStartupSnapshot)
	g.Expect(event.Type).To(Equal(corev1.EventTypeNormal))
	g.Expect(len(event.Note)).To(BeNumerically("<=", featuregate.NoteLimit))
	g.Expect(event.Note).To(HavePrefix("Startup feature set TechPreviewNoUpgrade (version " + version + ": enabled ["))
	g.Expect(event.ReportingController).To(Equal("guard-test"))

	g.Expect(gauge(t, reg, "consumer_startup_feature_set", "TechPreviewNoUpgrade")).To(Equal(1.0))
	// Watching one gate narrows restarts, never what is enabled.
	for _, a := range enabled {
		g.Expect(guard.Enabled(a.Name)).To(BeTrue(), string(a.Name))
	}
	g.Expect(guard.KnownFeatures()).To(HaveLen(len(enabled) + len(fg.Status.FeatureGates[0].Disabled)))
	gd.noStop(t)
}

// gauge is the value of the gauge name with the one label value, among
// what reg gathers.
func gauge(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == name && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{%s} among what was gathered", name, label)
	return 0
}

// The required options are named when missing.
func TestNewGuardRequiresIdentityAndCancel(t *testing.T) {
	g := NewWithT(t)
	_, err := featuregate.NewGuard(sharedControlPlane(t).Config, featuregate.Options{})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(And(ContainSubstring("Options.EventSource"), ContainSubstring("Options.Cancel")))
}

// BoundNote keeps notes the API server accepts, cutting on a rune boundary.
func TestBoundNote(t *testing.T) {
	g := NewWithT(t)
	g.Expect(featuregate.BoundNote("short")).To(Equal("short"))
	exact := strings.Repeat("a", featuregate.NoteLimit)
	g.Expect(featuregate.BoundNote(exact)).To(Equal(exact))
	long := strings.Repeat("é", featuregate.NoteLimit)
	bounded := featuregate.BoundNote(long)
	g.Expect(len(bounded)).To(BeNumerically("<=", featuregate.NoteLimit))
	g.Expect(bounded).To(HaveSuffix("…"))
	g.Expect(strings.ToValidUTF8(bounded, "?")).To(Equal(bounded), "cut inside a rune")
}
