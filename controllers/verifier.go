package controllers

import (
	"context"
	"net/http"
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
// for it (or for the resync). The verifier instead reads every Interval,
// comparing each read like any reconcile, until the watch has been quiet for
// a while: the process learns of the change within about Interval of the
// API returning.
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
	v.wake()
}

// WrapTransport wakes the verifier whenever a request of the manager fails
// to reach a working API server: client-go's reflector retries a refused
// watch inside its own loop without telling the WatchErrorHandler, so the
// transport is where an outage is seen first. Use it as rest.Config's
// WrapTransport for the manager (not for Reader, whose own failures during
// the outage would only echo).
func (v *Verifier) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return troubleTransport{next: rt, wake: v.wake}
}

func (v *Verifier) wake() {
	select {
	case v.trouble <- struct{}{}:
	default:
	}
}

type troubleTransport struct {
	next http.RoundTripper
	wake func()
}

func (t troubleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= http.StatusInternalServerError {
		t.wake()
	}
	return resp, err
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

// verify reads every interval and compares each successful read, until a
// read succeeds with the watch quiet for settle: a stopping API server still
// answers for a moment after it broke the watch, and a read then proves
// nothing about the outage that follows.
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
	settle := 10 * interval
	lastTrouble := time.Now()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	c := comparison{Options: v.Options, Stopper: v.Stopper, Recorder: v.Recorder, Events: v.Events}
	for {
		fg := &configv1.FeatureGate{}
		err := v.Reader.Get(ctx, client.ObjectKey{Name: v.Options.ObjectName()}, fg)
		switch {
		case err == nil:
			diff, err := c.compare(ctrl.LoggerInto(ctx, log), snapshot, fg, "live read after a watch failure")
			if err != nil {
				log.Error(err, "compare FeatureGate")
			}
			if len(diff) > 0 || time.Since(lastTrouble) >= settle {
				return
			}
		case client.IgnoreNotFound(err) == nil:
			return // the reconciler reports a deletion
		}
		select {
		case <-ctx.Done():
			return
		case <-v.trouble:
			lastTrouble = time.Now()
		case <-ticker.C:
		}
	}
}
