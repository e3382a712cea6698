package controllers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/clusterinputs"
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

// Applier applies, with server-side apply, the manifests of a directory that
// the startup snapshot includes, deletes those marked for deletion, and
// reports the outcome on a ClusterOperator. It is level-triggered: every
// resync compares every object with what it last applied and applies again
// what differs (see resync), which corrects drift without writing what has
// not drifted, and a run with failures is retried sooner, with backoff. It
// only ever acts on the startup snapshot: it asks the FeatureGate whether
// it still holds before each run level, checks for a stop before every
// request, and cancels the requests in flight when a stop is requested, so
// that nothing the new feature set excludes is written while a restart is
// pending.
type Applier struct {
	Client client.Client
	// Reader reads live what must not be stale: the ClusterVersion, and
	// whether a create-only object exists.
	Reader client.Reader
	// Mapper tells cluster-scoped kinds from namespaced ones; nil: the
	// Client's.
	Mapper meta.RESTMapper
	// Gates is the guard: the snapshot the Applier acts on, the last look
	// before each write, and the stop.
	Gates    featuregate.Gates
	Recorder events.EventRecorder
	Status   *StatusReporter
	// Cache, when set, watches the ClusterOperator to restore it at once.
	Cache cache.Cache

	Dir string
	// Scan bounds what is read of Dir.
	Scan manifest.Options
	// Profile and ExcludeIdentifier are the inclusion inputs that come from
	// the operator's configuration; the release version (its major version)
	// is the snapshot's, and the capabilities and overrides are read from
	// the ClusterVersion each run.
	Profile           string
	ExcludeIdentifier string

	ResyncPeriod time.Duration
	// Parallelism bounds concurrent requests within a run level.
	Parallelism int
	// Log is where the Applier logs; controller-runtime's, named "apply",
	// when unset.
	Log logr.Logger

	mu   sync.Mutex
	last *lastRun
	poke chan struct{}
	// applied are the records the last complete run left (see resync).
	applied map[manifest.ObjectID]record
}

func (a *Applier) log() logr.Logger {
	if a.Log.GetSink() == nil {
		return ctrl.Log.WithName("apply")
	}
	return a.Log
}

// NeedLeaderElection is true: one replica applies.
func (a *Applier) NeedLeaderElection() bool { return true }

// Start applies until ctx ends or a stop is requested. Add it to the guard's
// manager, which starts it once the snapshot is taken.
func (a *Applier) Start(ctx context.Context) error {
	log := a.log()
	snap, ok := a.Gates.Snapshot()
	if !ok {
		return errors.New("applier started without a snapshot")
	}
	if name := snap.FeatureSetName(); !knownFeatureSet(name) {
		log.Info("Unknown feature set; upgrades are blocked", "featureSet", name)
		if a.Recorder != nil && a.Status != nil {
			ref := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: a.Status.Name}}
			ref.SetGroupVersionKind(configv1.GroupVersion.WithKind("ClusterOperator"))
			a.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonUnknownFeatureSet, "Snapshot", "%s",
				truncate(fmt.Sprintf("feature set %q is not one this operator knows; Upgradeable=False", name), eventNoteLimit))
		}
	}
	if err := a.watchStatus(ctx); err != nil {
		return err
	}
	if a.Status != nil {
		if err := a.Status.Starting(ctx, snap.Version()); err != nil {
			a.statusNotWritten(ctx, err, "ClusterOperator status not reported")
		}
	}
	retry := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: a.ResyncPeriod}
	for {
		run := a.Apply(ctx, snap)
		if run.Postponed && !run.Aborted {
			// Nothing is reported of a run cut short for want of proof:
			// the next one, once the guard vouches again, is.
			log.Info("FeatureGate view not current; run postponed", "applied", len(run.Applied), "retryIn", postponedRetry.String())
			if !a.wait(ctx, snap, postponedRetry) {
				return nil
			}
			continue
		}
		if run.Aborted {
			if stopped(a.Gates) {
				log.Info("Stop requested; no more manifests are applied", "applied", len(run.Applied), "deleted", len(run.Deleted))
			}
			return nil
		}
		a.record(ctx, snap, run)
		delay := a.ResyncPeriod
		if len(run.Failed) > 0 {
			delay = min(retry.Step(), a.ResyncPeriod)
		} else {
			retry.Duration = time.Second
		}
		log.Info("Manifests applied", "featureSet", snap.FeatureSetName(), "applied", len(run.Applied), "unchanged", run.Unchanged,
			"created", run.Created, "createOnlyLeft", run.CreateOnlyLeft, "deleted", len(run.Deleted), "failed", len(run.Failed), "invalid", len(run.Invalid),
			"excluded", run.Excluded, "skipped", len(run.Skipped), "capabilities", run.Inputs.Filter(),
			"duration", run.Duration.String(), "next", delay.String())
		// A run's garbage (every manifest decoded, every request body) is
		// most of the heap, and the process idles until the next run: hand
		// it back now rather than at the scavenger's pace.
		debug.FreeOSMemory()
		if !a.wait(ctx, snap, delay) {
			return nil
		}
	}
}

