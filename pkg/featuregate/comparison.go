package featuregate

import (
	"context"
	"strings"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
)

// entryRewriteTimeout bounds how long a feature-set change waits for the
// release version's status entry to be rewritten before the process stops
// anyway. cluster-config-operator rewrites it within its informer's sync,
// about a second; the bound covers that operator restarting meanwhile.
const entryRewriteTimeout = 10 * time.Second

// comparison is the one place where a live FeatureGate is held against the
// startup snapshot and a difference acted on: the FeatureGate controller and
// the monitor both come here.
type comparison struct {
	startup  *startup
	stopper  *stopper
	consumed consumed
	// read reads the FeatureGate live, for the wait after a feature-set
	// change.
	read    func(context.Context) (*configv1.FeatureGate, error)
	events  eventWriter
	metrics metrics
	log     logr.Logger
	// rewriteTimeout is entryRewriteTimeout; tests shorten it.
	rewriteTimeout time.Duration
	// entry keeps a feature-set consumer from vouching for a snapshot
	// whose status may be older than its spec; nil for other consumers.
	entry *entryCheck
}

// compare builds the live view the way the snapshot was built and, when it
// differs in what the component consumes, asks for a shutdown, logs the
// difference, records a Warning Event on the FeatureGate and counts it.
// Before the snapshot there is nothing to compare with, and nothing is
// reported.
//
// OpenShift switches a feature set in two writes: the admin's
// spec.featureSet, then cluster-config-operator's rewrite of its own
// version's status entry from it. A process restarted between the two
// would read a mixed snapshot (the new feature set over the old set's
// gates) and restart again at the rewrite. So a feature-set change whose
// entry is not rewritten yet stops the work at once (Current is false,
// StopRequested closed) but holds the exit until the entry is rewritten,
// or entryRewriteTimeout passes: one restart, onto a snapshot that is not
// mixed.
func (c *comparison) compare(ctx context.Context, fg *configv1.FeatureGate, detectedBy string) bool {
	snapshot, ok := c.startup.Snapshot()
	if !ok {
		return false
	}
	c.entry.seen(fg)
	live := build(fg, snapshot.version)
	d := diff(snapshot, live, c.consumed)
	if d.none() {
		return false
	}
	reason := strings.Join(d.sentences(), "; ")
	var settle func(context.Context)
	entryPending := d.featureSet != "" && snapshot.hasStatus && sameEntry(snapshot, live)
	if entryPending {
		settle = func(ctx context.Context) { c.awaitEntry(ctx, snapshot) }
	}
	// Stop first: work that acts on the snapshot must not go on while the
	// change is being reported.
	if !c.stopper.Stop(reason, settle) {
		return true // reported by whoever saw it first
	}
	msg := "FeatureGate changed; requesting shutdown"
	if entryPending {
		msg = "FeatureGate feature set changed; work stopped, exit held until the status entry of the release version is rewritten"
	}
	c.log.Info(msg, "featureGate", fg.Name, "diff", d.sentences(), "detectedBy", detectedBy,
		"startupFeatureSet", snapshot.FeatureSetName(), "liveFeatureSet", live.FeatureSetName())
	c.events.record(ctx, reference(fg), corev1.EventTypeWarning, reasonFeatureGateChanged, "Compare", reason+"; requesting shutdown")
	c.metrics.shutdownRequests.Inc()
	return true
}

// sameEntry reports whether live carries the snapshot's status entry, every
// gate compared (not only the consumed ones: any rewrite tells that
// cluster-config-operator caught up).
func sameEntry(snapshot, live Snapshot) bool {
	return live.hasStatus && snapshot.statusEnabled.Equal(live.statusEnabled) && snapshot.statusDisabled.Equal(live.statusDisabled)
}

// awaitEntry reads the FeatureGate until the release version's status
// entry differs from the snapshot's, the feature set is back to the
// snapshot's (the next process reads a consistent pair either way), ctx
// ends, or the timeout passes.
func (c *comparison) awaitEntry(ctx context.Context, snapshot Snapshot) {
	started := time.Now()
	deadline := time.NewTimer(c.rewriteTimeout)
	defer deadline.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		fg, err := c.read(rctx)
		cancel()
		if err == nil {
			live := build(fg, snapshot.version)
			if !sameEntry(snapshot, live) || live.featureSet == snapshot.featureSet {
				c.log.Info("FeatureGate status entry caught up with the feature set; stopping", "featureGate", fg.Name,
					"version", snapshot.version, "liveFeatureSet", live.FeatureSetName(), "waited", time.Since(started).Round(time.Millisecond).String())
				return
			}
		}
		t := time.NewTimer(retryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-deadline.C:
			t.Stop()
			c.log.Info("FeatureGate status entry not rewritten in time; stopping all the same", "featureGate", c.startup.name,
				"version", snapshot.version, "waited", time.Since(started).Round(time.Millisecond).String())
			return
		case <-t.C:
		}
	}
}

// stopped reports whether a stop was requested.
func (c *comparison) stopped() bool {
	_, ok := c.stopper.Reason()
	return ok
}
