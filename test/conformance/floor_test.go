//go:build conformance_floor

package conformance_test

// floor: built against controller-runtime v0.23 (the library's floor),
// whose suite and specs are v0.23.3's.
func floor() bool { return true }
