package manifest

import (
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/api/features"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// fakeFeatures is a feature set with some gates enabled.
type fakeFeatures struct {
	set   string
	gates []string
}

func (f fakeFeatures) FeatureSetName() string { return f.set }
func (f fakeFeatures) Enabled(gate configv1.FeatureGateName) bool {
	return slices.Contains(f.gates, string(gate))
}

const (
	fs   = featureSetAnnotation
	fg   = featureGateAnnotation
	mv   = majorVersionAnnotation
	capa = capabilityAnnotation
	del  = deleteAnnotation
	co   = createOnlyAnnotation
	sno  = "single-node-developer"
	ha   = "self-managed-high-availability"
	haOn = profileAnnotationPrefix + ha
	exID = "hypershift"
	exOn = excludeAnnotationPrefix + exID
)

// object is a ConfigMap (or, with kind "Group/Kind", another kind) with annotations.
func object(kind string, annotations map[string]string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]interface{}{}}
	switch kind {
	case "", "ConfigMap":
		obj.SetAPIVersion("v1")
		obj.SetKind("ConfigMap")
		obj.SetNamespace("ns")
	case "CRD":
		obj.SetAPIVersion("apiextensions.k8s.io/v1")
		obj.SetKind("CustomResourceDefinition")
	case "FeatureGate":
		obj.SetAPIVersion("config.openshift.io/v1")
		obj.SetKind("FeatureGate")
	case "Namespace":
		obj.SetAPIVersion("v1")
		obj.SetKind("Namespace")
	default:
		panic(kind)
	}
	obj.SetName("x")
	if annotations != nil {
		obj.SetAnnotations(annotations)
	}
	return obj
}

