package controllers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// FieldManager owns every field the operator applies.
const FieldManager = "featuregate-operator"

// EventSource is the reporting controller of the operator's Events.
const EventSource = "featuregate-operator"

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ForceAnnotation, set to "true" on a manifest, takes fields over from other
// managers on apply; without it a conflict is an error to report.
const ForceAnnotation = "featuregate-operator.io/force-ownership"

// What the payload's objects need is not declared here: `manager manifests
// --rbac` derives it from the payload itself (config/payload/role.yaml), so
// the operator may write exactly the objects it ships and nothing else.

// FeatureGate is what the Applier needs of the featuregate.Guard: the
// snapshot it acts on, the last look before each action, and the stop.
type FeatureGate interface {
	Snapshot() (featuregate.Snapshot, bool)
	Current(ctx context.Context) (bool, error)
	StopRequested() <-chan struct{}
}

// Applier applies, with server-side apply, the manifests of a directory that
// the startup snapshot includes, and reports the outcome on a
// ClusterOperator. It is level-triggered: every resync applies everything
// again, which corrects drift, and a run with failures is retried sooner,
// with backoff. It only ever acts on the startup snapshot, and asks the
// FeatureGate whether it still holds before each run level, so that nothing
// the new feature set excludes is applied while a restart is pending.
type Applier struct {
	Client      client.Client
	FeatureGate FeatureGate
	Recorder    events.EventRecorder
	Status      *StatusReporter

	Dir          string
	Profile      string
	ResyncPeriod time.Duration
	// Parallelism bounds concurrent applies within a run level.
	Parallelism int
}

// NeedLeaderElection is true: one replica applies.
func (a *Applier) NeedLeaderElection() bool { return true }

// Start applies until ctx ends or a stop is requested. Wrap it in
// Startup.AfterSnapshot.
func (a *Applier) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("apply")
	snap, ok := a.FeatureGate.Snapshot()
	if !ok {
		return errors.New("applier started without a snapshot")
	}
	if name := snap.FeatureSetName(); !knownFeatureSet(name) {
		log.Info("Warning: unknown feature set; upgrades are blocked", "featureSet", name)
		if a.Recorder != nil && a.Status != nil {
			ref := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: a.Status.Name}}
			ref.SetGroupVersionKind(configv1.GroupVersion.WithKind("ClusterOperator"))
			a.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonUnknownFeatureSet, "Snapshot", "%s",
				featuregate.BoundNote(fmt.Sprintf("feature set %q is not one this operator knows; Upgradeable=False", name)))
		}
	}
	retry := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: a.ResyncPeriod}
	for {
		run := a.Apply(ctx, snap)
		if !run.Aborted {
			a.record(ctx, snap, run)
		}
		delay := a.ResyncPeriod
		if len(run.Failed) > 0 {
			delay = min(retry.Step(), a.ResyncPeriod)
		} else {
			retry.Duration = time.Second
		}
		log.Info("Manifests applied", "featureSet", snap.FeatureSetName(), "applied", len(run.Applied), "failed", len(run.Failed), "invalid", len(run.Invalid), "excluded", run.Excluded, "skipped", run.Skipped, "duration", run.Duration.String(), "next", delay.String())
		// A run's garbage (every manifest decoded, every request body) is
		// most of the heap, and the process idles until the next run: hand
		// it back now rather than at the scavenger's pace.
		debug.FreeOSMemory()
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-a.FeatureGate.StopRequested():
			timer.Stop()
			log.Info("Stop requested; no more manifests are applied")
			return nil
		case <-timer.C:
		}
	}
}

// Run is the outcome of one pass over the directory.
type Run struct {
	Applied  []manifest.Manifest
	Failed   []error
	Invalid  []error
	Excluded int
	Skipped  int
	Duration time.Duration
	// Aborted is set when a stop was requested, or the FeatureGate no longer
	// matches the snapshot, before the run finished.
	Aborted bool
}

