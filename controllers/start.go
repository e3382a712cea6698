package controllers

import (
	"context"
	"errors"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Start applies until ctx ends or a stop is requested. Add it to the guard's
// manager, which starts it once the snapshot is taken.
//
// It is the Applier's run order, whole: before the first run, the
// ClusterOperator is watched and the version move announced; then runs,
// each followed by the time between runs, which publishes it and waits for
// the next. A run the stop cuts short ends the Applier.
func (a *Applier) Start(ctx context.Context) error {
	snap, ok := a.Gates.Snapshot()
	if !ok {
		return errors.New("applier started without a snapshot")
	}
	a.warnUnknownFeatureSet(snap)
	if err := a.watchStatus(ctx); err != nil {
		return err
	}
	a.announce(ctx, snap)
	retry := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: a.ResyncPeriod}
	for {
		run := a.Apply(ctx, snap)
		if run.Aborted {
			if stopped(a.Gates) {
				a.log().Info("Stop requested; no more manifests are applied", "applied", len(run.Applied), "deleted", len(run.Deleted))
			}
			return nil
		}
		if !a.between(ctx, snap, run, &retry) {
			return nil
		}
	}
}
