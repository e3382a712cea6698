package controllers

import (
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// What the payload's objects need is not declared here: `manager manifests
// --rbac` derives it from the payload itself (config/payload/role.yaml), so
// the operator may write exactly the objects it ships and nothing else.

// Applier applies, with server-side apply, the manifests of a directory that
// the startup snapshot includes, deletes those marked for deletion, and
// reports the outcome on a ClusterOperator. It is level-triggered: every
// resync compares every object with what it last applied and applies again
// what differs (see resync), which corrects drift without writing what has
// not drifted, and a run with failures is retried sooner, with backoff. It
// only ever acts on the startup snapshot: it asks the FeatureGate whether
// it still holds before each run level, checks for a stop before every
// request, and cancels the requests in flight when a stop is requested, so
// that nothing the new feature set excludes is written while a restart is
// pending.
//
// Start (start.go) is its run order, whole; each step is a file of its
// own, in that order: upgrading.go and watch.go before the first run,
// apply.go for a run (current.go, act.go, write.go below it), between.go
// after one.
type Applier struct {
	Client client.Client
	// Reader reads live what must not be stale: the ClusterVersion, and
	// whether a create-only object exists.
	Reader client.Reader
	// Mapper tells cluster-scoped kinds from namespaced ones; nil: the
	// Client's.
	Mapper meta.RESTMapper
	// Gates is the guard: the snapshot the Applier acts on, the last look
	// before each write, and the stop.
	Gates    featuregate.Gates
	Recorder events.EventRecorder
	Status   *StatusReporter
	// Cache, when set, watches the ClusterOperator to restore it at once.
	Cache cache.Cache

	Dir string
	// Scan bounds what is read of Dir.
	Scan manifest.Options
	// Profile and ExcludeIdentifier are the inclusion inputs that come from
	// the operator's configuration; the release version (its major version)
	// is the snapshot's, and the capabilities and overrides are read from
	// the ClusterVersion each run (internal/clusterinputs).
	Profile           string
	ExcludeIdentifier string

	ResyncPeriod time.Duration
	// Parallelism bounds concurrent requests within a run level.
	Parallelism int
	// Log is where the Applier logs; controller-runtime's, named "apply",
	// when unset.
	Log logr.Logger

	mu   sync.Mutex
	last *lastRun
	poke chan struct{}
	// applied are the records the last complete run left (see resync).
	applied map[manifest.ObjectID]record
}

func (a *Applier) log() logr.Logger {
	if a.Log.GetSink() == nil {
		return ctrl.Log.WithName("apply")
	}
	return a.Log
}

// NeedLeaderElection is true: one replica applies.
func (a *Applier) NeedLeaderElection() bool { return true }
