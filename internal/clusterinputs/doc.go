// Package clusterinputs is the one home of what inclusion reads from a
// cluster besides the payload: the FeatureGate's snapshot (for the commands;
// the operator's comes from the guard), the ClusterVersion's capabilities
// and overrides, and the release version, with the version marker resolved
// from the ClusterVersion as the guard resolves it.
//
// It reads through a client.Reader, so that a live cluster and anything
// that stands for one (a must-gather) are read alike: the Applier reads
// here before each run, and the `manifests --from-cluster` and `audit`
// commands read here once, so that a command answers for a cluster
// exactly as the operator would decide on it. It holds no flag and no
// policy of a caller; the callers say which reader, and wrap the errors
// with where they read.
package clusterinputs
