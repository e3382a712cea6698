package controllers

import (
	"context"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// comparison is the one place where a live FeatureGate is held against the
// startup snapshot and a difference acted on: the reconciler, the applier's
// last look before acting, and the outage verifier all come here.
type comparison struct {
	Options  featuregate.Options
	Stopper  Stopper
	Recorder events.EventRecorder
}

// compare builds the live view the way the snapshot was built and, when they
// differ, logs the difference, records a Warning Event on the FeatureGate,
// counts it and asks for a shutdown. It returns the difference.
func (c comparison) compare(ctx context.Context, snapshot featuregate.Snapshot, fg *configv1.FeatureGate, by string) ([]string, error) {
	live, err := featuregate.New(fg, c.Options)
	if err != nil {
		return nil, err
	}
	diff := featuregate.Diff(snapshot, live)
	if len(diff) == 0 {
		return nil, nil
	}
	reason := strings.Join(diff, "; ")
	ctrl.LoggerFrom(ctx).Info(reason+"; requesting shutdown", "featureGate", fg.Name, "detectedBy", by,
		"startupFeatureSet", snapshot.FeatureSetName(), "liveFeatureSet", live.FeatureSetName())
	if c.Recorder != nil {
		c.Recorder.Eventf(fg, nil, corev1.EventTypeWarning, ReasonFeatureGateChanged, "Compare", "%s; requesting shutdown", reason)
	}
	ShutdownRequests.Inc()
	c.Stopper.Stop(reason)
	return diff, nil
}
