package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// Whether the Applier may still act on its snapshot: nobody asked for a
// stop, and the guard vouches that the FeatureGate still matches.

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

// currentWait is how long a run level waits for the guard to vouch for the
// snapshot again: a re-read takes a round trip or two.
const currentWait = 5 * time.Second
