//go:build !conformance_floor

package conformance_test

// floor: built against go.mod's controller-runtime v0.25, whose suite and
// specs are v0.25.2's.
func floor() bool { return false }