// Apply makes one pass: load, decide, apply included manifests run level by
// run level.
func (a *Applier) Apply(ctx context.Context, snap featuregate.Snapshot) Run {
	started := time.Now()
	var run Run
	var ms []manifest.Manifest
	if a.Dir != "" {
		ms, run.Invalid = manifest.Load(a.Dir)
	}
	var included []manifest.Manifest
	for _, m := range ms {
		d := manifest.Include(m.Object, manifest.Cluster{Features: snap, Profile: a.Profile})
		switch {
		case d.Included:
			included = append(included, m)
		case d.Delete: // not deleted yet: counted as skipped
			run.Skipped++
		default:
			run.Excluded++
		}
	}
	var mu sync.Mutex
	for _, group := range manifest.Groups(included) {
		if !a.stillCurrent(ctx) {
			run.Aborted = true
			break
		}
		sem := make(chan struct{}, max(a.Parallelism, 1))
		var wg sync.WaitGroup
		for _, m := range group {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				err := a.applyOne(ctx, m)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					run.Failed = append(run.Failed, err)
					return
				}
				run.Applied = append(run.Applied, m)
			}()
		}
		wg.Wait()
	}
	run.Duration = time.Since(started)
	return run
}

// stillCurrent is the last look before acting: the snapshot still holds,
// and nobody asked for a stop. When that cannot be told, nothing is applied.
func (a *Applier) stillCurrent(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	current, err := a.FeatureGate.Current(ctx)
	if err != nil {
		ctrl.Log.WithName("apply").Error(err, "FeatureGate not checked; not applying")
	}
	return current
}

func (a *Applier) applyOne(ctx context.Context, m manifest.Manifest) error {
	opts := []client.ApplyOption{client.FieldOwner(FieldManager)}
	if m.Object.GetAnnotations()[ForceAnnotation] == "true" {
		opts = append(opts, client.ForceOwnership)
	}
	obj := m.Object.DeepCopy()
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), opts...); err != nil {
		ApplyFailures.Inc()
		return fmt.Errorf("%s: apply: %w", m, err)
	}
	return nil
}

// record publishes a run: metrics, Events for failures, ClusterOperator.
func (a *Applier) record(ctx context.Context, snap featuregate.Snapshot, run Run) {
	Manifests.WithLabelValues("applied").Set(float64(len(run.Applied)))
	Manifests.WithLabelValues("failed").Set(float64(len(run.Failed)))
	Manifests.WithLabelValues("invalid").Set(float64(len(run.Invalid)))
	Manifests.WithLabelValues("excluded").Set(float64(run.Excluded))
	Manifests.WithLabelValues("skipped").Set(float64(run.Skipped))
	LastApplyDuration.Set(run.Duration.Seconds())
	log := ctrl.Log.WithName("apply")
	for _, err := range run.Invalid {
		log.Error(err, "invalid manifest")
	}
	for _, err := range run.Failed {
		log.Error(err, "manifest not applied")
	}
	if a.Status == nil {
		return
	}
	co, err := a.Status.Report(ctx, snap, run)
	if err != nil {
		ctrl.Log.WithName("apply").Error(err, "report ClusterOperator status")
		return
	}
	if a.Recorder != nil {
		for _, err := range append(append([]error{}, run.Invalid...), run.Failed...) {
			a.Recorder.Eventf(co, nil, corev1.EventTypeWarning, "ManifestApplyFailed", "Apply", "%s", featuregate.BoundNote(err.Error()))
		}
	}
}

// appliedNamespaces are the namespaces a run created or wrote into.
func appliedNamespaces(ms []manifest.Manifest) []string {
	ns := sets.New[string]()
	for _, m := range ms {
		if m.Object.GetKind() == "Namespace" && m.Object.GetAPIVersion() == "v1" {
			ns.Insert(m.Object.GetName())
		} else if n := m.Object.GetNamespace(); n != "" {
			ns.Insert(n)
		}
	}
	return sets.List(ns)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
