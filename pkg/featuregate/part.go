package featuregate

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// part is one config object the snapshot holds beside the FeatureGate: the
// TLS profile (tlspart.go), or an adopter's own (Options.Parts,
// objectpart.go). The guard treats every part alike, with the FeatureGate's
// discipline: the startup read takes each one before the snapshot is
// published (not ready until all are read), the monitor checks each one
// after each FeatureGate read and follows it, the prover sends a consistent
// read of each beside the FeatureGate's (one proof per period covers them
// all), and a change of what a part holds stops the process as a
// FeatureGate change does.
//
// The FeatureGate is not a part: it is the snapshot's spine, with what the
// parts do not need (a release version, a status entry rewritten after its
// spec, a file as a source).
type part interface {
	// key identifies the part's value in a Snapshot.
	key() *partKey
	// what names the part in readiness and in the startup read's log
	// line ("TLS security profile").
	what() string
	// object names the object it is read from ("APIServer cluster").
	object() string
	// take reads it live for the startup snapshot: the value the snapshot
	// holds, or why it cannot be had yet (readiness shows the error).
	take(ctx context.Context) (any, error)
	// check reads it live and compares it with held, the snapshot's
	// value: changed once the stop is requested and the change reported.
	// A live value that cannot be held (bad input, an object gone) is an
	// answer: the snapshot is kept, and err is nil. err is a read that got
	// no answer.
	check(ctx context.Context, held any, detectedBy string) (changed bool, err error)
	// follow follows the object from its last read until ctx ends, it
	// loses track (an error: the monitor reads again), or it sees a change
	// (changed). It calls following once it is certain to see any change
	// made after that read.
	follow(ctx context.Context, held any, following func()) (changed bool, err error)
	// reconnect renews its connections after a read got no answer.
	reconnect()
}

// partKey is a part's identity in a Snapshot; label is what the
// snapshot's String shows before its value.
type partKey struct{ label string }

// partValue is one part's value in a Snapshot.
type partValue struct {
	key   *partKey
	value any
}

// takenNoter is a part that logs what its startup value means once the
// snapshot is taken (a TLS profile this binary cannot serve in full).
type takenNoter interface {
	noteTaken(log logr.Logger, value any)
}

// unreadLiner is a part whose startup retry line predates parts (the TLS
// profile's): kept, as adopters may match on it.
type unreadLiner interface {
	unreadLine() string
}

// managerOnly is a part a guard without a manager cannot run (Run): the
// reason says what it needs of one.
type managerOnly interface {
	needsManager() string
}

// managedPart is a part watched, under a manager, by a controller of its
// own on the manager's cache rather than by the monitor's follow.
type managedPart interface {
	controller(g *Guard, mgr manager.Manager) (manager.Runnable, error)
}

// valueOf is the value of key in s, and false when s holds none.
func (s Snapshot) valueOf(key *partKey) (any, bool) {
	for _, p := range s.parts {
		if p.key == key {
			return p.value, true
		}
	}
	return nil, false
}

// partUnreadError is a startup read that got the FeatureGate but not a
// part: readiness says which is missing.
type partUnreadError struct {
	part part
	err  error
}

func (e *partUnreadError) Error() string { return e.err.Error() }
func (e *partUnreadError) Unwrap() error { return e.err }

// lastReason keeps a part's "cannot hold the live value" line to one per
// reason: the prover reads every half bound.
type lastReason struct {
	mu     sync.Mutex
	reason string
}

// changed records reason ("" once a value is held again) and reports
// whether it differs from the last one.
func (l *lastReason) changed(reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := l.reason != reason
	l.reason = reason
	return changed
}
