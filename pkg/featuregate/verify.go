package featuregate

import (
	"context"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// alarm is raised whenever the manager's requests or watches fail: the API
// may be in trouble, and a change made meanwhile could be missed until the
// reflector's backoff (many seconds) lets the watch resume.
type alarm chan struct{}

func newAlarm() alarm { return make(alarm, 1) }

func (a alarm) raise() {
	select {
	case a <- struct{}{}:
	default:
	}
}

// watchErrorHandler keeps next (client-go's logging, or the caller's own)
// and raises the alarm.
func (a alarm) watchErrorHandler(next toolscache.WatchErrorHandlerWithContext) toolscache.WatchErrorHandlerWithContext {
	if next == nil {
		next = toolscache.DefaultWatchErrorHandler
	}
	return func(ctx context.Context, r *toolscache.Reflector, err error) {
		next(ctx, r, err)
		a.raise()
	}
}

// wrapTransport raises the alarm whenever a request fails to reach a working
// API server: client-go's reflector retries a refused watch inside its own
// loop without telling the watch error handler, so the transport is where an
// outage is seen first.
func (a alarm) wrapTransport(rt http.RoundTripper) http.RoundTripper {
	return troubleTransport{next: rt, alarm: a}
}

type troubleTransport struct {
	next  http.RoundTripper
	alarm alarm
}

func (t troubleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= http.StatusInternalServerError {
		t.alarm.raise()
	}
	return resp, err
}

// verifier reads the FeatureGate live whenever the alarm is raised, every
// interval, comparing each read like any reconcile, until the watch has been
// quiet for a while: the process learns of a change made during an outage
// within about interval of the API returning.
type verifier struct {
	// reader reads live, without retries of its own.
	reader     getter
	name       string
	alarm      alarm
	comparison *comparison
	interval   time.Duration
	log        logr.Logger
}

// NeedLeaderElection is false: every replica guards its own snapshot.
func (v *verifier) NeedLeaderElection() bool { return false }

// Start verifies after each alarm until ctx ends.
func (v *verifier) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-v.alarm:
			v.verify(ctx)
		}
	}
}

// verify reads every interval and compares each successful read, until a
// read succeeds with the alarm quiet for settle: a stopping API server still
// answers for a moment after it broke the watch, and a read then proves
// nothing about the outage that follows.
func (v *verifier) verify(ctx context.Context) {
	settle := 10 * v.interval
	lastTrouble := time.Now()
	ticker := time.NewTicker(v.interval)
	defer ticker.Stop()
	for {
		fg := &configv1.FeatureGate{}
		err := v.reader.Get(ctx, client.ObjectKey{Name: v.name}, fg)
		switch {
		case err == nil:
			changed, err := v.comparison.compare(ctx, fg, "verify")
			if err != nil {
				v.log.Error(err, "FeatureGate not compared", "featureGate", v.name)
			}
			if changed || time.Since(lastTrouble) >= settle {
				return
			}
		case client.IgnoreNotFound(err) == nil:
			return // the reconciler reports a deletion
		}
		select {
		case <-ctx.Done():
			return
		case <-v.alarm:
			lastTrouble = time.Now()
		case <-ticker.C:
		}
	}
}
