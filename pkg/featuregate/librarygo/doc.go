// Package librarygo is the guard for operators built on library-go's
// controllercmd: a featuregates.FeatureGateAccess, library-go's own
// interface, run by the guard's core without a controller-runtime manager
// (featuregate.Guard.Run). An operator changes one constructor,
// featuregates.NewFeatureGateAccess to NewFeatureGateAccess, and keeps the
// rest: go Run(ctx), the select on InitialFeatureGatesObserved, the change
// handler (library-go's ForceExit by default), CurrentFeatureGates, and the
// Events its recorder writes under library-go's reasons.
//
// What changes is the discipline behind them. The gates are observed only
// after a consistent read of the FeatureGate, never from an informer's
// cache, so nothing is assumed while the API is down; the handler is
// called on a change of what the component consumes (the guard's restart
// rule), once, after the guard has stopped; Current says whether the
// snapshot is still proven current, for a controller to ask before it
// writes what the gates decide; and Readiness is the health check
// controllercmd serves.
//
// It is a Go module of its own, so that the guard's module requires no
// library-go. docs/migrating-from-library-go.md has the call-by-call
// differences, library-go's own test tables run against it, and a worked
// port of a real controllercmd operator.
package librarygo
