package featuregate

import (
	"context"
	"fmt"
	"os"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate/internal/eventnote"
)

// Event reasons the guard records on the FeatureGate.
const (
	reasonStartupSnapshot    = "StartupSnapshot"
	reasonFeatureGateChanged = "FeatureGateChanged"
	reasonFeatureGateDeleted = "FeatureGateDeleted"
)

// eventWriter records the guard's Events on the FeatureGate. It writes each
// one synchronously: they are rare, and the change it announces is followed
// within milliseconds by a shutdown that would drop a recorder's queue.
type eventWriter struct {
	client   client.Client
	source   string
	instance string
}

func newEventWriter(c client.Client, source string) eventWriter {
	host, _ := os.Hostname()
	instance := source + "-" + host
	if len(instance) > 128 {
		instance = instance[:128]
	}
	return eventWriter{client: c, source: source, instance: instance}
}

// record writes one Event about fg (which may be a name-only stand-in for a
// deleted object). Failing to record is logged by the caller, never fatal.
func (w eventWriter) record(ctx context.Context, fg *configv1.FeatureGate, eventType, reason, action, note string) error {
	now := metav1.NowMicro()
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", fg.Name, now.UnixNano()), Namespace: metav1.NamespaceDefault},
		EventTime:  now,
		Regarding: corev1.ObjectReference{
			APIVersion: configv1.GroupVersion.String(), Kind: "FeatureGate",
			Name: fg.Name, UID: fg.UID, ResourceVersion: fg.ResourceVersion,
		},
		Reason:              reason,
		Action:              action,
		Note:                eventnote.Bound(note),
		Type:                eventType,
		ReportingController: w.source,
		ReportingInstance:   w.instance,
	}
	// Written even while the manager stops: it announces why.
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := w.client.Create(writeCtx, ev); err != nil {
		return fmt.Errorf("record %s Event on FeatureGate %s: %w", reason, fg.Name, err)
	}
	return nil
}
