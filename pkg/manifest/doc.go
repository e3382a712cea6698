// Package manifest loads release-payload style manifest directories and
// decides which manifests apply to a cluster.
//
// An OpenShift release payload is a flat directory of YAML (or JSON) files
// whose names carry a run level (0000_30_...) and whose annotations say in
// which feature sets and cluster profiles each object applies. This package
// keeps those two concerns apart: Load and Groups turn a directory into
// ordered objects, Include is a pure function from annotations and the
// cluster's feature configuration to a Decision with a human-readable reason.
//
// The package does not depend on how the feature configuration is obtained;
// callers pass anything implementing Features.
package manifest
