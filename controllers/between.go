package controllers

import (
	"context"
	"runtime/debug"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// between is the time from the end of one run to the start of the next. A
// postponed run is made again soon, and nothing is reported of it: the
// next one, once the guard vouches again, is. A complete run is published
// (see record), and the next is made after the resync period, or sooner,
// with backoff, while manifests fail. Meanwhile the ClusterOperator is
// restored from the last run whenever it is deleted or overwritten (see
// Poke). It returns false when the Applier must end.
func (a *Applier) between(ctx context.Context, snap featuregate.Snapshot, run Run, retry *wait.Backoff) bool {
	delay := postponedRetry
	if run.Postponed {
		a.log().Info("FeatureGate view not current; run postponed", "applied", len(run.Applied), "retryIn", delay.String())
	} else {
		delay = a.ResyncPeriod
		if len(run.Failed) > 0 {
			delay = min(retry.Step(), a.ResyncPeriod)
		} else {
			retry.Duration = time.Second
		}
		a.record(ctx, snap, run, delay)
		// A run's garbage (every manifest decoded, every request body) is
		// most of the heap, and the process idles until the next run: hand
		// it back now rather than at the scavenger's pace.
		debug.FreeOSMemory()
	}
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
			a.mu.Lock()
			last := a.last
			a.mu.Unlock()
			a.Status.restore(ctx, a.log(), last)
		case <-timer.C:
			return true
		}
	}
}

// postponedRetry is how soon a postponed run is made again.
const postponedRetry = time.Second

// record publishes a complete run: metrics, its problems in the log, the
// ClusterOperator (kept as the last run, to restore it from) and an Event
// on it for each problem, then the run's summary line, which names when
// the next run is made.
func (a *Applier) record(ctx context.Context, snap featuregate.Snapshot, run Run, next time.Duration) {
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
	status := run.runStatus()
	if a.Status != nil {
		a.mu.Lock()
		a.last = &lastRun{snap: snap, status: status}
		a.mu.Unlock()
		co, err := a.Status.report(ctx, snap, status)
		switch {
		case err != nil:
			a.Status.notWritten(ctx, log, err, "ClusterOperator status not reported")
		case a.Recorder != nil:
			for _, problem := range status.problems {
				a.Recorder.Eventf(co, nil, corev1.EventTypeWarning, "ManifestApplyFailed", "Apply", "%s", truncate(problem, eventNoteLimit))
			}
		}
	}
	log.Info("Manifests applied", "featureSet", snap.FeatureSetName(), "applied", len(run.Applied), "unchanged", run.Unchanged,
		"created", run.Created, "createOnlyLeft", run.CreateOnlyLeft, "deleted", len(run.Deleted), "failed", len(run.Failed), "invalid", len(run.Invalid),
		"excluded", run.Excluded, "skipped", len(run.Skipped), "capabilities", status.capabilityFilter,
		"duration", run.Duration.String(), "next", next.String())
}
