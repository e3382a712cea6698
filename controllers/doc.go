// Package controllers is this operator's own work on top of the guard
// (pkg/featuregate): applying the release manifests the startup snapshot
// includes, and reporting status the OpenShift way.
//
// The Applier is not a Reconciler: it is a leader-elected manager Runnable
// that the guard's manager starts once the snapshot is taken. Each run reads
// the payload directory and the cluster's inclusion inputs (Inputs: the
// ClusterVersion's capabilities and overrides), decides every manifest with
// pkg/manifest, and applies (or creates, or deletes) run level by run level,
// in file-name order as the cluster-version-operator does; every write asks
// the guard first (a run the guard cannot vouch for is postponed), and a
// stop request ends the run. A resync writes nothing for objects found as
// last applied. The StatusReporter turns a run into the ClusterOperator's
// conditions, versions and related objects; Events and metrics say the
// rest.
//
// Data flows one way: the snapshot (feature set, gates, release version)
// comes from the guard and is passed down; nothing here writes back into
// its configuration.
package controllers
