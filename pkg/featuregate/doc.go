// Package featuregate gives a controller-runtime operator the OpenShift
// FeatureGate discipline: read the cluster's feature configuration at
// start, never guess it, and restart when it changes.
//
// A Guard does all of it. Before the initial read succeeds the process is
// alive but not ready (the readiness check CheckName says why); the read is
// retried with capped backoff, whatever the error, because a FeatureGate
// that could not be read is no feature set at all. Once read, the startup
// Snapshot is frozen. Every reconcile of the FeatureGate compares the live
// object with it (level-triggered: the first reconcile after the cache syncs
// is such a comparison too, and so is every resync), and so does a live read
// after any failed request or watch, so that a change made during an API
// outage is seen as soon as the API answers. Any difference is logged,
// recorded as a FeatureGateChanged Event, and ends the manager gracefully:
// the process exits 0 and its restart reads the new value.
//
// Wiring takes NewGuard before the manager, ManagerOptions and RESTConfig
// for it, and SetupWithManager after; see the example. What acts on the
// snapshot starts through AfterSnapshot, asks Enabled, and checks Current
// before each action.
//
// The guard needs RBAC to get, list and watch featuregates
// (config.openshift.io) and to create events (events.k8s.io).
package featuregate
