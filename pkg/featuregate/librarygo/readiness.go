package librarygo

import (
	"net/http"
	"sync/atomic"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// Readiness is the Access's health check made before the Access exists.
// controllercmd takes its checks (WithHealthChecks) when the command is
// built, and runs the operator's start function, where the Access is
// built, only once this replica leads: give the same Readiness to both
// (ReportTo). Until an Access reports to it, it passes: the replica runs
// nothing that reads the gates (a standby, or a leader before its start
// function got there), as controllercmd's /healthz passes then, and a
// standby failing it for as long as it stands by would be restarted by a
// liveness probe. From then on it answers as that Access's Check: it fails,
// saying why, until the startup snapshot is taken.
type Readiness struct {
	access atomic.Pointer[Access]
}

// Name is the check's name in /healthz (and /readyz where it is served).
func (r *Readiness) Name() string { return featuregate.CheckName }

// Check passes until an Access reports to r, then fails until that
// Access has taken its snapshot.
func (r *Readiness) Check(req *http.Request) error {
	a := r.access.Load()
	if a == nil {
		return nil
	}
	return a.Check(req)
}

// ReportTo makes the Access answer r's Check.
func ReportTo(r *Readiness) Option {
	return func(o *options) { o.readiness = r }
}
