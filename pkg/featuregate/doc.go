// Package featuregate gives a controller-runtime operator the OpenShift
// FeatureGate discipline: read the cluster's feature configuration at
// start, never guess it, never act on it once it cannot be vouched for, and
// restart when it changes.
//
// A Guard does all of it. NewGuard, then Guard.NewManager in place of
// ctrl.NewManager; the rest of the operator is written the kubebuilder way
// (ctrl.NewControllerManagedBy(mgr), its own cached types, field indexes),
// and starts once the startup snapshot is taken. Before the initial read
// succeeds the process is alive but not ready (/readyz/featuregate, the
// check CheckName, says why); the read is retried whatever the error,
// because a FeatureGate that could not be read is no feature set at all.
// Once read, the snapshot is frozen.
//
// After that the guard keeps checking, level-triggered: every reconcile of
// its FeatureGate controller compares the live object with the snapshot,
// and a monitor reads it live and follows it (a watch from that read, or
// the file) so that a change made during or just after an API outage is
// seen as soon as it can be read. Any difference is logged (key diff,
// detectedBy "reconcile" or "verify"), recorded as a FeatureGateChanged
// Event, and ends the manager gracefully: Start returns nil, the process
// exits 0, and its restart reads the new value.
//
// Code that acts on the feature set depends on the Gates interface: it asks
// Enabled, and checks Current right before each action (the write), since
// the view can change while Reconcile runs. Current is false whenever
// the guard cannot vouch that the snapshot still holds (before it is taken,
// while the API is in trouble, once a stop is requested); the answer then
// is to requeue, never to act. Unit tests give such code a
// featuregatetest.Gates instead of the guard.
//
// Options.File reads the FeatureGate from a file (HyperShift renders it into
// a ConfigMap volume; MicroShift has no FeatureGate API) with the same
// discipline. Read is the one reader of a FeatureGate, for tools that answer
// for a cluster the way the guard would.
//
// The guard needs RBAC to get, list and watch featuregates
// (config.openshift.io), to create and patch events (events.k8s.io), and,
// when Options.Version is the placeholder, to get the clusterversion
// "version"; the package's +kubebuilder:rbac markers say exactly that, for
// controller-gen.
package featuregate
