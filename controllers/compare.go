package controllers

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// comparison is the one place where a live FeatureGate is held against the
// startup snapshot and a difference acted on: the reconciler, the applier's
// last look before acting, and the outage verifier all come here.
type comparison struct {
	Options  featuregate.Options
	Stopper  Stopper
	Recorder events.EventRecorder
	// Events, when set, writes the FeatureGateChanged Event synchronously:
	// the shutdown it announces takes milliseconds, and the recorder's queue
	// would be dropped with the manager's context.
	Events client.Client
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
	c.recordChange(ctx, fg, reason+"; requesting shutdown")
	ShutdownRequests.Inc()
	c.Stopper.Stop(reason)
	return diff, nil
}

func (c comparison) recordChange(ctx context.Context, fg *configv1.FeatureGate, note string) {
	if c.Events == nil {
		if c.Recorder != nil {
			c.Recorder.Eventf(fg, nil, corev1.EventTypeWarning, ReasonFeatureGateChanged, "Compare", "%s", note)
		}
		return
	}
	host, _ := os.Hostname()
	now := metav1.NowMicro()
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", fg.Name, now.UnixNano()), Namespace: metav1.NamespaceDefault},
		EventTime:  now,
		Regarding: corev1.ObjectReference{
			APIVersion: configv1.GroupVersion.String(), Kind: "FeatureGate",
			Name: fg.Name, UID: fg.UID, ResourceVersion: fg.ResourceVersion,
		},
		Reason:              ReasonFeatureGateChanged,
		Action:              "Compare",
		Note:                truncate(note, 1024),
		Type:                corev1.EventTypeWarning,
		ReportingController: EventSource,
		ReportingInstance:   truncate(EventSource+"-"+host, 128),
	}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.Events.Create(writeCtx, ev); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "record FeatureGateChanged Event", "featureGate", fg.Name)
	}
}