func TestInclude(t *testing.T) {
	var (
		def  = NewFeatures(defaultSet)
		tp   = NewFeatures(techPreviewSet)
		gate = fakeFeatures{set: defaultSet, gates: []string{"GateA"}}
		caps = &Capabilities{
			Known:   []configv1.ClusterVersionCapability{"Console", "Insights", "Build"},
			Enabled: []configv1.ClusterVersionCapability{"Console"},
		}
		four = ptr.To[uint64](4)
	)
	cluster := func(f Features) Cluster { return Cluster{Features: f} }
	inHA := func(c Cluster) Cluster { c.Profile = ha; return c }
	tests := []struct {
		name        string
		kind        string
		annotations map[string]string
		cluster     Cluster
		want        string // included, create-only, delete, invalid or excluded
		reason      []string
	}{
		// No feature annotation.
		{"no feature annotations default", "", map[string]string{"a": "b"}, cluster(def), "included", []string{"no " + fs}},
		{"no feature annotations tech preview", "", map[string]string{"a": "b"}, cluster(tp), "included", []string{"no " + fs}},
		{"nil features is Default", "", map[string]string{fs: "Default"}, Cluster{}, "included", nil},
		// Differs from library-go ("no annotations"), on purpose: no annotations and no profile is included.
		{"no annotations at all, no profile", "", nil, cluster(def), "included", []string{"no " + fs}},
		{"no annotations at all, profile", "", nil, inHA(cluster(def)), "excluded", []string{haOn, "not set"}},

		// 1. Exclude identifier.
		{"exclude identifier", "", map[string]string{exOn: "true"}, Cluster{ExcludeIdentifier: exID}, "excluded", []string{exOn, `"true"`, `exclude identifier "hypershift"`}},
		{"exclude identifier not true", "", map[string]string{exOn: "True"}, Cluster{ExcludeIdentifier: exID}, "included", nil},
		{"exclude other identifier", "", map[string]string{excludeAnnotationPrefix + "other": "true"}, Cluster{ExcludeIdentifier: exID}, "included", nil},
		{"no exclude identifier", "", map[string]string{exOn: "true"}, Cluster{}, "included", nil},
		{"exclude before both annotations", "", map[string]string{exOn: "true", fs: "Default", fg: "GateA"}, Cluster{ExcludeIdentifier: exID}, "excluded", []string{exOn}},

		// 2. Both feature annotations, whatever their values.
		{"both hold", "", map[string]string{fs: "Default", fg: "GateA"}, cluster(gate), "excluded", []string{fs, fg, "either a feature set or a feature gate, but not both"}},
		{"both old spelling", "", map[string]string{fs: "TechPreviewNoUpgrade", fg: "TechPreviewNoUpgrade"}, cluster(tp), "excluded", []string{"not both"}},
		{"both, gate empty", "", map[string]string{fs: "Default", fg: ""}, cluster(def), "excluded", []string{"not both"}},

		// 3. feature-set.
		{"default only on default", "", map[string]string{fs: "Default"}, cluster(def), "included", []string{fs, `"Default"`, "includes feature set Default"}},
		{"default only on tech preview", "", map[string]string{fs: "Default"}, cluster(tp), "excluded", []string{fs, `"Default"`, "does not include", techPreviewSet}},
		{"tech preview on tech preview", "", map[string]string{fs: "TechPreviewNoUpgrade"}, cluster(tp), "included", nil},
		{"tech preview on default", "", map[string]string{fs: "TechPreviewNoUpgrade"}, cluster(def), "excluded", []string{"does not include feature set Default"}},
		{"list", "", map[string]string{fs: "Default,TechPreviewNoUpgrade"}, cluster(tp), "included", nil},
		{"spaces are not trimmed", "", map[string]string{fs: "Default, TechPreviewNoUpgrade"}, cluster(def), "excluded", []string{`unknown feature set " TechPreviewNoUpgrade"`}},
		{"leading space", "", map[string]string{fs: " Default"}, cluster(def), "excluded", []string{`unknown feature set " Default"`}},
		{"empty item", "", map[string]string{fs: "Default,"}, cluster(def), "excluded", []string{`unknown feature set ""`}},
		{"empty value", "", map[string]string{fs: ""}, cluster(def), "excluded", []string{`unknown feature set "" in ` + fs + `: ""`}},
		{"unknown set", "", map[string]string{fs: "TechPreview"}, cluster(tp), "excluded", []string{`unknown feature set "TechPreview" in ` + fs, "known: Default, TechPreviewNoUpgrade"}},
		{"unknown beside the cluster's", "", map[string]string{fs: "Default,Bogus"}, cluster(def), "excluded", []string{`"Bogus"`}},
		{"case matters", "", map[string]string{fs: "techpreviewnoupgrade"}, cluster(tp), "excluded", []string{"unknown feature set"}},
		{"empty API set is Default", "", map[string]string{fs: "Default"}, cluster(fakeFeatures{set: ""}), "included", nil},
		{"OKD", "", map[string]string{fs: "OKD"}, cluster(NewFeatures(okdSet)), "included", nil},
		{"custom", "", map[string]string{fs: "CustomNoUpgrade,DevPreviewNoUpgrade"}, cluster(NewFeatures(devPreviewSet)), "included", nil},

		// 4. feature-gate: a gate list.
		{"gate enabled", "", map[string]string{fg: "GateA"}, cluster(gate), "included", []string{fg, `"GateA"`, "satisfied"}},
		{"gate not enabled", "", map[string]string{fg: "GateB"}, cluster(gate), "excluded", []string{"feature gate GateB is not enabled", fg}},
		{"negated gate enabled", "", map[string]string{fg: "-GateA"}, cluster(gate), "excluded", []string{"feature gate GateA is enabled", `"-GateA"`}},
		{"negated gate not enabled", "", map[string]string{fg: "-GateB"}, cluster(gate), "included", nil},
		{"gates ANDed", "", map[string]string{fg: "GateA,-GateB"}, cluster(gate), "included", nil},
		{"gates ANDed one fails", "", map[string]string{fg: "GateA,GateB"}, cluster(gate), "excluded", []string{"GateB"}},
		{"gate items are trimmed", "", map[string]string{fg: " GateA , -GateB "}, cluster(gate), "included", nil},
		{"empty gate requires nothing", "", map[string]string{fg: ""}, cluster(def), "included", []string{fg, `""`, "satisfied"}},
		{"only commas require nothing", "", map[string]string{fg: ",,"}, cluster(def), "included", nil},
		{"bare minus requires nothing", "", map[string]string{fg: "GateA,-"}, cluster(gate), "included", nil},
		{"unknown gate not enabled", "", map[string]string{fg: "NoSuchGate"}, cluster(tp), "excluded", []string{"NoSuchGate is not enabled"}},
		{"negated unknown gate", "", map[string]string{fg: "-NoSuchGate"}, cluster(tp), "included", nil},
		{"typed gate names", "", map[string]string{fg: string(features.FeatureGateClusterAPIMachineManagement)}, cluster(NewFeatures(techPreviewSet, features.FeatureGateClusterAPIMachineManagement)), "included", nil},

		// 4. feature-gate: the 4.10 spelling, the one documented difference from library-go.
		{"4.10: feature set name on its set", "", map[string]string{fg: "TechPreviewNoUpgrade", haOn: "true"}, inHA(cluster(tp)), "included", []string{fg, `"TechPreviewNoUpgrade"`, "includes feature set TechPreviewNoUpgrade", "4.10 spelling", haOn}},
		{"4.10: feature set name elsewhere", "", map[string]string{fg: "TechPreviewNoUpgrade"}, cluster(def), "excluded", []string{fg, "does not include feature set Default", "4.10 spelling"}},
		{"4.10: Default", "", map[string]string{fg: "Default"}, cluster(def), "included", []string{"4.10 spelling"}},
		{"4.10: list of sets", "", map[string]string{fg: "TechPreviewNoUpgrade,DevPreviewNoUpgrade"}, cluster(NewFeatures(devPreviewSet)), "included", nil},
		{"4.10: spaced list is a gate list", "", map[string]string{fg: "TechPreviewNoUpgrade, DevPreviewNoUpgrade"}, cluster(NewFeatures(devPreviewSet)), "excluded", []string{"feature gate TechPreviewNoUpgrade is not enabled"}},
		{"4.10: set name mixed with gate is a gate list", "", map[string]string{fg: "TechPreviewNoUpgrade,GateA"}, cluster(fakeFeatures{set: techPreviewSet, gates: []string{"GateA"}}), "excluded", []string{"feature gate TechPreviewNoUpgrade is not enabled"}},
		{"4.10: negated set name is a gate list", "", map[string]string{fg: "-TechPreviewNoUpgrade"}, cluster(tp), "included", []string{"satisfied"}},

		// 5. Major version, only for FeatureGate and CRD kinds.
		{"major included", "CRD", map[string]string{mv: "4"}, Cluster{MajorVersion: four}, "included", []string{mv, `"4"`, "includes major version 4"}},
		{"major excluded", "CRD", map[string]string{mv: "-4"}, Cluster{MajorVersion: four}, "excluded", []string{mv, `"-4"`, "excludes major version 4"}},
		{"major 4,-5", "CRD", map[string]string{mv: "4,-5"}, Cluster{MajorVersion: four}, "included", nil},
		{"major other", "CRD", map[string]string{mv: "5"}, Cluster{MajorVersion: four}, "excluded", []string{"does not include major version 4"}},
		{"major other excluded", "CRD", map[string]string{mv: "-5"}, Cluster{MajorVersion: four}, "included", []string{"does not exclude major version 4"}},
		{"major overlap", "CRD", map[string]string{mv: "4,-4"}, Cluster{MajorVersion: four}, "excluded", []string{"both includes and excludes [4]"}},
		{"major overlap elsewhere", "CRD", map[string]string{mv: "5,-5"}, Cluster{MajorVersion: four}, "excluded", []string{"both includes and excludes [5]"}},
		{"major invalid", "CRD", map[string]string{mv: "four"}, Cluster{MajorVersion: four}, "excluded", []string{`invalid version "four"`}},
		{"major plus sign invalid", "CRD", map[string]string{mv: "+4"}, Cluster{MajorVersion: four}, "excluded", []string{`invalid version "+4"`}},
		{"major trimmed", "CRD", map[string]string{mv: " 4 , -5 "}, Cluster{MajorVersion: four}, "included", nil},
		{"major empty", "CRD", map[string]string{mv: ""}, Cluster{MajorVersion: four}, "included", nil},
		{"major on FeatureGate", "FeatureGate", map[string]string{mv: "5,6"}, Cluster{MajorVersion: four}, "excluded", []string{"does not include major version 4"}},
		{"major on ConfigMap", "", map[string]string{mv: "4"}, Cluster{MajorVersion: four}, "excluded", []string{"only allowed on FeatureGate and CustomResourceDefinition objects, not ConfigMap"}},
		{"major filter off", "", map[string]string{mv: "5"}, Cluster{}, "included", nil},
		{"major after feature set", "", map[string]string{mv: "4", fs: "TechPreviewNoUpgrade"}, Cluster{MajorVersion: four}, "excluded", []string{fs}},

		// 6. Profiles.
		{"profile set and annotated", "", map[string]string{haOn: "true"}, inHA(cluster(def)), "included", []string{haOn}},
		{"profile set, not annotated", "", map[string]string{"a": "b"}, inHA(cluster(def)), "excluded", []string{haOn, "not set"}},
		{"profile set, other profile", "", map[string]string{profileAnnotationPrefix + sno: "true"}, inHA(cluster(def)), "excluded", []string{haOn}},
		{"profile set, not exactly true", "", map[string]string{haOn: "True"}, inHA(cluster(def)), "excluded", []string{haOn, `"True"`}},
		{"profile set, empty", "", map[string]string{haOn: ""}, inHA(cluster(def)), "excluded", []string{haOn}},
		{"no profile ignores profile annotations", "", map[string]string{haOn: "false"}, cluster(def), "included", nil},
		{"feature set checked before profile", "", map[string]string{fs: "Bogus"}, inHA(cluster(def)), "excluded", []string{"unknown feature set"}},
		{"major version checked before profile", "CRD", map[string]string{mv: "5"}, Cluster{Profile: ha, MajorVersion: four}, "excluded", []string{mv}},

		// 7. Capabilities.
		{"capability enabled", "", map[string]string{capa: "Console"}, Cluster{Capabilities: caps}, "included", []string{capa, `"Console"`, "enabled"}},
		{"capability disabled", "", map[string]string{capa: "Insights"}, Cluster{Capabilities: caps}, "excluded", []string{capa, "not enabled: Insights"}},
		{"capabilities ANDed", "", map[string]string{capa: "Console+Insights"}, Cluster{Capabilities: caps}, "excluded", []string{"not enabled: Insights"}},
		{"capability unknown", "", map[string]string{capa: "Bogus"}, Cluster{Capabilities: caps}, "excluded", []string{`unknown capabilities "Bogus"`}},
		{"unknown before disabled", "", map[string]string{capa: "Insights+Bogus"}, Cluster{Capabilities: caps}, "excluded", []string{`unknown capabilities "Bogus"`}},
		{"capability empty", "", map[string]string{capa: ""}, Cluster{Capabilities: caps}, "included", nil},
		{"capability trailing plus", "", map[string]string{capa: "Console+"}, Cluster{Capabilities: caps}, "excluded", []string{`unknown capabilities ""`}},
		{"capability not trimmed", "", map[string]string{capa: "Console+ Insights"}, Cluster{Capabilities: caps}, "excluded", []string{`unknown capabilities " Insights"`}},
		{"capability filter off", "", map[string]string{capa: "Bogus"}, Cluster{}, "included", nil},
		{"empty capabilities know nothing", "", map[string]string{capa: "Console"}, Cluster{Capabilities: &Capabilities{}}, "excluded", []string{"unknown capabilities"}},
		{"profile before capabilities", "", map[string]string{capa: "Bogus"}, Cluster{Profile: ha, Capabilities: caps}, "excluded", []string{haOn}},

		// 8. Overrides: see TestIncludeOverrides.

		// Delete and create-only, once every rule includes.
		{"delete", "", map[string]string{del: "true"}, cluster(def), "delete", []string{del + `: "true"`}},
		// Any other delete value is an error in the CVO (lib/resourcedelete
		// ValidDeleteAnnotation): neither applied nor deleted.
		{"delete false is invalid", "", map[string]string{del: "false"}, cluster(def), "invalid", []string{del + `: "false" is not "true"`, "neither applied nor deleted"}},
		{"delete True is invalid", "", map[string]string{del: "True"}, cluster(def), "invalid", []string{del + `: "True"`}},
		{"delete empty is invalid", "", map[string]string{del: ""}, cluster(def), "invalid", []string{del + `: ""`}},
		{"delete spaced is invalid", "", map[string]string{del: " true"}, cluster(def), "invalid", []string{del + `: " true"`}},
		{"delete invalid in profile", "", map[string]string{del: "no", haOn: "true"}, inHA(cluster(def)), "invalid", []string{del + `: "no"`}},
		{"delete invalid excluded by feature set", "", map[string]string{del: "false", fs: "TechPreviewNoUpgrade"}, cluster(def), "excluded", []string{fs}},
		{"delete invalid excluded by profile", "", map[string]string{del: "false"}, inHA(cluster(def)), "excluded", []string{haOn}},
		{"delete invalid wins over create-only", "", map[string]string{del: "false", co: "true"}, cluster(def), "invalid", []string{del}},
		{"delete excluded by feature set", "", map[string]string{del: "true", fs: "TechPreviewNoUpgrade"}, cluster(def), "excluded", []string{fs}},
		{"delete excluded by profile", "", map[string]string{del: "true"}, inHA(cluster(def)), "excluded", []string{haOn}},
		{"delete in profile", "", map[string]string{del: "true", haOn: "true"}, inHA(cluster(def)), "delete", []string{haOn, del}},
		{"create-only", "", map[string]string{co: "true"}, cluster(def), "create-only", []string{co + `: "true"`}},
		// The CVO reads create-only with strings.EqualFold (lib/resourceapply
		// IsCreateOnly); any other value is an ordinary apply, not an error.
		{"create-only True", "", map[string]string{co: "True"}, cluster(def), "create-only", []string{co + `: "True"`}},
		{"create-only TRUE", "", map[string]string{co: "TRUE"}, cluster(def), "create-only", nil},
		{"create-only not true", "", map[string]string{co: "false"}, cluster(def), "included", []string{co + `: "false" is not "true"`, "applied as usual"}},
		{"create-only empty", "", map[string]string{co: ""}, cluster(def), "included", []string{co + `: ""`}},
		{"create-only spaced", "", map[string]string{co: " true"}, cluster(def), "included", nil},
		{"create-only excluded by profile", "", map[string]string{co: "True"}, inHA(cluster(def)), "excluded", []string{haOn}},
		{"delete wins over create-only", "", map[string]string{co: "true", del: "true"}, cluster(def), "delete", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Include(object(tt.kind, tt.annotations), tt.cluster)
			if got := d.State(); got != tt.want {
				t.Errorf("Include() = %v, want %s", d, tt.want)
			}
			checkDecision(t, d)
			for _, s := range tt.reason {
				if !strings.Contains(d.Reason, s) {
					t.Errorf("reason %q does not contain %q", d.Reason, s)
				}
			}
		})
	}
}

