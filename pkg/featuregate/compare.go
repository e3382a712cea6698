package featuregate

import (
	"context"
	"strings"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
)

// comparison is the one place where a live FeatureGate is held against the
// startup snapshot and a difference acted on: the reconciler, the outage
// verifier and Guard.Current all come here.
type comparison struct {
	startup  *startup
	stopper  *stopper
	events   eventWriter
	metrics  metrics
	onChange func(Change)
	log      logr.Logger
}

// compare builds the live view the way the snapshot was built and, when they
// differ, logs the difference, records a Warning Event on the FeatureGate,
// counts it and asks for a shutdown. Before the snapshot there is nothing to
// compare with, and nothing is reported.
func (c *comparison) compare(ctx context.Context, fg *configv1.FeatureGate, detectedBy string) (changed bool, err error) {
	snapshot, ok := c.startup.Snapshot()
	if !ok {
		return false, nil
	}
	live, err := New(fg, c.startup.view)
	if err != nil {
		return false, err
	}
	diff := Diff(snapshot, live)
	if len(diff) == 0 {
		return false, nil
	}
	reason := strings.Join(diff, "; ")
	// Stop first: work that acts on the snapshot (an applier between two
	// requests) must not go on while the change is being reported.
	c.stopper.Stop(reason)
	c.log.Info("FeatureGate changed; requesting shutdown", "featureGate", fg.Name, "diff", diff, "detectedBy", detectedBy,
		"startupFeatureSet", snapshot.FeatureSetName(), "liveFeatureSet", live.FeatureSetName())
	if err := c.events.record(ctx, fg, corev1.EventTypeWarning, ReasonFeatureGateChanged, "Compare", reason+"; requesting shutdown"); err != nil {
		c.log.Error(err, "Event not recorded", "featureGate", fg.Name, "reason", ReasonFeatureGateChanged)
	}
	c.metrics.shutdownRequests.Inc()
	if c.onChange != nil {
		c.onChange(Change{Diff: diff, DetectedBy: detectedBy, Startup: snapshot, Live: live})
	}
	return true, nil
}
