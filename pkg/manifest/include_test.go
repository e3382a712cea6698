package manifest

import (
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// fakeFeatures is a feature set with some gates enabled.
type fakeFeatures struct {
	set   string
	gates []string
}

func (f fakeFeatures) FeatureSetName() string { return f.set }
func (f fakeFeatures) Enabled(gate configv1.FeatureGateName) bool {
	for _, g := range f.gates {
		if configv1.FeatureGateName(g) == gate {
			return true
		}
	}
	return false
}

const (
	fs   = FeatureSetAnnotation
	fg   = FeatureGateAnnotation
	del  = DeleteAnnotation
	sno  = "single-node-developer"
	ha   = "self-managed-high-availability"
	haOn = ProfileAnnotationPrefix + ha
)

func TestInclude(t *testing.T) {
	var (
		def  = FeatureSetOnly(Default)
		tp   = FeatureSetOnly(TechPreviewNoUpgrade)
		gate = fakeFeatures{set: Default, gates: []string{"GateA"}}
	)
	tests := []struct {
		name        string
		annotations map[string]string
		features    Features
		profile     string
		want        string // included, excluded or skipped
		reason      []string
	}{
		// No feature annotation.
		{"no annotations default", nil, def, "", "included", []string{"no " + fs}},
		{"no annotations tech preview", nil, tp, "", "included", []string{"no " + fs}},
		{"nil features is Default", map[string]string{fs: "Default"}, nil, "", "included", nil},

		// feature-set.
		{"default only on default", map[string]string{fs: "Default"}, def, "", "included", []string{fs, `"Default"`}},
		{"default only on tech preview", map[string]string{fs: "Default"}, tp, "", "excluded", []string{fs, `"Default"`, "does not include", TechPreviewNoUpgrade}},
		{"tech preview on tech preview", map[string]string{fs: "TechPreviewNoUpgrade"}, tp, "", "included", nil},
		{"tech preview on default", map[string]string{fs: "TechPreviewNoUpgrade"}, def, "", "excluded", []string{"does not include feature set Default"}},
		{"list with spaces", map[string]string{fs: " Default , TechPreviewNoUpgrade "}, tp, "", "included", nil},
		{"list with empty items", map[string]string{fs: ",Default,,"}, def, "", "included", nil},
		{"empty value", map[string]string{fs: ""}, def, "", "excluded", []string{fs, `""`, "names no feature set"}},
		{"only commas", map[string]string{fs: " , "}, def, "", "excluded", []string{"names no feature set"}},
		{"unknown set", map[string]string{fs: "TechPreview"}, tp, "", "excluded", []string{`unknown feature set "TechPreview" in ` + fs}},
		{"unknown beside known", map[string]string{fs: "Default,Bogus"}, def, "", "excluded", []string{`"Bogus"`}},
		{"case matters", map[string]string{fs: "techpreviewnoupgrade"}, tp, "", "excluded", []string{"unknown feature set"}},
		{"empty API set is Default", map[string]string{fs: "Default"}, fakeFeatures{set: ""}, "", "included", nil},
		{"OKD", map[string]string{fs: "OKD"}, FeatureSetOnly(OKD), "", "included", nil},
		{"custom", map[string]string{fs: "CustomNoUpgrade,DevPreviewNoUpgrade"}, FeatureSetOnly(DevPreviewNoUpgrade), "", "included", nil},

		// feature-gate, old meaning (4.10/4.11): a feature set name.
		{"seed: old gate on tech preview", map[string]string{fg: "TechPreviewNoUpgrade", haOn: "true"}, tp, ha, "included", []string{fg, `"TechPreviewNoUpgrade"`, "includes feature set TechPreviewNoUpgrade", haOn}},
		{"seed: old gate on default", map[string]string{fg: "TechPreviewNoUpgrade"}, def, "", "excluded", []string{fg, "does not include feature set Default"}},
		{"old gate list of sets", map[string]string{fg: "TechPreviewNoUpgrade, DevPreviewNoUpgrade"}, FeatureSetOnly(DevPreviewNoUpgrade), "", "included", nil},
		{"old gate with feature-set", map[string]string{fs: "TechPreviewNoUpgrade", fg: "TechPreviewNoUpgrade"}, tp, "", "excluded", []string{fs, fg, "either, not both"}},
		{"empty gate", map[string]string{fg: ""}, def, "", "excluded", []string{fg, `""`}},

		// feature-gate, current meaning: gate requirements.
		{"gate enabled", map[string]string{fg: "GateA"}, gate, "", "included", []string{fg, `"GateA"`, "satisfied"}},
		{"gate not enabled", map[string]string{fg: "GateB"}, gate, "", "excluded", []string{"feature gate GateB is not enabled", fg}},
		{"negated gate enabled", map[string]string{fg: "-GateA"}, gate, "", "excluded", []string{"feature gate GateA is enabled", `"-GateA"`}},
		{"negated gate not enabled", map[string]string{fg: "-GateB"}, gate, "", "included", nil},
		{"gates ANDed", map[string]string{fg: "GateA, -GateB"}, gate, "", "included", nil},
		{"gates ANDed one fails", map[string]string{fg: "GateA,GateB"}, gate, "", "excluded", []string{"GateB"}},
		{"unknown gate not enabled", map[string]string{fg: "NoSuchGate"}, tp, "", "excluded", []string{"NoSuchGate is not enabled"}},
		{"negated unknown gate", map[string]string{fg: "-NoSuchGate"}, tp, "", "included", nil},
		{"bare minus", map[string]string{fg: "GateA,-"}, gate, "", "excluded", []string{"empty gate name"}},
		{"set name mixed with gate is a gate list", map[string]string{fg: "TechPreviewNoUpgrade,GateA"}, fakeFeatures{set: TechPreviewNoUpgrade, gates: []string{"GateA"}}, "", "excluded", []string{"feature gate TechPreviewNoUpgrade is not enabled"}},
		{"gate list and feature-set both hold", map[string]string{fs: "Default", fg: "GateA"}, gate, "", "included", []string{fs, fg}},
		{"gate list and feature-set, set fails", map[string]string{fs: "TechPreviewNoUpgrade", fg: "GateA"}, gate, "", "excluded", []string{fs}},
		{"gate list and feature-set, gate fails", map[string]string{fs: "Default", fg: "-GateA"}, gate, "", "excluded", []string{fg}},

		// Profiles.
		{"profile set and annotated", map[string]string{haOn: "true"}, def, ha, "included", []string{haOn}},
		{"profile set, not annotated", map[string]string{}, def, ha, "excluded", []string{haOn, "not set"}},
		{"profile set, other profile", map[string]string{ProfileAnnotationPrefix + sno: "true"}, def, ha, "excluded", []string{haOn}},
		{"profile set, not exactly true", map[string]string{haOn: "True"}, def, ha, "excluded", []string{haOn, `"True"`}},
		{"profile set, empty", map[string]string{haOn: ""}, def, ha, "excluded", []string{haOn}},
		{"no profile ignores profile annotations", map[string]string{haOn: "false"}, def, "", "included", nil},
		{"profile checked before feature set", map[string]string{fs: "Bogus"}, def, ha, "excluded", []string{haOn}},

		// Delete.
		{"delete", map[string]string{del: "true"}, def, "", "skipped", []string{del + `: "true"`}},
		{"delete not true", map[string]string{del: "false"}, def, "", "included", nil},
		{"delete before feature set", map[string]string{del: "true", fs: "TechPreviewNoUpgrade"}, def, "", "skipped", []string{del}},
		{"profile before delete", map[string]string{del: "true"}, def, ha, "excluded", []string{haOn}},
		{"delete in profile", map[string]string{del: "true", haOn: "true"}, def, ha, "skipped", []string{del}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]interface{}{}}
			obj.SetAnnotations(tt.annotations)
			d := Include(obj, tt.features, tt.profile)
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

func TestIncludeNilObject(t *testing.T) {
	d := Include(nil, nil, "")
	if !d.Included {
		t.Errorf("Include(nil) = %v, want included", d)
	}
	if d := Include(nil, nil, ha); d.Included {
		t.Errorf("Include(nil) with profile = %v, want excluded", d)
	}
}

func TestFeatureSetOnly(t *testing.T) {
	if got := FeatureSetOnly("").FeatureSetName(); got != Default {
		t.Errorf(`FeatureSetOnly("").FeatureSetName() = %q, want Default`, got)
	}
	f := FeatureSetOnly(TechPreviewNoUpgrade)
	if f.FeatureSetName() != TechPreviewNoUpgrade || f.Enabled("Anything") || f.Enabled("") {
		t.Errorf("FeatureSetOnly(TechPreviewNoUpgrade) = %q, enables gates", f.FeatureSetName())
	}
}

// checkDecision asserts the invariants of every Decision.
func checkDecision(t *testing.T, d Decision) {
	t.Helper()
	if d.Included && d.Skipped {
		t.Errorf("decision %+v is both included and skipped", d)
	}
	if d.Reason == "" {
		t.Errorf("decision %+v has no reason", d)
	}
}