// wait sleeps until the next run, restoring the ClusterOperator from the
// last run whenever it is deleted or overwritten (see Poke). It returns
// false when the applier must end.
func (a *Applier) wait(ctx context.Context, snap featuregate.Snapshot, delay time.Duration) bool {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-a.Gates.StopRequested():
			a.log().Info("Stop requested; no more manifests are applied")
			return false
		case <-a.pokes():
			a.restoreStatus(ctx)
		case <-timer.C:
			return true
		}
	}
}

// Apply makes one pass: read the directory and the cluster's inputs,
// decide, then apply or delete run level by run level.
func (a *Applier) Apply(ctx context.Context, snap featuregate.Snapshot) Run {
	started := time.Now()
	// Requests in flight end with the stop, not after it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.Gates.StopRequested():
			cancel()
		case <-ctx.Done():
		}
	}()

	var run Run
	var payload manifest.Payload
	if a.Dir != "" {
		payload = manifest.Scan(a.Dir, a.Scan)
	}
	run.Invalid, run.Skipped = payload.Errors, payload.Skipped
	for _, s := range payload.Skipped {
		a.log().Info("Manifest directory entry skipped", "entry", s.Name, "reason", s.Reason)
	}
	inputs, err := clusterinputs.Read(ctx, a.Reader)
	if err != nil {
		// The capability filter cannot be guessed: nothing is applied.
		run.Failed = append(run.Failed, err)
		run.Aborted = ctx.Err() != nil
		run.Duration = time.Since(started)
		return run
	}
	run.Inputs = inputs
	cluster := inputs.Cluster(snap, a.Profile, a.ExcludeIdentifier, snap.Version())
	decisions, duplicates := manifest.Decide(payload.Manifests, cluster)
	run.Invalid = append(run.Invalid, duplicates...)
	later := sets.New[*unstructured.Unstructured]()
	for _, err := range duplicates {
		if d, ok := errors.AsType[*manifest.DuplicateError](err); ok {
			later.Insert(d.Second.Object) // the first one is applied
		}
	}
	var work []manifest.Manifest
	decided := map[*unstructured.Unstructured]manifest.Decision{}
	for i, m := range payload.Manifests {
		switch d := decisions[i]; {
		case later.Has(m.Object):
		case d.Included || d.Delete:
			work = append(work, m)
			decided[m.Object] = d
		case d.Invalid: // reported by Decide
		default:
			run.Excluded++
		}
	}

	a.mu.Lock()
	rs := newResync(a.Reader, a.log(), a.applied)
	a.mu.Unlock()
	var mu sync.Mutex
	for _, group := range manifest.Groups(work) {
		if !a.stillCurrent(ctx) {
			run.Aborted = a.halted(ctx)
			run.Postponed = !run.Aborted
			break
		}
		sem := make(chan struct{}, max(a.Parallelism, 1))
		var wg sync.WaitGroup
		for _, m := range group {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				out, err := a.act(ctx, m, decided[m.Object], rs)
				mu.Lock()
				defer mu.Unlock()
				run.add(out, err)
			}()
		}
		wg.Wait()
		if run.Postponed {
			break
		}
	}
	if ctx.Err() != nil { // a stop, or the manager's end: not a run to report
		run.Aborted = true
	}
	if !run.Aborted && !run.Postponed {
		a.mu.Lock()
		a.applied = rs.next
		a.mu.Unlock()
	}
	run.Duration = time.Since(started)
	return run
}

