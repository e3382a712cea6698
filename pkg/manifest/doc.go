// Package manifest loads release-payload style manifest directories and
// decides which manifests apply to a cluster.
//
// An OpenShift release payload is a flat directory of YAML (or JSON) files
// whose names carry a run level (0000_30_...) and whose annotations say in
// which feature sets and cluster profiles each object applies. This package
// keeps those two concerns apart: Load and Groups turn a directory into
// ordered objects, Include is a pure function from a manifest and a Cluster
// (features, profile, capabilities, major version, exclude identifier,
// overrides) to a Decision with a human-readable reason, following
// openshift/library-go's Manifest.Include rule for rule.
//
// The package does not depend on how the cluster is read; callers pass a
// Cluster whose Features is anything implementing Features.
package manifest