func TestIncludeOverrides(t *testing.T) {
	overrides := []configv1.ComponentOverride{
		{Kind: "ConfigMap", Namespace: "ns", Name: "unmanaged", Unmanaged: true},
		{Kind: "ConfigMap", Namespace: "ns", Name: "managed"},
		{Kind: "ConfigMap", Namespace: "ns", Name: "first-managed"},
		{Kind: "ConfigMap", Namespace: "ns", Name: "first-managed", Unmanaged: true},
		{Kind: "ConfigMap", Namespace: "other", Name: "other-namespace", Unmanaged: true},
		{Kind: "ConfigMap", Group: "apps", Namespace: "ns", Name: "wrong-group", Unmanaged: true},
		{Kind: "Namespace", Namespace: "ignored", Name: "cluster-scoped", Unmanaged: true},
		{Kind: "CustomResourceDefinition", Group: "apiextensions.k8s.io", Name: "crd", Unmanaged: true},
	}
	for name, want := range map[string]string{
		"unmanaged":       "excluded",
		"managed":         "included",
		"first-managed":   "included", // the first matching entry decides
		"other-namespace": "included",
		"wrong-group":     "included",
		"not-listed":      "included",
	} {
		obj := object("", map[string]string{"a": "b"})
		obj.SetName(name)
		d := Include(obj, Cluster{Overrides: overrides})
		if d.State() != want {
			t.Errorf("%s: Include() = %v, want %s", name, d, want)
		}
		checkDecision(t, d)
	}
	ns := object("Namespace", map[string]string{"a": "b"})
	ns.SetName("cluster-scoped")
	if d := Include(ns, Cluster{Overrides: overrides}); d.Included || !strings.Contains(d.Reason, "spec.overrides marks Namespace cluster-scoped unmanaged") {
		t.Errorf("cluster-scoped: Include() = %v, want excluded, the override's namespace ignored", d)
	}
	crd := object("CRD", map[string]string{"a": "b"})
	crd.SetName("crd")
	if d := Include(crd, Cluster{Overrides: overrides}); d.Included || !strings.Contains(d.Reason, "CustomResourceDefinition.apiextensions.k8s.io crd") {
		t.Errorf("crd: Include() = %v, want excluded", d)
	}
	// Overrides come last: an earlier rule gives its own reason.
	obj := object("", map[string]string{capa: "Bogus"})
	obj.SetName("unmanaged")
	if d := Include(obj, Cluster{Overrides: overrides, Capabilities: &Capabilities{}}); !strings.Contains(d.Reason, capa) {
		t.Errorf("capabilities before overrides: Include() = %v", d)
	}
}

