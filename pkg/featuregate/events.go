package featuregate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate/internal/eventnote"
)

// Event reasons the guard records on the FeatureGate, and on the object
// of an adopter's part (the TLS profile's is in tlspart.go).
const (
	reasonStartupSnapshot    = "StartupSnapshot"
	reasonFeatureGateChanged = "FeatureGateChanged"
	reasonFeatureGateDeleted = "FeatureGateDeleted"
	// reasonSnapshotPartChanged is an adopter's own part (Options.Parts)
	// that changed.
	reasonSnapshotPartChanged = "SnapshotPartChanged"
)

// eventWriter records the guard's Events on the FeatureGate: through the
// adopter's recorder when Options.EventRecorder is set, else itself, one
// write each (5 s at most), which the manager's Start waits for, within a
// budget, before it returns (flushWithin): they are rare, and the change
// one announces is followed within milliseconds by a shutdown that would
// drop a recorder's queue. Each write runs beside the work that records
// it, not in its way: the runnable that
// detected a change returns at once, and the manager drains its other
// runnables while the Event is written, instead of after it (in a restart
// stampede, dozens of processes write theirs to one busy API server). An
// Event is a courtesy, never a condition: a failure is logged and the
// guard goes on; a forbidden one is logged once, as RBAC that grants no
// Events is a choice the operator's author made.
type eventWriter struct {
	client    client.Client
	recorder  events.EventRecorder
	source    string
	instance  string
	log       logr.Logger
	forbidden *atomic.Bool
	// pending are the writes under way.
	pending *writes
}

func newEventWriter(c client.Client, recorder events.EventRecorder, source string, log logr.Logger) eventWriter {
	host, _ := os.Hostname()
	instance := source + "-" + host
	if len(instance) > 128 {
		instance = instance[:128]
	}
	return eventWriter{client: c, recorder: recorder, source: source, instance: instance, log: log, forbidden: &atomic.Bool{}, pending: &writes{}}
}

// flushWithin waits for the writes under way for at most budget, and logs
// those it leaves behind: on the way out, a process must not wait on a busy
// API server for a courtesy (in a restart stampede every process writes
// its Event at once, and the exit would wait for the slowest).
func (w eventWriter) flushWithin(budget time.Duration) {
	started := time.Now()
	if left := w.pending.wait(budget); left > 0 {
		w.log.Info("Events not written in time; exiting without them", "pending", left,
			"waited", time.Since(started).Round(time.Millisecond).String())
	}
}

// writes are goroutines that flushWithin waits for. Not a sync.WaitGroup:
// a write may start while it waits (a runnable that outlived the
// manager's drain), which a WaitGroup forbids.
type writes struct {
	mu   sync.Mutex
	done []chan struct{}
}

// start runs write in a goroutine of its own.
func (ws *writes) start(write func()) {
	d := make(chan struct{})
	ws.mu.Lock()
	ws.done = slices.DeleteFunc(ws.done, closed)
	ws.done = append(ws.done, d)
	ws.mu.Unlock()
	go func() {
		defer close(d)
		write()
	}()
}

// wait returns once every write started before it ended, or once
// budget passed (when above zero), with how many had not ended.
func (ws *writes) wait(budget time.Duration) int {
	ws.mu.Lock()
	ds := slices.Clone(ws.done)
	ws.mu.Unlock()
	var expired <-chan time.Time
	if budget > 0 {
		t := time.NewTimer(budget)
		defer t.Stop()
		expired = t.C
	}
	for i, d := range ds {
		select {
		case <-d:
		case <-expired:
			left := 0
			for _, d := range ds[i:] {
				if !closed(d) {
					left++
				}
			}
			return left
		}
	}
	return 0
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// record records one Event about the object ref names (a FeatureGate,
// which may be a name-only stand-in for a deleted one, or the APIServer
// whose TLS profile the snapshot carries).
func (w eventWriter) record(ctx context.Context, ref *corev1.ObjectReference, eventType, reason, action, note string) {
	note = eventnote.Bound(note)
	if w.recorder != nil {
		// A reference, not the object: a recorder resolves an object's
		// kind through its scheme, which need not know FeatureGates
		// (client-go's global one does not), and would drop the Event.
		w.recorder.Eventf(ref, nil, eventType, reason, action, "%s", note)
		return
	}
	if w.forbidden.Load() {
		return
	}
	w.pending.start(func() {
		err := w.write(ctx, ref, eventType, reason, action, note)
		switch {
		case err == nil:
		case apierrors.IsForbidden(err):
			if !w.forbidden.Swap(true) {
				w.log.Info("Events forbidden; the guard records none (grant create and patch on events.k8s.io events, or set Options.EventRecorder)",
					strings.ToLower(ref.Kind[:1])+ref.Kind[1:], ref.Name, "reason", reason, "error", err.Error())
			}
		default:
			w.log.Error(err, "Event not recorded", strings.ToLower(ref.Kind[:1])+ref.Kind[1:], ref.Name, "reason", reason)
		}
	})
}

func (w eventWriter) write(ctx context.Context, ref *corev1.ObjectReference, eventType, reason, action, note string) error {
	now := metav1.NowMicro()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: metav1.NamespaceDefault},
		EventTime:           now,
		Regarding:           *ref,
		Reason:              reason,
		Action:              action,
		Note:                note,
		Type:                eventType,
		ReportingController: w.source,
		ReportingInstance:   w.instance,
	}
	// Written even while the manager stops: it announces why.
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := w.client.Create(writeCtx, ev); err != nil {
		return fmt.Errorf("record %s Event on %s %s: %w", reason, ref.Kind, ref.Name, err)
	}
	return nil
}

// reference is what the guard's FeatureGate Events regard.
func reference(fg *configv1.FeatureGate) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: configv1.GroupVersion.String(), Kind: "FeatureGate",
		Name: fg.Name, UID: fg.UID, ResourceVersion: fg.ResourceVersion,
	}
}

// metrics are the guard's: which feature set this process started with,
// how often it asked to stop, and how often its proof lapsed.
type metrics struct {
	startupFeatureSet *prometheus.GaugeVec
	shutdownRequests  prometheus.Counter
	freshnessLapses   prometheus.Counter
}

// newMetrics registers the metrics on reg, reusing ones registered already
// (a second guard in one process, as tests build).
func newMetrics(reg prometheus.Registerer) (metrics, error) {
	m := metrics{
		startupFeatureSet: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Name:      "startup_feature_set",
			Help:      "The feature set of the FeatureGate snapshot taken at startup (1 for the set in force).",
		}, []string{"feature_set"}),
		shutdownRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Name:      "shutdown_requests_total",
			Help:      "Comparisons that found the FeatureGate different from the startup snapshot and asked for a shutdown.",
		}),
		freshnessLapses: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Name:      "freshness_lapses_total",
			Help:      "Times the proof that the FeatureGate still matches the snapshot grew older than the freshness bound (Current false until a read matches again).",
		}),
	}
	var err error
	m.startupFeatureSet, err = register(reg, m.startupFeatureSet)
	if err != nil {
		return metrics{}, err
	}
	if m.shutdownRequests, err = register(reg, m.shutdownRequests); err != nil {
		return metrics{}, err
	}
	m.freshnessLapses, err = register(reg, m.freshnessLapses)
	return m, err
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
