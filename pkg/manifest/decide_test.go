package manifest

import (
	"errors"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
)

// invalidInput is a payload with a manifest the cluster-version-operator
// refuses everywhere (release.openshift.io/delete: "false", second document
// of its file), one it refuses only where TechPreviewNoUpgrade includes it,
// and a valid delete.
func invalidInput(t *testing.T) []Manifest {
	t.Helper()
	ms, errs := Load("testdata/invalid")
	if len(errs) != 0 || len(ms) != 4 {
		t.Fatalf("Load() = %v, %v", ms, errs)
	}
	return ms
}

// A delete value other than "true" is an error naming the file, document,
// object and value; the manifest is neither applied nor deleted, and the
// others are decided as usual.
func TestDecideInvalid(t *testing.T) {
	ms := invalidInput(t)
	ds, errs := Decide(ms, Cluster{})
	var states []string
	for _, d := range ds {
		checkDecision(t, d)
		states = append(states, d.State())
	}
	if got := strings.Join(states, " "); got != "delete included invalid excluded" {
		t.Errorf("states = %s, want delete included invalid excluded", got)
	}
	want := `0000_20_bad.yaml[1] ConfigMap default/kept: release.openshift.io/delete: "false" is not "true"`
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
		t.Fatalf("errors = %q, want one starting %q", errorStrings(errs), want)
	}
	inv, ok := errors.AsType[*InvalidError](errs[0])
	if !ok || inv.Manifest.File != "0000_20_bad.yaml" || inv.Manifest.Index != 1 || inv.Reason != ds[2].Reason {
		t.Errorf("error = %#v, want an *InvalidError for 0000_20_bad.yaml[1] with the decision's reason", errs[0])
	}
	_, errs = Decide(ms, Cluster{Features: NewFeatures(string(configv1.TechPreviewNoUpgrade))})
	if got := errorStrings(errs); len(got) != 2 || !strings.HasPrefix(got[1], `0000_30_tp.yaml[0] ConfigMap default/tp: release.openshift.io/delete: "True"`) {
		t.Errorf("TechPreviewNoUpgrade errors = %q, want kept's then tp's", got)
	}
}
