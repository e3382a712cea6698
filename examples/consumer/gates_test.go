package main

import (
	"slices"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
)

func TestParseGates(t *testing.T) {
	cases := map[string][]configv1.FeatureGateName{
		"":                nil,
		" , ":             nil,
		"GateA":           {"GateA"},
		"GateA,GateB":     {"GateA", "GateB"},
		" GateA , GateB,": {"GateA", "GateB"},
	}
	for in, want := range cases {
		if got := parseGates(in); !slices.Equal(got, want) {
			t.Errorf("parseGates(%q) = %v, want %v", in, got, want)
		}
	}
}