func TestIncludeNilObject(t *testing.T) {
	if d := Include(nil, Cluster{}); !d.Included {
		t.Errorf("Include(nil) = %v, want included", d)
	}
	if d := Include(nil, Cluster{Profile: ha}); d.Included {
		t.Errorf("Include(nil) with profile = %v, want excluded", d)
	}
	if d := Include(nil, Cluster{Overrides: []configv1.ComponentOverride{{Unmanaged: true}}}); !d.Included {
		t.Errorf("Include(nil) with overrides = %v, want included", d)
	}
}

func TestNewFeatures(t *testing.T) {
	if got := NewFeatures("").FeatureSetName(); got != defaultSet {
		t.Errorf(`NewFeatures("").FeatureSetName() = %q, want Default`, got)
	}
	f := NewFeatures(techPreviewSet)
	if f.FeatureSetName() != techPreviewSet || f.Enabled("Anything") || f.Enabled("") {
		t.Errorf("NewFeatures(TechPreviewNoUpgrade) = %q, enables gates", f.FeatureSetName())
	}
}

// The known feature sets are the module's, and the set library-go derives
// (every feature set features.AllFeatureSets knows, plus CustomNoUpgrade).
func TestKnownFeatureSetsFromModule(t *testing.T) {
	want := map[string]bool{customSet: true}
	for _, byProfile := range features.AllFeatureSets() {
		for _, bySet := range byProfile {
			for set := range bySet {
				want[normalizeFeatureSet(string(set))] = true
			}
		}
	}
	got := KnownFeatureSets()
	if len(got) != len(want) {
		t.Errorf("KnownFeatureSets() = %v, want the keys of %v", got, want)
	}
	for _, s := range got {
		if !want[s] {
			t.Errorf("KnownFeatureSets() has %q, library-go does not", s)
		}
	}
	if got[0] != defaultSet {
		t.Errorf("KnownFeatureSets()[0] = %q, want Default first", got[0])
	}
	for c, v := range map[string]configv1.FeatureSet{
		techPreviewSet: configv1.TechPreviewNoUpgrade, devPreviewSet: configv1.DevPreviewNoUpgrade,
		customSet: configv1.CustomNoUpgrade, okdSet: configv1.OKD,
	} {
		if c != string(v) {
			t.Errorf("constant %q != openshift/api %q", c, v)
		}
	}
	if caps := KnownCapabilities(); !slices.Equal(caps, configv1.KnownClusterVersionCapabilities) ||
		!slices.Contains(caps, configv1.ClusterVersionCapabilityClusterAPI) {
		t.Errorf("KnownCapabilities() = %v", caps)
	}
}

// checkDecision asserts the invariants of every Decision.
func checkDecision(t *testing.T, d Decision) {
	t.Helper()
	if d.Included && d.Delete {
		t.Errorf("decision %+v is both included and delete", d)
	}
	if d.Invalid && (d.Included || d.Delete) {
		t.Errorf("decision %+v is invalid and included or delete", d)
	}
	if d.CreateOnly && !d.Included {
		t.Errorf("decision %+v is create-only but not included", d)
	}
	if d.Reason == "" {
		t.Errorf("decision %+v has no reason", d)
	}
}
