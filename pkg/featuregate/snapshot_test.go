package featuregate_test

import (
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
)

// The shared fixture, under short names for the tables below.
var (
	featureGate = featuregatetest.FeatureGate
	custom      = featuregatetest.CustomGates
	status      = featuregatetest.StatusGates
)

func mustNew(t *testing.T, fg *configv1.FeatureGate, opts featuregate.View) featuregate.Snapshot {
	t.Helper()
	s, err := featuregate.New(fg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// Diff is the whole restart decision, so each row pins both the decision
// (empty or not) and the exact sentence the operator logs.
func TestNewAndDiff(t *testing.T) {
	const v = "4.11.0"
	versioned := featuregate.View{Version: v}
	tests := []struct {
		name             string
		opts             featuregate.View
		snapshot, live   *configv1.FeatureGate
		want             []string
		snapshotFeatures string
	}{
		{
			name:     "empty and Default are the same set",
			snapshot: featureGate(""), live: featureGate("Default"),
			snapshotFeatures: "Default",
		},
		{
			name:     "Default to TechPreviewNoUpgrade",
			opts:     featuregate.View{WatchFeatureSet: true},
			snapshot: featureGate(configv1.Default), live: featureGate(configv1.TechPreviewNoUpgrade),
			want: []string{"feature set changed from Default to TechPreviewNoUpgrade"},
		},
		{
			name:     "a feature-set change restarts only a component that consumes the feature set",
			snapshot: featureGate(configv1.Default), live: featureGate(configv1.TechPreviewNoUpgrade),
		},
		{
			name:     "a feature-set change with the entry not yet rewritten restarts no gate consumer",
			opts:     versioned,
			snapshot: featureGate(configv1.Default, status(v, []string{"A"}, []string{"B"})),
			live:     featureGate(configv1.TechPreviewNoUpgrade, status(v, []string{"A"}, []string{"B"})),
		},
		{
			name:     "customNoUpgrade changes with a version count once the entry is rewritten",
			opts:     versioned,
			snapshot: featureGate(configv1.CustomNoUpgrade, custom([]string{"A"}, nil), status(v, []string{"A"}, []string{"B"})),
			live:     featureGate(configv1.CustomNoUpgrade, custom([]string{"A", "B"}, nil), status(v, []string{"A"}, []string{"B"})),
		},
		{
			name:     "spelled Default to TechPreviewNoUpgrade",
			opts:     featuregate.View{WatchFeatureSet: true},
			snapshot: featureGate("Default"), live: featureGate(configv1.TechPreviewNoUpgrade),
			want:             []string{"feature set changed from Default to TechPreviewNoUpgrade"},
			snapshotFeatures: "Default",
		},
		{
			name:     "TechPreviewNoUpgrade to DevPreviewNoUpgrade",
			opts:     featuregate.View{WatchFeatureSet: true},
			snapshot: featureGate(configv1.TechPreviewNoUpgrade), live: featureGate(configv1.DevPreviewNoUpgrade),
			want:             []string{"feature set changed from TechPreviewNoUpgrade to DevPreviewNoUpgrade"},
			snapshotFeatures: "TechPreviewNoUpgrade",
		},
		{
			name:     "same set is equal",
			snapshot: featureGate(configv1.TechPreviewNoUpgrade), live: featureGate(configv1.TechPreviewNoUpgrade),
		},
		{
			name:     "customNoUpgrade lists in another order are equal",
			snapshot: featureGate(configv1.CustomNoUpgrade, custom([]string{"A", "B", "C"}, []string{"D", "E"})),
			live:     featureGate(configv1.CustomNoUpgrade, custom([]string{"C", "A", "B"}, []string{"E", "D"})),
		},
		{
			name:     "customNoUpgrade duplicates do not count",
			snapshot: featureGate(configv1.CustomNoUpgrade, custom([]string{"A"}, nil)),
			live:     featureGate(configv1.CustomNoUpgrade, custom([]string{"A", "A"}, nil)),
		},
		{
			name:     "customNoUpgrade absent equals empty lists",
			snapshot: featureGate(configv1.CustomNoUpgrade),
			live:     featureGate(configv1.CustomNoUpgrade, custom(nil, nil)),
		},
		{
			name:     "customNoUpgrade.enabled added",
			snapshot: featureGate(configv1.CustomNoUpgrade, custom([]string{"A"}, nil)),
			live:     featureGate(configv1.CustomNoUpgrade, custom([]string{"X", "A"}, nil)),
			want:     []string{"gate X absent -> enabled in spec.customNoUpgrade"},
		},
		{
			name:     "customNoUpgrade.enabled removed",
			snapshot: featureGate(configv1.CustomNoUpgrade, custom([]string{"A", "B"}, nil)),
			live:     featureGate(configv1.CustomNoUpgrade, custom([]string{"B"}, nil)),
			want:     []string{"gate A enabled -> absent in spec.customNoUpgrade"},
		},
		{
			name:     "customNoUpgrade.disabled added and removed",
			snapshot: featureGate(configv1.CustomNoUpgrade, custom(nil, []string{"A", "B"})),
			live:     featureGate(configv1.CustomNoUpgrade, custom(nil, []string{"C", "B", "D"})),
			want: []string{
				"gate A disabled -> absent in spec.customNoUpgrade",
				"gate C absent -> disabled in spec.customNoUpgrade",
				"gate D absent -> disabled in spec.customNoUpgrade",
			},
		},
		{
			name:     "gate moved from disabled to enabled in customNoUpgrade",
			snapshot: featureGate(configv1.CustomNoUpgrade, custom(nil, []string{"A"})),
			live:     featureGate(configv1.CustomNoUpgrade, custom([]string{"A"}, nil)),
			want:     []string{"gate A disabled -> enabled in spec.customNoUpgrade"},
		},
		{
			name:     "feature set and lists changed together",
			opts:     featuregate.View{WatchFeatureSet: true},
			snapshot: featureGate(configv1.Default),
			live:     featureGate(configv1.CustomNoUpgrade, custom([]string{"X"}, nil)),
			want:     []string{"feature set changed from Default to CustomNoUpgrade", "gate X absent -> enabled in spec.customNoUpgrade"},
		},
		{
			name:     "feature set and lists changed together, only the gates consumed",
			snapshot: featureGate(configv1.Default),
			live:     featureGate(configv1.CustomNoUpgrade, custom([]string{"X"}, nil)),
			want:     []string{"gate X absent -> enabled in spec.customNoUpgrade"},
		},
		{
			name:     "no version configured: status is ignored",
			snapshot: featureGate("", status(v, []string{"A"}, nil)),
			live:     featureGate("", status(v, nil, []string{"A"})),
		},
		{
			name:     "status entries for other versions are ignored",
			opts:     versioned,
			snapshot: featureGate("", status("4.10.0", []string{"A"}, nil), status(v, []string{"B"}, nil)),
			live:     featureGate("", status("4.10.0", nil, []string{"A"}), status(v, []string{"B"}, nil), status("4.12.0", []string{"C"}, nil)),
		},
		{
			name:     "status lists in another order are equal",
			opts:     versioned,
			snapshot: featureGate("", status(v, []string{"A", "B"}, []string{"C", "D"})),
			live:     featureGate("", status(v, []string{"B", "A"}, []string{"D", "C"})),
		},
		{
			name:     "version entry missing on both sides is equal",
			opts:     versioned,
			snapshot: featureGate("", status("4.10.0", []string{"A"}, nil)),
			live:     featureGate(""),
		},
		{
			name:     "version entry removed",
			opts:     versioned,
			snapshot: featureGate("", status(v, []string{"A"}, nil)),
			live:     featureGate("", status("4.10.0", []string{"A"}, nil)),
			want:     []string{"status.featureGates entry for version 4.11.0 removed"},
		},
		{
			name:     "version entry appeared",
			opts:     versioned,
			snapshot: featureGate(""),
			live:     featureGate("", status(v, nil, nil)),
			want:     []string{"status.featureGates entry for version 4.11.0 appeared"},
		},
		{
			name:     "gate enabled to disabled",
			opts:     versioned,
			snapshot: featureGate("", status(v, []string{"X", "Y"}, nil)),
			live:     featureGate("", status(v, []string{"X"}, []string{"Y"})),
			want:     []string{"gate Y enabled -> disabled in status for version 4.11.0"},
		},
		{
			name:     "gates appearing and disappearing, sorted by name",
			opts:     versioned,
			snapshot: featureGate("", status(v, []string{"B"}, []string{"C"})),
			live:     featureGate("", status(v, []string{"A"}, []string{"C"})),
			want: []string{
				"gate A absent -> enabled in status for version 4.11.0",
				"gate B enabled -> absent in status for version 4.11.0",
			},
		},
		{
			name:     "unwatched status gate changes are no difference",
			opts:     featuregate.View{Version: v, WatchedGates: []configv1.FeatureGateName{"Watched"}},
			snapshot: featureGate("", status(v, []string{"Watched", "Other"}, []string{"Third"})),
			live:     featureGate("", status(v, []string{"Watched", "Third"}, []string{"Other", "New"})),
		},
		{
			name:     "watched status gate change is a difference",
			opts:     featuregate.View{Version: v, WatchedGates: []configv1.FeatureGateName{"Watched"}},
			snapshot: featureGate("", status(v, []string{"Watched", "Other"}, nil)),
			live:     featureGate("", status(v, []string{"Other"}, []string{"Watched"})),
			want:     []string{"gate Watched enabled -> disabled in status for version 4.11.0"},
		},
		{
			name:     "unwatched customNoUpgrade gate changes are no difference",
			opts:     featuregate.View{WatchedGates: []configv1.FeatureGateName{"Watched"}},
			snapshot: featureGate(configv1.CustomNoUpgrade, custom([]string{"Watched"}, nil)),
			live:     featureGate(configv1.CustomNoUpgrade, custom([]string{"Watched", "Other"}, []string{"Third"})),
		},
		{
			name:     "watched gates do not hide a feature set change",
			opts:     featuregate.View{Version: v, WatchedGates: []configv1.FeatureGateName{"Watched"}, WatchFeatureSet: true},
			snapshot: featureGate("", status(v, []string{"Watched"}, nil)),
			live:     featureGate(configv1.TechPreviewNoUpgrade, status(v, []string{"Watched"}, nil)),
			want:     []string{"feature set changed from Default to TechPreviewNoUpgrade"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			snapshot := mustNew(t, tt.snapshot, tt.opts)
			live := mustNew(t, tt.live, tt.opts)
			g.Expect(featuregate.Diff(snapshot, live, tt.opts)).To(Equal(tt.want))
			// Every snapshot equals itself, and the comparison is symmetric
			// in its verdict.
			g.Expect(featuregate.Diff(snapshot, snapshot, tt.opts)).To(BeEmpty())
			g.Expect(featuregate.Diff(live, snapshot, tt.opts)).To(HaveLen(len(tt.want)))
			if tt.snapshotFeatures != "" {
				g.Expect(snapshot.FeatureSetName()).To(Equal(tt.snapshotFeatures))
			}
		})
	}
}

func TestNewRejectsNil(t *testing.T) {
	g := NewWithT(t)
	_, err := featuregate.New(nil, featuregate.View{})
	g.Expect(err).To(HaveOccurred())
}

// "Default" and "" are one feature set: the API's enum only allows "", but
// people and release manifests write "Default".
func TestSnapshotFeatureSetNormalised(t *testing.T) {
	g := NewWithT(t)
	for _, set := range []configv1.FeatureSet{"", "Default"} {
		s := mustNew(t, featureGate(set), featuregate.View{})
		g.Expect(s.FeatureSetName()).To(Equal("Default"))
		g.Expect(featuregate.Diff(s, mustNew(t, featureGate(configv1.Default), featuregate.View{}), featuregate.View{WatchFeatureSet: true})).To(BeEmpty())
		g.Expect(s.String()).To(Equal("Default"))
	}
}

// Read is the one reader: with a version, a FeatureGate without that
// version's status entry is no snapshot, and the error names the version.
func TestReadRequiresTheVersionEntry(t *testing.T) {
	const v = "4.11.0"
	tests := []struct {
		name    string
		fg      *configv1.FeatureGate
		version string
		missing bool
	}{
		{name: "no version configured, no status", fg: featureGate("")},
		{name: "no version configured, other versions only", fg: featureGate("", status("4.10.0", []string{"A"}, nil))},
		{name: "version entry present", fg: featureGate("", status(v, nil, nil)), version: v},
		{name: "no status at all", fg: featureGate(""), version: v, missing: true},
		{name: "only other versions", fg: featureGate("", status("4.10.0", []string{"A"}, nil)), version: v, missing: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := featuregate.Read(tt.fg, tt.version)
			if tt.missing {
				g.Expect(err).To(MatchError(ContainSubstring(v)))
				g.Expect(s).To(Equal(featuregate.Snapshot{}), "no partial snapshot with the error")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Version()).To(Equal(tt.version))
			// Read is New (the live view) plus the check.
			g.Expect(featuregate.Diff(s, mustNew(t, tt.fg, featuregate.View{Version: tt.version}), featuregate.View{WatchFeatureSet: true})).To(BeEmpty())
		})
	}
}

func TestReadRejectsNil(t *testing.T) {
	_, err := featuregate.Read(nil, "")
	NewWithT(t).Expect(err).To(HaveOccurred())
}

func TestSnapshotGatesAndString(t *testing.T) {
	g := NewWithT(t)
	s := mustNew(t, featureGate(configv1.TechPreviewNoUpgrade, status("4.11.0", []string{"Z", "A"}, []string{"M", "B"})), featuregate.View{Version: "4.11.0"})
	g.Expect(s.Version()).To(Equal("4.11.0"))
	for _, gate := range []configv1.FeatureGateName{"A", "Z"} {
		g.Expect(s.Enabled(gate)).To(BeTrue(), string(gate))
	}
	for _, gate := range []configv1.FeatureGateName{"B", "M"} {
		g.Expect(s.Enabled(gate)).To(BeFalse(), string(gate))
	}
	g.Expect(s.KnownFeatures()).To(Equal([]configv1.FeatureGateName{"A", "B", "M", "Z"}))
	g.Expect(s.String()).To(Equal("TechPreviewNoUpgrade (version 4.11.0: enabled [A Z], disabled [B M])"))

	c := mustNew(t, featureGate(configv1.CustomNoUpgrade, custom([]string{"Y", "X"}, []string{"W"})), featuregate.View{})
	g.Expect(c.String()).To(Equal("CustomNoUpgrade (customNoUpgrade enabled [X Y], disabled [W])"))
	g.Expect(c.KnownFeatures()).To(Equal([]configv1.FeatureGateName{"W", "X", "Y"}))
	// Without a version only customNoUpgrade names gates.
	g.Expect(mustNew(t, featureGate(configv1.TechPreviewNoUpgrade, status("4.11.0", []string{"A"}, nil)), featuregate.View{}).KnownFeatures()).To(BeEmpty())
}

// Enabled never panics and never says yes to a gate it does not know:
// library-go's reader panicked on unknown gates, which broke operators when
// CustomNoUpgrade came without lists.
func TestSnapshotEnabled(t *testing.T) {
	const v = "4.11.0"
	tests := []struct {
		name     string
		snapshot featuregate.Snapshot
		enabled  []configv1.FeatureGateName
		off      []configv1.FeatureGateName
	}{
		{name: "zero value", snapshot: featuregate.Snapshot{}, off: []configv1.FeatureGateName{"A", ""}},
		{name: "Default", snapshot: mustNew(t, featureGate(""), featuregate.View{}), off: []configv1.FeatureGateName{"A"}},
		{
			name:     "CustomNoUpgrade without lists",
			snapshot: mustNew(t, featureGate(configv1.CustomNoUpgrade), featuregate.View{}),
			off:      []configv1.FeatureGateName{"A"},
		},
		{
			name:     "CustomNoUpgrade with lists",
			snapshot: mustNew(t, featureGate(configv1.CustomNoUpgrade, custom([]string{"A"}, []string{"B"})), featuregate.View{}),
			enabled:  []configv1.FeatureGateName{"A"},
			off:      []configv1.FeatureGateName{"B", "Unknown"},
		},
		{
			name:     "customNoUpgrade lists under another feature set are not in force",
			snapshot: mustNew(t, featureGate(configv1.TechPreviewNoUpgrade, custom([]string{"A"}, nil)), featuregate.View{}),
			off:      []configv1.FeatureGateName{"A"},
		},
		{
			name:     "status entry for the version",
			snapshot: mustNew(t, featureGate(configv1.TechPreviewNoUpgrade, status(v, []string{"A"}, []string{"B"})), featuregate.View{Version: v}),
			enabled:  []configv1.FeatureGateName{"A"},
			off:      []configv1.FeatureGateName{"B", "Unknown"},
		},
		{
			// WatchedGates narrows what restarts, never what is enabled.
			name:     "watched gates do not hide an unwatched enabled gate",
			snapshot: mustNew(t, featureGate("", status(v, []string{"A", "B"}, []string{"C"})), featuregate.View{Version: v, WatchedGates: []configv1.FeatureGateName{"A"}}),
			enabled:  []configv1.FeatureGateName{"A", "B"},
			off:      []configv1.FeatureGateName{"C"},
		},
		{
			name:     "version entry missing",
			snapshot: mustNew(t, featureGate("", status("4.10.0", []string{"A"}, nil)), featuregate.View{Version: v}),
			off:      []configv1.FeatureGateName{"A"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			for _, gate := range tt.enabled {
				g.Expect(tt.snapshot.Enabled(gate)).To(BeTrue(), gate)
			}
			for _, gate := range tt.off {
				g.Expect(tt.snapshot.Enabled(gate)).To(BeFalse(), gate)
			}
		})
	}
}

// A zero featuregate.Snapshot (say, a struct field never set) is safe to use everywhere.
func TestZeroSnapshotIsSafe(t *testing.T) {
	g := NewWithT(t)
	var zero featuregate.Snapshot
	g.Expect(func() {
		_ = zero.String()
		_ = zero.FeatureSetName()
		_ = zero.KnownFeatures()
		_ = zero.Enabled("A")
		_ = zero.Version()
		_ = featuregate.Diff(zero, zero, featuregate.View{})
		_ = featuregate.Diff(zero, mustNew(t, featureGate(configv1.CustomNoUpgrade, custom([]string{"A"}, nil)), featuregate.View{Version: "4.11.0"}), featuregate.View{WatchFeatureSet: true})
		_ = featuregate.Diff(zero, zero, featuregate.View{WatchedGates: []configv1.FeatureGateName{"A"}})
	}).NotTo(Panic())
	g.Expect(zero.FeatureSetName()).To(Equal("Default"))
	g.Expect(zero.KnownFeatures()).To(BeEmpty())
	g.Expect(featuregate.Diff(zero, zero, featuregate.View{})).To(BeEmpty())
}

// details is a status.featureGates entry.
func details(version string, enabled, disabled []string) configv1.FeatureGateDetails {
	return featuregatetest.FeatureGate("", featuregatetest.StatusGates(version, enabled, disabled)).Status.FeatureGates[0]
}
