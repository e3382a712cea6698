package controllers

import (
	"context"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// DefaultVerifyInterval is the wait between live reads while the watch fails.
const DefaultVerifyInterval = 500 * time.Millisecond

// Verifier reads the FeatureGate live whenever the cache's watch fails. A
// watch broken by an API outage comes back on the reflector's own backoff,
// which grows to many seconds, and a change made during the outage would wait
// for it (or for the resync). The verifier instead reads every Interval until
// a read succeeds, and compares that read like any reconcile: the process
// learns of the change within about Interval of the API returning.
type Verifier struct {
	// Reader reads live, without retries of its own: featuregate.NewLiveGetter.
	Reader    featuregate.Getter
	Snapshots Snapshots
	Options   featuregate.Options
	Stopper   Stopper
	Recorder  events.EventRecorder
	// Events, when set, writes the FeatureGateChanged Event synchronously.
	Events client.Client
	// Interval between live reads; DefaultVerifyInterval when zero.
	Interval time.Duration

	trouble chan struct{}
}

// NewVerifier returns a Verifier ready for WatchErrorHandler and Start.
func NewVerifier(v Verifier) *Verifier {
	v.trouble = make(chan struct{}, 1)
	return &v
}

// WatchErrorHandler is the cache's DefaultWatchErrorHandler: it keeps
// client-go's logging and wakes the verifier.
func (v *Verifier) WatchErrorHandler(ctx context.Context, r *toolscache.Reflector, err error) {
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
	select {
	case v.trouble <- struct{}{}:
	default:
	}
}

// NeedLeaderElection is false: every replica guards its own snapshot.
func (v *Verifier) NeedLeaderElection() bool { return false }

// Start verifies after each watch failure until ctx ends.
func (v *Verifier) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-v.trouble:
			v.verify(ctx)
		}
	}
}

// verify reads until one read succeeds, and compares it.
func (v *Verifier) verify(ctx context.Context) {
	log := ctrl.Log.WithName("verify")
	snapshot, ok := v.Snapshots.Snapshot()
	if !ok {
		return
	}
	interval := v.Interval
	if interval <= 0 {
		interval = DefaultVerifyInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		fg := &configv1.FeatureGate{}
		err := v.Reader.Get(ctx, client.ObjectKey{Name: v.Options.ObjectName()}, fg)
		if err == nil {
			c := comparison{Options: v.Options, Stopper: v.Stopper, Recorder: v.Recorder, Events: v.Events}
			if _, err := c.compare(ctrl.LoggerInto(ctx, log), snapshot, fg, "live read after a watch failure"); err != nil {
				log.Error(err, "compare FeatureGate")
			}
			return
		}
		if client.IgnoreNotFound(err) == nil {
			return // the reconciler reports a deletion
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
