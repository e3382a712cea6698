package librarygo

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/openshift/library-go/pkg/operator/events"
)

// libraryGoReasons are the guard's Event reasons that library-go's
// FeatureGateAccess records under a name of its own, always as Normal
// Events; operators' alerts and must-gather readers know them so. The
// guard's others (FeatureGateDeleted, a Warning) keep their name and type.
var libraryGoReasons = map[string]string{
	"StartupSnapshot":    "FeatureGatesInitialized",
	"FeatureGateChanged": "FeatureGatesModified",
}

// eventsTo records the guard's Events through a library-go recorder: on the
// operator's own object, as every other Event of a controllercmd operator.
type eventsTo struct{ recorder events.Recorder }

func (e eventsTo) Eventf(_, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	if r, ok := libraryGoReasons[reason]; ok {
		e.recorder.Eventf(r, note, args...)
		return
	}
	if eventtype == corev1.EventTypeWarning {
		e.recorder.Warningf(reason, note, args...)
		return
	}
	e.recorder.Eventf(reason, note, args...)
}
