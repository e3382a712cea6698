package main

import (
	"strings"

	configv1 "github.com/openshift/api/config/v1"
)

// parseGates reads --watched-gates: names separated by commas, spaces
// around them ignored. Empty names are dropped, so that "" (and a stray
// trailing comma) mean no narrowing, every gate consumed, rather than a
// gate named "" that would make every other gate unwatched.
func parseGates(s string) []configv1.FeatureGateName {
	var gates []configv1.FeatureGateName
	for name := range strings.SplitSeq(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			gates = append(gates, configv1.FeatureGateName(name))
		}
	}
	return gates
}
