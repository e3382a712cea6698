package featuregate

import (
	"context"
	"fmt"
	"os"
	"time"
	"unicode/utf8"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event reasons the guard records on the FeatureGate.
const (
	ReasonStartupSnapshot    = "StartupSnapshot"
	ReasonFeatureGateChanged = "FeatureGateChanged"
	ReasonFeatureGateDeleted = "FeatureGateDeleted"
)

// NoteLimit is the longest Event note the API server stores
// (events.k8s.io/v1 rejects longer ones outright).
const NoteLimit = 1024

// BoundNote cuts note to NoteLimit bytes on a rune boundary, marking the cut.
// Every Event note goes through it: a real payload's gate list is longer
// than that, and an Event the API server rejects tells nobody anything.
func BoundNote(note string) string {
	if len(note) <= NoteLimit {
		return note
	}
	const mark = "…"
	cut := NoteLimit - len(mark)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + mark
}

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
		Note:                BoundNote(note),
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
