package featuregate

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The lease is asked for once the snapshot is taken. A stock manager's
// elector first tries at Start; with the API down at start that try fails
// and the next comes one RetryPeriod later (26 s with OpenShift's
// timings), long after the API returned and the snapshot was taken, and
// nothing that needs the lease runs in between. Holding the lock's reads
// until the snapshot makes the first try the one the API answers.

// heldLock is the lease lock the guarded manager's elector uses: its Get
// waits for the snapshot. Create and Update follow a Get.
type heldLock struct {
	resourcelock.Interface
	taken <-chan struct{}
}

func (l heldLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	select {
	case <-l.taken:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	return l.Interface.Get(ctx)
}

// holdLease sets opts' lease lock to one held until the snapshot: the
// caller's own (LeaderElectionResourceLockInterface), or the one a stock
// manager would build from the same options, with the same errors.
// recorders is the manager the lock's Events go to, set once it is built.
func (g *Guard) holdLease(opts *manager.Options, recorders *managerRecorders) error {
	if !opts.LeaderElection {
		return nil
	}
	lock := opts.LeaderElectionResourceLockInterface
	if lock == nil {
		cfg := g.restConfig
		if opts.LeaderElectionConfig != nil {
			// The lease is in another cluster, whose Events a stock
			// manager records through a recorder of its own; the
			// manager's would post them to this one. The lock records
			// none then.
			cfg = opts.LeaderElectionConfig
			recorders = &managerRecorders{none: true}
		}
		renewDeadline := defaultRenewDeadline
		if opts.RenewDeadline != nil {
			renewDeadline = *opts.RenewDeadline
		}
		var err error
		lock, err = leaderelection.NewResourceLock(rest.CopyConfig(cfg), recorders, leaderelection.Options{
			LeaderElection:             true,
			LeaderElectionResourceLock: opts.LeaderElectionResourceLock,
			LeaderElectionID:           opts.LeaderElectionID,
			LeaderElectionNamespace:    opts.LeaderElectionNamespace,
			RenewDeadline:              renewDeadline,
			LeaderLabels:               opts.LeaderElectionLabels,
		})
		if err != nil {
			return err
		}
	}
	opts.LeaderElectionResourceLockInterface = heldLock{Interface: lock, taken: g.startup.Taken()}
	return nil
}

// defaultRenewDeadline is controller-runtime's default, which sizes the
// lock's request timeout as it does for a stock manager's lock.
const defaultRenewDeadline = 10 * time.Second

// managerRecorders hands the lease lock, built before the manager, the
// manager's own Event recorders, as a stock manager's lock gets them: the
// lock asks for its recorder when it is built and records only once the
// manager runs. The manager is set once built; GetEventRecorder is its
// own, whose type differs between controller-runtime minors.
type managerRecorders struct {
	manager.Manager
	// none: the lock records no Events.
	none bool
}

func (p *managerRecorders) GetEventRecorderFor(name string) record.EventRecorder {
	if p.none {
		return nil // the lock records nothing without a recorder
	}
	return laterRecorder{p: p, name: name}
}

// laterRecorder records through the manager's recorder of its name.
type laterRecorder struct {
	p    *managerRecorders
	name string
}

func (r laterRecorder) recorder() record.EventRecorder {
	return r.p.Manager.GetEventRecorderFor(r.name) //nolint:staticcheck // the lease lock speaks the core/v1 Events API, as client-go's elector does
}

func (r laterRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.recorder().Event(object, eventtype, reason, message)
}

func (r laterRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.recorder().Eventf(object, eventtype, reason, messageFmt, args...)
}

func (r laterRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.recorder().AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
}
