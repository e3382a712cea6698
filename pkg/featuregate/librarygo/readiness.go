package librarygo

import (
	"errors"
	"net/http"
	"sync/atomic"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// Readiness is the Access's health check made before the Access exists.
// controllercmd takes its checks (WithHealthChecks) when the command is
// built, and the Access is built later, in the operator's run function,
// from the config the command made: give the same Readiness to both
// (ReportTo). It fails until an Access reports to it, then answers as that
// Access's Check.
type Readiness struct {
	access atomic.Pointer[Access]
}

// Name is the check's name in /healthz (and /readyz where it is served).
func (r *Readiness) Name() string { return featuregate.CheckName }

// Check fails until the Access reporting to r has taken its snapshot.
func (r *Readiness) Check(req *http.Request) error {
	a := r.access.Load()
	if a == nil {
		return errors.New("FeatureGate access not built yet")
	}
	return a.Check(req)
}

// ReportTo makes the Access answer r's Check.
func ReportTo(r *Readiness) Option {
	return func(o *options) { o.readiness = r }
}
