// Package fleet runs many adopters of the FeatureGate guard
// (examples/consumer, built once) on one etcd and kube-apiserver, each under
// a kubelet-like loop, and makes the FeatureGate changes a cluster makes:
// a switch to TechPreviewNoUpgrade (the admin's spec write, then
// a model of cluster-config-operator's rewrite, here of every version's
// status entry where it rewrites only its own), an
// upgrade (a new version's entry, adopters rolled onto it, the old entry
// removed) and a gate flipped in CustomNoUpgrade. It counts the restarts
// each change causes against library-go's rule for the same writes
// (issue 32), and, for `make fleet`, measures a stampede (every adopter
// restarting at once) and the idle cost on the API server beside
// library-go's FeatureGateAccess.
//
// TestFleetRestarts (10 adopters) runs in `make test`; TestFleetReport runs
// everything at -fleet.n (60 under `make fleet`) and writes the report.
package fleet
