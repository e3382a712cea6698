package featuregate

import (
	"context"

	configv1 "github.com/openshift/api/config/v1"
)

// source is where the guard reads the FeatureGate: the API server, or a file
// holding one (HyperShift renders the FeatureGate into a ConfigMap mounted
// in the pod; MicroShift serves no FeatureGate API). The guard's discipline
// is the same for both: the startup snapshot is one successful read, and
// afterwards the guard follows the source to vouch that the snapshot is
// still current.
type source interface {
	// read reads the FeatureGate once, bounded by ctx. Its errors name what
	// failed (the object, or the file) and are shown by the readiness check.
	read(ctx context.Context) (*configv1.FeatureGate, error)
	// follow reports every state of the FeatureGate after from (a result of
	// read) to seen, until ctx ends or it loses track. It calls following
	// once it is certain to see any change made after from, or to end with
	// an error (a watch the server answered may still refuse its start as
	// too old, at once; the proof keeps its own deadline): from then on,
	// until follow returns, the guard vouches for its view. It returns nil
	// when ctx ends or the source ended it in the ordinary way (a watch that
	// reached its timeout), and otherwise an error saying how it lost track
	// (a watch that broke, a file that vanished or stopped parsing); either
	// way the guard then reads again. seen returning true (the FeatureGate changed, a stop
	// is requested) ends follow with nil.
	follow(ctx context.Context, from *configv1.FeatureGate, following func(), seen func(*configv1.FeatureGate) bool) error
	// reconnect drops what the source reads through, once nothing is in
	// flight, so that the next read starts afresh: after the proof lapsed
	// the connection may be the trouble, and a new one may reach a healthy
	// API server (through a load balancer) where the old one cannot.
	reconnect()
}