// halted is true once nothing more may be sent: ctx ended or a stop was
// requested.
func (a *Applier) halted(ctx context.Context) bool {
	return ctx.Err() != nil || stopped(a.Gates)
}

func stopped(fg featuregate.Gates) bool {
	select {
	case <-fg.StopRequested():
		return true
	default:
		return false
	}
}

// stillCurrent is the last look before a run level: the snapshot still
// holds, and nobody asked for a stop. The guard cannot vouch for it while
// it re-reads the FeatureGate (after a watch ends, or API trouble): that is
// waited out for up to currentWait, and nothing is applied meanwhile.
func (a *Applier) stillCurrent(ctx context.Context) bool {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, currentWait, true, func(ctx context.Context) (bool, error) {
		if a.halted(ctx) {
			return false, errStopped
		}
		return a.Gates.Current(), nil
	})
	if err != nil && !a.halted(ctx) {
		a.log().Info("FeatureGate view not current; not applying", "waited", currentWait.String())
	}
	return err == nil
}

// postponedRetry is how soon a postponed run is made again.
const postponedRetry = time.Second

// currentWait is how long a run level waits for the guard to vouch for the
// snapshot again: a re-read takes a round trip or two.
const currentWait = 5 * time.Second

// record publishes a run: metrics, Events for failures, ClusterOperator.
func (a *Applier) record(ctx context.Context, snap featuregate.Snapshot, run Run) {
	Manifests.WithLabelValues("applied").Set(float64(len(run.Applied)))
	Manifests.WithLabelValues("unchanged").Set(float64(run.Unchanged))
	Manifests.WithLabelValues("deleted").Set(float64(len(run.Deleted)))
	Manifests.WithLabelValues("failed").Set(float64(len(run.Failed)))
	Manifests.WithLabelValues("invalid").Set(float64(len(run.Invalid)))
	Manifests.WithLabelValues("excluded").Set(float64(run.Excluded))
	Manifests.WithLabelValues("skipped").Set(float64(len(run.Skipped)))
	LastApplyDuration.Set(run.Duration.Seconds())
	log := a.log()
	for _, err := range run.Invalid {
		log.Error(err, "Manifest invalid")
	}
	for _, err := range run.Failed {
		log.Error(err, "Manifest not applied")
	}
	if a.Status == nil {
		return
	}
	a.mu.Lock()
	a.last = &lastRun{snap: snap, status: run.runStatus()}
	a.mu.Unlock()
	co, err := a.Status.Report(ctx, snap, run)
	if err != nil {
		a.statusNotWritten(ctx, err, "ClusterOperator status not reported")
		return
	}
	if a.Recorder != nil {
		for _, err := range append(append([]error{}, run.Invalid...), run.Failed...) {
			a.Recorder.Eventf(co, nil, corev1.EventTypeWarning, "ManifestApplyFailed", "Apply", "%s", truncate(err.Error(), eventNoteLimit))
		}
	}
}

// statusNotWritten logs a failed status write under msg: an error, unless
// the process is stopping. The stop cuts writes short on purpose, and
// whatever else failed then is the next process's to report; the line
// keeps the error either way.
func (a *Applier) statusNotWritten(ctx context.Context, err error, msg string) {
	log := a.log().WithValues("clusterOperator", a.Status.Name)
	if ctx.Err() != nil {
		log.Info(msg+"; stopping", "error", err.Error())
		return
	}
	if errors.Is(err, errNotCurrent) {
		log.Info(msg+"; FeatureGate view not current", "error", err.Error())
		return
	}
	log.Error(err, msg)
}
