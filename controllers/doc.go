// Package controllers is this operator's own work on top of the guard
// (pkg/featuregate): applying the release manifests the startup snapshot
// includes, and reporting status the OpenShift way.
//
// The Applier is not a Reconciler: it is a leader-elected manager Runnable
// that the guard's manager starts once the snapshot is taken. Its files
// read top to bottom in the order it runs, each one concern, each using
// only the files below it:
//
//   - start.go: Start, the run order, whole.
//   - upgrading.go, watch.go: before the first run, an unknown feature set
//     said, the version move announced (StatusReporter.Starting), the
//     ClusterOperator watched so that it is restored when touched.
//   - apply.go: one run. It reads the payload directory and the cluster's
//     inclusion inputs (internal/clusterinputs: the ClusterVersion's
//     capabilities and overrides), decides every manifest with
//     pkg/manifest, and acts run level by run level, in file-name order as
//     the cluster-version-operator does; current.go says whether it may
//     still act (the stop, the guard's vouching), act.go what to do with
//     one manifest (nothing, for an object found as last applied:
//     unchanged.go), write.go the writes, each asking the guard first
//     (guarded.go).
//   - between.go: after a run, publishing it (metrics, log, Events, the
//     ClusterOperator) and waiting for the next, restoring the
//     ClusterOperator meanwhile.
//   - applier.go, clusteroperator.go, run.go, metrics.go, names.go: the
//     Applier itself, the StatusReporter that turns a run (run.go) into
//     the ClusterOperator's conditions, versions and related objects, the
//     metrics, the names the operator writes under.
//
// Data flows one way: the snapshot (feature set, gates, release version)
// comes from the guard and is passed down; nothing here writes back into
// its configuration.
package controllers
