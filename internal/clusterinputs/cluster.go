package clusterinputs

import "github.com/featuregate-operator/operator/pkg/manifest"

// Cluster is what inclusion decides with: features (a snapshot), these
// inputs, and the cluster profile and exclude identifier, which the
// caller's configuration holds. The major-version filter is on when
// releaseVersion has a numeric major version, and off otherwise: the
// snapshot's version is one the guard accepted, and inclusion does not
// refuse it (the commands, which take it from a flag, call
// SetMajorVersion and say what is wrong with it).
func (in Inputs) Cluster(features manifest.Features, profile, excludeIdentifier, releaseVersion string) manifest.Cluster {
	c := manifest.Cluster{
		Features:          features,
		Profile:           profile,
		ExcludeIdentifier: excludeIdentifier,
		Capabilities:      in.Capabilities,
		Overrides:         in.Overrides,
	}
	_ = SetMajorVersion(&c, releaseVersion) // not a number: the filter stays off, as said above
	return c
}
