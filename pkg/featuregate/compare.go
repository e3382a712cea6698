package featuregate

import (
	"context"
	"strings"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// comparison is the one place where a live FeatureGate is held against the
// startup snapshot and a difference acted on: the FeatureGate controller and
// the monitor both come here.
type comparison struct {
	startup *startup
	stopper *stopper
	watched sets.Set[configv1.FeatureGateName]
	events  eventWriter
	metrics metrics
	log     logr.Logger
}

// compare builds the live view the way the snapshot was built and, when they
// differ, asks for a shutdown, logs the difference, records a Warning Event
// on the FeatureGate and counts it. Before the snapshot there is nothing to
// compare with, and nothing is reported.
func (c *comparison) compare(ctx context.Context, fg *configv1.FeatureGate, detectedBy string) bool {
	snapshot, ok := c.startup.Snapshot()
	if !ok {
		return false
	}
	live := build(fg, snapshot.version)
	d := diff(snapshot, live, c.watched)
	if len(d) == 0 {
		return false
	}
	reason := strings.Join(d, "; ")
	// Stop first: work that acts on the snapshot must not go on while the
	// change is being reported.
	first := c.stopper.Stop(reason)
	if !first {
		return true // reported by whoever saw it first
	}
	c.log.Info("FeatureGate changed; requesting shutdown", "featureGate", fg.Name, "diff", d, "detectedBy", detectedBy,
		"startupFeatureSet", snapshot.FeatureSetName(), "liveFeatureSet", live.FeatureSetName())
	c.events.record(ctx, fg, corev1.EventTypeWarning, reasonFeatureGateChanged, "Compare", reason+"; requesting shutdown")
	c.metrics.shutdownRequests.Inc()
	return true
}

// stopped reports whether a stop was requested.
func (c *comparison) stopped() bool {
	_, ok := c.stopper.Reason()
	return ok
}
