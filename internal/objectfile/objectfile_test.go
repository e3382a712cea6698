package objectfile

import (
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
)

func TestDecode(t *testing.T) {
	gvk := configv1.GroupVersion.WithKind("FeatureGate")
	for name, tc := range map[string]struct {
		data   string
		strict bool
		want   string // error; empty: decoded
	}{
		"a FeatureGate":    {data: "apiVersion: config.openshift.io/v1\nkind: FeatureGate\nspec:\n  featureSet: TechPreviewNoUpgrade\n"},
		"empty":            {data: " \n", want: "empty"},
		"not an object":    {data: "- a\n", want: "not a YAML or JSON object"},
		"another kind":     {data: "apiVersion: v1\nkind: ConfigMap\n", want: `is not a FeatureGate: kind is "ConfigMap"`},
		"another version":  {data: "apiVersion: config.openshift.io/v2\nkind: FeatureGate\n", want: `is not a FeatureGate: apiVersion is "config.openshift.io/v2", want "config.openshift.io/v1"`},
		"unknown, lenient": {data: "apiVersion: config.openshift.io/v1\nkind: FeatureGate\nspec:\n  featureSett: X\n"},
		"unknown, strict":  {data: "apiVersion: config.openshift.io/v1\nkind: FeatureGate\nspec:\n  featureSett: X\n", strict: true, want: "featureSett"},
	} {
		t.Run(name, func(t *testing.T) {
			fg := &configv1.FeatureGate{}
			err := Decode([]byte(tc.data), gvk, fg, tc.strict)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
